"""hanging.find_hanging as a pure function over hand-made coordinator and partition states."""

from __future__ import annotations

from kafkatx.checks.hanging import find_hanging
from kafkatx.coordinator.state import TransactionMetadata
from kafkatx.coordinator.state_manager import CoordinatorState, _index_producers
from kafkatx.format.txn_log import TxnState
from kafkatx.rows import HistoryEntry
from kafkatx.storage.producer_state import PartitionProducerState, ProducerState

S = TxnState
NOW = 10_000_000
MAX = 900_000


def meta(tid, state, pid, parts, *, start=0, timeout=60_000, **kw) -> TransactionMetadata:
    return TransactionMetadata(transactional_id=tid, producer_id=pid, producer_epoch=1, state=state,
                               timeout_ms=timeout, start_timestamp=start, last_update_timestamp=start,
                               partitions=frozenset(parts), coordinator_partition=0, offset=0, **kw)


def coordinator(*metas, history=None) -> CoordinatorState:
    txns = {m.transactional_id: m for m in metas}
    hist = history or {m.transactional_id: [] for m in metas}
    return CoordinatorState(transactions=txns, history=hist, tombstoned={}, partitions_count=1,
                            partitions_found=(0,), _by_producer=_index_producers(txns, hist))


def partition(topic, part, *open_txns) -> PartitionProducerState:
    producers = {pid: ProducerState(producer_id=pid, producer_epoch=1, last_sequence=0, last_offset=first,
                                    last_timestamp=ts, coordinator_epoch=0, current_txn_first_offset=first,
                                    current_txn_last_offset=first, current_txn_start_timestamp=ts,
                                    current_txn_last_timestamp=ts)
                 for pid, first, ts in open_txns}
    return PartitionProducerState(topic=topic, partition=part, path="/x", log_start_offset=0, log_end_offset=100,
                                  replay_start_offset=0, snapshot_offset=None, batches=1, producers=producers)


def kinds(rows):
    return [(r.kind, r.topic, r.partition, r.producer_id, r.transactional_id) for r in rows]


def test_tv2_next_producer_id_counts_as_the_same_transaction():
    # PrepareAbort written with producer 7 rotating to 8 (epoch exhaustion): data of either id is covered.
    c = coordinator(meta("a", S.PREPARE_ABORT, 7, [("t", 0), ("t", 1)], next_producer_id=8))
    rows = find_hanging(c, [partition("t", 0, (8, 5, 0)), partition("t", 1, (7, 3, 0))], now=NOW, max_timeout_ms=MAX)
    assert kinds(rows) == [("incomplete-markers", "t", 0, 8, "a"), ("incomplete-markers", "t", 1, 7, "a")]


def test_partition_not_in_ongoing_txn_is_orphaned():
    c = coordinator(meta("a", S.ONGOING, 7, [("t", 0)], start=NOW - 1_000))
    rows = find_hanging(c, [partition("t", 0, (7, 0, 0)), partition("t", 1, (7, 2, 0))], now=NOW, max_timeout_ms=MAX)
    # t-0 is part of the (young) ongoing transaction: not hanging; t-1 is not in it: orphaned
    assert kinds(rows) == [("orphaned", "t", 1, 7, "a")]
    assert rows[0].coordinator_state == "Ongoing"


def test_old_producer_id_of_live_id_maps_through_history():
    hist = {"a": [HistoryEntry(offset=0, state="Ongoing", producer_id=3, producer_epoch=0, partitions=["t-0"],
                               last_update_timestamp_ms=0)]}
    c = coordinator(meta("a", S.COMPLETE_COMMIT, 7, []), history=hist)
    rows = find_hanging(c, [partition("t", 0, (3, 0, 0))], now=NOW, max_timeout_ms=MAX)
    assert kinds(rows) == [("orphaned", "t", 0, 3, "a")]


def test_prepare_epoch_fence_past_timeout_is_not_timed_out():
    # TransactionStateManager.timedOutTransactions aborts Ongoing only (`case _ => false`), and a
    # loaded PrepareEpochFence is not resumed either: nothing will finish it, so once the producer's
    # last write is older than the max timeout it is orphaned, like any state that owes no marker.
    c = coordinator(meta("a", S.PREPARE_EPOCH_FENCE, 7, [("t", 0)], start=0, timeout=1_000))
    rows = find_hanging(c, [partition("t", 0, (7, 0, 0))], now=NOW, max_timeout_ms=MAX)
    assert kinds(rows) == [("orphaned", "t", 0, 7, "a")]
    assert rows[0].coordinator_state == "PrepareEpochFence"
    assert rows[0].start_ms == 0 and rows[0].duration_ms == NOW  # the partition's first batch (ts 0)
    young = find_hanging(c, [partition("t", 0, (7, 0, NOW - 1_000))], now=NOW, max_timeout_ms=MAX)
    assert young == []  # past its own timeout, but written to 1 s ago: not old, and not timed-out


def test_timed_out_boundary_is_strict():
    # timedOutTransactions: txnStartTimestamp + txnTimeoutMs < now. Exactly at the deadline: not yet.
    at = coordinator(meta("a", S.ONGOING, 7, [("t", 0)], start=NOW - 60_000, timeout=60_000))
    assert find_hanging(at, [partition("t", 0, (7, 0, NOW))], now=NOW, max_timeout_ms=MAX) == []
    past = coordinator(meta("a", S.ONGOING, 7, [("t", 0)], start=NOW - 60_001, timeout=60_000))
    rows = find_hanging(past, [partition("t", 0, (7, 0, NOW))], now=NOW, max_timeout_ms=MAX)
    assert kinds(rows) == [("timed-out", "t", 0, 7, "a")]
    assert (rows[0].start_ms, rows[0].duration_ms) == (NOW - 60_001, 60_001)


def test_incomplete_markers_age_boundary_is_strict():
    c = coordinator(meta("a", S.PREPARE_ABORT, 7, [("t", 0)], start=0))
    assert find_hanging(c, [partition("t", 0, (7, 0, NOW - MAX))], now=NOW, max_timeout_ms=MAX) == []
    rows = find_hanging(c, [partition("t", 0, (7, 0, NOW - MAX - 1))], now=NOW, max_timeout_ms=MAX)
    assert kinds(rows) == [("incomplete-markers", "t", 0, 7, "a")]


def test_orphan_age_uses_last_write_strictly_greater():
    c = coordinator()
    rows = find_hanging(c, [partition("t", 0, (9, 0, NOW - MAX))], now=NOW, max_timeout_ms=MAX)
    assert rows == []  # exactly the max timeout: not older than it (TransactionsCommand uses '>')
    rows = find_hanging(c, [partition("t", 0, (9, 0, NOW - MAX - 1))], now=NOW, max_timeout_ms=MAX)
    assert kinds(rows) == [("orphaned", "t", 0, 9, None)]


def test_a_topic_filter_never_claims_no_partition_holds_a_transaction_open():
    """fixtures/hanging: 'stale-loader' (producer 1004) is Ongoing past its timeout and open on orders-0
    and payments-1 (fixtures/README.md). Reading only `legacy` or only orders-1 leaves those partitions
    unread, so nothing may say that no partition holds it open; with every partition read the fold
    sees it open and says nothing either."""
    from pathlib import Path

    from kafkatx.session import offline

    hanging = Path(__file__).resolve().parents[2] / "fixtures" / "hanging"
    now = 1_700_007_200_000
    claim = "no partition in these log dirs holds it open"
    for topic in (None, "legacy", "orders", "payments"):
        notices = offline.find_hanging([hanging], now=now, topic=topic).notices
        assert not [n for n in notices if claim in n], (topic, notices)
    notices = offline.timeline([hanging], now=now, topic="orders", partition=1).notices
    assert not [n for n in notices if claim in n], notices
