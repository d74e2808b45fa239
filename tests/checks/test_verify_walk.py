"""verify's segment walk (one compiled fold per chunk, Python per event and per index entry)
against the former per-batch walk (``verify_oracle.py``): the very same problem list -- check,
severity, file, position, message, order -- on every fixture, on generated partitions with
corruption injected, in C and pure-Python modes, with chunks small enough to split segments.

The index rules on their own (``SegmentIndexCheck`` over the batch table, chunk by chunk)
against the per-batch check on random segments and random index/time index files.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verify_oracle import PerBatchIndexCheck, per_batch_walk, verify_index_file_per_batch

import kafkatx.checks.verify as V
import kafkatx.format.record_batch as rb
from kafkatx.checks.indexes import AddProblem, BatchRow, Problem, SegmentIndexCheck, verify_index_file
from kafkatx.checks.verify import verify
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format import segment_fold as sf
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import OffsetIndexColumns, OffsetIndexEntry, encode_offset_index
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.format.time_index import TimeIndexColumns, TimeIndexEntry, encode_time_index
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
from tests.storage.txn_builders import PartitionWriter, snapshot_entry, write_checkpoint, write_log_dir

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_DIRS = sorted({p.parent.parent for p in (ROOT / "fixtures").rglob("*.log")})


@pytest.fixture(params=["compiled", "pure-python"])
def mode(request):  # type: ignore[no-untyped-def]
    if request.param == "compiled" and not compiled.active("kafkatx.format._fold"):
        pytest.skip("the C extension is not built (python setup.py build_ext --inplace)")
    with compiled.pure_python(request.param == "pure-python"):
        yield request.param


class _WalkedAhead(sf.CrcAhead):
    """The CRC walk ahead, finished before the fold starts: the fold is told every CRC it can be told."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._thread.join()


def _crcs_ahead(dirs: list[Path]) -> list[Problem]:
    """verify with every segment's CRCs checked ahead (format.segment_fold.CrcAhead; compiled mode only)."""
    import os

    saved = V.CRC_AHEAD_BYTES, V.CrcAhead, os.environ.get("KAFKATX_JOBS")
    V.CRC_AHEAD_BYTES, V.CrcAhead = 0, _WalkedAhead  # type: ignore[misc]
    os.environ["KAFKATX_JOBS"] = "2"  # a second CPU, as far as the policy can tell
    try:
        return verify(dirs)
    finally:
        V.CRC_AHEAD_BYTES, V.CrcAhead = saved[0], saved[1]  # type: ignore[misc]
        if saved[2] is None:
            os.environ.pop("KAFKATX_JOBS", None)
        else:
            os.environ["KAFKATX_JOBS"] = saved[2]


def _both(dirs: list[Path], chunk_bytes: int = sf.CHUNK_BYTES) -> list[Problem]:
    saved = V._PartitionVerifier.chunk_bytes
    V._PartitionVerifier.chunk_bytes = chunk_bytes
    try:
        new = verify(dirs)
        ahead = _crcs_ahead(dirs)
    finally:
        V._PartitionVerifier.chunk_bytes = saved
    with per_batch_walk():
        old = verify(dirs)
    assert new == old
    assert ahead == new
    return new


def test_the_oracle_is_the_per_batch_walk() -> None:
    with per_batch_walk():
        assert V._PartitionVerifier.__name__ == "PerBatchVerifier"
    assert V._PartitionVerifier.__name__ == "_PartitionVerifier"


@pytest.mark.parametrize("log_dir", FIXTURE_DIRS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fixture_dir(log_dir: Path, mode: str) -> None:
    _both([log_dir])
    _both([log_dir], chunk_bytes=700)


@pytest.mark.parametrize("maker", ["bad_batch_crc", "truncated_tail", "bogus_txnindex_entry", "bad_snapshot_crc",
                                   "trailing_garbage"])
def test_corrupt_fixture_copies(tmp_path: Path, maker: str, mode: str) -> None:
    from fixtures import corrupt

    c = getattr(corrupt, maker)(tmp_path)
    problems = _both([c.log_dir], chunk_bytes=500)
    assert any(p.file == str(c.path) for p in problems)


# ----------------------------------------------------------------------------- generated partitions

def _odd_control(offset: int, pid: int, epoch: int) -> bytes:
    """A control batch whose record key is too short for a control key: read_control_record refuses it."""
    return build_batch([Record(offset=offset, timestamp=5, key=b"\x00", value=None)], producer_id=pid,
                       producer_epoch=epoch, is_control=True, is_transactional=True)


def _partition(rng: random.Random, topic: str) -> PartitionWriter:
    p = PartitionWriter(topic, 0, base=rng.choice([0, 0, 40]))
    pids = [1, 2, 3, 4]
    epochs = dict.fromkeys(pids, 0)
    first: dict[int, int] = {}  # open transaction's first offset per producer
    ts = 1_000
    for _ in range(rng.randint(3, 70)):
        r = rng.random()
        pid = rng.choice(pids)
        ts += rng.randint(-50, 200)  # max timestamps that sometimes go back
        if r < 0.40:
            txn = rng.random() < 0.8
            epoch = epochs[pid] - (rng.random() < 0.08)  # sometimes below the producer's epoch
            lo, _hi = p.data(pid, epoch, rng.randint(1, 4), txn=txn, ts=ts, index=rng.random() < 0.6)
            if txn:
                first.setdefault(pid, lo)
        elif r < 0.52:
            p.data(-1, -1, rng.randint(1, 3), txn=False, ts=ts, index=rng.random() < 0.5)
        elif r < 0.70:
            abort = rng.random() < 0.5
            m = p.marker(pid, epochs[pid] - (rng.random() < 0.1), commit=not abort,
                         coordinator_epoch=rng.randint(0, 3), ts=ts, index=rng.random() < 0.3)
            began = first.pop(pid, None)
            if abort and began is not None and rng.random() < 0.85:
                others = [f for q, f in first.items() if q != pid]
                lso = min(others) if others else m + 1
                p.abort_entry(pid, began if rng.random() < 0.9 else began + 1,
                              m, lso if rng.random() < 0.9 else m)
        elif r < 0.74:
            epochs[pid] += 1
        elif r < 0.80:
            p.roll()
        elif r < 0.86:
            entries = [snapshot_entry(q, epochs[q] + (rng.random() < 0.15), last_offset=max(p.next_offset - 1, 0),
                                      txn_first=first.get(q, -1)) for q in pids if rng.random() < 0.7]
            p.snapshot(entries)
        elif r < 0.90:
            p.next_offset += rng.randint(-3, 4)  # a gap, or offsets that go back
            p.next_offset = max(p.next_offset, 0)
        elif r < 0.93:
            off = p.next_offset
            p._append(build_batch([Record(offset=off, timestamp=ts, key=b"a", value=b"b")], magic=rng.choice([0, 1])),
                      off, ts, index=False)
            p.next_offset += 1
        elif r < 0.96:
            off = p.next_offset
            p._append(_odd_control(off, pid, epochs[pid]), off, 5, index=False)
            p.next_offset += 1
        else:
            off = p.next_offset
            p._append(build_control_batch(offset=off, control_type=ControlType.LEADER_CHANGE, producer_id=-1,
                                          producer_epoch=-1, coordinator_epoch=0, timestamp=ts), off, ts, index=False)
            p.next_offset += 1
    return p


def _batches(raw: bytes) -> list[rb.BatchHeader]:
    out = []
    try:
        for h in rb.iter_batches(raw):
            out.append(h)
    except DecodeError:
        pass
    return out


def _recrc(b: bytearray, pos: int, size: int) -> None:
    struct.pack_into(">I", b, pos + 17, crc32c.crc32c(bytes(b[pos + 21:pos + size])))


def _corrupt_segment(rng: random.Random, seg_dir: Path, base: int, kinds: set[str]) -> None:
    log = seg_dir / f"{base:020d}.log"
    raw = bytearray(log.read_bytes())
    batches = [h for h in _batches(bytes(raw)) if h.magic == 2]
    for h in batches:
        x = rng.random()
        if x < 0.06:  # a bad CRC
            raw[h.position + h.size - 1] ^= 0x5A
            kinds.add("crc")
        elif x < 0.09:  # a last offset delta that goes back (the CRC made to hold)
            struct.pack_into(">i", raw, h.position + 23, rng.randint(-3, 1))
            _recrc(raw, h.position, h.size)
        elif x < 0.12:  # another max timestamp (the CRC made to hold)
            struct.pack_into(">q", raw, h.position + 35, rng.randint(0, 3000))
            _recrc(raw, h.position, h.size)
        elif x < 0.14:  # a base offset that goes back (not covered by the CRC)
            struct.pack_into(">q", raw, h.position, max(h.base_offset - rng.randint(1, 5), 0))
    y = rng.random()
    if raw and y < 0.15:
        del raw[len(raw) - rng.randint(1, 30):]  # a torn tail
    elif y < 0.3:
        raw += bytes(rng.randrange(256) for _ in range(rng.randint(1, 80)))  # garbage
    log.write_bytes(bytes(raw))
    # index files: the true entries, mixed with entries inside batches, past the end, at wrong offsets
    starts = [(h.position, h.last_offset, h.max_timestamp) for h in batches]
    if rng.random() < 0.6:
        entries = []
        for pos, last, _ts in starts:
            if rng.random() < 0.4:
                entries.append(OffsetIndexEntry(offset=max(last + rng.choice([0, 0, 0, -1, 1, -4, 9]), base),
                                                position=pos + rng.choice([0, 0, 0, 0, 3, 61])))
        if rng.random() < 0.3:
            entries.append(OffsetIndexEntry(offset=base + rng.randint(0, 300), position=len(raw) + rng.randint(0, 9)))
        if rng.random() < 0.2 and entries:
            entries.insert(rng.randrange(len(entries)), entries[-1])  # out of order / duplicate position
        (seg_dir / f"{base:020d}.index").write_bytes(encode_offset_index(entries, base))
    if rng.random() < 0.6:
        times = []
        for _pos, last, ts in starts:
            if rng.random() < 0.4:
                times.append(TimeIndexEntry(timestamp=ts + rng.choice([0, 0, 0, 1, -7]),
                                            offset=max(last + rng.choice([0, 0, 0, -1, 2, 50]), base)))
        if rng.random() < 0.3:
            times.append(TimeIndexEntry(timestamp=rng.randint(0, 9000), offset=base + rng.randint(0, 400)))
        (seg_dir / f"{base:020d}.timeindex").write_bytes(encode_time_index(times, base))
    for suffix, size in ((".index", 8), (".timeindex", 12)):
        path = seg_dir / f"{base:020d}{suffix}"
        u = rng.random()
        if u < 0.1:
            path.write_bytes(path.read_bytes() + bytes(size * rng.randint(1, 4)))  # preallocated, as Kafka leaves it
        elif u < 0.14:
            path.write_bytes(path.read_bytes() + b"\x01" * rng.randint(1, size - 1))  # a partial entry
    txn = seg_dir / f"{base:020d}.txnindex"
    z = rng.random()
    if z < 0.15 and txn.exists():
        txn.unlink()
    elif z < 0.3:
        extra = AbortedTxn(version=0, producer_id=rng.randint(1, 4), first_offset=base + rng.randint(0, 50),
                           last_offset=base + rng.randint(0, 80), last_stable_offset=rng.randint(-1, 90))
        txn.write_bytes((txn.read_bytes() if txn.exists() else b"") + encode_aborted_txn(extra))


def _generated(rng: random.Random, root: Path) -> Path:
    kinds: set[str] = set()
    parts = [_partition(rng, "t"), _partition(rng, "u")]
    for part in parts:  # entries below a segment's base (offsets went back) do not encode
        for seg in part.segments:
            seg.index = [e for e in seg.index if e.offset >= seg.base]
            seg.time_index = [e for e in seg.time_index if e.offset >= seg.base]
    d = write_log_dir(root, parts, clean_shutdown=rng.random() < 0.5)
    if rng.random() < 0.3:
        write_checkpoint(d, "log-start-offset-checkpoint", {("t", 0): rng.randint(0, 60)})
    for part in ("t-0", "u-0"):
        for log in sorted((d / part).glob("*.log")):
            if rng.random() < 0.7:
                _corrupt_segment(rng, d / part, int(log.name[:20]), kinds)
    return d


def _index_files(d: Path) -> Iterator[tuple[Path, int]]:
    for path in sorted([*d.rglob("*.index"), *d.rglob("*.timeindex")]):
        yield path, int(path.name[:20])


def _index_file_problems(fn, path: Path, base: int) -> list[Problem] | str:  # type: ignore[no-untyped-def]
    try:
        return fn(path, base)
    except Exception as err:  # noqa: BLE001 - both must raise the same
        return f"{type(err).__name__}: {err}"


SEEDS = range(60)


def test_generated_partitions_with_corruption(tmp_path: Path, mode: str) -> None:
    seen: set[str] = set()
    for seed in SEEDS:
        rng = random.Random(seed)
        d = _generated(rng, tmp_path / f"s{seed}")
        problems = _both([d], chunk_bytes=rng.choice([sf.CHUNK_BYTES, 90, 400, 2000]))
        seen |= {p.check for p in problems}
        for path, base in _index_files(d):
            assert (_index_file_problems(verify_index_file, path, base)
                    == _index_file_problems(verify_index_file_per_batch, path, base)), path
    # the corruptions reached every rule the walk applies (else this test proves little)
    assert {"crc", "offset-order", "log-decode", "control-record", "index-decode", "timeindex-decode", "index-order", "index-offset", "index-position",
            "timeindex-order", "timeindex-offset", "timeindex-timestamp", "txnindex-missing", "txnindex-no-marker",
            "txnindex-first-offset", "txnindex-lso", "snapshot-log-mismatch", "stale-marker", "producer-epoch",
            "non-transactional-in-txn"} <= seen, seen


def test_a_run_in_an_open_transaction_reports_each_batch_in_log_order(tmp_path: Path, mode: str) -> None:
    # Producer 1's non-transactional batches inside its open transaction, with producer 2's
    # stale marker between them: the fold makes one run of producer 1's three batches; the
    # findings must still come in log order, one per batch.
    p = PartitionWriter("t", 0)
    p.data(1, 0, 1)                        # 0: opens producer 1's transaction
    p.data(2, 3, 1)                        # 1: producer 2, epoch 3
    p.data(1, 0, 1, txn=False)             # 2
    p.marker(2, 1, commit=True)            # 3: stale (epoch 1 < 3)
    p.data(1, 0, 1, txn=False)             # 4
    p.data(1, 0, 1, txn=False)             # 5
    d = write_log_dir(tmp_path / "b", [p])
    got = [(x.check, x.position) for x in _both([d]) if x.severity != "info"]
    positions = [h.position for h in rb.iter_batches(bytes(p.seg.data))]
    assert got == [("non-transactional-in-txn", positions[2]), ("stale-marker", positions[3]),
                   ("non-transactional-in-txn", positions[4]), ("non-transactional-in-txn", positions[5])]


# ----------------------------------------------------------------------------- the index rules alone

@st.composite
def _segment_and_indexes(draw: st.DrawFn) -> tuple[bytes, list[OffsetIndexEntry], list[TimeIndexEntry]]:
    out = bytearray()
    offset = 0
    starts = []
    for _ in range(draw(st.integers(0, 30))):
        n = draw(st.integers(1, 3))
        ts = draw(st.integers(0, 50))
        b = bytearray(build_batch([Record(offset=offset + i, timestamp=ts + i, key=b"k", value=b"v") for i in range(n)]))
        if draw(st.booleans()) and draw(st.booleans()):
            struct.pack_into(">i", b, 23, draw(st.integers(-4, 4)))  # last offset delta, CRC left alone
        pos = len(out)
        out += b
        h = rb.read_batch_header(bytes(b), 0)
        starts.append((pos, h.last_offset, h.max_timestamp))
        offset = max(offset + draw(st.integers(-3, 4)) + n, 0)
    if draw(st.booleans()):
        out += bytes(draw(st.integers(1, 70)))  # bytes that do not form a batch
    index = [OffsetIndexEntry(offset=last + draw(st.sampled_from([0, 0, -1, 1, 40])),
                              position=pos + draw(st.sampled_from([0, 0, 0, 5, 9999])))
             for pos, last, _ts in starts if draw(st.booleans())]
    index += draw(st.lists(st.builds(OffsetIndexEntry, offset=st.integers(0, 100), position=st.integers(-5, 3000)),
                           max_size=3))
    times = [TimeIndexEntry(timestamp=ts + draw(st.sampled_from([0, 0, 1, -1])),
                            offset=last + draw(st.sampled_from([0, 0, -1, 1, 60])))
             for _pos, last, ts in starts if draw(st.booleans())]
    times += draw(st.lists(st.builds(TimeIndexEntry, timestamp=st.integers(0, 60), offset=st.integers(0, 100)),
                           max_size=3))
    if draw(st.booleans()):
        times.sort(key=lambda t: (t.offset, t.timestamp))
    return bytes(out), index, times


def _collect() -> tuple[list[Problem], AddProblem]:
    got: list[Problem] = []

    def add(check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        got.append(Problem(check=check, severity=severity, file=file, position=position, message=message))
    return got, add


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_segment_and_indexes(), max_bytes=st.integers(1, 3000))
def test_table_rules_equal_the_per_batch_rules(case, max_bytes: int) -> None:  # type: ignore[no-untyped-def]
    buf, index, times = case
    files = {"log_path": Path("00.log"), "index_path": Path("00.index"), "timeindex_path": Path("00.timeindex")}
    old, add_old = _collect()
    check_old = PerBatchIndexCheck(add=add_old, index=index, time_index=times, **files)  # type: ignore[arg-type]
    try:
        for h in rb.iter_batches(buf):
            check_old.batch(h)
    except DecodeError:
        pass
    check_old.finish(len(buf))
    new, add_new = _collect()
    check = SegmentIndexCheck(add=add_new, index=OffsetIndexColumns.of(index),  # type: ignore[arg-type]
                              time_index=TimeIndexColumns.of(times), **files)
    rows: list[BatchRow] = []
    try:
        for chunk in sf.SegmentFold(buf, want_table=True, max_bytes=max_bytes).chunks():
            assert chunk.table is not None
            rows += check.table(chunk.table, chunk.pos)
    except DecodeError:
        pass
    for row in rows:
        add_new(*row[2:])
    check.finish(len(buf))
    assert new == old


def test_random_byte_damage_to_a_fixture(tmp_path: Path, mode: str) -> None:
    # Bytes flipped anywhere in the logs and indexes of a real fixture: headers that change
    # magic, length, attributes, producer or offsets, records that stop decoding.
    import shutil

    seen: set[str] = set()
    for seed in range(40):
        rng = random.Random(1000 + seed)
        d = tmp_path / f"s{seed}"
        shutil.copytree(ROOT / "fixtures" / "hanging", d)
        files = sorted(p for p in d.rglob("*") if p.suffix in (".log", ".index", ".timeindex") and p.stat().st_size)
        for path in rng.sample(files, min(len(files), rng.randint(1, 4))):
            raw = bytearray(path.read_bytes())
            for _ in range(rng.randint(1, 6)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            path.write_bytes(bytes(raw))
        seen |= {p.check for p in _both([d], chunk_bytes=rng.choice([sf.CHUNK_BYTES, 300]))}
    assert {"crc", "log-decode", "index-position"} <= seen, seen


# ----------------------------------------------------------------------------- what recovery keeps

def _recovery_walks(d: Path) -> Iterator[tuple[Path, object, object]]:
    """(segment, what verify's fold says LogSegment.recover keeps of it, what the loader's own walk says)."""
    from kafkatx.storage import log_end
    from kafkatx.storage.log_dir import LogDir

    for part in LogDir(d).partitions():
        v = V._PartitionVerifier(part)
        v.run()
        assert set(v.prefixes) == {str(s.log_path) for s in part.segments}
        for seg in part.segments:
            yield seg.log_path, v.prefixes[str(seg.log_path)], log_end.segment_valid_prefix(seg)


def test_verify_hands_the_loader_the_very_prefix_its_walk_finds(tmp_path: Path, mode: str) -> None:
    # plan_load(known_prefixes=...) skips segment_valid_prefix's walk for the segments verify folded: what
    # verify hands it must be what that walk returns, on every kind of damage.
    kinds = set()
    for seed in SEEDS:
        d = _generated(random.Random(seed), tmp_path / f"s{seed}")
        for log, new, old in _recovery_walks(d):
            assert new == old, log
            kinds.add(old.bad.split(" (")[0].split(" at offset")[0])  # type: ignore[attr-defined]
    for maker in ("bad_batch_crc", "truncated_tail", "trailing_garbage"):
        from fixtures import corrupt

        c = getattr(corrupt, maker)(tmp_path / maker)
        for log, new, old in _recovery_walks(c.log_dir):
            assert new == old, log
    assert kinds == {"a batch", "not a whole valid batch", "a partial batch"}, kinds


def test_the_loader_takes_a_known_prefix_only_for_the_bytes_it_was_made_from(tmp_path: Path) -> None:
    from kafkatx.storage.loading import plan_load
    from kafkatx.storage.log_dir import LogDir
    from kafkatx.storage.log_end import valid_prefix

    p = PartitionWriter("t", 0)
    for _ in range(3):
        p.data(1, 0, 2, txn=False)
    d = write_log_dir(tmp_path / "d", [p], clean_shutdown=False)
    part = LogDir(d).partition("t", 0)
    (seg,) = part.segments
    size = seg.size
    truth = plan_load(part)
    assert truth.log_end_offset == 6 and truth.truncated is None
    # A known prefix made from as many bytes as the file has is taken instead of reading the file
    # (here a made-up one, to see that it is used) ...
    told = plan_load(part, known_prefixes={seg.log_path: valid_prefix(10, 1, None, size)})
    assert told.log_end_offset == 1 and told.truncated == (str(seg.log_path), 10, size - 10)
    # ... but not one made from another size (the file grew or shrank since: a live broker).
    stale = plan_load(part, known_prefixes={seg.log_path: valid_prefix(10, 1, None, size - 1)})
    assert stale == truth
