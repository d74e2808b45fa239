"""ProducerAppendInfo's rules (storage/producer_state.py predicates and ProducerStateFold) and
ProducerStateManager.ongoingTxns.

Expected values are read off Kafka's storage/.../log/ProducerAppendInfo.java and
ProducerStateManager.java (3.8 / trunk), as the log loader runs them (AppendOrigin.REPLICATION,
TV_UNKNOWN: the legacy epoch rule), not from kafkatx's output.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from txn_builders import PartitionWriter, write_log_dir

from kafkatx.format import compiled
from kafkatx.format.record_batch import iter_batches
from kafkatx.storage.log_dir import open_log_dirs
from kafkatx.storage.producer_state import (
    FOLD_END,
    NO_COORDINATOR_EPOCH,
    NO_PRODUCER_EPOCH,
    begins_txn,
    check_coordinator_epoch,
    check_end_txn_marker,
    check_producer_epoch,
    check_txn_state,
    find_next_incomplete_txn,
    new_producer_state_fold,
    ongoing_in_order,
)
from kafkatx.storage.replay import replay_partition
from kafkatx.storage.segment import map_file


def only_partition(log_dir: Path, name: str):
    (d,) = open_log_dirs([log_dir])
    return next(p for p in d.partitions() if p.name == name)


# ----------------------------------------------------------------------------- the predicates

def test_check_producer_epoch_is_the_legacy_rule():
    # checkProducerEpoch: invalidEpoch = producerEpoch < current (TV0/TV1, and TV_UNKNOWN on replication)
    assert check_producer_epoch(5, 5)  # the same epoch: fine (legacy markers carry the data's epoch)
    assert check_producer_epoch(6, 5)  # a bumped epoch: fine
    assert not check_producer_epoch(4, 5)  # below: a leader throws InvalidProducerEpochException
    # a producer without an entry compares against RecordBatch.NO_PRODUCER_EPOCH (-1)
    assert check_producer_epoch(0, NO_PRODUCER_EPOCH)
    assert check_producer_epoch(-1, NO_PRODUCER_EPOCH)
    assert not check_producer_epoch(-2, NO_PRODUCER_EPOCH)  # int16 -2 on disk: below -1


def test_check_coordinator_epoch():
    # checkCoordinatorEpoch: updatedEntry.coordinatorEpoch() > endTxnMarker.coordinatorEpoch() fails
    assert check_coordinator_epoch(3, 3)
    assert check_coordinator_epoch(4, 3)
    assert not check_coordinator_epoch(2, 3)  # a zombie coordinator
    assert check_coordinator_epoch(0, NO_COORDINATOR_EPOCH)


def test_check_end_txn_marker_is_both_checks():
    # appendEndTxnMarker: checkProducerEpoch, then checkCoordinatorEpoch
    assert check_end_txn_marker(1, 2, 1, 2)
    assert not check_end_txn_marker(0, 2, 1, 2)  # older producer epoch
    assert not check_end_txn_marker(1, 1, 1, 2)  # older coordinator epoch
    assert not check_end_txn_marker(0, 1, 1, 2)
    assert check_end_txn_marker(2, 5, 1, 2)


def test_append_data_batch_rules():
    # appendDataBatch: currentTxnFirstOffset present && !isTransactional -> InvalidTxnStateException
    assert not check_txn_state(True, False)
    assert check_txn_state(True, True) and check_txn_state(False, False) and check_txn_state(False, True)
    # currentTxnFirstOffset empty && isTransactional -> "Began a new transaction"
    assert begins_txn(False, True)
    assert not begins_txn(True, True) and not begins_txn(False, False) and not begins_txn(True, False)


def test_find_next_incomplete_txn_skips_the_completing_producer():
    # findNextIncompleteTxn walks ongoingTxns (a TreeMap by first offset) and returns the first
    # transaction of another producer
    ongoing = {7: 3, 8: 10, 9: 12}  # producer id -> first offset, in first-offset order
    assert find_next_incomplete_txn(ongoing, 7) == 10
    assert find_next_incomplete_txn(ongoing, 8) == 3
    assert find_next_incomplete_txn({7: 3}, 7) is None
    assert find_next_incomplete_txn({}, 7) is None
    assert ongoing_in_order(ongoing, 12) and ongoing_in_order(ongoing, 13) and not ongoing_in_order(ongoing, 11)
    assert ongoing_in_order({}, 0)


# ----------------------------------------------------------------------------- ongoingTxns in a replay

@pytest.fixture(params=["compiled", "pure"])
def fold_path(request):
    if request.param == "compiled" and not compiled.active("kafkatx.storage._replay"):
        pytest.skip("the C extension is not built (or KAFKATX_PURE_PYTHON is set)")
    with compiled.pure_python(request.param == "pure"):
        yield request.param


def test_completed_lso_is_the_earliest_other_ongoing_txn(tmp_path, fold_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)                 # 0..1 producer 1 begins (first offset 0)
    p.data(2, 0, 1)                 # 2 producer 2 begins (2)
    p.data(3, 0, 1)                 # 3 producer 3 begins (3)
    p.marker(2, 0, commit=False)    # 4 ends producer 2: ongoing {1: 0, 3: 3} -> LSO 0
    p.marker(1, 0, commit=True)     # 5 ends producer 1: ongoing {3: 3} -> LSO 3
    p.data(1, 0, 1)                 # 6 producer 1 begins again (6)
    p.marker(3, 0, commit=False)    # 7 ends producer 3: ongoing {1: 6} -> LSO 6
    p.marker(1, 0, commit=False)    # 8 ends producer 1: nothing else ongoing -> marker + 1 = 9
    write_log_dir(tmp_path, [p])
    st = replay_partition(only_partition(tmp_path, "t-0"), keep_completed=True)
    assert [(c.producer_id, c.first_offset, c.marker_offset, c.last_stable_offset) for c in st.completed] == [
        (2, 2, 4, 0), (1, 0, 5, 3), (3, 3, 7, 6), (1, 6, 8, 9)]


def _going_back(tmp_path):
    p = PartitionWriter("t", 0)
    p.next_offset = 10
    p.data(1, 0, 1, index=False)    # 10 producer 1 begins
    p.next_offset = 12
    p.data(3, 0, 1, index=False)    # 12 producer 3 begins
    p.next_offset = 5
    p.data(2, 0, 1, index=False)    # 5 producer 2 begins: before both in first-offset order
    p.next_offset = 20
    p.marker(1, 0, commit=False)    # 20 ends producer 1: earliest other is producer 2 at 5 (not 3 at 12)
    p.marker(3, 0, commit=False)    # 21 ends producer 3: producer 2 at 5
    p.marker(2, 0, commit=False)    # 22 ends producer 2: nothing else -> 23
    write_log_dir(tmp_path, [p])
    return only_partition(tmp_path, "t-0")


def test_the_fold_keeps_ongoing_txns_by_first_offset_when_offsets_go_back(tmp_path, fold_path):
    """Both classes add a begun transaction last in ``ongoingTxns``, remove a completed one, and put one
    beginning below the last one's first offset in its place by first offset (Kafka's ``TreeMap``): the
    fold goes on through it (no batch is left to the caller for a rule)."""
    part = _going_back(tmp_path)
    state = new_producer_state_fold(keep_completed=True)
    with map_file(part.segments[0].log_path) as buf:
        headers = list(iter_batches(buf))
        assert state.fold(buf, 0, headers[2].position) == (headers[2].position, 2, 2, FOLD_END)
        assert state.ongoing_txns() == [(1, 10), (3, 12)]
        assert state.fold(buf, headers[2].position, headers[3].position)[3] == FOLD_END
        assert state.ongoing_txns() == [(2, 5), (1, 10), (3, 12)]  # the batch at offset 5 goes first
        assert state.fold(buf, headers[3].position, len(buf)) == (len(buf), 3, 3, FOLD_END)
    assert state.ongoing_txns() == []
    assert [(row[0], row[9]) for row in state.take_completed()] == [(1, 5), (3, 5), (2, 23)]


def test_offsets_that_go_back_keep_ongoing_txns_ordered_by_first_offset(tmp_path, fold_path):
    """LogSegment.recover checks each batch's CRC and that its offsets fit the segment, not that they
    grow: a segment whose offsets go back loads, and ongoingTxns (a TreeMap) still orders by first offset."""
    st = replay_partition(_going_back(tmp_path), keep_completed=True)
    assert [(c.producer_id, c.first_offset, c.marker_offset, c.last_stable_offset) for c in st.completed] == [
        (1, 10, 20, 5), (3, 12, 21, 5), (2, 5, 22, 23)]
    assert st.open_transactions == []


@pytest.mark.parametrize("seed", range(6))
def test_completed_lso_matches_kafkas_definition_on_random_logs(tmp_path, fold_path, seed):
    """Each completed transaction's ``last_stable_offset`` is ``ProducerStateManager.lastStableOffset``:
    the earliest first offset among the *other* producers' ongoing transactions when its marker is
    appended, else the marker's offset + 1. The expected list is worked out here from that definition
    alone (a dict of open transactions), beside the writer: a marker ends its producer's transaction
    whatever its epochs (the loader applies stale markers), a non-transactional batch does not."""
    rng = random.Random(seed)
    p = PartitionWriter("t", 0)
    open_txns: dict[int, int] = {}  # producer id -> first offset
    expected = []
    epochs = {pid: 0 for pid in range(12)}
    for _ in range(600):
        pid = rng.randrange(12)
        roll = rng.random()
        if roll < 0.55:
            txn = rng.random() < 0.85
            first, _last = p.data(pid, epochs[pid], rng.randint(1, 3), txn=txn, index=False)
            if txn and pid not in open_txns:
                open_txns[pid] = first
        elif roll < 0.95:
            epoch = epochs[pid] + rng.choice([0, 0, 0, 1, -1])
            marker = p.marker(pid, epoch, rng.random() < 0.5)
            if pid in open_txns:
                others = [f for q, f in open_txns.items() if q != pid]
                expected.append((pid, open_txns.pop(pid), marker, min(others) if others else marker + 1))
            epochs[pid] = max(epochs[pid], epoch)
        else:
            p.data(-1, -1, 1, txn=False, index=False)
    write_log_dir(tmp_path, [p])
    st = replay_partition(only_partition(tmp_path, "t-0"), keep_completed=True)
    got = [(c.producer_id, c.first_offset, c.marker_offset, c.last_stable_offset) for c in st.completed]
    assert got == expected
    assert len(expected) > 100 and sum(lso <= marker for _p, _f, marker, lso in expected) > 50  # other txns held it
    assert sorted((t.producer_id, t.first_offset) for t in st.open_transactions) == sorted(open_txns.items())


def test_ongoing_txns_from_a_snapshot_are_ordered_by_first_offset(fold_path) -> None:
    # ProducerStateManager.loadProducerEntry puts each open transaction in ongoingTxns (a TreeMap by first
    # offset): a snapshot's entries come in producer order, the transactions by first offset
    rows = [(7, 0, 0, 60, 1, 0, 50, 60, None, 1), (3, 0, 0, 20, 1, 0, 10, 20, None, 1),
            (9, 0, 0, 5, 1, 0, None, None, None, None), (4, 0, 0, 55, 1, 0, 50, 55, None, 1)]
    assert new_producer_state_fold().ongoing_txns() == []
    state = new_producer_state_fold(rows)
    assert state.ongoing_txns() == [(3, 10), (7, 50), (4, 50)]  # a tie keeps the order they came in
    assert [row[0] for row in state.active_producers()] == [7, 3, 9, 4]
    state.remove_producer(3)
    state.load_producer_entry((7, 1, 0, 60, 1, 0, None, None, None, None))  # replaced where it stands
    assert state.ongoing_txns() == [(4, 50)]
    assert [row[0] for row in state.active_producers()] == [7, 9, 4]
