"""The compiled producer-state fold (``kafkatx.storage._replay.replay_fold`` behind ``txn.fold.fold_batches``) against Python.

``replay_partition`` folds the files' common batches in C and hands the replay loop only the
batches that need Python. Three things are held to each other here, on seeded random
partitions full of what is *not* common (many producers, epochs going back, non-transactional
batches inside transactions, stale markers, empty control batches, LEADER_CHANGE, compressed
or header-carrying control records, magic 0/1 batches, bad CRCs, torn tails, snapshots with
reloads, several segments):

* ``replay_partition`` with the compiled fold (also with a tiny chunk size, so every chunk
  boundary is crossed),
* ``replay_partition`` in pure Python (``compiled.pure_python()``: the twin ``_fold_py``),
* ``replay_partition_events`` over a one-event-per-batch source (``test_replay_runs._per_batch``),

and the run events ``kafkatx scan`` folds (``file_events`` as a plain callable), each compared as the whole :class:`PartitionProducerState` (producers, completed, findings,
unreplicated spans, batches, expired, load) or the same error. A second test drives
``fold_batches`` itself, C against its twin ``_fold_py``, call by call: same stopping
position and reason, same producer state, spans and completed transactions.
"""

from __future__ import annotations

import copy
import random
from functools import partial
from pathlib import Path

import msgspec
import pytest
from test_replay_runs import _outcome, _per_batch
from txn_builders import PartitionWriter, snapshot_entry, write_log_dir

import kafkatx.storage.fold as fold_mod
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format.control import ControlType, encode_control_key, encode_end_txn_marker
from kafkatx.format.record_batch import Compression, Record, build_batch, read_batch_header
from kafkatx.session.timeline import replay_spans
from kafkatx.storage.events import FileEvents, file_events
from kafkatx.storage.fold import FOLD_SLOW, fold_batches
from kafkatx.storage.loading import plan_load
from kafkatx.storage.log_dir import open_log_dirs
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import ProducerReplay, _Entry
from kafkatx.storage.replay import replay_partition, replay_partition_events
from kafkatx.storage.segment import map_file

pytestmark = pytest.mark.skipif(not fold_mod.fold_compiled(), reason="the C extension is not built "
                                "(or KAFKATX_PURE_PYTHON is set): nothing compiled to compare")

NOW = 1_700_000_000_000 + 86_400_000 + 5_000


def _flip(raw: bytes) -> bytes:
    b = bytearray(raw)
    b[-1] ^= 0x5A  # inside the CRC-covered bytes
    return bytes(b)


def _control(w: PartitionWriter, pid: int, epoch: int, record: Record, *, compression=Compression.NONE) -> bytes:
    return build_batch([record], base_offset=w.next_offset, producer_id=pid, producer_epoch=epoch,
                       is_transactional=True, is_control=True, compression=compression)


def _random_partition(rng: random.Random, log_dir: Path, *, bad_control_crc: bool) -> None:
    """One partition (``t-0``) of a few segments written batch by batch from ``rng``."""
    w = PartitionWriter("t", 0)
    pids = [rng.choice([0, 1, 2, 3, 5, 8, 13, 1000, 2**40 + 7]) for _ in range(rng.randint(1, 7))]
    epochs = {pid: rng.randint(0, 3) for pid in pids}
    coords = {pid: rng.randint(0, 5) for pid in pids}
    ts = 1_700_000_000_000

    def put(raw: bytes, n: int, *, index: bool = True) -> None:
        w._append(raw, w.next_offset + n - 1, ts, index=index)
        w.next_offset += n

    for _ in range(rng.randint(20, 140)):
        ts += rng.randint(0, 3_000_000)
        pid = rng.choice(pids)
        epoch = epochs[pid]
        r = rng.random()
        if r < 0.03:
            epoch = epochs[pid] = max(epoch - 1, 0) if rng.random() < 0.5 else epoch + 1  # back, or bumped
        if r < 0.40:
            w.data(pid, epoch, rng.randint(1, 4), txn=True, ts=ts, index=rng.random() < 0.5)
        elif r < 0.48:
            w.data(pid, epoch, rng.randint(1, 3), txn=False, ts=ts)  # lands in an open transaction, or not
        elif r < 0.55:
            w.data(-1, -1, rng.randint(1, 3), txn=False, ts=ts)
        elif r < 0.75:
            coord = coords[pid] = coords[pid] + rng.choice([0, 0, 0, 1, -1])  # -1: a stale (zombie) marker
            w.marker(pid, epoch + rng.choice([0, 0, 0, 1, -1]), rng.random() < 0.6, coordinator_epoch=coord, ts=ts)
        elif r < 0.78:
            put(build_batch([], base_offset=w.next_offset, producer_id=pid, producer_epoch=epoch,
                            is_transactional=True, is_control=True), 1)  # emptied by the cleaner
        elif r < 0.81:
            put(_control(w, rng.choice([pid, -1]), epoch,
                         Record(offset=w.next_offset, timestamp=ts, key=encode_control_key(ControlType.LEADER_CHANGE),
                                value=b"\x00\x00\x00\x00\x00\x00")), 1)
        elif r < 0.84:
            coord = coords[pid]
            rec = Record(offset=w.next_offset, timestamp=ts, key=encode_control_key(ControlType.ABORT),
                         value=encode_end_txn_marker(coord), headers=(("h", b"x"),) if rng.random() < 0.5 else ())
            put(_control(w, pid, epoch, rec, compression=Compression.GZIP if not rec.headers else Compression.NONE), 1)
        elif r < 0.88:
            n = rng.randint(1, 3)
            recs = [Record(offset=w.next_offset + i, timestamp=ts, key=b"k", value=b"old") for i in range(n)]
            put(build_batch(recs, magic=rng.choice([0, 1])), n)
        elif r < 0.91:
            first = w.next_offset
            recs = [Record(offset=first, timestamp=ts, key=b"k", value=b"v")]
            put(_flip(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                  is_transactional=rng.random() < 0.5)), 1)
        elif r < 0.92 and bad_control_crc:
            put(_flip(build_batch([Record(offset=w.next_offset, timestamp=ts, key=encode_control_key(ControlType.COMMIT),
                                          value=encode_end_txn_marker(0))], base_offset=w.next_offset,
                                  producer_id=pid, producer_epoch=epoch, is_transactional=True, is_control=True)), 1)
        elif r < 0.97:
            w.roll()
            if rng.random() < 0.6:
                entries = [snapshot_entry(p, epochs[p], last_offset=max(w.next_offset - 1, 0), ts=ts - rng.randint(0, 10**8),
                                          coordinator_epoch=coords[p],
                                          txn_first=rng.choice([-1, -1, max(w.next_offset - rng.randint(1, 20), 0)]))
                           for p in sorted(set(rng.sample(pids, rng.randint(0, len(pids)))))]
                w.snapshot(entries)
        else:
            w.next_offset += rng.randint(1, 5)  # a gap (compaction)
    if rng.random() < 0.15:
        w.seg.data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 80)))  # a torn tail
    hw = rng.randint(max(w.next_offset - 30, 0), w.next_offset)
    write_log_dir(log_dir, [w], hw={w.name: hw}, clean_shutdown=rng.random() < 0.5)


def _part(log_dir: Path) -> Partition:
    (part,) = [p for d in open_log_dirs([log_dir]) for p in d.partitions()]
    return part


def _pure(call, *args, **kw):  # type: ignore[no-untyped-def]
    with compiled.pure_python():
        return _outcome(call, *args, **kw)


def _runs(part: Partition, kw: dict):  # type: ignore[no-untyped-def]
    plan = plan_load(part)
    breaks = plan.chain.reloads if kw.get("use_snapshot", True) else ()
    return lambda start: file_events(part, start, verify_crc=kw.get("verify_crc", False), breaks=breaks,
                                     cuts=plan.cuts)


class _Progress:
    def __init__(self) -> None:
        self.advanced: list[int] = []

    def start(self, total: int, description: str) -> None:  # pragma: no cover - the replay does not start one
        raise AssertionError("replay_partition reports advances only")

    def advance(self, n: int) -> None:
        self.advanced.append(n)


def _unordered(outcome):  # type: ignore[no-untyped-def]
    if isinstance(outcome, tuple):
        return outcome
    return msgspec.structs.replace(outcome, findings=sorted(outcome.findings, key=repr))


KWS = [{}, {"now": NOW}, {"use_snapshot": False, "keep_completed": True}, {"verify_crc": True, "now": NOW},
       {"keep_completed": True, "now": NOW}]


@pytest.mark.parametrize("seed", range(60))
def test_compiled_fold_replays_like_python_on_random_partitions(seed: int, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    _random_partition(rng, tmp_path, bad_control_crc=seed % 5 == 0)
    part = _part(tmp_path)
    for kw in KWS:
        reference = _outcome(replay_partition_events, part,
                             partial(_per_batch, part, verify_crc=kw.get("verify_crc", False)), **kw)
        fast = _outcome(replay_partition, part, **kw)
        assert fast == _pure(replay_partition, part, **kw), (seed, kw)
        assert fast == reference, (seed, kw)
        # the run events (what scan folds) give the same state; a non-transactional run inside an open
        # transaction is expanded where the run starts, so its findings may come before another
        # producer's earlier-offset finding: compare those as a multiset
        assert _unordered(_outcome(replay_partition_events, part, _runs(part, kw), **kw)) == _unordered(reference)
        with monkeypatch.context() as m:
            m.setattr(fold_mod, "FOLD_BYTES", rng.randint(1, 400))  # a chunk ends after every batch or few
            assert _outcome(replay_partition, part, **kw) == fast, (seed, kw)
        # progress: the size of every file the replay read from, as the event loop reports it
        got_progress, want_progress = _Progress(), _Progress()
        _outcome(replay_partition, part, progress=got_progress, **kw)
        _outcome(replay_partition_events, part, _runs(part, kw), progress=want_progress, **kw)
        assert got_progress.advanced == want_progress.advanced, (seed, kw)
        # on_completed sees the markers the fold folded, in order, like keep_completed keeps them
        seen: list = []
        got = _outcome(replay_partition, part, on_completed=seen.append, keep_completed=True, **{
            k: v for k, v in kw.items() if k != "keep_completed"})
        if not isinstance(got, tuple):
            assert seen == got.completed


@pytest.mark.parametrize("seed", range(60, 80))
def test_timeline_spans_from_the_compiled_fold_match_one_event_per_batch(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    _random_partition(rng, tmp_path, bad_control_crc=False)
    part = _part(tmp_path)
    done_c: list = []
    done_ref: list = []
    got = _outcome(replay_spans, part, FileEvents(part), now=NOW, completed=done_c)
    want = _outcome(replay_spans, part, partial(_per_batch, part, verify_crc=False), now=NOW, completed=done_ref)
    assert got == want
    assert done_c == done_ref


def test_the_random_partitions_reach_every_unusual_case(tmp_path: Path) -> None:
    """The generator is worth its name: across the seeds, the compiled replays meet every finding
    kind, completed transactions, unreplicated spans, expired producers and decode errors."""
    checks: set[str] = set()
    completed = unreplicated = expired = errors = snapshots = 0
    for seed in range(60):
        d = tmp_path / str(seed)
        _random_partition(random.Random(seed), d, bad_control_crc=seed % 5 == 0)
        part = _part(d)
        for kw in ({"now": NOW, "keep_completed": True}, {"verify_crc": True}):
            got = _outcome(replay_partition, part, **kw)
            if isinstance(got, tuple):
                errors += 1
                continue
            checks |= {f.check for f in got.findings}
            completed += len(got.completed)
            unreplicated += len(got.unreplicated)
            expired += len(got.expired)
            snapshots += got.snapshot_offset is not None
    assert {"producer-epoch", "non-transactional-in-txn", "stale-marker", "crc"} <= checks
    assert completed > 100 and unreplicated > 5 and expired > 5 and errors > 0 and snapshots > 5


def _fold_both(producers: dict[int, _Entry], part: Partition, floor: int, buf, pos: int, hi: int,  # type: ignore[no-untyped-def]
               aborts_only: bool = False, **kw):
    """One ``fold_batches`` call compiled and one in Python (``compiled.pure_python()``), from equal states;
    ``aborts_only``: a replay that keeps only the aborted transactions (``verify``'s), no callback."""
    out = []
    for pure in (False, True):
        mine = copy.deepcopy(producers)
        spans: list = []
        findings: list = []
        done: list = []
        ctx = ProducerReplay(part, mine, findings, True, None if aborts_only else done.append, spans=spans,
                             span_floor=floor, keep_aborts_only=aborts_only)
        assert ctx.ongoing is not None
        with compiled.pure_python(pure):
            res = fold_batches(ctx, buf, pos, hi, **kw)
        # ongoing (ProducerStateManager.ongoingTxns) as the fold leaves it, order included
        out.append(((res, {pid: e.freeze() for pid, e in mine.items()}, list(mine), spans, findings, ctx.completed,
                     done, list(ctx.ongoing.items())), mine))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_fold_calls_stop_at_the_same_batch_with_the_same_state(seed: int, tmp_path: Path) -> None:
    rng = random.Random(1000 + seed)
    _random_partition(rng, tmp_path, bad_control_crc=True)
    part = _part(tmp_path)
    stops = 0
    for segment in part.segments:
        with map_file(segment.log_path) as buf:
            producers: dict[int, _Entry] = {}
            for pid in rng.sample([0, 1, 2, 3, 5], rng.randint(0, 3)):
                e = producers[pid] = _Entry(pid)
                e.epoch, e.coord_epoch, e.last_ts = rng.randint(0, 2), rng.randint(0, 3), 5
                if rng.random() < 0.5:
                    e.txn_first, e.txn_start_ts = segment.base_offset, 7
            start = segment.base_offset + rng.randint(0, 5)
            end = segment.base_offset + rng.randint(5, 400)
            floor = segment.base_offset + rng.randint(0, 50)
            pos, hi = 0, len(buf)
            while pos < hi:
                stop = rng.choice([None, None, segment.base_offset + rng.randint(0, 100)])
                max_bytes = rng.choice([None, rng.randint(1, 3000)])
                aborts_only = rng.random() < 0.3
                (c, mine), (py, _) = _fold_both(producers, part, floor, buf, pos, hi, aborts_only, start=start,
                                                end=end, stop=stop, verify_crc=rng.random() < 0.5, max_bytes=max_bytes,
                                                crcs_hold=rng.random() < 0.2)  # a caller that checked every CRC
                if aborts_only:
                    assert all(d.outcome == "ABORT" for d in c[5]), (seed, pos)
                assert c == py, (seed, segment.log_path, pos)
                new_pos, _n, _seen, reason = c[0]
                producers = mine  # carry on from the compiled state: the Python objects are the one state
                pos = new_pos
                if reason == FOLD_SLOW:
                    stops += 1
                    try:
                        h = read_batch_header(buf, pos, hi)
                    except DecodeError:
                        break
                    pos += h.size  # the caller's business: step over it
    assert stops > 0


def test_hundreds_of_producers_interleaved(tmp_path: Path) -> None:
    """Far more producers than the compiled fold's first table holds (it grows, rehashing), open
    transactions overlapping across segments and a snapshot reload in between."""
    rng = random.Random(7)
    w = PartitionWriter("t", 0)
    pids = list(range(5, 5 + 400))
    open_ = set()
    for step in range(3000):
        pid = rng.choice(pids)
        if pid in open_ and rng.random() < 0.4:
            w.marker(pid, 0, rng.random() < 0.7, coordinator_epoch=1, ts=1_700_000_000_000 + step)
            open_.discard(pid)
        else:
            w.data(pid, 0, 1, txn=rng.random() < 0.8, ts=1_700_000_000_000 + step, index=step % 50 == 0)
            open_.add(pid)
        if step in (1000, 2000):
            w.roll()
            w.snapshot([snapshot_entry(p, 0, ts=1_700_000_000_000) for p in pids[:50]])
    write_log_dir(tmp_path, [w], clean_shutdown=True)
    part = _part(tmp_path)
    for kw in ({"keep_completed": True, "now": 1_700_000_000_000 + 86_400_000 + 2_500},
               {"use_snapshot": False, "keep_completed": True}):
        fast = _outcome(replay_partition, part, **kw)
        assert not isinstance(fast, tuple)
        assert len(fast.producers) > 300 and len(fast.completed) > 100
        assert fast == _pure(replay_partition, part, **kw)
        assert fast == _outcome(replay_partition_events, part, partial(_per_batch, part, verify_crc=False), **kw)
