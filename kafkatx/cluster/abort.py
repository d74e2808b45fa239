"""``abort-hanging`` against a live cluster: :func:`plan_abort` (the rows, from :func:`kafkatx.cluster.service.
find_hanging` or the named transactional ids) and :func:`execute_abort` (InitProducerId to fence, WriteTxnMarkers
to a partition leader, as ``Admin.abortTransaction``, or ``Admin.forceTerminateTransaction`` for a prepared
two-phase-commit transaction, KIP-939)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from msgspec.structs import replace

from kafkatx.cluster.backend import (
    ClusterBackend,
    TopicPartitionKey,
)
from kafkatx.cluster.confluent import fence_timeout_ms
from kafkatx.cluster.service import all_partitions, clock_ms, find_hanging, open_status
from kafkatx.coordinator.rules import (
    DEFAULT_MAX_TIMEOUT_MS,
    PREPARE_STATES,
    TIMEOUT_STATES,
    HangingKind,
    is_distributed_two_phase_commit,
    is_timed_out,
    state_from_name,
)
from kafkatx.coordinator.state import tp_name
from kafkatx.errors import ClusterError, UnsupportedApi, UsageError
from kafkatx.format.txn_log import TxnState
from kafkatx.rows import (
    UNTOUCHED_2PC_REASON,
    AbortPlanRow,
    HangingRow,
    Report,
    RowAction,
    RowResult,
)

log = logging.getLogger("kafkatx.cluster")


# The online rows' actions (RowAction): fence-epoch, write-abort-marker, write-commit-marker, and
# force-terminate (Admin.forceTerminateTransaction, KIP-939) for a prepared 2PC transaction only.
_MARKERS = {RowAction.WRITE_ABORT_MARKER: "ABORT", RowAction.WRITE_COMMIT_MARKER: "COMMIT"}


# Rows are kafkatx.rows.AbortPlanRow, the class the offline planner fills, so --format json has
# the same keys either way. Online actions: ``fence-epoch`` (InitProducerId for the
# transactional id: the coordinator bumps the epoch and aborts the Ongoing transaction
# itself, so we write no marker), ``write-abort-marker`` / ``write-commit-marker``
# (WriteTxnMarkers straight to the partition leader, as Admin.abortTransaction; a commit
# marker only finishes a PrepareCommit the coordinator already decided, never reverses it).
# For a marker, ``control_type`` and ``marker_epoch`` say what we send; ``marker_offset`` stays
# None because the leader assigns it. A ghost gets an ABORT marker too: the leader's
# ProducerAppendInfo ends the open transaction wherever it began.

def _control_type(action: RowAction) -> str | None:
    """The control record a marker action writes (ControlRecordType's name), None for a fence."""
    return _MARKERS.get(action)


def _with_marker(row: AbortPlanRow) -> AbortPlanRow:
    """``row`` with ``control_type``/``marker_epoch`` filled in when its action writes a marker."""
    control = _control_type(row.state)
    if control is None:
        return row
    return replace(row, control_type=control, marker_epoch=row.producer_epoch)


def _two_pc_action(transactional_id: str | None, force_terminate: frozenset[str]) -> str:
    """A prepared 2PC transaction's action: force-terminate when ``--force-terminate`` names its id, else
    left untouched (its external transaction manager owns the outcome)."""
    if transactional_id in force_terminate:
        return RowAction.FORCE_TERMINATE.text()
    return RowAction.UNTOUCHED.text(UNTOUCHED_2PC_REASON)


def _from_hanging(row: HangingRow, coordinator_epochs: dict[tuple[TopicPartitionKey, int], int],
                  force_terminate: frozenset[str] = frozenset()) -> AbortPlanRow:
    if row.kind == HangingKind.PREPARED_2PC:
        # Never fenced or marked by selection: its external transaction manager owns the outcome.
        action = _two_pc_action(row.transactional_id, force_terminate)
    elif row.kind == HangingKind.TIMED_OUT and row.transactional_id is not None:
        action = RowAction.FENCE_EPOCH.text()
    elif row.kind == HangingKind.INCOMPLETE_MARKERS and state_from_name(row.coordinator_state) is TxnState.PREPARE_COMMIT:
        action = RowAction.WRITE_COMMIT_MARKER.text()
    else:
        action = RowAction.WRITE_ABORT_MARKER.text()
    return _with_marker(AbortPlanRow(
        kind=row.kind, topic=row.topic, partition=row.partition, producer_id=row.producer_id,
        producer_epoch=row.producer_epoch, transactional_id=row.transactional_id,
        coordinator_state=row.coordinator_state, first_offset=row.first_offset, start_ms=row.start_ms,
        duration_ms=row.duration_ms, action=action,
        coordinator_epoch=coordinator_epochs.get(((row.topic, row.partition), row.producer_id)),
        blocked_groups=row.blocked_groups,
    ))


def plan_abort(backend: ClusterBackend, *, transactional_ids: Sequence[str] = (), topic: str | None = None,
               partition: int | None = None, producer_id: int | None = None, all_: bool = False,
               max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS, now_ms: int | None = None,
               force_terminate: Sequence[str] = (), report: Report | None = None) -> list[AbortPlanRow]:
    """What abort-hanging would do; changes nothing. Why an asked-for id gets no row (unknown, already
    ended) or a blind fence is a note in ``report`` (else logged). A plan is never made from a partial
    answer: what the cluster does not answer is raised here, never left out.

    A prepared two-phase-commit transaction (timeout Integer.MAX_VALUE, ``prepared-2pc``) gets
    ``untouched: prepared-2pc`` unless its id is in ``force_terminate`` (``force-terminate``:
    ``Admin.forceTerminateTransaction``); ids in ``force_terminate`` are selected too.

    - ``all_``: every find-hanging row;
    - ``transactional_ids``: fence each id whose transaction is Ongoing (on a broker without
      DescribeTransactions the fence is planned blind: InitProducerId is safe on any state);
      an id in PrepareCommit/PrepareAbort gets its missing markers instead, since fencing
      cannot finish a decided transaction;
    - ``topic`` [+ ``partition``] [+ ``producer_id``]: an ABORT marker for each open
      transaction there (kafka-transactions.sh abort).
    """
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")
    if producer_id is not None and topic is None:
        raise UsageError("--producer-id needs --topic and --partition")
    forced = frozenset(force_terminate)
    transactional_ids = list(dict.fromkeys([*transactional_ids, *force_terminate]))
    if not (all_ or transactional_ids or topic is not None):
        raise UsageError("nothing selected: give --transactional-id, --topic/--partition or --all")
    now = clock_ms(now_ms)
    plan: list[AbortPlanRow] = []

    if all_:
        hanging = find_hanging(backend, max_timeout_ms=max_timeout_ms, now_ms=now)
        epochs: dict[tuple[TopicPartitionKey, int], int] = {}
        marker_tps = sorted({(h.topic, h.partition) for h in hanging})
        if marker_tps:
            for tp, states in backend.describe_producers(marker_tps).items():
                for s in states:
                    epochs[(tp, s.producer_id)] = s.coordinator_epoch
        plan.extend(_from_hanging(h, epochs, forced) for h in hanging)

    for tid in transactional_ids:
        plan.extend(_plan_for_id(backend, tid, now, forced, report))

    if topic is not None:
        tps = [(topic, partition)] if partition is not None else all_partitions(backend, topic)
        if partition is not None:
            md = backend.metadata([topic])
            if not any(p.partition == partition for p in md.partitions):
                raise ClusterError(f"broker {backend.bootstrap_server}: topic {topic!r} has no partition {partition}")
        for tp, states in sorted(backend.describe_producers(tps).items()):
            for s in states:
                if s.current_txn_start_offset is None:
                    continue
                if producer_id is not None and s.producer_id != producer_id:
                    continue
                plan.append(_with_marker(AbortPlanRow(
                    kind="requested", topic=tp[0], partition=tp[1], producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch, transactional_id=None, coordinator_state=None,
                    first_offset=s.current_txn_start_offset, start_ms=s.last_timestamp,
                    duration_ms=now - s.last_timestamp if s.last_timestamp is not None else None,
                    action=RowAction.WRITE_ABORT_MARKER.text(), coordinator_epoch=s.coordinator_epoch)))

    seen: set[tuple[object, ...]] = set()
    unique = []
    for row in _fence_timeouts(backend, plan):
        key = (row.action, row.transactional_id if row.state in (RowAction.FENCE_EPOCH, RowAction.FORCE_TERMINATE)
               else None,
               row.topic, row.partition, row.producer_id)
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


# An id whose transaction is still undecided can be fenced (InitProducerId bumps the epoch and
# the coordinator aborts what is open).
_FENCEABLE_STATES = frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE})


def _say(report: Report | None, line: str) -> None:
    """A note of the online plan: in ``report``, else logged (a caller without one)."""
    if report is not None:
        report.note(line)
    else:
        log.warning("%s", line)


def _plan_for_id(backend: ClusterBackend, tid: str, now: int,
                 force_terminate: frozenset[str] = frozenset(), report: Report | None = None) -> list[AbortPlanRow]:
    if not backend.supports("DescribeTransactions"):
        _say(report, f"broker {backend.bootstrap_server} has no DescribeTransactions (Kafka 3.0, KIP-664): "
                     f"fencing {tid!r} without knowing its state")
        return [AbortPlanRow(kind="requested", topic=None, partition=None, producer_id=None, producer_epoch=None,
                             transactional_id=tid, coordinator_state=None, first_offset=None, start_ms=None,
                             duration_ms=None, action=RowAction.FENCE_EPOCH.text())]
    desc = backend.describe_transactions([tid]).get(tid)
    if desc is None:
        _say(report, f"transactional id {tid!r} is unknown to its coordinator; nothing to abort")
        return []
    state = state_from_name(desc.state)
    if tid in force_terminate and not (state in TIMEOUT_STATES and is_distributed_two_phase_commit(desc.timeout_ms)):
        raise UsageError(f"--force-terminate {tid}: not a prepared two-phase-commit transaction (state "
                         f"{desc.state}, timeout {desc.timeout_ms} ms); select it with --transactional-id")
    if state in TIMEOUT_STATES and is_distributed_two_phase_commit(desc.timeout_ms):
        action = _two_pc_action(tid, force_terminate)
        two_pc: list[TopicPartitionKey | None] = [*sorted(desc.partitions)] or [None]
        return [AbortPlanRow(kind=HangingKind.PREPARED_2PC.value, topic=tp[0] if tp else None,
                             partition=tp[1] if tp else None, producer_id=desc.producer_id,
                             producer_epoch=desc.producer_epoch, transactional_id=tid, coordinator_state=desc.state,
                             first_offset=None, start_ms=desc.start_timestamp,
                             duration_ms=now - desc.start_timestamp if desc.start_timestamp is not None else None,
                             action=action) for tp in two_pc]
    if state not in _FENCEABLE_STATES and state not in PREPARE_STATES:
        _say(report, f"transactional id {tid!r} is {desc.state}; nothing to abort")
        return []
    start, duration = desc.start_timestamp, (now - desc.start_timestamp if desc.start_timestamp is not None else None)
    timed_out = state in TIMEOUT_STATES and is_timed_out(desc.start_timestamp, desc.timeout_ms, now)
    if state in PREPARE_STATES:
        marker = RowAction.WRITE_COMMIT_MARKER if state is TxnState.PREPARE_COMMIT else RowAction.WRITE_ABORT_MARKER
        producers = backend.describe_producers(sorted(desc.partitions)) if desc.partitions else {}
        rows = []
        for tp in sorted(desc.partitions):
            for s in producers.get(tp, []):
                if s.producer_id == desc.producer_id and s.current_txn_start_offset is not None:
                    rows.append(_with_marker(AbortPlanRow(
                        kind=HangingKind.INCOMPLETE_MARKERS.value, topic=tp[0], partition=tp[1], producer_id=s.producer_id,
                        producer_epoch=s.producer_epoch, transactional_id=tid, coordinator_state=desc.state,
                        first_offset=s.current_txn_start_offset, start_ms=start, duration_ms=duration,
                        action=marker.text(), coordinator_epoch=s.coordinator_epoch)))
        return rows
    parts: list[TopicPartitionKey | None] = [*sorted(desc.partitions)] or [None]
    # first_offset as find-hanging and describe-txn give it: DescribeProducers' currentTransactionStartOffset
    # of this producer on each partition (None where the leader has none open, or without the API)
    first = {status.partition: status.first_offset for status in open_status(backend, desc)}
    return [AbortPlanRow(kind=HangingKind.TIMED_OUT.value if timed_out else "requested",
                         topic=tp[0] if tp else None, partition=tp[1] if tp else None,
                         producer_id=desc.producer_id, producer_epoch=desc.producer_epoch, transactional_id=tid,
                         coordinator_state=desc.state, first_offset=first.get(tp_name(tp)) if tp else None,
                         start_ms=start, duration_ms=duration, action=RowAction.FENCE_EPOCH.text(),
                         transaction_timeout_ms=fence_timeout_ms(desc.timeout_ms))
            for tp in parts]


def _fence_timeouts(backend: ClusterBackend, plan: list[AbortPlanRow]) -> list[AbortPlanRow]:
    """Each fence row with the transactionTimeoutMs its InitProducerId will send: the id's own timeout
    (DescribeTransactions), so the fence changes the epoch and nothing else; the producer default
    where the coordinator cannot be asked (a blind fence)."""
    missing = sorted({r.transactional_id for r in plan
                      if r.state is RowAction.FENCE_EPOCH and r.transaction_timeout_ms is None and r.transactional_id})
    if not missing:
        return plan
    described = backend.describe_transactions(missing) if backend.supports("DescribeTransactions") else {}
    return [replace(r, transaction_timeout_ms=fence_timeout_ms(
                getattr(described.get(r.transactional_id or ""), "timeout_ms", None)))
            if r.state is RowAction.FENCE_EPOCH and r.transaction_timeout_ms is None else r
            for r in plan]


def execute_abort(backend: ClusterBackend, plan: Sequence[AbortPlanRow], *,
                  transaction_timeout_ms: int = 60_000) -> list[AbortPlanRow]:
    """Carry out a plan; each row comes back with ``result`` ``ok`` or ``failed: <reason>``.

    A missing API fails the whole run before anything is touched (UnsupportedApi). Each
    transactional id is fenced once, however many partition rows it has.
    """
    if any(r.state in _MARKERS for r in plan) and \
            not backend.supports("WriteTxnMarkers"):
        raise UnsupportedApi(f"broker {backend.bootstrap_server} does not support WriteTxnMarkers "
                             "(admin abort needs Kafka 3.0, KIP-664)")
    fenced: dict[str, str] = {}
    done: list[AbortPlanRow] = []
    if any(r.state is RowAction.FORCE_TERMINATE for r in plan):
        # InitProducerId with keepPreparedTxn=false, as Admin.forceTerminateTransaction sends it: any client
        # library that can init a transactional producer can do it (UnsupportedApi: a backend that cannot).
        for tid in dict.fromkeys(r.transactional_id for r in plan if r.state is RowAction.FORCE_TERMINATE):
            if tid is not None:
                try:
                    backend.force_terminate_transaction(tid, transaction_timeout_ms=transaction_timeout_ms)
                    fenced[tid] = RowResult.OK.text()
                except UnsupportedApi:
                    raise
                except ClusterError as err:
                    fenced[tid] = RowResult.FAILED.text(str(err))
    for row in plan:
        if row.untouched:
            done.append(row)
            continue
        if row.state is RowAction.FORCE_TERMINATE:
            done.append(replace(row, result=fenced.get(row.transactional_id or "",
                                                       RowResult.FAILED.text("no transactional id"))))
            continue
        try:
            if row.state is RowAction.FENCE_EPOCH:
                if row.transactional_id is None:
                    raise ClusterError("no transactional id to fence")
                if row.transactional_id not in fenced:
                    try:
                        backend.fence_transactional_id(row.transactional_id,
                                                       transaction_timeout_ms=row.transaction_timeout_ms)
                        fenced[row.transactional_id] = RowResult.OK.text()
                    except ClusterError as err:
                        fenced[row.transactional_id] = RowResult.FAILED.text(str(err))
                result = fenced[row.transactional_id]
            elif row.state in _MARKERS:
                if row.topic is None or row.partition is None or row.producer_id is None \
                        or row.producer_epoch is None:
                    raise ClusterError("the plan row lacks the partition or producer to write a marker for")
                backend.write_txn_markers(
                    topic=row.topic, partition=row.partition, producer_id=row.producer_id,
                    producer_epoch=row.producer_epoch,
                    # Admin abort passes the producer's last coordinator epoch; -1 (unknown) becomes 0
                    # as in TransactionsCommand's AbortTransactionCommand.
                    coordinator_epoch=max(row.coordinator_epoch if row.coordinator_epoch is not None else 0, 0),
                    commit=row.state is RowAction.WRITE_COMMIT_MARKER)
                result = RowResult.OK.text()
            else:
                raise ClusterError(f"unknown action {row.action!r}")
        except UnsupportedApi:
            raise
        except ClusterError as err:
            result = RowResult.FAILED.text(str(err))
        done.append(replace(row, result=result))
    return done
