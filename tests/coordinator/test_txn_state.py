"""The coordinator state machine: every legal and illegal move, tombstones, history."""

from __future__ import annotations

import itertools

import pytest

from kafkatx.coordinator.state import (
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionMetadata,
    apply_record,
    is_valid_transition,
)
from kafkatx.format.txn_log import TxnLogValue, TxnState

S = TxnState

# Kafka's TransactionState.validPreviousStates written out as (from, to) pairs, independently of
# the module's table, so a typo in either shows up.
LEGAL = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    # KIP-890 (transaction version 2): an unsure client's EndTxn(abort) from a finished state.
    (S.EMPTY, S.PREPARE_ABORT), (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}
ALL_MOVES = list(itertools.product(list(S), list(S)))


def value(state: TxnState, *, pid: int = 1000, epoch: int = 0, parts=None, start: int = 100,
          update: int = 200, **kw) -> TxnLogValue:
    if parts is None:
        parts = None if state is S.EMPTY else ((("t", (0, 1)),) if state in (
            S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE) else ())
    return TxnLogValue(version=0, producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=60_000,
                       state=state, partitions=parts, last_update_timestamp=update, start_timestamp=start, **kw)


def meta(state: TxnState) -> TransactionMetadata:
    return TransactionMetadata.from_value("tx", value(state), offset=0, coordinator_partition=3)


def test_table_matches_kafka():
    table = {(prev, new) for new, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
    assert table == LEGAL
    assert len(LEGAL) == 19


@pytest.mark.parametrize(("prev", "new"), ALL_MOVES, ids=[f"{a.kafka_name}->{b.kafka_name}" for a, b in ALL_MOVES])
def test_every_move(prev, new):
    applied = apply_record(meta(prev), "tx", value(new), offset=7, coordinator_partition=3)
    assert is_valid_transition(prev, new) == ((prev, new) in LEGAL)
    # The new value is always taken (the broker keeps the latest value when loading).
    assert applied.metadata is not None and applied.metadata.state is new
    assert applied.metadata.offset == 7
    if (prev, new) in LEGAL:
        assert applied.finding is None
    else:
        f = applied.finding
        assert isinstance(f, IllegalTransition)
        assert (f.from_state, f.to_state) == (prev.kafka_name, new.kafka_name)
        assert f.offset == 7 and f.partition == "__transaction_state-3"
        assert prev.kafka_name in f.message and new.kafka_name in f.message


def test_first_record_any_state_is_accepted():
    # Compaction may have removed everything before a PrepareCommit: no finding.
    applied = apply_record(None, "tx", value(S.PREPARE_COMMIT), offset=0, coordinator_partition=0)
    assert applied.finding is None and applied.metadata.state is S.PREPARE_COMMIT


def test_tombstone_removes_but_keeps_history():
    applied = apply_record(meta(S.COMPLETE_COMMIT), "tx", None, offset=9, coordinator_partition=3)
    assert applied.metadata is None and applied.finding is None
    assert applied.history.offset == 9 and applied.history.state is None and applied.history.producer_id is None


def test_metadata_fields_and_partitions():
    v = value(S.ONGOING, parts=(("b", (2, 0)), ("a", (5,))), previous_producer_id=7, next_producer_id=-1)
    m = TransactionMetadata.from_value("tx", v, offset=4, coordinator_partition=1)
    assert m.partitions == frozenset({("b", 2), ("b", 0), ("a", 5)})
    assert m.partition_names() == ["a-5", "b-0", "b-2"]
    assert m.producer_ids == frozenset({1000, 7})
    assert m.state_name == "Ongoing" and m.timeout_ms == 60_000 and m.start_timestamp == 100
    applied = apply_record(None, "tx", v, offset=4, coordinator_partition=1)
    assert applied.history.partitions == ["a-5", "b-0", "b-2"]
    assert applied.history.state == "Ongoing" and applied.history.last_update_timestamp_ms == 200


def test_empty_has_null_partitions():
    m = meta(S.EMPTY)
    assert m.partitions == frozenset()
    h = apply_record(None, "tx", value(S.EMPTY), offset=0, coordinator_partition=0).history
    assert h.partitions is None
