"""The compiled ``ProducerStateFold`` (``kafkatx/storage/_replay.c``) against its reference ``PyProducerStateFold``.

``replay_partition`` folds the files' plain batches with one class (the compiled one where it is
built) and hands the replay loop only the batches whose bytes need reading in Python. Three things are held to each other here, on seeded random
partitions full of what is *not* common (many producers, epochs going back, non-transactional
batches inside transactions, stale markers, empty control batches, LEADER_CHANGE, compressed
or header-carrying control records, magic 0/1 batches, bad CRCs, torn tails, snapshots with
reloads, several segments):

* ``replay_partition`` with the compiled fold (also with a tiny chunk size, so every chunk
  boundary is crossed),
* ``replay_partition`` in pure Python (``compiled.pure_python()``: ``PyProducerStateFold``),
* ``replay_partition_events`` over a one-event-per-batch source (``test_replay_runs._per_batch``),

and the run events ``kafkatx scan`` folds (``file_events`` as a plain callable), each compared as the whole :class:`PartitionProducerState` (producers, completed, findings,
unreplicated spans, batches, expired, load) or the same error. The other tests drive the two
classes themselves, call by call (``fold`` over random segments, every method in random order with
hypothesis): the same results -- stopping position and reason, producer entries, ongoing
transactions, findings, spans and completed transactions -- and the same errors.
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_replay_runs import _outcome, _per_batch
from txn_builders import PartitionWriter, snapshot_entry, write_log_dir

import kafkatx.storage.replay as replay_mod
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format.control import ControlType, encode_control_key, encode_end_txn_marker
from kafkatx.format.record_batch import BatchHeader, Compression, Record, build_batch, read_batch_header
from kafkatx.session.timeline import replay_spans
from kafkatx.storage.events import FileEvents, file_events
from kafkatx.storage.loading import plan_load
from kafkatx.storage.log_dir import open_log_dirs
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import FOLD_STOP, EntryRow, PyProducerStateFold, fold_compiled
from kafkatx.storage.replay import replay_partition, replay_partition_events
from kafkatx.storage.segment import map_file

try:
    from kafkatx.storage._replay import ProducerStateFold as CProducerStateFold
except ImportError:  # pragma: no cover - depends on the build
    CProducerStateFold = None  # type: ignore[assignment,misc]

pytestmark = pytest.mark.skipif(not fold_compiled(), reason="the C extension is not built "
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
            m.setattr(replay_mod, "FOLD_BYTES", rng.randint(1, 400))  # a chunk ends after every batch or few
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


def _state(fold):  # type: ignore[no-untyped-def]
    """Everything a fold holds and hands out (what it gathered is taken: the next call starts afresh)."""
    return (fold.active_producers(), fold.ongoing_txns(), fold.take_findings(), fold.take_completed(),
            fold.take_spans(), len(fold))


def _call(fold, name: str, *args, **kw):  # type: ignore[no-untyped-def]
    """One method call's result or error (its type), then the fold's whole state."""
    try:
        got = ("ok", getattr(fold, name)(*args, **kw))
    except Exception as err:  # noqa: BLE001 - the twins must raise the same
        got = ("error", type(err).__name__)
    return got, _state(fold)


def _twins(entries: list[EntryRow], **kw):  # type: ignore[no-untyped-def]
    return CProducerStateFold(entries, **kw), PyProducerStateFold(entries, **kw)


def _random_entries(rng: random.Random, base: int) -> list[EntryRow]:
    rows: list[EntryRow] = []
    for pid in rng.sample([0, 1, 2, 3, 5], rng.randint(0, 3)):
        first = base if rng.random() < 0.5 else None
        rows.append((pid, rng.randint(0, 2), rng.randint(-1, 9), rng.randint(-1, base + 5), 5, rng.randint(0, 3),
                     first, None, 7 if first is not None else None, 5 if first is not None else None))
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_fold_calls_stop_at_the_same_batch_with_the_same_state(seed: int, tmp_path: Path) -> None:
    """``fold`` on random segments, C against Python call by call; at each batch a fold leaves to its
    caller the twins are handed it through ``append`` / ``append_end_txn_marker`` as a replay would."""
    rng = random.Random(1000 + seed)
    _random_partition(rng, tmp_path, bad_control_crc=True)
    part = _part(tmp_path)
    stops = 0
    for segment in part.segments:
        with map_file(segment.log_path) as buf:
            kw = {"keep_completed": rng.random() < 0.8, "aborts_only": rng.random() < 0.3,
                  "span_floor": rng.choice([None, segment.base_offset + rng.randint(0, 50)])}
            c, py = _twins(_random_entries(rng, segment.base_offset), **kw)
            start = segment.base_offset + rng.randint(0, 5)
            end = segment.base_offset + rng.randint(5, 400)
            pos, hi = 0, len(buf)
            while pos < hi:
                stop = rng.choice([None, None, segment.base_offset + rng.randint(0, 100)])
                args = {"start": start, "end": end, "stop": stop, "verify_crc": rng.random() < 0.5,
                        "crcs_hold": rng.random() < 0.2, "log_path": str(segment.log_path)}
                if rng.random() < 0.5:
                    args["max_bytes"] = rng.randint(0, 3000)
                got = _call(c, "fold", buf, pos, hi, **args)
                assert got == _call(py, "fold", buf, pos, hi, **args), (seed, segment.log_path, pos)
                assert got[0][0] == "ok", got
                if kw["aborts_only"]:
                    assert all(row[4] == ControlType.ABORT for row in got[1][3])
                new_pos, _n, _seen, reason = got[0][1]
                pos = new_pos
                if reason == FOLD_STOP:
                    stops += 1
                    try:
                        h = read_batch_header(buf, pos, hi)
                    except DecodeError:
                        break
                    pos += h.size  # the caller's business: step over it, or apply it as a replay would
                    if h.is_control and h.records_count > 0 and rng.random() < 0.7:
                        how = ("append_end_txn_marker", h, rng.choice([0, 1, 2]), rng.choice([None, 0, 4]),
                               str(segment.log_path))
                    else:
                        how = ("append", h, str(segment.log_path))
                    assert _call(c, *how) == _call(py, *how), (seed, segment.log_path, pos)
    assert stops > 0


# ----------------------------------------------------------------------------- every method, hypothesis

def _header(pid: int, epoch: int, base: int, delta: int, txn: bool, ts: int, seq: int, position: int) -> BatchHeader:
    return BatchHeader(position=position, base_offset=base, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=0x10 if txn else 0, last_offset_delta=delta, base_timestamp=ts, max_timestamp=ts,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, records_count=delta + 1)


_pids = st.sampled_from([-1, 0, 1, 2, 7, 2**40])
_offsets = st.integers(0, 60)
_entry = st.tuples(_pids.filter(lambda p: p >= 0), st.integers(-1, 3), st.integers(-1, 20), st.integers(-1, 60),
                   st.integers(0, 10**6), st.integers(-1, 4),
                   st.one_of(st.none(), _offsets), st.one_of(st.none(), _offsets), st.one_of(st.none(), st.just(5)),
                   st.one_of(st.none(), st.just(6)))
_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), _pids, st.integers(-1, 3), _offsets, st.integers(0, 5), st.booleans(),
              st.integers(0, 10**6), st.sampled_from([-1, 0, 2**31 - 2])),
    st.tuples(st.just("append_end_txn_marker"), _pids.filter(lambda p: p >= 0), st.integers(-1, 3), _offsets,
              st.sampled_from([0, 1, 2, 3]), st.one_of(st.none(), st.integers(-1, 5))),
    st.tuples(st.just("load_producer_entry"), _entry),
    st.tuples(st.just("remove_producer"), _pids),
    st.tuples(st.just("last_entry"), _pids),
    st.tuples(st.just("bad_entry"), st.sampled_from([(1, 2), (1, 0, 0, 0, 0, 0, None, None, None, 2**64),
                                                     (None, 0, 0, 0, 0, 0, None, None, None, None)])),
    st.tuples(st.just("bad_fold"), st.integers(-3, 70), st.integers(-3, 70))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(_entry, max_size=4), ops=_ops, keep=st.booleans(), aborts_only=st.booleans(),
       floor=st.one_of(st.none(), _offsets))
def test_every_method_gives_the_same_results_and_errors(entries, ops, keep, aborts_only, floor) -> None:  # type: ignore[no-untyped-def]
    """Random calls of every method on both classes from the same start state: offsets that go back
    (ongoingTxns re-sorted), stale markers, epochs going back, non-transactional batches in a
    transaction, producers removed and seen again, entries replaced, and the errors (an entry row that
    is not 10 int64 fields, a producer that is not there, a byte range outside the buffer)."""
    c, py = _twins(entries, keep_completed=keep, aborts_only=aborts_only, span_floor=floor)
    assert _state(c) == _state(py)
    buf = b"\x00" * 64
    for i, op in enumerate(ops):
        if op[0] == "append":
            _, pid, epoch, base, delta, txn, ts, seq = op
            args: tuple = ("append", _header(pid, epoch, base, delta, txn, ts, seq, i * 7), "p.log")
        elif op[0] == "append_end_txn_marker":
            _, pid, epoch, base, ctype, coord = op
            args = ("append_end_txn_marker", _header(pid, epoch, base, 0, True, 10 * i, -1, i * 7), ctype, coord)
        elif op[0] == "bad_entry":
            args = ("load_producer_entry", op[1])
        elif op[0] == "bad_fold":
            args = ("fold", buf, op[1], op[2])
        else:
            args = op
        assert _call(c, *args) == _call(py, *args), (i, op)


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
