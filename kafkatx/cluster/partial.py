"""What a live cluster did not answer, said in the answer's :class:`~kafkatx.rows.Report` as offline.

kafka-python raises on the first per-partition (or per-id) error of a DescribeProducers (or
DescribeTransactions) response: a leader moving, a partition offline, a coordinator loading. Asked as one
batch, one such partition would end the whole command; asked here, a batch that fails is asked again in
halves, each half that fails halved again down to one partition (one id), so the others are still answered
(k partitions failing among n cost about 2k·log2(n) requests, not n: at 3 a.m., with a leader moving among
10,000 partitions, that is a few dozen requests, not 10,000 in a row) and each one that does not answer is named
in the report's ``incomplete`` list (``Report.not_read``): the command then exits 3, as offline when a
partition cannot be read. A DescribeProducers no partition answers stays the error it is (the cluster is
down, or refuses us), and a broker without the API (:class:`~kafkatx.errors.UnsupportedApi`) is never
retried.

Kafka's own tool stops at the first such error (``TransactionsCommand.FindHangingTransactionsCommand``
waits on ``DescribeProducersResult.all()`` and ``DescribeTransactionsResult.description``, then
``printErrorAndExit``); kafkatx answers the rest and names what it could not ask, the rule every offline
answer follows for a partition it cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from kafkatx.cluster.backend import ClusterBackend, ProducerState, TopicPartitionKey, TransactionState
from kafkatx.coordinator.state import tp_name
from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
from kafkatx.errors import ClusterError, UnsupportedApi
from kafkatx.format.txn_log import coordinator_partition
from kafkatx.rows import Report

__all__ = ["coordinator_name", "describe_producers_each", "describe_transactions_each"]


K = TypeVar("K")
V = TypeVar("V")


def _asked(ask: Callable[[list[K]], dict[K, V]], items: Sequence[K], report: Report | None, *,
           none_is_error: bool) -> tuple[dict[K, V], dict[K, ClusterError]]:
    """``ask(items)``; a batch that fails, asked again in halves (:func:`_halves`): the answers and the items
    that failed with their errors. Without a report a failure is raised, as before; with ``none_is_error``, so is
    a batch no item of answers."""
    try:
        return ask(list(items)), {}
    except UnsupportedApi:
        raise
    except ClusterError as err:
        if report is None or (none_is_error and len(items) < 2):
            raise
        answers: dict[K, V] = {}
        failed: dict[K, ClusterError] = {}
        _halves(ask, list(items), err, answers, failed)
    if none_is_error and len(failed) == len(items):
        raise next(iter(failed.values()))  # nothing answered: the error is the answer
    return answers, failed


def _halves(ask: Callable[[list[K]], dict[K, V]], items: list[K], err: ClusterError, answers: dict[K, V],
            failed: dict[K, ClusterError]) -> None:
    """``items``, a request that failed with ``err``: one item is then the one that failed; more are split in
    two, each half asked as one request and, when it fails, halved the same way."""
    if len(items) == 1:
        failed[items[0]] = err
        return
    mid = len(items) // 2
    for half in (items[:mid], items[mid:]):
        try:
            answers.update(ask(half))
        except UnsupportedApi:
            raise
        except ClusterError as half_err:
            _halves(ask, half, half_err, answers, failed)


def describe_producers_each(backend: ClusterBackend, partitions: Sequence[TopicPartitionKey],
                            report: Report | None) -> tuple[dict[TopicPartitionKey, list[ProducerState]],
                                                            set[TopicPartitionKey]]:
    """DescribeProducers of ``partitions``: the answers, and the partitions that did not answer (each named in
    ``report``'s ``incomplete``). Without a report, or when no partition answers, a failure is raised."""
    answers, failed = _asked(backend.describe_producers, partitions, report, none_is_error=True)
    if report is not None:  # (without one nothing failed: it was raised)
        for tp, why in failed.items():
            report.not_read(tp_name(tp), str(why))
    return answers, set(failed)


def describe_transactions_each(backend: ClusterBackend, transactional_ids: Sequence[str],
                               report: Report | None) -> tuple[dict[str, TransactionState], dict[str, str]]:
    """DescribeTransactions of ``transactional_ids``: the answers, and the ids whose coordinator did not answer
    with why. Each coordinator that did not answer is named once in ``report``'s ``incomplete``
    (:func:`coordinator_name`), with how many of the asked ids it holds. Every id failing is still an answer
    (the partitions' other open transactions are classified without them); without a report a failure is
    raised, as before."""
    answers, failed = _asked(backend.describe_transactions, transactional_ids, report, none_is_error=False)
    if report is not None and failed:
        count = _txn_partitions(backend)
        by_coordinator: dict[str, list[ClusterError]] = {}
        for tid, why in failed.items():
            by_coordinator.setdefault(coordinator_name(backend, tid, count), []).append(why)
        for name, whys in by_coordinator.items():
            n = len(whys) - 1
            more = f" (and {n} more transactional id{'s' if n > 1 else ''} it coordinates)" if n else ""
            report.not_read(name, f"{whys[0]}{more}")
    return answers, {tid: str(why) for tid, why in failed.items()}


def _txn_partitions(backend: ClusterBackend) -> int:
    """``__transaction_state``'s partition count from Metadata (0: unknown)."""
    try:
        return sum(1 for p in backend.metadata([TXN_STATE_TOPIC]).partitions if p.topic == TXN_STATE_TOPIC)
    except ClusterError:
        return 0


def coordinator_name(backend: ClusterBackend, transactional_id: str | None, count: int | None = None) -> str:
    """The ``__transaction_state`` partition coordinating ``transactional_id``
    (``TransactionStateManager.partitionFor``: its hash modulo the topic's partition count, ``count`` or
    asked of Metadata), or the bare topic name when the id or the count is unknown."""
    if transactional_id is None:
        return TXN_STATE_TOPIC
    if count is None:
        count = _txn_partitions(backend)
    return f"{TXN_STATE_TOPIC}-{coordinator_partition(transactional_id, count)}" if count else TXN_STATE_TOPIC
