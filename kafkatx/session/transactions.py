"""The coordinator's transactions as rows: ``TransactionRow`` of a ``TransactionMetadata`` (or of its
``__transaction_state`` fields without building one), the ``--state`` / ``--transactional-id-pattern``
filters as ListTransactions reads them, which broker coordinates which ``__transaction_state`` partition."""

from __future__ import annotations

import re
from collections.abc import Iterable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from kafkatx.coordinator.state import TransactionMetadata
from kafkatx.coordinator.state_manager import (
    TRANSACTION_ROW_FIELDS,
    CoordinatorState,
    transaction_values,
)
from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
from kafkatx.errors import UsageError
from kafkatx.format.txn_log import (
    TxnLogFields,
    TxnState,
)
from kafkatx.rows import (
    TransactionRow,
)
from kafkatx.storage.log_dir import LogDir, collector_paused
from kafkatx.storage.replicas import choose_replicas

if TYPE_CHECKING:
    pass


_STATE_BY_KEY = {s.kafka_name.lower(): s for s in TxnState} | {s.name.lower(): s for s in TxnState}


def parse_states(states: Iterable[str] | None) -> set[TxnState] | None:
    """Kafka state names (``Ongoing``, ``PrepareCommit``; case and ``_`` insensitive) -> TxnState."""
    if not states:
        return None
    out = set()
    for name in states:
        state = _STATE_BY_KEY.get(name.lower()) or _STATE_BY_KEY.get(name.replace("-", "_").lower())
        if state is None:
            valid = ", ".join(s.kafka_name for s in TxnState)
            raise UsageError(f"--state {name!r}: not a transaction state (one of {valid})")
        out.add(state)
    return out


def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    """``--transactional-id-pattern``, compiled; :func:`kafkatx.coordinator.rules.listed` matches it against
    the whole id (KIP-1152). Python's ``re`` dialect: Java's differs in corners (possessive
    quantifiers, ``\\p{...}`` classes)."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise UsageError(f"--transactional-id-pattern {pattern!r}: {err}") from err


def transaction_row(meta: TransactionMetadata, coordinators: dict[int, int | None] | None = None) -> TransactionRow:
    """``coordinators``: ``__transaction_state`` partition -> the node id of the log dir holding it
    (:func:`coordinator_ids`), for ``coordinator_id`` (DescribeTransactions' coordinator)."""
    return _transaction_row(meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.state.kafka_name,
                            meta.timeout_ms, meta.start_timestamp, meta.last_update_timestamp,
                            meta.partition_names(), meta.coordinator_partition, coordinators)


def transaction_row_fields(tid: str, f: TxnLogFields, coordinator_partition: int,
                           coordinators: dict[int, int | None] | None = None) -> TransactionRow:
    """:func:`transaction_row` of ``TransactionMetadata.from_fields(tid, f, ...)`` without building the
    metadata (``list-txn`` at 1,000,000 ids; the test suite holds the two to each other)."""
    return _values_row(transaction_values(tid, f, coordinator_partition, (coordinators or {}).get(coordinator_partition)))


def _values_row(values: tuple[object, ...]) -> TransactionRow:
    """The ``TransactionRow`` of :func:`transaction_values`' tuple."""
    row: dict[str, Any] = dict(zip(TRANSACTION_ROW_FIELDS, values, strict=True))
    return TransactionRow(**row)


_ROW_VALUES = attrgetter(*TRANSACTION_ROW_FIELDS)  # a TransactionRow -> its values in order


def _transaction_row(tid: str, producer_id: int, producer_epoch: int, state: str, timeout_ms: int, start: int,
                     last_update: int, partitions: list[str], coordinator_partition: int | None,
                     coordinators: dict[int, int | None] | None) -> TransactionRow:
    return TransactionRow(
        transactional_id=tid, producer_id=producer_id, producer_epoch=producer_epoch, state=state,
        timeout_ms=timeout_ms, start_timestamp_ms=start if start >= 0 else None,
        last_update_timestamp_ms=last_update if last_update >= 0 else None,
        partitions=partitions, coordinator_partition=coordinator_partition,
        coordinator_id=(coordinators or {}).get(coordinator_partition) if coordinator_partition is not None else None)


def coordinator_ids(dirs: list[LogDir]) -> dict[int, int | None]:
    """``__transaction_state`` partition -> the broker coordinating it: the ``node.id`` of the log dir
    whose replica the replay reads (``choose_replicas``; the leader's copy). A broker coordinates
    the transactional ids of the ``__transaction_state`` partitions it leads
    (``TransactionStateManager.partitionFor``, ``FindCoordinator``)."""
    return {c.partition.partition: (c.partition.log_dir.node_id if c.partition.log_dir is not None else None)
            for c in choose_replicas(dirs, topic=TXN_STATE_TOPIC)}


@collector_paused()
def known_ids(transactions: Iterable[str], shown: int = 8) -> str:
    """``known ids: a, b, c and 5 more``: what an unknown ``--transactional-id`` is answered with, by every
    command that takes one (describe-txn, abort-hanging)."""
    known = sorted(transactions)
    listed = ", ".join(known[:shown]) + (f" and {len(known) - shown} more" if len(known) > shown else "")
    return f"known ids: {listed or 'none'}"


def producer_ids_of(coord: CoordinatorState, transactional_id: str) -> set[int]:
    """Every producer id a transactional id used: current, previous/next (TV2 rotation), and its history."""
    meta = coord.transactions.get(transactional_id)
    ids = set(meta.producer_ids) if meta is not None else set()
    ids.update(h.producer_id for h in coord.history.get(transactional_id, ()) if h.producer_id is not None
               and h.producer_id >= 0)
    return ids
