"""The offline commands over hand-built log dirs: each hanging kind, lag, describe, skipped partitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatx.errors import MissingFile, UsageError
from kafkatx.format.txn_log import TxnState
from kafkatx.session import offline
from tests.storage.txn_builders import PartitionWriter, TxnLogWriter, txn_value, write_log_dir

S = TxnState
MIN = 60_000
T0 = 1_700_000_000_000
NOW = T0 + 60 * MIN  # an hour later; max timeout 15 minutes


def build(tmp_path: Path) -> Path:
    """One coordinator partition (N=1) and data partitions with one scenario each.

    - "late" (pid 10) Ongoing on orders-0, started T0, timeout 1 min -> timed-out on orders-0.
    - "prep" (pid 20) PrepareCommit over orders-1 and payments-0: orders-1 got its COMMIT,
      payments-0 did not -> incomplete-markers on payments-0 only.
    - "done" (pid 30) CompleteCommit, but orders-1 still has its txn open (lost marker) -> orphaned.
    - pid 99 maps to no transactional id, open on __consumer_offsets-0 -> orphaned, id null.
    - "fresh" (pid 40) Ongoing within its timeout on orders-0 -> not hanging.
    - pid 50 open on payments-0 but only written 5 minutes ago, no id -> younger than the max timeout.
    """
    coord = TxnLogWriter(0)
    coord.put("late", txn_value(S.ONGOING, pid=10, epoch=3, parts={"orders": [0]}, start=T0, timeout_ms=MIN))
    coord.put("prep", txn_value(S.ONGOING, pid=20, parts={"orders": [1], "payments": [0]}, start=T0))
    coord.put("prep", txn_value(S.PREPARE_COMMIT, pid=20, parts={"orders": [1], "payments": [0]}, start=T0))
    coord.put("done", txn_value(S.ONGOING, pid=30, parts={"orders": [1]}, start=T0))
    coord.put("done", txn_value(S.PREPARE_COMMIT, pid=30, parts={"orders": [1]}, start=T0))
    coord.put("done", txn_value(S.COMPLETE_COMMIT, pid=30, parts={}, start=T0))
    coord.put("fresh", txn_value(S.ONGOING, pid=40, parts={"orders": [0]}, start=NOW - MIN, timeout_ms=10 * MIN))

    o0 = PartitionWriter("orders", 0)
    o0.data(-1, -1, 5, ts=T0 - MIN)                # 0..4 plain
    o0.data(10, 3, 2, ts=T0 + 1_000)               # 5..6 late opens
    o0.data(40, 0, 1, ts=NOW - MIN)                # 7 fresh opens
    o1 = PartitionWriter("orders", 1)
    o1.data(30, 0, 3, ts=T0 + 2_000)               # 0..2 done opens, never closed here
    o1.data(20, 0, 1, ts=T0 + 3_000)               # 3 prep opens
    o1.marker(20, 0, commit=True, ts=T0 + 4_000)   # 4 prep committed here
    pay = PartitionWriter("payments", 0)
    pay.data(20, 0, 2, ts=T0 + 3_000)              # 0..1 prep opens, marker missing
    pay.data(50, 0, 1, ts=NOW - 5 * MIN)           # 2 young unknown producer
    co = PartitionWriter("__consumer_offsets", 0)
    co.data(99, 1, 1, ts=T0 + 5_000, key=b"\x00\x01")  # 0 transactional offset commit, unknown producer
    return write_log_dir(tmp_path / "broker", [coord, o0, o1, pay, co], hw={"orders-0": 7})


def test_find_hanging_kinds(tmp_path):
    d = build(tmp_path)
    ans = offline.find_hanging([d], now=NOW, max_timeout_ms=15 * MIN)
    got = [(r.kind, f"{r.topic}-{r.partition}", r.producer_id, r.transactional_id, r.coordinator_state,
            r.first_offset) for r in ans.rows]
    assert got == [
        ("orphaned", "__consumer_offsets-0", 99, None, None, 0),
        ("timed-out", "orders-0", 10, "late", "Ongoing", 5),
        ("orphaned", "orders-1", 30, "done", "CompleteCommit", 0),
        ("incomplete-markers", "payments-0", 20, "prep", "PrepareCommit", 0),
    ]
    timed_out = ans.rows[1]
    # timed-out: the coordinator's clock (start + timeout passed)
    assert timed_out.start_ms == T0 and timed_out.duration_ms == NOW - T0 and timed_out.producer_epoch == 3
    orphan = ans.rows[2]
    assert orphan.start_ms == T0 + 2_000 and orphan.duration_ms == NOW - T0 - 2_000
    assert ans.skipped == []


def test_max_timeout_filters_orphans_not_timeouts(tmp_path):
    d = build(tmp_path)
    # With a 2-hour max timeout nothing is "old" except what the coordinator's own timeout says.
    rows = offline.find_hanging([d], now=NOW, max_timeout_ms=120 * MIN).rows
    assert [(r.kind, r.producer_id) for r in rows] == [("timed-out", 10)]
    # With 1 minute the young unknown producer 50 (5 minutes) counts too.
    rows = offline.find_hanging([d], now=NOW, max_timeout_ms=MIN).rows
    assert ("orphaned", 50) in [(r.kind, r.producer_id) for r in rows]


def test_timed_out_without_data_is_a_notice(tmp_path):
    coord = TxnLogWriter(0)
    coord.put("idle", txn_value(S.ONGOING, pid=5, parts={"orders": [9]}, start=T0, timeout_ms=MIN))
    d = write_log_dir(tmp_path / "b", [coord])
    ans = offline.find_hanging([d], now=NOW)
    assert ans.rows == []
    assert any("'idle'" in n and "orders-9" in n for n in ans.notices)


def test_lag(tmp_path):
    d = build(tmp_path)
    rows = {f"{r.topic}-{r.partition}": r for r in offline.lag([d]).rows}
    o0 = rows["orders-0"]
    # HW 7 from the checkpoint; open txns from 5 (late) and 7 (fresh); LSO = 5
    assert (o0.log_start_offset, o0.lso, o0.high_watermark, o0.log_end_offset, o0.lag) == (0, 5, 7, 8, 2)
    assert (o0.open_transactions, o0.oldest_open_producer_id, o0.oldest_open_first_offset) == (2, 10, 5)
    o1 = rows["orders-1"]
    assert (o1.lso, o1.high_watermark, o1.lag, o1.open_transactions) == (0, 5, 5, 1)
    co = rows["__consumer_offsets-0"]
    assert (co.lso, co.high_watermark, co.open_transactions) == (0, 1, 1)
    ts = rows["__transaction_state-0"]
    assert (ts.lso, ts.lag, ts.open_transactions, ts.oldest_open_producer_id) == (7, 0, 0, None)
    assert [r.topic for r in offline.lag([d], topic="payments").rows] == ["payments"]


def test_lag_without_checkpoint_uses_log_end(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 3)
    d = write_log_dir(tmp_path / "b", [p], checkpoints=False)
    ans = offline.lag([d])
    (row,) = ans.rows
    assert (row.high_watermark, row.lso, row.lag) == (3, 0, 3)
    assert any("t-0" in n and "log end offset" in n for n in ans.notices)


def test_list_and_describe(tmp_path):
    d = build(tmp_path)
    rows = offline.list_transactions([d]).rows
    assert [r.transactional_id for r in rows] == ["done", "fresh", "late", "prep"]
    assert rows[3].partitions == ["orders-1", "payments-0"] and rows[3].state == "PrepareCommit"
    assert rows[3].coordinator_partition == 0 and rows[3].coordinator_id is None
    assert [r.transactional_id for r in offline.list_transactions([d], states=["ongoing"]).rows] == \
        ["fresh", "late"]
    assert [r.transactional_id for r in offline.list_transactions([d], pattern="[dp].*").rows] == ["done", "prep"]
    # a full match (KIP-1152): "d" alone names no id, where a search would find "done"
    assert offline.list_transactions([d], pattern="d").rows == []
    with pytest.raises(UsageError):
        offline.list_transactions([d], states=["Sleeping"])

    (desc,) = offline.describe_transaction([d], "prep").rows
    assert [h.state for h in desc.history] == ["Ongoing", "PrepareCommit"]
    assert [(s.partition, s.open, s.first_offset) for s in desc.partition_status] == \
        [("orders-1", False, None), ("payments-0", True, 0)]
    missing = offline.describe_transaction([d], "nope")
    assert missing.rows == [] and "not found" in missing.notices[0]


def test_describe_producers(tmp_path):
    d = build(tmp_path)
    rows = offline.describe_producers([d], topic="orders", partition=1).rows
    assert [(r.producer_id, r.producer_epoch, r.last_sequence, r.current_txn_first_offset) for r in rows] == \
        [(20, 0, 0, None), (30, 0, 2, 0)]
    assert rows[0].last_timestamp_ms == T0 + 4_000  # the marker's timestamp
    with pytest.raises(MissingFile):
        offline.describe_producers([d], topic="orders", partition=7)


def test_torn_tail_after_a_crash_is_what_the_broker_truncates(tmp_path):
    # build() writes no .kafka_cleanshutdown: the broker recovers orders-1's active segment and
    # truncates the torn COMMIT marker at offset 4 (storage/loading.py). Producer 20 ("prep",
    # PrepareCommit) then has its transaction open again in orders-1: incomplete-markers.
    d = build(tmp_path)
    log = d / "orders-1" / f"{0:020d}.log"
    log.write_bytes(log.read_bytes()[:-7])  # torn tail: the last batch, the marker at offset 4
    ans = offline.find_hanging([d], now=NOW, max_timeout_ms=15 * MIN)
    assert ans.skipped == []
    assert sorted((r.kind, r.producer_id) for r in ans.rows if (r.topic, r.partition) == ("orders", 1)) == [
        ("incomplete-markers", 20), ("orphaned", 30)]
    assert any(str(log) in n and "recovery truncates" in n for n in ans.notices)
    lag = offline.lag([d])
    (o1,) = [r for r in lag.rows if (r.topic, r.partition) == ("orders", 1)]
    assert (o1.log_end_offset, o1.lso, o1.open_transactions) == (4, 0, 2)


def test_corrupt_partition_is_skipped_and_rest_answered(tmp_path):
    # After a clean shutdown nothing is recovered: bytes that do not form a batch cannot be read,
    # the partition is skipped and named, the others answered.
    d = build(tmp_path)
    (d / ".kafka_cleanshutdown").write_text("")
    log = d / "orders-1" / f"{0:020d}.log"
    log.write_bytes(log.read_bytes()[:-7])  # torn tail
    ans = offline.find_hanging([d], now=NOW, max_timeout_ms=15 * MIN)
    assert len(ans.skipped) == 1 and "orders-1" in ans.skipped[0] and str(log) in ans.skipped[0]
    assert "orders-1" not in {f"{r.topic}-{r.partition}" for r in ans.rows}
    lag = offline.lag([d])
    assert "orders-1" not in {f"{r.topic}-{r.partition}" for r in lag.rows}
    assert lag.skipped and "orders-1" in lag.skipped[0]
