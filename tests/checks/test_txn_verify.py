"""verify on crafted corrupt copies: each problem named with file and position, exit 1; the
analysis commands still answer for the healthy partitions and say which they skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.checks.verify import verify
from kafkatx.cli.main import app
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index
from tests.storage.txn_builders import PartitionWriter, snapshot_entry, write_checkpoint, write_log_dir

ROOT = Path(__file__).resolve().parents[2]
HAVE_FIXTURES = (ROOT / "fixtures" / "hanging").is_dir()
needs_fixtures = pytest.mark.skipif(not HAVE_FIXTURES, reason="fixtures not built")


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def checks(problems) -> set[str]:
    return {p.check for p in problems}


# ----------------------------------------------------------------------------- F's corrupt copies

def _expected(name: str):
    return json.loads((ROOT / "fixtures" / "expected" / "hanging" / f"{name}.json").read_text())


def _now() -> str:
    return str(_expected("scenario")["now_ms"])


@needs_fixtures
@pytest.mark.parametrize(("maker", "check", "exact_position"), [
    ("bad_batch_crc", "crc", True),
    ("truncated_tail", "log-decode", True),
    ("bogus_txnindex_entry", "txnindex-no-marker", True),
    ("bad_snapshot_crc", "snapshot-crc", False),
    ("trailing_garbage", "log-decode", True),
])
def test_verify_names_each_corruption(tmp_path, maker, check, exact_position):
    from fixtures import corrupt

    c = getattr(corrupt, maker)(tmp_path)
    result = run("verify", "--log-dir", str(c.log_dir), "--format", "json")
    # a log that does not decode to its end (with .kafka_cleanshutdown the broker does not
    # recover it) leaves the partition partly unchecked: exit 3, rows beside an "incomplete" list.
    unreadable = check == "log-decode"
    assert result.exit_code == (3 if unreadable else 1), result.output
    doc = json.loads(result.stdout)
    if unreadable:
        assert [u["partition"] for u in doc["incomplete"]] == [c.path.parent.name]
        assert doc["incomplete"][0]["file"] == str(c.path)
    rows = doc["rows"] if unreadable else doc
    hits = [r for r in rows if r["check"] == check and r["file"] == str(c.path)]
    assert hits, rows
    assert set(rows[0]) >= {"check", "severity", "file", "position", "message"}
    if exact_position:
        assert c.position in {r["position"] for r in hits}


@needs_fixtures
@pytest.mark.parametrize("maker", ["truncated_tail", "trailing_garbage"])
def test_analysis_skips_undecodable_partition_and_answers_the_rest(tmp_path, maker):
    from fixtures import corrupt

    c = getattr(corrupt, maker)(tmp_path)
    damaged = c.path.parent.name
    expected = [r for r in _expected("find-hanging") if f"{r['topic']}-{r['partition']}" != damaged]
    # what could be read is printed, then exit 3 naming the partition (never an all-clear).
    result = run("find-hanging", "--log-dir", str(c.log_dir), "--now", _now(), "--format", "json")
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert doc["rows"] == expected
    assert [(u["partition"], u["file"]) for u in doc["incomplete"]] == [(damaged, str(c.path))]
    assert f"skipped: {damaged}" in result.stderr and str(c.path) in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith(f"kafkatx: incomplete: 1 partition could not be "
                                                              f"read (left out above): {damaged}")

    result = run("lag", "--log-dir", str(c.log_dir), "--format", "json")
    assert result.exit_code == 3
    lag_expected = [r for r in _expected("lag") if f"{r['topic']}-{r['partition']}" != damaged]
    assert json.loads(result.stdout)["rows"] == lag_expected
    assert f"skipped: {damaged}" in result.stderr


@needs_fixtures
@pytest.mark.parametrize("maker", ["bad_batch_crc", "bogus_txnindex_entry", "bad_snapshot_crc"])
def test_analysis_unaffected_by_damage_it_does_not_read(tmp_path, maker):
    # A data batch's CRC, the txnindex and a broken snapshot (older one / log start used instead)
    # do not change producer state: find-hanging and lag give the undamaged answers.
    from fixtures import corrupt

    c = getattr(corrupt, maker)(tmp_path)
    result = run("find-hanging", "--log-dir", str(c.log_dir), "--now", _now(), "--format", "json")
    assert json.loads(result.stdout) == _expected("find-hanging")
    result = run("lag", "--log-dir", str(c.log_dir), "--format", "json")
    assert json.loads(result.stdout) == _expected("lag")
    if maker == "bad_snapshot_crc":
        assert "snapshot CRC mismatch" in result.stderr


# ----------------------------------------------------------------------------- hand-made problems

def _problems(d: Path) -> list:
    """verify's integrity rows, without the info rows that say what the broker does on startup
    (these test dirs have no .kafka_cleanshutdown, so the broker would recover the last segment)."""
    return [x for x in verify([d]) if x.severity != "info"]


def _healthy(tmp_path: Path) -> tuple[Path, PartitionWriter]:
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)                   # 0..1
    p.data(2, 0, 1)                   # 2
    m = p.marker(1, 0, commit=False)  # 3 aborts producer 1 (data 0..1); producer 2 still open from 2
    p.abort_entry(1, 0, m, 2)         # LSO after the abort: producer 2's first offset
    p.marker(2, 0, commit=True)       # 4
    p.snapshot([snapshot_entry(1, 0, last_seq=-1, last_offset=1, coordinator_epoch=0),
                snapshot_entry(2, 0, last_seq=0, last_offset=2, coordinator_epoch=0)])
    return write_log_dir(tmp_path / "b", [p], clean_shutdown=True), p  # a cleanly stopped broker


def test_healthy_partition_has_no_problems(tmp_path):
    d, _ = _healthy(tmp_path)
    assert _problems(d) == []


def test_missing_txnindex_entry(tmp_path):
    d, _ = _healthy(tmp_path)
    (d / "t-0" / f"{0:020d}.txnindex").unlink()
    (problem,) = _problems(d)
    assert problem.check == "txnindex-missing" and "offset 3" in problem.message
    assert problem.file.endswith(f"{0:020d}.txnindex")


def test_txnindex_wrong_first_offset_and_lso(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)
    m = p.marker(1, 0, commit=False)
    p.abort_entry(1, 1, m, m)  # first offset should be 0, LSO m + 1
    d = write_log_dir(tmp_path / "b", [p])
    got = {(x.check, x.severity, x.position) for x in _problems(d)}
    assert got == {("txnindex-first-offset", "error", 0), ("txnindex-lso", "warning", 0)}


def _two_batches(tmp_path: Path) -> Path:
    """A log dir whose t-0 has two batches: offsets 0..1 (max timestamp 100) and 2..3 (200), no index entries."""
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2, ts=100, index=False)   # 0..1 at position 0
    p.data(1, 0, 2, ts=200, index=False)   # 2..3
    return write_log_dir(tmp_path / "b", [p])


def test_index_and_timeindex_problems(tmp_path):
    d = _two_batches(tmp_path)
    seg = d / "t-0"
    # entry 1 points 5 bytes into the first batch; entry 2 names an offset past the segment
    (seg / f"{0:020d}.index").write_bytes(encode_offset_index(
        [OffsetIndexEntry(offset=1, position=0), OffsetIndexEntry(offset=2, position=5),
         OffsetIndexEntry(offset=9, position=7)], 0))
    # time goes backwards
    (seg / f"{0:020d}.timeindex").write_bytes(encode_time_index(
        [TimeIndexEntry(timestamp=200, offset=3), TimeIndexEntry(timestamp=100, offset=3)], 0))
    got = _problems(d)
    assert {"index-position", "index-offset", "timeindex-order"} <= checks(got)
    pos = [x for x in got if x.check == "index-position"]
    assert {("position 5" in x.message) or ("position 7" in x.message) for x in pos} == {True}
    # every problem names the byte of the index entry: entries are 8 bytes, so entries 1 and 2
    assert sorted(x.position for x in pos) == [8, 16]
    assert [x.position for x in got if x.check == "index-offset"] == [16]


def test_dump_index_verify_applies_verifys_rules(tmp_path):
    # One implementation (txn.verify.SegmentIndexCheck): for each index file, dump-index --verify
    # finds exactly the (check, byte) problems verify finds in it, and names them on stderr.
    d = _two_batches(tmp_path)
    seg = d / "t-0"
    index, timeindex = seg / f"{0:020d}.index", seg / f"{0:020d}.timeindex"
    index.write_bytes(encode_offset_index(
        [OffsetIndexEntry(offset=1, position=0), OffsetIndexEntry(offset=2, position=5),
         OffsetIndexEntry(offset=9, position=7)], 0))
    # entry 0: offset 1 is in the first batch, whose max timestamp is 100, not 150; entry 1 goes back
    timeindex.write_bytes(encode_time_index(
        [TimeIndexEntry(timestamp=150, offset=1), TimeIndexEntry(timestamp=100, offset=3)], 0))
    by_verify = {(x.file, x.check, x.position) for x in _problems(d)}
    assert {(str(timeindex), "timeindex-timestamp", 0), (str(timeindex), "timeindex-order", 12)} <= by_verify
    for path in (index, timeindex):
        r = run("dump-index", str(path), "--verify", "--format", "json")
        assert r.exit_code == 1
        mine = {(f, c, pos) for f, c, pos in by_verify if f == str(path)}
        assert len(r.stderr.strip().splitlines()) == len(mine)
        size = 8 if path == index else 12
        rows = json.loads(r.stdout)
        assert {i * size for i, row in enumerate(rows) if row["problem"]} == {pos for _f, _c, pos in mine}
        for _f, _c, pos in mine:
            assert f"{path}: byte {pos}: " in r.stderr


def test_dump_index_verify_on_a_torn_log_says_so_and_checks_what_is_there(tmp_path):
    d = _two_batches(tmp_path)
    log = d / "t-0" / f"{0:020d}.log"
    raw = log.read_bytes()
    first_size = len(raw) // 2  # the two batches are the same size
    log.write_bytes(raw[:-5])  # the second batch is torn
    timeindex = d / "t-0" / f"{0:020d}.timeindex"
    timeindex.write_bytes(encode_time_index(
        [TimeIndexEntry(timestamp=100, offset=1), TimeIndexEntry(timestamp=200, offset=3)], 0))
    r = run("dump-index", str(timeindex), "--verify", "--format", "json")
    assert r.exit_code == 1  # entry 1's offset 3 is in the torn batch: no batch holds it any more
    assert [row["problem"] is not None for row in json.loads(r.stdout)] == [False, True]
    # the torn tail itself is said, naming the .log and the byte where the bad bytes begin
    assert f"{log}: byte {first_size}: " in r.stderr and f"{timeindex}: byte 12: " in r.stderr


def test_dump_index_verify_unreadable_index_is_exit_3(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2, ts=100)
    d = write_log_dir(tmp_path / "b", [p])
    index = d / "t-0" / f"{0:020d}.index"
    index.write_bytes(index.read_bytes() + b"\x00\x00\x00")  # not a whole entry
    r = run("dump-index", str(index), "--verify")
    assert r.exit_code == 3
    assert len(r.stderr.strip().splitlines()) == 1 and str(index) in r.stderr and "Traceback" not in r.stderr


def test_offset_overlap_and_checkpoints(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 3)        # 0..2
    p.next_offset = 1      # the next batch reuses offsets 1..
    p.data(1, 0, 1, index=False)
    d = write_log_dir(tmp_path / "b", [p], hw={"t-0": 50})
    write_checkpoint(d, "log-start-offset-checkpoint", {("t", 0): 70})
    got = _problems(d)
    assert {"offset-order", "checkpoint-high-watermark", "checkpoint-log-start"} <= checks(got)
    overlap = next(x for x in got if x.check == "offset-order")
    assert overlap.position > 0 and "base offset 1" in overlap.message


def test_snapshot_disagreeing_with_log(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)
    p.snapshot([snapshot_entry(1, 3, last_seq=1, last_offset=1, txn_first=-1)])  # epoch 3, no open txn
    d = write_log_dir(tmp_path / "b", [p])
    (problem,) = _problems(d)
    assert problem.check == "snapshot-log-mismatch"
    assert "epoch 3 vs log 0" in problem.message and "open transaction from -1 vs log 0" in problem.message


def test_stale_marker_reported(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 2, 1)
    p.marker(1, 1, commit=True)
    d = write_log_dir(tmp_path / "b", [p])
    assert checks(_problems(d)) == {"stale-marker"}


def test_verify_cli_exit_codes(tmp_path):
    d, _ = _healthy(tmp_path)
    ok = run("verify", "--log-dir", str(d), "--format", "json")
    assert ok.exit_code == 0 and json.loads(ok.stdout) == []
    (d / "t-0" / f"{0:020d}.txnindex").unlink()
    bad = run("verify", "--log-dir", str(d))
    assert bad.exit_code == 1 and "txnindex-missing" in bad.stdout
    online = run("verify", "--bootstrap-server", "localhost:1")
    assert online.exit_code == 2


# ----------------------------------------------------------------------------- preallocated indexes

def _preallocate(path: Path, size: int) -> None:
    """Zero-fill ``path`` up to ``size`` bytes, as Kafka's AbstractIndex preallocates an active segment's index."""
    raw = path.read_bytes()
    path.write_bytes(raw + bytes(size - len(raw)))


def _crashed_dir(tmp_path: Path, *, clean_shutdown: bool = False) -> Path:
    """t-0: a sealed segment 0 (offsets 0..5, an index entry per batch after the first) and an active
    segment 6 (offsets 6..9); u-0: an empty active segment. No .kafka_cleanshutdown unless asked."""
    t = PartitionWriter("t", 0)
    t.data(1, 0, 2, ts=100, index=False)  # 0..1 at position 0: Kafka never indexes position 0
    t.data(1, 0, 2, ts=200)               # 2..3, indexed
    t.data(1, 0, 2, ts=300)               # 4..5, indexed
    t.roll()
    t.data(1, 0, 2, ts=400, index=False)  # 6..7 at position 0 of the active segment
    t.data(1, 0, 2, ts=500)               # 8..9, indexed
    u = PartitionWriter("u", 0)
    return write_log_dir(tmp_path / "b", [t, u], clean_shutdown=clean_shutdown)


def test_preallocated_active_indexes_are_rebuilt_at_startup_not_errors(tmp_path):
    # A broker killed with its segments open leaves the active segment's .index/.timeindex at
    # segment.index.bytes, zero-filled (AbstractIndex). Without .kafka_cleanshutdown the broker
    # recovers the active segment (LogLoader.recoverLog from the recovery point) and
    # LogSegment.recover rebuilds both indexes: one info row per file, no error.
    d = _crashed_dir(tmp_path)
    files = {d / "t-0" / f"{6:020d}.index": (800, 8), d / "t-0" / f"{6:020d}.timeindex": (792, 12),
             d / "u-0" / f"{0:020d}.index": (800, 0), d / "u-0" / f"{0:020d}.timeindex": (792, 0)}
    for path, (size, _real_bytes) in files.items():
        _preallocate(path, size)
    got = verify([d])
    assert [p for p in got if p.severity == "error"] == []
    rebuilt = {p.file: p for p in got if p.check == "startup-rebuild-index"}
    assert set(rebuilt) == {str(p) for p in files}
    for path, (_size, real_bytes) in files.items():
        row = rebuilt[str(path)]
        assert row.severity == "info" and row.position == real_bytes  # where the zeros begin
        assert "index preallocated, rebuilt at startup" in row.message
    result = run("verify", "--log-dir", str(d), "--format", "json")
    assert result.exit_code == 0, result.output


def test_a_real_mismatch_stays_an_error_next_to_a_preallocated_tail(tmp_path):
    d = _crashed_dir(tmp_path)
    sealed = d / "t-0" / f"{0:020d}.index"
    raw = sealed.read_bytes()
    # the sealed segment's second entry (offset 5) now points 3 bytes into the batch it names
    entries = [OffsetIndexEntry(offset=3, position=int.from_bytes(raw[4:8], "big")),
               OffsetIndexEntry(offset=5, position=int.from_bytes(raw[12:16], "big") + 3)]
    sealed.write_bytes(encode_offset_index(entries, 0))
    active = d / "t-0" / f"{6:020d}.index"
    # the active segment's index: a non-zero entry at a wrong position, then the preallocated zeros
    active.write_bytes(encode_offset_index([OffsetIndexEntry(offset=9, position=7)], 6))
    _preallocate(active, 800)
    got = verify([d])
    errors = {(p.file, p.check, p.position) for p in got if p.severity == "error"}
    assert errors == {(str(sealed), "index-position", 8), (str(active), "index-position", 0)}
    assert [p.position for p in got if p.check == "startup-rebuild-index" and p.file == str(active)] == [8]
    assert run("verify", "--log-dir", str(d)).exit_code == 1


def test_preallocated_index_of_a_segment_the_broker_does_not_recover_is_a_warning(tmp_path):
    # .kafka_cleanshutdown: no recovery, the broker reads the file as it is (a pre-existing index's
    # entry count is its size / entry size): not rebuilt, so a warning, not an info row.
    d = _crashed_dir(tmp_path, clean_shutdown=True)
    active = d / "t-0" / f"{6:020d}.timeindex"
    _preallocate(active, 792)
    got = verify([d])
    assert [p for p in got if p.severity == "error"] == []
    (row,) = [p for p in got if p.file == str(active)]
    assert (row.check, row.severity, row.position) == ("index-preallocated", "warning", 12)


def test_dump_index_verify_on_a_preallocated_index_is_a_note(tmp_path):
    d = _crashed_dir(tmp_path)
    for name, size in ((f"{6:020d}.index", 800), (f"{6:020d}.timeindex", 792)):
        path = d / "t-0" / name
        _preallocate(path, size)
        r = run("dump-index", str(path), "--verify", "--format", "json")
        assert r.exit_code == 0, r.output
        assert "index preallocated (" in r.stderr and "note:" in r.stderr
        assert all(row["problem"] is None for row in json.loads(r.stdout))


@needs_fixtures
def test_verify_pauses_the_cyclic_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    # the collector is off while verify runs (no full collection over every partition's
    # objects) and back on afterwards; off before stays off
    import gc

    import kafkatx.checks.verify as V

    seen: list[bool] = []
    real = V.verify_partition

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(V, "verify_partition", spy)
    was = gc.isenabled()
    try:
        gc.enable()
        first = verify([ROOT / "fixtures" / "hanging"])
        assert seen and not any(seen)
        assert gc.isenabled()
        gc.disable()
        assert verify([ROOT / "fixtures" / "hanging"]) == first
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


@needs_fixtures
@pytest.mark.parametrize("fixture", ["hanging", "loading/torn-tail", "loading/unclean-snapshot-in-active"])
def test_verify_partition_small_as_the_caller_asked_it(fixture: str) -> None:
    # verify asks small_reads() once per log dir and hands it to verify_partition; the rows
    # are those verify_partition gives asking it itself, or reading every file through the map (False)
    from kafkatx.checks.verify import verify_partition
    from kafkatx.storage.log_dir import LogDir
    from kafkatx.storage.segment import small_reads

    log_dir = LogDir(ROOT / "fixtures" / fixture)
    for part in log_dir.partitions():
        kw = {"high_watermark": log_dir.high_watermarks.get(part.key),
              "recovery_point": log_dir.recovery_points.get(part.key),
              "log_start": log_dir.log_start_offsets.get(part.key)}
        asked = verify_partition(part, **kw)
        assert verify_partition(part, small=small_reads(), **kw) == asked
        assert verify_partition(part, small=False, **kw) == asked
