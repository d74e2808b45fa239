"""The transaction coordinator's state machine, replayed offline.

Kafka's coordinator keeps one ``TransactionMetadata`` per transactional id and
writes one ``__transaction_state`` record per state change (the latest value
wins; the topic is compacted). This module applies one decoded record at a time
to the current metadata, checking the move against Kafka's
``TransactionState.validPreviousStates``:

    transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionState.java
    (Kafka 3.x: core/src/main/scala/kafka/coordinator/transaction/TransactionMetadata.scala)

An illegal move is *reported* (an :class:`IllegalTransition` finding) and the
new value is still taken: that is what the broker does when it loads the log
(``TransactionStateManager.loadTransactionMetadata`` keeps the latest value
without checking), and an on-call engineer wants to see both the current state
and the fact that the log holds a move Kafka would never make itself.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from msgspec import Struct

from kafkatx.format.txn_log import (
    F_CLIENT_TRANSACTION_VERSION,
    F_LAST_UPDATE_TIMESTAMP,
    F_NEXT_PRODUCER_EPOCH,
    F_NEXT_PRODUCER_ID,
    F_PARTITIONS,
    F_PREVIOUS_PRODUCER_ID,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_START_TIMESTAMP,
    F_STATE,
    F_TIMEOUT_MS,
    TxnLogFields,
    TxnLogValue,
    TxnState,
    value_fields,
)
from kafkatx.rows import Finding, HistoryEntry

# Kafka 4's TransactionState.validPreviousStates, verbatim. Transaction version 2
# (KIP-890) added Empty/CompleteCommit/CompleteAbort -> PrepareAbort: a TV2
# client that is unsure of the server's state sends EndTxn(abort) and the
# coordinator may write PrepareAbort from a completed or empty state. Kafka
# checks the set without looking at the client's transaction version, so we do
# the same (the version is on the record as ``client_transaction_version``).
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY,
                                       TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

# The states the hanging rules look at (Ongoing, PrepareCommit/PrepareAbort) live in
# kafkatx.coordinator.rules, with the rules themselves.

# The same rule as (previous, new) state numbers, for the replay's per-record check.
VALID_TRANSITIONS: frozenset[tuple[int, int]] = frozenset(
    (int(prev), int(new)) for new, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs)

STATE_NAMES: dict[int, str] = {int(s): s.kafka_name for s in TxnState}

NO_PRODUCER_ID = -1
_STATES = tuple(sorted(TxnState))  # TxnState by number (0..7), without the enum call per id
# Kafka's state names by number (``STATE_NAMES`` as a tuple: what the compiled list-txn rows index)
STATE_NAMES_BY_NUMBER: tuple[str, ...] = tuple(s.kafka_name for s in _STATES)
# One empty partition set for every metadata without partitions (each frozenset() is 216 bytes: most of
# 200,000 ids sit in a completed state).
_NO_PARTITIONS: frozenset[tuple[str, int]] = frozenset()


def state_of(number: int) -> TxnState:
    """The ``TxnState`` of a stored state number (``TransactionState.fromId``)."""
    return _STATES[number] if 0 <= number < len(_STATES) else TxnState(number)


def is_valid_transition(previous: TxnState, new: TxnState) -> bool:
    """Would Kafka's coordinator move ``previous`` -> ``new``?"""
    return previous in VALID_PREVIOUS_STATES.get(new, frozenset())


def tp_name(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


class TransactionMetadata(Struct, frozen=True, kw_only=True):
    """The coordinator's view of one transactional id after some ``__transaction_state`` record."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    timeout_ms: int
    start_timestamp: int  # -1 when no transaction has started (Empty)
    last_update_timestamp: int
    partitions: frozenset[tuple[str, int]]
    previous_producer_id: int = NO_PRODUCER_ID  # v1 tagged field 0
    next_producer_id: int = NO_PRODUCER_ID  # v1 tagged field 1 (TV2 epoch exhaustion)
    client_transaction_version: int = 0  # v1 tagged field 2
    next_producer_epoch: int = -1  # v1 tagged field 3
    coordinator_partition: int  # the __transaction_state partition the record was read from
    offset: int  # offset of that record

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnLogValue, *, offset: int,
                   coordinator_partition: int) -> TransactionMetadata:
        return cls.from_fields(transactional_id, value_fields(value), offset=offset,
                               coordinator_partition=coordinator_partition)

    @classmethod
    def from_fields(cls, transactional_id: str, f: TxnLogFields, *, offset: int,
                    coordinator_partition: int) -> TransactionMetadata:
        """From a value in ``value_fields`` form."""
        # Empty values carry a null partition list (TransactionLog.valueToBytes).
        parts = frozenset(fields_partitions(f)) if f[F_PARTITIONS] else _NO_PARTITIONS
        return cls(
            transactional_id=transactional_id,
            producer_id=f[F_PRODUCER_ID],
            producer_epoch=f[F_PRODUCER_EPOCH],
            state=state_of(f[F_STATE]),
            timeout_ms=f[F_TIMEOUT_MS],
            start_timestamp=f[F_START_TIMESTAMP],
            last_update_timestamp=f[F_LAST_UPDATE_TIMESTAMP],
            partitions=parts or _NO_PARTITIONS,
            previous_producer_id=f[F_PREVIOUS_PRODUCER_ID],
            next_producer_id=f[F_NEXT_PRODUCER_ID],
            client_transaction_version=f[F_CLIENT_TRANSACTION_VERSION],
            next_producer_epoch=f[F_NEXT_PRODUCER_EPOCH],
            coordinator_partition=coordinator_partition,
            offset=offset,
        )

    @property
    def state_name(self) -> str:
        return self.state.kafka_name

    @property
    def producer_ids(self) -> frozenset[int]:
        """Every producer id this metadata speaks for.

        With transaction version 2 an exhausted epoch rotates the producer id inside a
        transaction: the PrepareCommit/PrepareAbort record keeps the old id and names the
        new one in ``next_producer_id``; the id before a rotation is ``previous_producer_id``.
        Markers for the data written under either id come from this coordinator entry.
        """
        ids = {self.producer_id, self.previous_producer_id, self.next_producer_id}
        ids.discard(NO_PRODUCER_ID)
        return frozenset(ids)

    def partition_names(self) -> list[str]:
        return sorted_partition_names(self.partitions)

    def includes(self, tp: tuple[str, int]) -> bool:
        return tp in self.partitions


class IllegalTransition(Finding, frozen=True, kw_only=True):
    """A ``__transaction_state`` record moves an id between states Kafka never connects."""

    transactional_id: str
    from_state: str
    to_state: str


class Applied(Struct, frozen=True, kw_only=True):
    """The result of applying one record: the new metadata (None after a tombstone)."""

    metadata: TransactionMetadata | None
    history: HistoryEntry
    finding: IllegalTransition | None = None


def sorted_partition_names(partitions: Iterable[tuple[str, int]]) -> list[str]:
    """``"topic-N"`` of each distinct partition, sorted by (topic, number): a transaction's partition set."""
    return [tp_name(tp) for tp in sorted(set(partitions))]


def fields_partitions(f: TxnLogFields) -> Iterator[tuple[str, int]]:
    """The (topic, partition) pairs of a value in ``value_fields`` form (an Empty value's null list: none)."""
    for topic, ids in f[F_PARTITIONS] or ():
        for p in ids:
            yield topic, p


def fields_partition_names(f: TxnLogFields) -> list[str]:
    """``sorted_partition_names(fields_partitions(f))`` ([] without partitions); a single partition named
    without the set and the sort (``list-txn`` and ``find-hanging``'s notes at 1,000,000 ids)."""
    parts = f[F_PARTITIONS]
    if not parts:
        return []
    if len(parts) == 1 and len(parts[0][1]) == 1:
        return [tp_name((parts[0][0], parts[0][1][0]))]
    return sorted_partition_names(fields_partitions(f))


def history_entry_fields(offset: int, f: TxnLogFields | None) -> HistoryEntry:
    if f is None:
        return HistoryEntry(offset=offset, state=None, producer_id=None, producer_epoch=None,
                            partitions=None, last_update_timestamp_ms=None)
    parts = None
    if f[F_PARTITIONS] is not None:
        parts = [tp_name(tp) for tp in sorted((t, p) for t, ids in f[F_PARTITIONS] for p in ids)]
    return HistoryEntry(offset=offset, state=STATE_NAMES[f[F_STATE]], producer_id=f[F_PRODUCER_ID],
                        producer_epoch=f[F_PRODUCER_EPOCH], partitions=parts,
                        last_update_timestamp_ms=f[F_LAST_UPDATE_TIMESTAMP])


def apply_record(current: TransactionMetadata | None, transactional_id: str, value: TxnLogValue | None, *,
                 offset: int, coordinator_partition: int, file: str | None = None,
                 position: int | None = None) -> Applied:
    """Apply one ``__transaction_state`` record (a value, or ``None`` for a tombstone).

    ``current`` is the metadata before the record (None for the first record seen, or
    after a tombstone: compaction may have removed the older records, so whatever state
    the first surviving record carries is accepted as a starting point).
    """
    return apply_fields(current, transactional_id, None if value is None else value_fields(value), offset=offset,
                        coordinator_partition=coordinator_partition, file=file, position=position)


def apply_fields(current: TransactionMetadata | None, transactional_id: str, value: TxnLogFields | None, *,
                 offset: int, coordinator_partition: int, file: str | None = None,
                 position: int | None = None) -> Applied:
    """:func:`apply_record` with the value in ``value_fields`` form."""
    entry = history_entry_fields(offset, value)
    if value is None:
        return Applied(metadata=None, history=entry)
    new = TransactionMetadata.from_fields(transactional_id, value, offset=offset,
                                          coordinator_partition=coordinator_partition)
    finding = None
    if current is not None and not is_valid_transition(current.state, new.state):
        allowed = ", ".join(sorted(s.kafka_name for s in VALID_PREVIOUS_STATES.get(new.state, ())))
        finding = IllegalTransition(
            check="illegal-transition",
            message=(f"transactional id {transactional_id!r}: {current.state.kafka_name} -> "
                     f"{new.state.kafka_name} at offset {offset} of __transaction_state-{coordinator_partition} "
                     f"is not a move Kafka's coordinator makes ({new.state.kafka_name} follows only "
                     f"{allowed}); taking the new value as the broker would"),
            file=file, position=position, offset=offset,
            partition=f"__transaction_state-{coordinator_partition}",
            transactional_id=transactional_id,
            from_state=current.state.kafka_name, to_state=new.state.kafka_name,
        )
    return Applied(metadata=new, history=entry, finding=finding)
