"""The loader (storage/loading.py) against Kafka's LogLoader rules, one rule per test.

Each scenario is written with the dumb builders of txn_builders.py; the expected state is
reasoned from Kafka's rules (docs/semantics.md "Loading", LogLoader.java,
ProducerStateManager.java, UnifiedLog.rebuildProducerState), written down in the test, not
taken from kafkatx. Snapshot contents deliberately differ from what the log says where the
test needs to see *which* snapshot the broker would load.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.session.offline import describe_producers, find_hanging, lag
from kafkatx.storage.loading import plan_load
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.replay import replay_partition
from tests.storage.txn_builders import PartitionWriter, snapshot_entry, write_checkpoint, write_log_dir

DAY = 86_400_000


def _part(log_dir: Path, name: str = "t-0"):
    topic, n = name.rsplit("-", 1)
    return LogDir(log_dir).partition(topic, int(n))


def _archive(tmp_path: Path, *, clean: bool = True) -> Path:
    """The issue's example: archive-0 starts at 100 (retention deleted 0..99); its only snapshot,
    00000000000000000100.snapshot, remembers producer 5's transaction opened at offset 50."""
    p = PartitionWriter("archive", 0, base=100)
    for _ in range(8):
        p.data(7, 0, 1, txn=False)  # 100..107, an idempotent producer
    p.snapshot([snapshot_entry(5, 0, last_offset=60, txn_first=50),
                snapshot_entry(7, 0, last_offset=99, last_seq=99)], offset=100)
    write_log_dir(tmp_path, [p], clean_shutdown=clean)
    return tmp_path


def test_snapshot_at_the_log_start_is_deleted_and_the_log_replayed(tmp_path):
    # truncateAndReload(logStart=100, logEnd=108) deletes snapshots <= 100: no snapshot is left, so
    # loadFromSnapshot starts empty at the log start and replays 100..107. Producer 5's transaction
    # (only the snapshot knew it) is forgotten: LSO = HW = 108, nothing hanging.
    ld = _archive(tmp_path)
    plan = plan_load(_part(ld, "archive-0"))
    assert (plan.log_start_offset, plan.log_end_offset, plan.mode) == (100, 108, "log-replay")
    assert [(a.action, Path(a.file).name) for a in plan.actions if a.action == "delete-snapshot"] == [
        ("delete-snapshot", "00000000000000000100.snapshot")]
    answer = lag([ld])
    (row,) = answer.rows
    assert (row.lso, row.high_watermark, row.lag, row.open_transactions) == (108, 108, 0, 0)
    assert any("archive-0/00000000000000000100.snapshot" in n and "log start offset 100" in n
               and "deletes it on startup" in n for n in answer.notices)
    assert find_hanging([ld], now=10_000).rows == []
    # The files are only planned over, never changed.
    assert (ld / "archive-0" / "00000000000000000100.snapshot").exists()


def test_the_archive_example_through_the_cli(tmp_path):
    ld = _archive(tmp_path)
    result = CliRunner().invoke(app, ["lag", "--log-dir", str(ld), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [(r["lso"], r["high_watermark"]) for r in json.loads(result.stdout)] == [(108, 108)]
    assert "00000000000000000100.snapshot: is at or below the log start offset 100" in result.stderr
    result = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(ld), "--now", "1700000000000", "--format", "json"])
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])


def _crash_layout(tmp_path: Path, *, clean: bool) -> Path:
    """Two segments: [0,2) holds producer 1's open transaction, [2,5) producer 2's idempotent data.
    Snapshot 2 (a roll, at the active segment's base) says what the log says; snapshot 5 (the
    log end) claims a producer 9 with an open transaction from 3 that the log never mentions."""
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2, ts=100)  # 0..1 opens producer 1's txn
    p.roll()
    p.snapshot([snapshot_entry(1, 0, last_seq=1, last_offset=1, ts=100, txn_first=0)], offset=2)
    p.data(2, 0, 3, txn=False, ts=200)  # 2..4
    p.snapshot([snapshot_entry(1, 0, last_seq=1, last_offset=1, ts=100, txn_first=0),
                snapshot_entry(9, 0, last_offset=3, ts=150, txn_first=3)], offset=5)
    write_log_dir(tmp_path, [p], clean_shutdown=clean)
    return tmp_path


def test_clean_shutdown_loads_the_snapshot_at_the_log_end(tmp_path):
    # Clean: no recovery; truncateAndReload(0, 5) keeps 2 and 5 and loads the newest, 5: no replay.
    st = replay_partition(_part(_crash_layout(tmp_path, clean=True)))
    assert st.snapshot_offset == 5 and st.batches == 0
    assert [(t.producer_id, t.first_offset) for t in st.open_transactions] == [(1, 0), (9, 3)]


def test_unclean_shutdown_recovers_the_active_segment_and_deletes_snapshots_above_its_base(tmp_path):
    # No .kafka_cleanshutdown, recovery point 5 (= log end): the segment holding it (base 2) is
    # recovered; rebuilding to its base deletes snapshot 5 (> 2) and loads snapshot 2; recovery then
    # replays 2..4. Producer 9 never existed for the broker.
    ld = _crash_layout(tmp_path, clean=False)
    plan = plan_load(_part(ld))
    assert [(a.action, Path(a.file).name) for a in plan.actions] == [
        ("delete-snapshot", "00000000000000000005.snapshot"), ("recover-segment", "00000000000000000002.log")]
    st = replay_partition(_part(ld))
    assert st.snapshot_offset == 2 and st.log_end_offset == 5
    assert [(t.producer_id, t.first_offset) for t in st.open_transactions] == [(1, 0)]
    assert set(st.producers) == {1, 2}


def test_recovery_point_below_the_active_segment_recovers_from_its_segment(tmp_path):
    # Recovery point 1 lies in segment 0: both segments are recovered. Rebuilding to base 0 deletes
    # every snapshot above 0 (2 and 5); the state is rebuilt from the log start.
    ld = _crash_layout(tmp_path, clean=False)
    write_checkpoint(ld, "recovery-point-offset-checkpoint", {("t", 0): 1})
    st = replay_partition(_part(ld))
    assert st.snapshot_offset is None and st.replay_start_offset == 0
    assert [(t.producer_id, t.first_offset) for t in st.open_transactions] == [(1, 0)]


def test_stray_snapshots_only_the_newest_above_the_newest_base_survives(tmp_path):
    # Segments 0 and 10. Snapshots 3 and 7 match no segment base (stray); 15 is stray too but the
    # newest and above the newest base 10, so removeStraySnapshots keeps it (and 10, a base).
    # truncateAndReload(0, 20) then loads 15, whose producer 5 the log never mentions.
    p = PartitionWriter("t", 0)
    p.data(3, 0, 10, txn=False)  # 0..9
    p.roll()
    p.data(3, 0, 10, txn=False)  # 10..19
    p.snapshot([snapshot_entry(4, 0, txn_first=1)], offset=3)
    p.snapshot([snapshot_entry(4, 0, txn_first=1)], offset=7)
    p.snapshot([snapshot_entry(3, 0, last_offset=9, last_seq=9)], offset=10)
    p.snapshot([snapshot_entry(3, 0, last_offset=14, last_seq=14), snapshot_entry(5, 0, txn_first=12)], offset=15)
    ld = write_log_dir(tmp_path, [p], clean_shutdown=True)
    plan = plan_load(_part(ld))
    deleted = sorted(Path(a.file).name[:20] for a in plan.actions if a.action == "delete-snapshot")
    assert [int(d) for d in deleted] == [3, 7]
    assert plan.snapshot_offset == 15
    st = replay_partition(_part(ld))
    assert [(t.producer_id, t.first_offset) for t in st.open_transactions] == [(5, 12)]


def test_a_stray_snapshot_below_the_newest_base_is_deleted(tmp_path):
    # Only strays 3 and 7, both below the newest segment base 10: 3 goes (a newer stray exists), then
    # 7 goes (below 10). Snapshot 10 is loaded.
    p = PartitionWriter("t", 0)
    p.data(3, 0, 10, txn=False)
    p.roll()
    p.data(3, 0, 10, txn=False)
    p.snapshot([snapshot_entry(4, 0, txn_first=1)], offset=3)
    p.snapshot([snapshot_entry(4, 0, txn_first=1)], offset=7)
    p.snapshot([snapshot_entry(3, 0, last_offset=9, last_seq=9)], offset=10)
    ld = write_log_dir(tmp_path, [p], clean_shutdown=True)
    st = replay_partition(_part(ld))
    assert st.snapshot_offset == 10 and st.open_transactions == []


def test_clean_shutdown_without_any_snapshot_starts_empty_and_reads_nothing(tmp_path):
    # The upgrade path: .kafka_cleanshutdown and no snapshot. Producer 1's open transaction in the
    # log is never read: empty producer state, LSO = HW.
    p = PartitionWriter("t", 0)
    p.data(1, 0, 3)  # 0..2, transactional, never ended
    ld = write_log_dir(tmp_path, [p], clean_shutdown=True)
    st = replay_partition(_part(ld))
    assert st.producers == {} and st.batches == 0 and st.load is not None and st.load.mode == "empty-upgrade"
    answer = lag([ld])
    assert [(r.lso, r.high_watermark) for r in answer.rows] == [(3, 3)]
    assert any("upgrade" in n and "t-0" in n for n in answer.notices)
    # The same files after a crash are replayed from the log start: the transaction is open.
    (ld / ".kafka_cleanshutdown").unlink()
    assert [r.lso for r in lag([ld]).rows] == [0]


def _expiry_dir(tmp_path: Path, base: int = 0) -> Path:
    p = PartitionWriter("t", 0)
    p.data(1, 0, 1, txn=False, ts=base + 1_000)
    p.data(2, 0, 1, txn=False, ts=base + 1_001)
    p.data(3, 0, 1, ts=base + 1_000)  # opens a transaction: never expires
    p.snapshot([snapshot_entry(1, 0, last_offset=0, ts=base + 1_000),
                snapshot_entry(2, 0, last_offset=1, ts=base + 1_001),
                snapshot_entry(3, 0, last_offset=2, ts=base + 1_000, txn_first=2)], offset=3)
    return write_log_dir(tmp_path, [p], clean_shutdown=True)


def test_producer_expiration_at_now(tmp_path):
    # isProducerExpired: no open transaction and now - lastTimestamp >= producer.id.expiration.ms.
    ld = _expiry_dir(tmp_path)
    at_boundary = 1_000 + DAY  # producer 1 exactly at the limit (>=): expired; producer 2 1 ms short
    rows = describe_producers([ld], topic="t", partition=0, now=at_boundary).rows
    assert [r.producer_id for r in rows] == [2, 3]
    rows = describe_producers([ld], topic="t", partition=0, now=at_boundary - 1).rows
    assert [r.producer_id for r in rows] == [1, 2, 3]
    rows = describe_producers([ld], topic="t", partition=0, now=at_boundary + 1, include_expired=True).rows
    assert [(r.producer_id, r.expired) for r in rows] == [(1, True), (2, True), (3, False)]
    rows = describe_producers([ld], topic="t", partition=0, now=at_boundary + 1, expiration_ms=2 * DAY).rows
    assert [r.producer_id for r in rows] == [1, 2, 3]


def test_describe_producers_cli_expiration_flags(tmp_path):
    t0 = 1_700_000_000_000  # --now must be epoch milliseconds: the clock starts at T0 here
    ld = _expiry_dir(tmp_path, t0)
    base = ["describe-producers", "--log-dir", str(ld), "--topic", "t", "--partition", "0", "--format", "json"]
    result = CliRunner().invoke(app, [*base, "--now", str(t0 + 1_000 + DAY)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["producer_id"] for r in rows] == [2, 3] and all("expired" not in r for r in rows)
    assert "--include-expired" in result.stderr
    result = CliRunner().invoke(app, [*base, "--now", str(t0 + 1_000 + DAY), "--include-expired",
                                      "--producer-id-expiration-ms", str(DAY)])
    assert [(r["producer_id"], r["expired"]) for r in json.loads(result.stdout)] == [(1, True), (2, False),
                                                                                     (3, False)]


def test_torn_tail_after_a_crash_is_truncated_and_the_log_end_follows(tmp_path):
    # Unclean shutdown: recovery stops at the partial last batch and truncates it; the log end is the
    # end of the last whole batch and every answer uses it.
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)  # 0..1 opens a transaction
    p.marker(1, 0, commit=True)  # 2
    p.data(1, 0, 2)  # 3..4 (torn below)
    ld = write_log_dir(tmp_path, [p], hw={"t-0": 3})
    log = ld / "t-0" / f"{0:020d}.log"
    log.write_bytes(log.read_bytes()[:-7])
    plan = plan_load(_part(ld))
    assert plan.log_end_offset == 3 and plan.truncated is not None and plan.truncated[2] > 0
    answer = lag([ld])
    (row,) = answer.rows
    assert (row.log_end_offset, row.lso, row.high_watermark, row.open_transactions) == (3, 3, 3, 0)
    assert answer.skipped == [] and any("recovery truncates" in n for n in answer.notices)


def test_torn_tail_after_a_clean_shutdown_is_not_truncated_the_partition_is_skipped(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)
    p.data(1, 0, 2)
    p.snapshot([snapshot_entry(1, 0, last_offset=3, txn_first=0)], offset=4)
    ld = write_log_dir(tmp_path, [p], clean_shutdown=True)
    log = ld / "t-0" / f"{0:020d}.log"
    log.write_bytes(log.read_bytes()[:-7])
    answer = lag([ld])
    assert answer.rows == [] and len(answer.skipped) == 1 and "t-0" in answer.skipped[0]


def test_a_completed_transaction_whose_marker_is_above_the_high_watermark_holds_the_lso(tmp_path):
    # ProducerStateManager keeps a transaction the final replay saw complete in unreplicatedTxns until
    # the high watermark passes its marker: firstUnstableOffset is its first offset meanwhile.
    p = PartitionWriter("t", 0)
    p.data(9, 0, 1, txn=False)  # 0
    p.data(1, 0, 2)  # 1..2
    p.marker(1, 0, commit=True)  # 3: above the high watermark 3
    p.snapshot([snapshot_entry(9, 0, last_offset=0)], offset=1)  # a roll-time snapshot below the txn
    ld = write_log_dir(tmp_path, [p], hw={"t-0": 3}, clean_shutdown=True)
    (row,) = lag([ld]).rows
    assert (row.lso, row.high_watermark, row.open_transactions) == (1, 3, 0)
    # Once the high watermark passes the marker (4 = log end), the transaction no longer counts.
    write_checkpoint(ld, "replication-offset-checkpoint", {("t", 0): 4})
    (row,) = lag([ld]).rows
    assert (row.lso, row.high_watermark) == (4, 4)


def test_verify_lists_what_the_broker_does_on_startup_as_info_rows(tmp_path):
    ld = _crash_layout(tmp_path, clean=False)
    result = CliRunner().invoke(app, ["verify", "--log-dir", str(ld), "--format", "json"])
    rows = json.loads(result.stdout)
    startup = [(r["check"], r["severity"], Path(r["file"]).name) for r in rows if r["check"].startswith("startup")]
    assert startup == [("startup-delete-snapshot", "info", "00000000000000000005.snapshot"),
                       ("startup-recover-segment", "info", "00000000000000000002.log")]
    # info rows alone are no integrity problem
    assert result.exit_code == (1 if any(r["severity"] != "info" for r in rows) else 0)


def test_log_end_reads_from_the_last_index_entry_and_distrusts_a_damaged_one(tmp_path):
    # LogSegment.readNextOffset reads from the last offset index entry's batch to the end. An entry
    # that does not point at the batch holding its offset is not trusted: the whole segment is read.
    from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
    from kafkatx.storage.log_end import _last_indexed_batch, next_offset_of

    p = PartitionWriter("t", 0)
    for _ in range(4):
        p.data(1, 0, 2, txn=False)  # 0..7, an index entry at every batch
    p.marker(1, 0, commit=True)  # 8, not indexed
    ld = write_log_dir(tmp_path, [p], clean_shutdown=True)
    seg = _part(ld).segments[0]
    with seg.open() as buf:
        size = len(buf)
        positions = [h.position for h in seg.iter_batches(buf)]
        assert _last_indexed_batch(seg, buf) == positions[3]
    assert next_offset_of(seg) == (9, None)
    assert plan_load(_part(ld)).log_end_offset == 9
    for damaged in ([OffsetIndexEntry(offset=7, position=positions[3] + 1)],  # inside a batch
                    [OffsetIndexEntry(offset=2, position=positions[3])],  # the batch there starts after 2
                    [OffsetIndexEntry(offset=7, position=size + 100)]):  # past the end
        seg.index_path.write_bytes(encode_offset_index(damaged, 0))
        with seg.open() as buf:
            assert _last_indexed_batch(seg, buf) == 0
        assert next_offset_of(seg) == (9, None)


def test_a_txnindex_entry_below_the_segment_base_makes_the_broker_recover_it(tmp_path):
    # LogSegment.sanityCheck -> TransactionIndex.sanityCheck: an aborted-txn entry whose last offset lies
    # below the segment's base offset is corrupt, so loadSegmentFiles recovers the segment even after a
    # clean shutdown. An entry of an unknown version is not a reason to recover (Kafka fails on it).
    from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn

    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)
    p.marker(1, 0, commit=False)
    p.roll()  # segment 3
    p.data(2, 0, 2)
    p.marker(2, 0, commit=False)
    ld = write_log_dir(tmp_path, [p], clean_shutdown=True)
    txnindex = ld / "t-0" / f"{3:020d}.txnindex"

    def entries(*rows: tuple[int, int, int]) -> bytes:
        return b"".join(encode_aborted_txn(AbortedTxn(version=v, producer_id=2, first_offset=3, last_offset=last,
                                                      last_stable_offset=3)) for v, last, _ in rows)

    txnindex.write_bytes(entries((0, 4, 0), (0, 1, 0), (0, 2, 0)))  # the 2nd and 3rd end below base 3
    recover = [a for a in plan_load(_part(ld)).actions if a.action == "recover-segment"]
    assert [Path(a.file).name for a in recover] == [f"{3:020d}.log"]
    assert "entry ending at 1, below the segment base 3" in recover[0].message
    # a version the broker does not know anywhere in the file: no recovery for this reason, and the
    # mapped file is released although the scan stopped with an error
    txnindex.write_bytes(entries((0, 1, 0), (5, 4, 0)))
    assert [a for a in plan_load(_part(ld)).actions if a.action == "recover-segment"] == []
    txnindex.write_bytes(entries((0, 4, 0)) + b"\x00" * 10)  # a partial trailing entry is not read
    assert [a for a in plan_load(_part(ld)).actions if a.action == "recover-segment"] == []
