"""Offline ``abort-hanging``: plan what Kafka would have written, from what the analysis read.

:func:`plan_repair` is pure: it reads no file and writes none. It plans from a
``repair.analysis.RepairAnalysis`` (the replayed coordinator and producer state, the selection,
and the sizes, sha256 and last entries of the files it appends after, read once under the
repair's locks); :func:`plan_abort_hanging` is the analysis followed by the plan.

The embedded coordinator finishes each selected hanging transaction the way a running
cluster would have, as appends to the broker's files (``RepairPlan`` of ``ops.py``, run
by ``apply.apply_plan`` with a journal first):

``timed-out`` (coordinator ``Ongoing`` past its timeout) -> action ``abort-timed-out``
    ``TransactionCoordinator.abortTimedOutTransactions``: ``prepareFenceProducerEpoch``
    bumps the epoch (it throws at ``Short.MaxValue``: we refuse, never wrap; a client never
    holds 32767 because ``isEpochExhausted`` (>= 32766) rotates the producer id at
    InitProducerId, so 32766 can still be fenced to 32767), then ``PrepareAbort`` with the
    bumped epoch is written (``PrepareEpochFence`` is only an in-memory pending state, never
    logged), ABORT markers carrying the bumped epoch go to every partition of the
    transaction (``TransactionMarkerChannelManager``), then ``CompleteAbort``.
``incomplete-markers`` (``PrepareCommit``/``PrepareAbort``) -> ``complete-commit``/``complete-abort``
    A coordinator loading a Prepare* record resends that outcome's markers
    (``TransactionStateManager`` -> ``TransactionMarkerChannelManager``): the decision is
    final, COMMIT stays COMMIT. Markers carry the Prepare* record's epoch, then Complete*.
``prepared-2pc`` (a KIP-939 two-phase-commit transaction, timeout ``Integer.MAX_VALUE``) -> ``untouched: prepared-2pc``
    Never aborted by selection alone (``--all``, ``--transactional-id``): an external transaction
    manager may already have promised its commit. The rest of the plan runs; the CLI exits 3
    naming it. ``force_terminate`` (``--force-terminate ID``) -> ``force-terminate``: what
    ``Admin.forceTerminateTransaction`` makes the coordinator do (an ``InitProducerId`` with
    ``keepPreparedTxn=false``: ``TransactionCoordinator.handleInitProducerId`` finds the
    transaction ``Ongoing``, fences it with ``prepareFenceProducerEpoch`` and aborts it), which
    writes what ``abort-timed-out`` writes (epoch bump, PrepareAbort, ABORT markers,
    CompleteAbort; the transaction keeps its 2PC timeout in these records), then the ``Empty``
    record of the admin's retried InitProducerId (``_force_terminate_empty``).

The epochs of a coordinator-side abort follow the Kafka release that wrote the data
(``kafkatx.coordinator.versions``: E+2 on 4.0 under TV2, E+1 from 4.1), ``--kafka-version`` or the
release of the finalized ``metadata.version``.
``orphaned`` -> ``write-commit-marker`` / ``write-abort-marker``
    What ``Admin.abortTransaction`` does (WriteTxnMarkers to the leader): a marker with the
    producer's current epoch and last coordinator epoch; the coordinator is not told. Its type is
    the coordinator's decision (``coordinator/decision.py``): an orphan whose producer/epoch match a
    ``PrepareCommit`` listing the partition (its marker was lost) gets COMMIT, never ABORT; where
    the ``__transaction_state`` history cannot tell, the row is refused unless ``decision``
    (``--decision commit|abort``) says which. The row's ``why`` names the record decided on.
``ghost`` -> ``write-abort-marker`` (strategy ``marker``) or ``drop-snapshots``
    See ``kafkatx.checks.ghost`` and the README runbook.

Byte-level rules followed (Kafka 3.x/4.x, storage/.../log/ and core/.../coordinator/transaction/):

* ``__transaction_state`` values are appended as one uncompressed, non-transactional v2
  batch per record (producer id -1), the value version the id last had (v0 or flexible
  v1, tagged fields kept), ``lastUpdateTimestamp`` = now, start timestamp kept;
  ``CompleteCommit``/``CompleteAbort`` carry an empty partition list (``prepareComplete``).
* Every batch continues the partition's offsets exactly (last batch's last offset + 1),
  carries the partition's current leader epoch (newest ``leader-epoch-checkpoint`` entry,
  never below the last batch's) and timestamp ``now``.
* Markers (``MemoryRecords.withEndTransactionMarker``) carry the coordinator epoch. A
  coordinator's epoch is the leader epoch of its ``__transaction_state`` partition
  (``TransactionCoordinator.onElection(txnTopicPartitionId, coordinatorEpoch)`` is called
  with the partition leader epoch); it is raised to the producer's last coordinator epoch
  in the data partition when that is higher, because ``ProducerAppendInfo.appendEndTxnMarker``
  rejects a marker from an older coordinator epoch.
* A marker that ends a transaction with data in the partition (the producer has it open)
  gets its ``.txnindex`` entry (``LogSegment.updateTxnIndex``): ABORT only, first offset =
  the transaction's first offset, last offset = the marker's offset, last stable offset =
  ``ProducerStateManager.lastStableOffset`` (``storage/lso.py txn_index_last_stable_offset``),
  computed against the transactions still open when that marker lands (markers in one
  partition are written coordinator-side transactions first, by transactional id, then orphans).
  The segment's ``.txnindex`` is created when absent.
* Offset index: ``LogSegment.recover``'s rule - a batch at position P gets an entry
  (its last offset, P) when P - (position of the last index entry, or 0) > ``index.interval.bytes``
  (a parameter: topic configs are not in the log dir; Kafka's default 4096). Missing entries
  are harmless (the index is sparse) but we write what recovery would. Time index: one entry
  (max timestamp, its offset) for the appended batches when the timestamp grows
  (``TimeIndex.maybeAppend``), as ``LogSegment.onBecomeInactiveSegment``/``close`` leave one.
  An index file that is not a whole number of entries, or has zero padding (not trimmed by
  a clean shutdown), is left alone and the plan says so.
* Producer snapshots are kept: the newest snapshot is still at or below the new log end, so
  on restart ``LogLoader``/``UnifiedLog.rebuildProducerState`` loads it and replays our
  appended markers through ``ProducerAppendInfo``: the broker closes the transaction itself.
  (Writing a new snapshot would make us the authority on every producer's state; replaying
  is Kafka's own code.) The ghost ``drop-snapshots`` strategy moves snapshots instead.
* Checkpoints: where ``replication-offset-checkpoint`` / ``recovery-point-offset-checkpoint``
  held the old log end of a partition we append to, they are replaced to hold the new log
  end (``ReplaceFile``), so LSO = high watermark afterwards and no recovery is triggered.
  A high watermark below the old log end (unreplicated tail) is left alone: raising it would
  claim replication that did not happen. ``.kafka_cleanshutdown`` is kept: the files we
  write are complete and consistent (the post-check verifies them), so the broker may trust
  them without recovery.

Refusals (an ``action`` starting with ``refused:``; the CLI exits 3 and executes nothing):
an epoch at ``Short.MaxValue``; a partition of the transaction not in the given log dirs
(writing Complete* while a partition we cannot reach still lacks its marker would turn it
into an orphan); an active segment with a torn tail (let the broker recover it first); a
marker epoch below the producer's epoch in the partition (Kafka would reject the marker).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TypeVar

from msgspec import Struct, field
from msgspec.structs import replace

from kafkatx.checks.ghost import KIND_GHOST
from kafkatx.coordinator.decision import COMMIT, marker_decision
from kafkatx.coordinator.rules import HangingKind, is_distributed_two_phase_commit
from kafkatx.coordinator.state import TransactionMetadata
from kafkatx.coordinator.state_manager import CoordinatorState
from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
from kafkatx.coordinator.versions import (
    KafkaVersion,
    coordinator_abort_epochs,
    is_epoch_exhausted,
    supports_epoch_bump,
    tv2_markers_need_greater_epoch,
    version_text,
)
from kafkatx.errors import KafkaTxError, MissingFile
from kafkatx.format.checkpoint import encode_offset_checkpoint
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value
from kafkatx.repair.analysis import (
    COORDINATED,
    DECISIONS,
    GHOST_STRATEGIES,
    TP,
    FileRead,
    RepairAnalysis,
    SegmentTail,
    analyse_abort_hanging,
    history_decision,
    last_write_ms,
    touched_names,
)
from kafkatx.repair.ops import AppendBytes, CreateFile, MoveToBackup, Operation, RepairPlan, ReplaceFile
from kafkatx.repair.postcheck import PostCheck, post_check_for
from kafkatx.rows import (
    UNTOUCHED_2PC_REASON,
    UNTOUCHED_UNDECIDED_REASON,
    AbortPlanRow,
    HangingRow,
    Report,
    Reported,
    RowAction,
    Unreadable,
)
from kafkatx.storage.log_dir import CLEAN_SHUTDOWN, RECOVERY_CHECKPOINT, REPLICATION_CHECKPOINT, LogDir
from kafkatx.storage.lso import txn_index_last_stable_offset
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import PartitionProducerState, ProducerState
from kafkatx.storage.segment import Segment
from kafkatx.storage.segment import read_window as segment_read_window

SHORT_MAX = 32767  # Short.MaxValue: prepareFenceProducerEpoch throws rather than overflow
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes default
# transaction.timeout.ms's default (ProducerConfig, and librdkafka's): the timeout of the Empty record a
# force-terminate ends with, as the InitProducerId that fences the id carries it.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000

_COORDINATED = COORDINATED


class OfflinePlan(Reported, frozen=True, kw_only=True):
    """abort-hanging's plan and its report: the analysis's notes then the plan's own, the partitions skipped,
    and (``incomplete``) the partitions in scope that could not be read."""

    rows: list[AbortPlanRow]  # txn.model's row: the same keys abort-hanging prints online
    plan: RepairPlan
    touched: tuple[tuple[Path, str, int], ...] = ()  # (log dir, topic, partition) written to
    blocked: bool = False  # a selected transaction touches an unreadable partition: refused, even --allow-partial
    in_timeout: list[HangingRow] = field(default_factory=list)  # selected, open, not hanging yet (no --force)

    @property
    def refused(self) -> list[AbortPlanRow]:
        return [r for r in self.rows if r.refused]

    @property
    def untouched(self) -> list[AbortPlanRow]:
        """``prepared-2pc`` rows left alone (no ``--force-terminate`` for their id)."""
        return [r for r in self.rows if r.untouched]

    @property
    def empty(self) -> bool:
        return not self.plan.operations


# ----------------------------------------------------------------------------- one partition's appends

class _File:
    """A file we append to: size and a running sha256, so several appends chain their expectations.

    Starts from what the analysis read (:class:`~kafkatx.repair.analysis.FileRead`): the expectations
    are the size and sha256 of exactly those bytes, not of a second read, so what the apply checks is
    what the plan was computed from (and the whole repair runs under the log dir locks)."""

    def __init__(self, read: FileRead) -> None:
        self.path = read.path
        self.exists = read.exists
        self.size = read.size
        self._hasher = read.hasher.copy()
        self.pending = bytearray()

    def flush(self, like: Path) -> list[Operation]:
        if not self.pending:
            return []
        data = bytes(self.pending)
        self.pending.clear()
        if not self.exists:
            self.exists = True
            self.size = len(data)
            self._hasher.update(data)
            return [CreateFile(path=self.path, data=data, like=like)]
        op = AppendBytes(path=self.path, expected_size=self.size, expected_sha256=self._hasher.hexdigest(), data=data)
        self._hasher.update(data)
        self.size += len(data)
        return [op]


class _Appender:
    """Appends batches to the active segment of one partition, with index/timeindex/txnindex upkeep,
    after the bytes the analysis read (:class:`~kafkatx.repair.analysis.SegmentTail`)."""

    def __init__(self, part: Partition, tail: SegmentTail, *, index_interval_bytes: int) -> None:
        self.part = part
        self.segment: Segment = tail.segment
        self.old_log_end = tail.last_offset + 1 if tail.last_offset is not None else tail.segment.base_offset
        self.next_offset = self.old_log_end
        epochs = tail.leader_epochs
        self.leader_epoch = max([tail.last_epoch, 0] + ([epochs[-1][0]] if epochs else []))
        self.log = _File(tail.log)
        self.log_position = self.log.size
        # offset index: position of the last entry, only when the file is exactly its entries
        self.index: _File | None = _File(tail.index) if tail.index is not None else None
        self.last_index_position = tail.last_index_position
        self.timeindex: _File | None = _File(tail.timeindex) if tail.timeindex is not None else None
        self.last_time = tail.last_time
        self.txnindex = _File(tail.txnindex)
        self.max_time = -1
        self.max_time_offset = -1
        self.index_interval_bytes = index_interval_bytes
        self.first_appended_position: int | None = None

    def append(self, batch: bytes, *, last_offset: int, timestamp: int) -> int:
        """Queue ``batch`` (already numbered ``self.next_offset``); returns its offset."""
        offset = self.next_offset
        pos = self.log_position
        if self.first_appended_position is None:
            self.first_appended_position = pos
        if self.index is not None and pos - self.last_index_position > self.index_interval_bytes:
            self.index.pending += encode_offset_index([OffsetIndexEntry(offset=last_offset, position=pos)],
                                                      self.segment.base_offset)
            self.last_index_position = pos
        self.log.pending += batch
        self.log_position += len(batch)
        self.next_offset = last_offset + 1
        if timestamp > self.max_time:
            self.max_time, self.max_time_offset = timestamp, last_offset
        return offset

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.txnindex.pending += encode_aborted_txn(txn)

    def flush(self) -> list[Operation]:
        like = self.segment.log_path
        ops = self.log.flush(like)
        if self.index is not None:
            ops += self.index.flush(like)
        if self.timeindex is not None and self.max_time > self.last_time:
            self.timeindex.pending += encode_time_index(
                [TimeIndexEntry(timestamp=self.max_time, offset=self.max_time_offset)], self.segment.base_offset)
            self.last_time = self.max_time
            ops += self.timeindex.flush(like)
        ops += self.txnindex.flush(like)
        return ops


# ----------------------------------------------------------------------------- planning

class _Work(Struct):
    """The plan being made from one analysis: the appenders it queues bytes on."""

    a: RepairAnalysis
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    transaction_timeout_ms: int = 60_000
    appenders: dict[TP, _Appender] = field(default_factory=dict)
    open_firsts: dict[TP, dict[int, int]] = field(default_factory=dict)
    report: Report = field(default_factory=Report)  # the analysis's, then the plan's own (it is not changed)

    def __post_init__(self) -> None:
        said = self.a.report
        self.report = Report(notices=list(said.notices), skipped=said.skipped, incomplete=said.incomplete)

    def said(self, incomplete: list[Unreadable]) -> Report:
        """The plan's report: its notes and skipped partitions, and of the unreadable ones ``incomplete``."""
        return Report(notices=self.report.notices, skipped=self.report.skipped, incomplete=incomplete)

    @property
    def dirs(self) -> list[LogDir]:
        return self.a.dirs

    @property
    def coord(self) -> CoordinatorState:
        return self.a.coord

    @property
    def parts(self) -> dict[TP, Partition]:
        return self.a.parts

    @property
    def states(self) -> dict[TP, PartitionProducerState]:
        return self.a.states

    @property
    def incomplete(self) -> list[Unreadable]:
        return self.report.incomplete

    def appender(self, tp: TP) -> _Appender:
        if tp not in self.appenders:
            tail = self.a.tails.get(tp)
            if tail is None:  # the analysis reads every partition a selected transaction can write to
                raise MissingFile(f"{self.parts[tp].path}: not read by the analysis; nothing is appended to it")
            if isinstance(tail, KafkaTxError):
                raise tail
            self.report.note(*tail.notices)
            self.appenders[tp] = _Appender(self.parts[tp], tail, index_interval_bytes=self.index_interval_bytes)
        return self.appenders[tp]

    def _opens(self, tp: tuple[str, int]) -> dict[int, int]:
        if tp not in self.open_firsts:
            state = self.states.get(tp)
            self.open_firsts[tp] = {t.producer_id: t.first_offset for t in state.open_transactions} if state else {}
        return self.open_firsts[tp]

    def marker(self, tp: tuple[str, int], *, control: ControlType, producer_id: int, producer_epoch: int,
               coordinator_epoch: int, now: int) -> int:
        """Queue a COMMIT/ABORT marker (and the txnindex entry an abort of a transaction with data needs)."""
        app = self.appender(tp)
        offset = app.next_offset
        batch = build_control_batch(offset=offset, control_type=control, producer_id=producer_id,
                                    producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                                    timestamp=now, partition_leader_epoch=app.leader_epoch)
        app.append(batch, last_offset=offset, timestamp=now)
        opens = self._opens(tp)
        first = opens.pop(producer_id, None)
        if first is not None and control == ControlType.ABORT:
            lso = txn_index_last_stable_offset(opens.values(), offset)
            app.add_aborted(AbortedTxn(version=0, producer_id=producer_id, first_offset=first, last_offset=offset,
                                       last_stable_offset=lso))
        return offset

    def producer(self, tp: tuple[str, int], producer_id: int) -> ProducerState | None:
        state = self.states.get(tp)
        return state.producers.get(producer_id) if state is not None else None


def _row(h: HangingRow, action: RowAction, reason: str = "", **extra: object) -> AbortPlanRow:
    """``h``'s plan row: what it does, and why for a row not carried out (refused, not planned, untouched)."""
    return AbortPlanRow(kind=h.kind, topic=h.topic, partition=h.partition, producer_id=h.producer_id,
                        producer_epoch=h.producer_epoch, transactional_id=h.transactional_id,
                        coordinator_state=h.coordinator_state, first_offset=h.first_offset, start_ms=h.start_ms,
                        duration_ms=h.duration_ms, action=action.text(reason), blocked_groups=h.blocked_groups,
                        **extra)  # type: ignore[arg-type]


def _refused(h: HangingRow, reason: str) -> AbortPlanRow:
    return _row(h, RowAction.REFUSED, reason)


def _txn_log_append(work: _Work, meta: TransactionMetadata, value: TxnLogValue, now: int) -> int:
    tp = (TXN_STATE_TOPIC, meta.coordinator_partition)
    app = work.appender(tp)
    offset = app.next_offset
    rec = Record(offset=offset, timestamp=now, key=encode_txn_log_key(meta.transactional_id),
                 value=encode_txn_log_value(value))
    # TransactionStateManager.appendTransactionToLog: one record, no producer id, not transactional.
    batch = build_batch([rec], base_offset=offset, partition_leader_epoch=app.leader_epoch)
    app.append(batch, last_offset=offset, timestamp=now)
    return offset


def plan_abort_hanging(log_dirs: Iterable[str | Path | LogDir], *, transactional_ids: Sequence[str] = (),
                       topic: str | None = None, partition: int | None = None, producer_id: int | None = None,
                       all_: bool = False, now: int, max_timeout_ms: int | None = None,
                       ghost_strategy: str = "marker", partitions_count: int | None = None,
                       index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                       force_terminate: Sequence[str] = (), decision: str | None = None,
                       allow_partial: bool = False, metadata_log_dir: Path | None = None,
                       after_analysis: Callable[[], None] | None = None, read_window: int | None = None,
                       kafka_version: KafkaVersion | None = None,
                       transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS, force: bool = False) -> OfflinePlan:
    """Plan the repair of the selected hanging transactions: :func:`~kafkatx.repair.analysis.analyse_abort_hanging`
    reads (never writes), then :func:`plan_repair` plans from what it read (module docstring).

    ``force_terminate``: transactional ids of prepared two-phase-commit transactions to abort
    (``--force-terminate ID``); each is selected as if given to ``transactional_ids`` too.
    ``metadata_log_dir``: where ``__cluster_metadata-0`` is when no log dir holds it (``--metadata-log-dir``).
    ``after_analysis``: called once the log dirs have been read, before the plan is made from that
    reading (a test seam for interleavings; ``repair.offline`` holds the locks across both).
    ``decision``: ``commit``/``abort`` for orphans whose coordinator decision the history cannot tell.
    ``allow_partial``: plan although a partition of the selection could not be read (``incomplete``);
    a transaction touching one is refused regardless.
    ``read_window``: bytes of a segment the analysis holds at most on the pread path (``--read-window``;
    None: the caller's ``log.segment.read_window``, 64 MiB by default).
    ``kafka_version`` (``--kafka-version``): the release whose coordinator the plan follows (None: the
    release of the metadata log's finalized ``metadata.version``; ``kafkatx.coordinator.versions``).
    ``transaction_timeout_ms`` (``--transaction-timeout-ms``): the timeout of the ``Empty`` record a
    force-terminate ends with (the fencing InitProducerId's transaction timeout).
    ``force``: also the selected open transactions that do not hang yet (within their timeout), as
    kafka-transactions.sh abort aborts what it is told; without it they are the plan's ``in_timeout``.
    """
    with nullcontext() if read_window is None else segment_read_window(read_window):
        analysis = analyse_abort_hanging(log_dirs, transactional_ids=transactional_ids, topic=topic, partition=partition,
                                         producer_id=producer_id, all_=all_, now=now, max_timeout_ms=max_timeout_ms,
                                         ghost_strategy=ghost_strategy, partitions_count=partitions_count,
                                         force_terminate=force_terminate, decision=decision,
                                         index_interval_bytes=index_interval_bytes, metadata_log_dir=metadata_log_dir,
                                         kafka_version=kafka_version, force=force)
    if after_analysis is not None:
        after_analysis()
    planned = plan_repair(analysis, now=now, ghost_strategy=ghost_strategy, index_interval_bytes=index_interval_bytes,
                          decision=decision, allow_partial=allow_partial, transaction_timeout_ms=transaction_timeout_ms)
    return replace(planned, in_timeout=analysis.in_timeout) if analysis.in_timeout else planned


def plan_repair(analysis: RepairAnalysis, *, now: int, ghost_strategy: str = "marker",
                index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, decision: str | None = None,
                allow_partial: bool = False,
                transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> OfflinePlan:
    """The plan of ``analysis.selected``, made from what the analysis read alone: no file is read here
    (the appends expect the sizes and hashes of the bytes the analysis decoded). Same arguments as
    :func:`plan_abort_hanging`."""
    work = _Work(analysis, index_interval_bytes=index_interval_bytes, transaction_timeout_ms=transaction_timeout_ms)
    selected = analysis.selected
    topic = analysis.topic
    transactional_ids = analysis.transactional_ids
    force_terminate = analysis.force_terminate
    in_scope = [u for u in work.incomplete if topic is None or u.partition.rpartition("-")[0] == topic
                or u.partition.startswith(TXN_STATE_TOPIC)]
    touches = touched_names(work.coord, selected)
    for tid in transactional_ids:  # an asked-for id whose own partition is unreadable may hang right there
        owned = work.coord.transactions.get(tid)
        if owned is not None:
            touches.update(f"{t}-{p}" for t, p in owned.partitions)
            touches.add(f"{TXN_STATE_TOPIC}-{owned.coordinator_partition}")
    blocked = [u for u in work.incomplete if u.partition in touches]
    if blocked:
        names = ", ".join(sorted({u.partition for u in blocked}))
        bad = {u.partition for u in blocked}
        rows = [_refused(h, f"partition(s) {names} of the selection could not be read; restore them first (see "
                            "verify)") if touched_names(work.coord, [h]) & bad or h.transactional_id in transactional_ids
                else _row(h, RowAction.NOT_PLANNED, "the selection touches an unreadable partition")
                for h in selected]
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           report=work.said(blocked + [u for u in in_scope if u not in blocked]), blocked=True)
    if in_scope and not allow_partial:
        # A partition of the selection could not be read: it may hold a hanging transaction too. Nothing
        # is planned (so ``execute_abort_hanging`` applies nothing) unless the caller accepts a partial plan.
        rows = [_row(h, RowAction.NOT_PLANNED, "a partition of the selection could not be read") for h in selected]
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           report=work.said(in_scope))
    try:
        rows, ops_phase1, ops_phase3, moves = _plan_rows(work, selected, now, ghost_strategy, set(force_terminate),
                                                         decision)
    except KafkaTxError as err:
        # A file we must append to cannot be (torn tail, missing partition): refuse everything.
        rows = [_refused(h, str(err)) for h in selected]
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           report=work.said(in_scope))
    if any(r.refused for r in rows):
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           report=work.said(in_scope))
    # Phase 2 (markers) flushes every partition except the coordinator records still pending.
    ops: list[Operation] = list(ops_phase1)
    txn_tps = {tp for tp in work.appenders if tp[0] == TXN_STATE_TOPIC}
    for tp, app in sorted(work.appenders.items()):
        if tp not in txn_tps:
            ops += app.flush()
    ops += ops_phase3
    for tp in sorted(txn_tps):
        ops += work.appenders[tp].flush()
    ops += moves
    ops += _checkpoint_ops(work)
    touched = tuple(sorted((work.parts[tp].path.parent, tp[0], tp[1]) for tp in work.appenders))
    desc = f"kafkatx abort-hanging: {len(rows)} row(s), now={now}"
    return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=tuple(ops),
                                                  description=desc),
                       report=work.said(in_scope), touched=touched)


def _transaction_version(work: _Work, tid: str, last: TxnLogValue) -> tuple[int, str]:
    """The transaction version a coordinator-side abort uses, and where it came from.

    Kafka uses the cluster's finalized ``transaction.version`` (``TransactionStateManager.
    transactionVersionLevel``); without a metadata log the transaction's own last record's
    ``ClientTransactionVersion`` is the best evidence there is."""
    if work.a.transaction_version is not None:
        return work.a.transaction_version, work.a.transaction_version_source
    return last.client_transaction_version, (f"ClientTransactionVersion={last.client_transaction_version} in "
                                             f"{tid}'s last __transaction_state record, as no "
                                             "__cluster_metadata-0 says the cluster's")


def _coordinator_epoch(work: _Work, meta: TransactionMetadata) -> int:
    """The coordinator epoch = leader epoch of the id's ``__transaction_state`` partition."""
    part = work.parts.get((TXN_STATE_TOPIC, meta.coordinator_partition))
    if part is None:
        return 0
    return work.appender(part.key).leader_epoch


def _plan_rows(work: _Work, selected: list[HangingRow], now: int, ghost_strategy: str,
               force_terminate: set[str] | None = None, decision: str | None = None,
               ) -> tuple[list[AbortPlanRow], list[Operation], list[Operation], list[Operation]]:
    rows: list[AbortPlanRow] = []
    coordinated: dict[str, list[HangingRow]] = {}
    marker_rows: list[HangingRow] = []
    forced = force_terminate or set()
    for h in selected:
        if h.kind == HangingKind.PREPARED_2PC and h.transactional_id not in forced:
            rows.append(_row(h, RowAction.UNTOUCHED, UNTOUCHED_2PC_REASON))  # an external transaction manager owns its outcome
            continue
        if h.kind in _COORDINATED and h.transactional_id is not None:
            coordinated.setdefault(h.transactional_id, []).append(h)
        else:
            marker_rows.append(h)

    # Phase 1: the coordinator's PrepareAbort for timed-out transactions.
    plans: list[tuple[str, TransactionMetadata, TxnLogValue, list[HangingRow], ControlType, int, int]] = []
    for tid, hrows in sorted(coordinated.items()):
        meta = work.coord.transactions[tid]
        missing = sorted(f"{t}-{p}" for t, p in meta.partitions if (t, p) not in work.parts)
        if (TXN_STATE_TOPIC, meta.coordinator_partition) not in work.parts:
            missing.insert(0, f"{TXN_STATE_TOPIC}-{meta.coordinator_partition}")
        if missing:
            rows += [_refused(h, f"partition(s) {', '.join(missing)} of this transaction are not in these "
                                 "log dirs; give every log dir that holds them") for h in hrows]
            continue
        last = _read(work.a.last_values[tid])
        if meta.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
            if meta.producer_epoch >= SHORT_MAX:
                rows += [_refused(h, f"producer epoch {meta.producer_epoch} is Short.MaxValue: Kafka's "
                                     "prepareFenceProducerEpoch cannot bump it (it would overflow)") for h in hrows]
                continue
            tv, source = _transaction_version(work, tid, last)
            kafka = work.a.kafka_version
            epochs = coordinator_abort_epochs(meta.producer_epoch, tv, kafka)
            if epochs.fails is not None:
                rows += [_refused(h, f"{epochs.fails}; give --kafka-version for a release that can")
                         for h in hrows]
                continue
            if epochs.needs_new_producer_id:
                rows += [_refused(h, f"producer epoch {meta.producer_epoch} is exhausted: Kafka "
                                     f"{version_text(kafka)} with transaction version {tv} moves the id to a new "
                                     "producer id (nextProducerId) from the controller's blocks, which an offline "
                                     "repair cannot allocate") for h in hrows]
                continue
            # One level of parentheses at most: a tired reader parses "as X does: what. X from ...; Y from ...".
            work.report.note(f"{tid}: aborted as Kafka {version_text(kafka)} does at transaction version {tv}: "
                                f"PrepareAbort, markers and CompleteAbort at producer epoch {epochs.final}. "
                                f"Kafka {version_text(kafka)} from {work.a.kafka_version_source}; transaction "
                                f"version {tv} from {source}")
            epoch = epochs.final
            # A flexible (v1) value carries ClientTransactionVersion; TV2 needs it (TransactionLog.valueToBytes).
            version = max(last.version, 1) if supports_epoch_bump(tv) else last.version
            prepare = replace(last, version=version, producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                              last_update_timestamp=now, partitions=_partition_list(meta, last),
                              start_timestamp=meta.start_timestamp, client_transaction_version=tv)
            _txn_log_append(work, meta, prepare, now)
            plans.append((tid, meta, prepare, hrows, ControlType.ABORT, epoch, tv))
        else:
            control = ControlType.COMMIT if meta.state is TxnState.PREPARE_COMMIT else ControlType.ABORT
            plans.append((tid, meta, last, hrows, control, meta.producer_epoch, last.client_transaction_version))
    ops_phase1: list[Operation] = []
    for _tp, app in sorted(work.appenders.items()):
        ops_phase1 += app.flush()

    # Phase 2: markers. Timed-out: every partition of the transaction; decided: the ones still open.
    for tid, meta, value, hrows, control, epoch, tv in plans:
        cepoch = _coordinator_epoch(work, meta)
        two_pc = is_distributed_two_phase_commit(meta.timeout_ms)
        if meta.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
            targets = sorted(meta.partitions)
            action = RowAction.FORCE_TERMINATE if two_pc else RowAction.ABORT_TIMED_OUT
        else:
            targets = sorted({(h.topic, h.partition) for h in hrows})
            action = RowAction.COMPLETE_COMMIT if control == ControlType.COMMIT else RowAction.COMPLETE_ABORT
        # ProducerAppendInfo.checkProducerEpoch: a legacy marker needs an epoch >= the producer's; a TV2
        # marker (WriteTxnMarkers v2 from a 4.2 coordinator, KIP-1228, PR #20882) strictly greater.
        strict = tv2_markers_need_greater_epoch(tv, work.a.kafka_version)
        bad = [f"{t}-{p}" for t, p in targets
               if (ps := work.producer((t, p), meta.producer_id)) is not None
               and (ps.producer_epoch >= epoch if strict else ps.producer_epoch > epoch)]
        if bad:
            rule = (f"not below {epoch}: a transaction version {tv} marker from Kafka "
                    f"{version_text(work.a.kafka_version)} needs a strictly greater epoch (KIP-1228)"
                    if strict else f"higher than {epoch}")
            rows += [_refused(h, f"producer {meta.producer_id} already has an epoch {rule} in "
                                 f"{', '.join(bad)}; Kafka would reject the marker") for h in hrows]
            continue
        offsets = {}
        for tp in targets:
            ps = work.producer(tp, meta.producer_id)
            ce = max(cepoch, ps.coordinator_epoch if ps is not None else 0)
            offsets[tp] = (work.marker(tp, control=control, producer_id=meta.producer_id, producer_epoch=epoch,
                                       coordinator_epoch=ce, now=now), ce)
        complete_state = TxnState.COMPLETE_COMMIT if control == ControlType.COMMIT else TxnState.COMPLETE_ABORT
        complete = replace(value, producer_epoch=epoch, state=complete_state, partitions=(), last_update_timestamp=now)
        _txn_log_append(work, meta, complete, now)
        if action is RowAction.FORCE_TERMINATE:
            _force_terminate_empty(work, tid, meta, complete, now)
        for h in hrows:
            mo, ce = offsets[(h.topic, h.partition)]
            rows.append(_row(h, action, coordinator_epoch=ce, control_type=control.name, marker_offset=mo,
                             marker_epoch=epoch))

    # Partition-side markers: orphaned (admin abort) and ghosts.
    moves: list[Operation] = []
    moved: set[Path] = set()
    for h in sorted(marker_rows, key=lambda r: (r.topic, r.partition, r.first_offset, r.producer_id)):
        tp = (h.topic, h.partition)
        if h.kind == KIND_GHOST and ghost_strategy == "drop-snapshots":
            part = work.parts[tp]
            flags = [part.log_dir.path / CLEAN_SHUTDOWN] if part.log_dir is not None else []
            for path in [p for _off, p in part.snapshots] + flags:
                # Without the clean-shutdown flag the broker rebuilds producer state from the log for
                # partitions with no snapshot; with it (and no snapshot) LogLoader skips the rebuild and
                # forgets every open transaction of the partition, legitimate ones too.
                if path not in moved and path in work.a.file_hashes:  # (a flag is there when it was hashed)
                    moved.add(path)
                    moves.append(MoveToBackup(path=path, expected_sha256=_read(work.a.file_hashes[path])))
            rows.append(_row(h, RowAction.DROP_SNAPSHOTS))
            continue
        decided = history_decision(work.a, h)
        if decided.control is None:  # the evidence Kafka left elsewhere: this transaction's other markers
            by_markers = marker_decision(work.a.markers, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                                         partition=f"{h.topic}-{h.partition}", start_ms=h.start_ms,
                                         last_write_ms=last_write_ms(work.a, h))
            decided = by_markers if by_markers.control is not None else replace(
                decided, why=f"{decided.why}; {by_markers.why}")
        why = decided.why
        control_name = decided.control
        if control_name is None and decision is None and h.kind == KIND_GHOST:
            # Retention deleted the data: no reader can see it either way; the marker only frees the LSO.
            control_name = "ABORT"
            why = f"{why}; its data is below the log start (deleted), so the marker only releases the LSO"
        if control_name is None:
            if decision is None:  # left alone; the rest of the plan runs (exit 3 naming the deciding command)
                rows.append(_row(h, RowAction.UNTOUCHED, UNTOUCHED_UNDECIDED_REASON, why=why))
                continue
            control_name = decision.upper()
            why = f"{why}; --decision {decision} given"
        control = ControlType.COMMIT if control_name == COMMIT else ControlType.ABORT
        ps = work.producer(tp, h.producer_id)
        epoch = ps.producer_epoch if ps is not None else h.producer_epoch
        ce = max(ps.coordinator_epoch if ps is not None else 0, 0)
        mo = work.marker(tp, control=control, producer_id=h.producer_id, producer_epoch=epoch,
                         coordinator_epoch=ce, now=now)
        rows.append(_row(h, RowAction.WRITE_COMMIT_MARKER if control == ControlType.COMMIT else RowAction.WRITE_ABORT_MARKER,
                         coordinator_epoch=ce, control_type=control.name, marker_offset=mo, marker_epoch=epoch,
                         why=why))
    ops_phase3: list[Operation] = []
    rows.sort(key=lambda r: (r.topic or "", r.partition or 0, r.first_offset or 0, r.producer_id or 0))
    return rows, ops_phase1, ops_phase3, moves


def _force_terminate_empty(work: _Work, tid: str, meta: TransactionMetadata, complete: TxnLogValue,
                           now: int) -> None:
    """The record ``Admin.forceTerminateTransaction`` ends with after ``CompleteAbort``.

    The admin call is an ``InitProducerId`` with ``keepPreparedTxn=false`` (``FenceProducersHandler``); the
    coordinator answers the first one CONCURRENT_TRANSACTIONS while it aborts, and the retry finds
    ``CompleteAbort``: ``TransactionCoordinator.prepareInitProducerIdTransit`` ->
    ``TransactionMetadata.prepareIncrementProducerEpoch`` (no expected epoch: epoch + 1), state ``Empty``,
    the request's transaction timeout (which replaces the 2PC ``Integer.MAX_VALUE`` sentinel), no partitions
    (``TransactionLog.valueToBytes`` writes null for Empty), start timestamp -1. An exhausted epoch would
    rotate the producer id (``prepareProducerIdRotation``) instead, which an offline repair cannot allocate:
    then the plan stops at CompleteAbort and says so."""
    if is_epoch_exhausted(complete.producer_epoch):
        work.report.note(f"{tid}: force-terminate stops at CompleteAbort (epoch {complete.producer_epoch}): the "
                            "InitProducerId retry would rotate to a new producer id (prepareProducerIdRotation), "
                            "which an offline repair cannot allocate; the next producer's InitProducerId does it")
        return
    empty = replace(complete, producer_epoch=complete.producer_epoch + 1, state=TxnState.EMPTY, partitions=None,
                    transaction_timeout_ms=work.transaction_timeout_ms, start_timestamp=-1,
                    last_update_timestamp=now)
    _txn_log_append(work, meta, empty, now)
    work.report.note(f"{tid}: force-terminate ends with Empty at producer epoch {empty.producer_epoch}, "
                        f"transaction timeout {work.transaction_timeout_ms} ms (--transaction-timeout-ms), as the "
                        "retried InitProducerId of Admin.forceTerminateTransaction writes it")


def _partition_list(meta: TransactionMetadata, last: TxnLogValue | None = None,
                    ) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The transaction's partitions as a value lists them. Kafka writes the same set in the order of its
    ``topicPartitions`` set, so the last record's order is kept when it lists the same set."""
    if last is not None and last.partitions is not None and \
            {(t, p) for t, ps in last.partitions for p in ps} == set(meta.partitions):
        return last.partitions
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(meta.partitions):
        by_topic.setdefault(t, []).append(p)
    return tuple((t, tuple(ps)) for t, ps in sorted(by_topic.items()))


def _checkpoint_ops(work: _Work) -> list[Operation]:
    """New log ends into replication-offset / recovery-point checkpoints where they held the old one
    (the checkpoints as the analysis read them)."""
    ops: list[Operation] = []
    by_dir: dict[Path, list[tuple[TP, _Appender]]] = {}
    for tp, app in work.appenders.items():
        if app.next_offset == app.old_log_end or app.part.log_dir is None:
            continue
        by_dir.setdefault(app.part.log_dir.path, []).append((tp, app))
    for d in work.dirs:
        items = by_dir.get(d.path)
        if not items:
            continue
        reads = work.a.checkpoints.get(d.path, {})
        for name in (REPLICATION_CHECKPOINT, RECOVERY_CHECKPOINT):
            if name not in reads:
                continue  # absent
            read = _read(reads[name])
            current = read.offsets
            updated = dict(current)
            for tp, app in items:
                old = current.get(tp)
                if old == app.old_log_end:
                    updated[tp] = app.next_offset
                elif old is not None and name == REPLICATION_CHECKPOINT:
                    work.report.note(f"{app.part.name}: high watermark {old} is below the old log end "
                                        f"{app.old_log_end} (unreplicated tail); left as is")
            if updated != current:
                ops.append(ReplaceFile(path=read.path, expected_sha256=read.sha256,
                                       data=encode_offset_checkpoint(updated).encode()))
    return ops


_T = TypeVar("_T")


def _read(got: _T | KafkaTxError) -> _T:
    """What the analysis read, or the error it met reading it (raised where the plan needs the file)."""
    if isinstance(got, KafkaTxError):
        raise got
    return got


# ----------------------------------------------------------------------------- post-check

__all__ = [
    "DECISIONS", "DEFAULT_INDEX_INTERVAL_BYTES", "GHOST_STRATEGIES", "SHORT_MAX", "AbortPlanRow",
    "OfflinePlan", "PostCheck", "RowAction", "plan_abort_hanging", "post_check_for",
]
