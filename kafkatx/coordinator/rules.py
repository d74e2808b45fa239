"""The hanging-transaction rule book: one place for the kinds, the states and the timeouts.

``find-hanging`` runs offline (``checks/hanging.py`` over the replayed coordinator and
partitions, ``checks/ghost.py``), online (``cluster/service.py`` over DescribeProducers /
ListTransactions / DescribeTransactions answers) and in Spark (``spark/rows.py`` through
``txn.offline.hanging_rows``). Each of them gathers plain values (a coordinator state, the
partitions it lists, timestamps, offsets) and asks the functions here for the verdict, so
the three can never disagree on a rule.

The rules, each checked against Kafka's source:

``timed-out``
    The coordinator has the transaction ``Ongoing``, it includes the partition, and
    ``now > start + timeout_ms``. That is ``TransactionStateManager.timedOutTransactions``
    (``txnStartTimestamp + txnTimeoutMs < now``, strictly, and only ``case Ongoing``): a
    running coordinator aborts exactly these (``abortTimedOutTransactions``). At
    ``now == start + timeout`` it has not timed out yet.

    A ``PrepareEpochFence`` state is *not* timed-out. In Kafka ``PrepareEpochFence`` is only
    the in-memory pending state of ``prepareFenceProducerEpoch`` (it is never written to
    ``__transaction_state``; ``endTransaction`` turns it straight into ``PrepareAbort``), and
    ``timedOutTransactions`` matches ``Ongoing`` only (``case _ => false``); a coordinator that
    loads a ``PrepareEpochFence`` value does nothing with it either
    (``loadTransactionsForTxnTopicPartition`` resumes ``PrepareCommit``/``PrepareAbort`` only).
    So no coordinator will ever finish such a transaction: it is classified like any other
    state that owes the partition nothing (``orphaned`` once it is old, below).
``prepared-2pc``
    The coordinator has the transaction ``Ongoing``, it includes the partition, and its
    timeout is ``Integer.MAX_VALUE``: a two-phase-commit transaction (KIP-939, Kafka 4.1+;
    ``TransactionMetadata.isDistributedTwoPhaseCommitTxn`` is ``txnTimeoutMs ==
    Integer.MAX_VALUE``, the timeout ``TransactionCoordinator.handleInitProducerId`` gives a
    producer initialised with ``enable2Pc``). ``TransactionStateManager.timedOutTransactions``
    skips it, so it is never ``timed-out`` however old (``start + Integer.MAX_VALUE`` is only
    24.8 days); transactional-id expiration only ever touches ``Empty``/``Complete*`` ids, so
    it never expires either. It stays ``Ongoing``, holding the LSO, until its external
    transaction manager commits or aborts it (EndTxn) or an operator calls
    ``Admin.forceTerminateTransaction``. It is listed once it has been open longer than
    ``max_timeout_ms`` (``now - start > max_timeout_ms``, strict: no ordinary transaction may
    stay open that long); its row says "held open by an external transaction manager".
``incomplete-markers``
    The coordinator is in ``PrepareCommit``/``PrepareAbort`` and still lists the partition
    (the decision is final but this partition never got its marker), and the producer last
    wrote to the partition more than ``max_timeout_ms`` ago (markers in flight are normal).
``orphaned``
    Every other open transaction whose producer last wrote more than ``max_timeout_ms`` ago:
    no coordinator transaction of that producer includes the partition in ``Ongoing`` or
    ``Prepare*`` (kafka-transactions.sh ``find-hanging``'s "hanging", KAFKA-12671). Offline, a
    producer whose transactional id no readable ``__transaction_state`` partition knows is not
    orphaned when some of them could not be read: its coordinator is unknown, and the transaction
    gets no row (``checks/hanging.py``; the answer is incomplete, exit 3).
``ghost``
    An ``orphaned`` transaction whose first offset is strictly below the partition's log
    start: only the producer state (a ``.snapshot`` offline, the leader's memory online)
    remembers it. ``timed-out``/``incomplete-markers`` keep their kind wherever they began
    (the coordinator-side repair closes them).

"Old" is ``now - last_write > max_timeout_ms`` (strict, as ``TransactionsCommand``'s
``transactionDurationMs > maxTransactionTimeoutMs``); an unknown or negative last write
time counts as old.

Pure: plain values in, a verdict out.
"""

from __future__ import annotations

import re
from collections.abc import Container
from enum import StrEnum

from kafkatx.format.txn_log import TxnState
from kafkatx.storage.broker_config import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS

DEFAULT_MAX_TIMEOUT_MS = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
"""Kafka's ``transaction.max.timeout.ms`` default (15 minutes): find-hanging's default
``--max-transaction-timeout`` (without ``--broker-config``). Its value is stated in
``storage/broker_config.py`` with the broker's other settings; every layer above imports it from here."""


class HangingKind(StrEnum):
    """The ``kind`` column of find-hanging and abort-hanging (cli.md). Rows store ``.value``."""

    ORPHANED = "orphaned"
    TIMED_OUT = "timed-out"
    INCOMPLETE_MARKERS = "incomplete-markers"
    GHOST = "ghost"
    PREPARED_2PC = "prepared-2pc"


# The coordinator states the rules look at (Kafka's TransactionState).
TIMEOUT_STATES = frozenset({TxnState.ONGOING})  # what timedOutTransactions aborts
PREPARE_STATES = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})  # decided, markers owed
COORDINATOR_KINDS = frozenset({HangingKind.TIMED_OUT, HangingKind.INCOMPLETE_MARKERS})  # the coordinator finishes

TWO_PHASE_COMMIT_TIMEOUT_MS = 2**31 - 1
"""Integer.MAX_VALUE: the transaction timeout that marks a KIP-939 two-phase-commit transaction."""

PREPARED_2PC_MEANING = "held open by an external transaction manager"
"""What a ``prepared-2pc`` row means, in the words every command uses."""

_BY_KAFKA_NAME = {s.kafka_name: s for s in TxnState}


def state_from_name(name: str | None) -> TxnState | None:
    """A state as Kafka names it (``"Ongoing"``, DescribeTransactions' answer) -> TxnState; None if unknown."""
    return _BY_KAFKA_NAME.get(name) if name is not None else None


def is_distributed_two_phase_commit(timeout_ms: int | None) -> bool:
    """``TransactionMetadata.isDistributedTwoPhaseCommitTxn``: ``txnTimeoutMs == Integer.MAX_VALUE``."""
    return timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS


def is_timed_out(start_ms: int | None, timeout_ms: int, now: int) -> bool:
    """``txnStartTimestamp + txnTimeoutMs < now`` (strict). No start (None or -1): not timed out.

    A two-phase-commit transaction never times out (``TransactionStateManager.timedOutTransactions``
    skips ``isDistributedTwoPhaseCommitTxn``)."""
    if is_distributed_two_phase_commit(timeout_ms):
        return False
    return start_ms is not None and start_ms >= 0 and now > start_ms + timeout_ms


def is_old(last_write_ms: int | None, now: int, max_timeout_ms: int) -> bool:
    """The producer last wrote more than ``max_timeout_ms`` ago (unknown or negative: old)."""
    return last_write_ms is None or last_write_ms < 0 or now - last_write_ms > max_timeout_ms


def below_log_start(first_offset: int | None, log_start: int | None) -> bool:
    """An open transaction began strictly below the log start (equal: its first batch is still there)."""
    return first_offset is not None and log_start is not None and first_offset < log_start


def classify(*, state: TxnState | None, includes_partition: bool, start_ms: int | None, timeout_ms: int | None,
             last_write_ms: int | None, now: int, max_timeout_ms: int) -> HangingKind | None:
    """The kind of one open transaction in one partition, or None when it does not hang (yet).

    ``state``/``start_ms``/``timeout_ms`` describe the coordinator's transaction of the
    producer (None when no transactional id maps to it); ``includes_partition`` says whether
    that transaction (of this very producer id) lists the partition. ``last_write_ms`` is
    when the producer last wrote to the partition.
    """
    if includes_partition and state in TIMEOUT_STATES and is_distributed_two_phase_commit(timeout_ms):
        # Held open on purpose; listed once older than any ordinary transaction may be (is_old of its start).
        return HangingKind.PREPARED_2PC if is_old(start_ms, now, max_timeout_ms) else None
    if includes_partition and state in TIMEOUT_STATES:
        return HangingKind.TIMED_OUT if is_timed_out(start_ms, timeout_ms or 0, now) else None
    if not is_old(last_write_ms, now, max_timeout_ms):
        return None
    if includes_partition and state in PREPARE_STATES:
        return HangingKind.INCOMPLETE_MARKERS
    return HangingKind.ORPHANED


def coordinator_holds(state_name: str | None, partitions: list[str] | tuple[str, ...], partition: str) -> bool:
    """The coordinator's transaction (state as Kafka names it, its partitions as ``topic-N``) holds ``partition``
    open itself: ``Ongoing`` or ``PrepareCommit``/``PrepareAbort`` listing it. Such a transaction is never a
    ghost, wherever it began: the coordinator aborts it on timeout or writes its markers
    (``timed-out``/``incomplete-markers`` keep their kind; the module docstring)."""
    state = state_from_name(state_name)
    return (state in TIMEOUT_STATES or state in PREPARE_STATES) and partition in partitions


def ghost_kind(kind: str, *, first_offset: int | None, log_start: int | None) -> str:
    """``ghost`` for an ``orphaned`` transaction that began below the log start; any other kind unchanged."""
    if kind == HangingKind.ORPHANED and below_log_start(first_offset, log_start):
        return HangingKind.GHOST.value
    return kind


# ----------------------------------------------------------------------------- ListTransactions' filters

def listed(*, transactional_id: str, producer_id: int, state: str, start_ms: int | None,
           pattern: re.Pattern[str] | None = None, producer_ids: Container[int] | None = None,
           duration_ms: int | None = None, now: int = 0) -> bool:
    """Whether ListTransactions lists this id: ``TransactionStateManager.listTransactionStates``'
    ``shouldInclude`` (the state filter is applied by the callers, as before).

    - ``Dead`` is never listed (a transient state of an id being expired);
    - ``producer_ids`` (ProducerIdFilters, KIP-664): only these producer ids;
    - ``duration_ms`` (DurationFilter, ListTransactions v1, Kafka 3.8, KIP-994): when >= 0, only
      transactions with ``now - txnStartTimestamp > duration_ms``; an id without a start
      (``txnStartTimestamp`` -1, None here) counts as started at -1, as Kafka's arithmetic does;
    - ``pattern`` (TransactionalIdPattern, v2, Kafka 4.1, KIP-1152): the whole id must match
      (Java's ``Pattern.matcher(id).matches()``, Python's ``fullmatch``), not a substring.
    """
    if state == TxnState.DEAD.kafka_name:
        return False
    if producer_ids is not None and producer_id not in producer_ids:
        return False
    if duration_ms is not None and duration_ms >= 0 and now - (start_ms if start_ms is not None else -1) <= duration_ms:
        return False
    return pattern is None or pattern.fullmatch(transactional_id) is not None


__all__ = [
    "COORDINATOR_KINDS", "DEFAULT_MAX_TIMEOUT_MS", "PREPARED_2PC_MEANING", "PREPARE_STATES", "TIMEOUT_STATES",
    "TWO_PHASE_COMMIT_TIMEOUT_MS", "HangingKind", "below_log_start", "classify", "coordinator_holds", "ghost_kind",
    "is_distributed_two_phase_commit", "is_old", "is_timed_out", "listed", "state_from_name",
]
