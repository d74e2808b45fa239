"""Offline ``abort-hanging``: plan (pure: reads, never writes) what Kafka would have written.

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
    writes exactly what ``abort-timed-out`` writes (epoch bump, PrepareAbort, ABORT markers,
    CompleteAbort). The transaction keeps its 2PC timeout in these records.
``orphaned`` -> ``write-commit-marker`` / ``write-abort-marker``
    What ``Admin.abortTransaction`` does (WriteTxnMarkers to the leader): a marker with the
    producer's current epoch and last coordinator epoch; the coordinator is not told. Its type is
    the coordinator's decision (``txn/decision.py``): an orphan whose producer/epoch match a
    ``PrepareCommit`` listing the partition (its marker was lost) gets COMMIT, never ABORT; where
    the ``__transaction_state`` history cannot tell, the row is refused unless ``decision``
    (``--decision commit|abort``) says which. The row's ``why`` names the record decided on.
``ghost`` -> ``write-abort-marker`` (strategy ``marker``) or ``drop-snapshots``
    See ``kafkatx.txn.ghost`` and the README runbook.

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
  ``ProducerStateManager.lastStableOffset`` (``txn/lso.py txn_index_last_stable_offset``),
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

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkatx.errors import DecodeError, KafkaTxError, MissingFile, UsageError
from kafkatx.format.checkpoint import encode_offset_checkpoint
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import ENTRY_SIZE as INDEX_ENTRY_SIZE
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index, read_offset_index
from kafkatx.format.record_batch import Record, build_batch, build_control_batch, crc_valid, iter_records
from kafkatx.format.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index, read_time_index
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
from kafkatx.format.txn_log import (
    TxnLogValue,
    TxnState,
    decode_txn_log_key,
    decode_txn_log_value,
    encode_txn_log_key,
    encode_txn_log_value,
)
from kafkatx.log.cluster_metadata import cluster_image
from kafkatx.log.log_dir import CLEAN_SHUTDOWN, RECOVERY_CHECKPOINT, REPLICATION_CHECKPOINT, LogDir
from kafkatx.log.partition import Partition
from kafkatx.log.segment import Buffer, Segment, map_file
from kafkatx.repair.fsutil import hash_file, hasher_of_file
from kafkatx.repair.ops import AppendBytes, CreateFile, MoveToBackup, Operation, RepairPlan, ReplaceFile
from kafkatx.txn import hanging as _hanging
from kafkatx.txn.coordinator import TXN_STATE_TOPIC, CoordinatorState, replay_transaction_log
from kafkatx.txn.decision import COMMIT, coordinator_decision
from kafkatx.txn.ghost import KIND_GHOST, apply_ghost_rule
from kafkatx.txn.lso import txn_index_last_stable_offset
from kafkatx.txn.model import REFUSED_PREFIX, UNTOUCHED_2PC, AbortPlanRow, HangingRow, Unreadable, unreadable
from kafkatx.txn.offline import hanging_settings, require_match
from kafkatx.txn.producer_state import PartitionProducerState
from kafkatx.txn.replay import replay_partition
from kafkatx.txn.replicas import as_log_dirs, choose_replicas
from kafkatx.txn.rules import (
    COORDINATOR_KINDS,
    TIMEOUT_STATES,
    HangingKind,
    is_distributed_two_phase_commit,
)
from kafkatx.txn.state import TransactionMetadata
from kafkatx.txn.versions import coordinator_abort_epochs, supports_epoch_bump

SHORT_MAX = 32767  # Short.MaxValue: prepareFenceProducerEpoch throws rather than overflow
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes default
GHOST_STRATEGIES = ("marker", "drop-snapshots")

ACTION_ABORT_TIMED_OUT = "abort-timed-out"
ACTION_COMPLETE_COMMIT = "complete-commit"
ACTION_COMPLETE_ABORT = "complete-abort"
ACTION_ABORT_MARKER = "write-abort-marker"
ACTION_COMMIT_MARKER = "write-commit-marker"
DECISIONS = ("commit", "abort")
ACTION_DROP_SNAPSHOTS = "drop-snapshots"
ACTION_FORCE_TERMINATE = "force-terminate"
# The kinds a coordinator-side repair finishes (every partition of the transaction at once).
_COORDINATED = COORDINATOR_KINDS | {HangingKind.PREPARED_2PC}
REFUSED = REFUSED_PREFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflinePlan:
    rows: list[AbortPlanRow]  # txn.model's row: the same keys abort-hanging prints online
    plan: RepairPlan
    notices: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    touched: tuple[tuple[Path, str, int], ...] = ()  # (log dir, topic, partition) written to
    incomplete: list[Unreadable] = field(default_factory=list)  # partitions in scope that could not be read
    blocked: bool = False  # a selected transaction touches an unreadable partition: refused, even --allow-partial

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

    ``read``: the bytes the analysis decoded (a segment or index buffer): the expectations are the
    size and sha256 of exactly those bytes, not of a second read, so what the apply checks is what
    the plan was computed from (and the whole repair runs under the log dir locks)."""

    def __init__(self, path: Path, read: Buffer | None = None) -> None:
        self.path = path
        if read is not None:
            self.exists = True
            self.size = len(read)
            self._hasher = hashlib.sha256(read)
        else:
            self.exists = path.is_file()
            self.size = path.stat().st_size if self.exists else 0
            self._hasher = hasher_of_file(path) if self.exists else hashlib.sha256()
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
    """Appends batches to the active segment of one partition, with index/timeindex/txnindex upkeep."""

    def __init__(self, part: Partition, *, index_interval_bytes: int, notices: list[str]) -> None:
        if not part.segments:
            raise MissingFile(f"{part.path}: partition has no segment to append to")
        self.part = part
        self.segment: Segment = part.segments[-1]
        seg = self.segment
        last_offset = None
        last_epoch = -1
        end = 0
        try:
            with seg.open() as buf:
                size = len(buf)
                for h in seg.iter_batches(buf):
                    last_offset, last_epoch, end = h.last_offset, h.partition_leader_epoch, h.position + h.size
                log_file = _File(seg.log_path, buf)  # size and sha256 of the bytes just decoded
        except DecodeError as err:
            raise DecodeError(f"{part.name}: active segment does not end in a whole batch ({err.message}); "
                              "start the broker once so its recovery truncates the torn tail, or run verify",
                              path=seg.log_path, position=err.position) from err
        if end != size:
            raise DecodeError(f"{part.name}: {size - end} bytes after the last batch; refusing to append after them",
                              path=seg.log_path, position=end)
        self.old_log_end = last_offset + 1 if last_offset is not None else seg.base_offset
        self.next_offset = self.old_log_end
        epochs = part.leader_epochs
        self.leader_epoch = max([last_epoch, 0] + ([epochs[-1][0]] if epochs else []))
        self.log = log_file
        self.log_position = self.log.size
        # offset index: position of the last entry, only when the file is exactly its entries
        self.index: _File | None = None
        self.last_index_position = 0
        if seg.index_path is not None and seg.index_path.is_file():
            with map_file(seg.index_path) as ibuf:
                entries = read_offset_index(ibuf, seg.base_offset, strict=False) if len(ibuf) else []
                isize = len(ibuf)
                index_file = _File(seg.index_path, ibuf)
            if isize == len(entries) * INDEX_ENTRY_SIZE:
                self.index = index_file
                self.last_index_position = entries[-1].position if entries else 0
            else:
                notices.append(f"{seg.index_path}: not trimmed to its entries ({isize} bytes, {len(entries)} "
                               "entries); no index entry appended (the index is sparse; lookups still work)")
        self.timeindex: _File | None = None
        self.last_time = -1
        if seg.timeindex_path is not None and seg.timeindex_path.is_file():
            with map_file(seg.timeindex_path) as tbuf:
                tentries = read_time_index(tbuf, seg.base_offset, strict=False) if len(tbuf) else []
                tsize = len(tbuf)
                time_file = _File(seg.timeindex_path, tbuf)
            if tsize == len(tentries) * TIME_ENTRY_SIZE:
                self.timeindex = time_file
                self.last_time = tentries[-1].timestamp if tentries else -1
            else:
                notices.append(f"{seg.timeindex_path}: not trimmed to its entries; no time index entry appended")
        txn_path = seg.log_path.with_suffix(".txnindex")
        self.txnindex = _File(txn_path)
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

@dataclass(slots=True)
class _Work:
    """The analysed log dirs: coordinator, partitions, replayed producer state."""

    dirs: list[LogDir]
    coord: CoordinatorState
    parts: dict[tuple[str, int], Partition]
    states: dict[tuple[str, int], PartitionProducerState]
    notices: list[str]
    skipped: list[str]
    incomplete: list[Unreadable] = field(default_factory=list)
    appenders: dict[tuple[str, int], _Appender] = field(default_factory=dict)
    open_firsts: dict[tuple[str, int], dict[int, int]] = field(default_factory=dict)
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    transaction_version: int | None = None  # the cluster's finalized transaction.version, when known
    transaction_version_source: str = ""

    def appender(self, tp: tuple[str, int]) -> _Appender:
        if tp not in self.appenders:
            self.appenders[tp] = _Appender(self.parts[tp], index_interval_bytes=self.index_interval_bytes,
                                           notices=self.notices)
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

    def producer(self, tp: tuple[str, int], producer_id: int):  # -> ProducerState | None
        state = self.states.get(tp)
        return state.producers.get(producer_id) if state is not None else None


def _analyse(log_dirs: Iterable[str | Path | LogDir], partitions_count: int | None,
             metadata_log_dir: Path | None = None) -> _Work:
    dirs = as_log_dirs(log_dirs)
    notices: list[str] = [n for d in dirs for n in d.skipped]
    skipped: list[str] = []
    if partitions_count is None and metadata_log_dir is not None:
        image = cluster_image(dirs, metadata_log_dir)
        if image is None:
            raise MissingFile(f"{metadata_log_dir}: no __cluster_metadata-0 here (--metadata-log-dir)")
        partitions_count = image.partition_count(TXN_STATE_TOPIC)
        if partitions_count is not None:
            notices.append(f"{TXN_STATE_TOPIC} has {partitions_count} partitions: taken from {image.path} "
                           "(the controller's metadata log)")
    coord = replay_transaction_log(dirs, partitions_count=partitions_count)
    notices.extend(coord.notices)
    skipped.extend(coord.skipped)
    incomplete: list[Unreadable] = list(coord.incomplete)
    parts: dict[tuple[str, int], Partition] = {}
    states: dict[tuple[str, int], PartitionProducerState] = {}
    for choice in choose_replicas(dirs, notices=notices):
        part = choice.partition
        parts[part.key] = part
        try:
            state = replay_partition(part)
        except (KafkaTxError, OSError) as err:
            skipped.append(f"{part.name} ({part.path}): {err}")
            incomplete.append(unreadable(part.name, err))
            continue
        notices.extend(state.notices)
        states[part.key] = state
    return _Work(dirs=dirs, coord=coord, parts=parts, states=states, notices=notices, skipped=skipped,
                 incomplete=incomplete)


def _select(rows: list[HangingRow], *, transactional_ids: Sequence[str], topic: str | None, partition: int | None,
            producer_id: int | None, all_: bool) -> list[HangingRow]:
    if all_:
        return list(rows)
    ids = set(transactional_ids)
    chosen = []
    for r in rows:
        if ids and r.transactional_id not in ids:
            continue
        if topic is not None and r.topic != topic:
            continue
        if partition is not None and r.partition != partition:
            continue
        if producer_id is not None and r.producer_id != producer_id:
            continue
        chosen.append(r)
    # A coordinator-side repair finishes the whole transaction: show every partition it touches.
    coordinated = {r.transactional_id for r in chosen
                   if r.kind in _COORDINATED}
    return [r for r in rows if r in chosen or (r.kind in _COORDINATED
                                                and r.transactional_id in coordinated)]


def _row(h: HangingRow, action: str, **extra: object) -> AbortPlanRow:
    return AbortPlanRow(kind=h.kind, topic=h.topic, partition=h.partition, producer_id=h.producer_id,
                        producer_epoch=h.producer_epoch, transactional_id=h.transactional_id,
                        coordinator_state=h.coordinator_state, first_offset=h.first_offset, start_ms=h.start_ms,
                        duration_ms=h.duration_ms, action=action, **extra)  # type: ignore[arg-type]


def _last_value(work: _Work, meta: TransactionMetadata) -> TxnLogValue:
    """The id's latest ``__transaction_state`` value, read back from its record (version and tags kept)."""
    part = work.parts.get((TXN_STATE_TOPIC, meta.coordinator_partition))
    if part is None:
        raise MissingFile(f"{TXN_STATE_TOPIC}-{meta.coordinator_partition} is not in these log dirs")
    for segment, buf, header in part.iter_batch_buffers(meta.offset):
        if header.base_offset > meta.offset:
            break
        try:
            for rec in iter_records(buf, header):
                if rec.offset == meta.offset and rec.key is not None:
                    if decode_txn_log_key(rec.key).transactional_id == meta.transactional_id:
                        value = decode_txn_log_value(rec.value)
                        if value is not None:
                            return value
        except DecodeError as err:
            raise err.at(segment.log_path) from err
    raise MissingFile(f"{part.path}: the record at offset {meta.offset} for transactional id "
                      f"{meta.transactional_id!r} was not found")


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
                       after_analysis: Callable[[], None] | None = None) -> OfflinePlan:
    """Plan the repair of the selected hanging transactions; reads only (module docstring).

    ``force_terminate``: transactional ids of prepared two-phase-commit transactions to abort
    (``--force-terminate ID``); each is selected as if given to ``transactional_ids`` too.
    ``metadata_log_dir``: where ``__cluster_metadata-0`` is when no log dir holds it (``--metadata-log-dir``).
    ``after_analysis``: called once the log dirs have been read and replayed, before the plan is
    made from that reading (a test seam for interleavings; ``repair.offline`` holds the locks
    across both).
    ``decision``: ``commit``/``abort`` for orphans whose coordinator decision the history cannot tell.
    ``allow_partial``: plan although a partition of the selection could not be read (``incomplete``);
    a transaction touching one is refused regardless.
    """
    if force_terminate:
        transactional_ids = tuple(dict.fromkeys([*transactional_ids, *force_terminate]))
    if not (all_ or transactional_ids or topic is not None or producer_id is not None):
        raise UsageError("nothing selected: give --transactional-id ID, --topic T [--partition N] "
                         "[--producer-id P], or --all for every hanging transaction")
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")
    if ghost_strategy not in GHOST_STRATEGIES:
        raise UsageError(f"--ghost-strategy {ghost_strategy!r}: expected one of {', '.join(GHOST_STRATEGIES)}")
    if decision is not None and decision not in DECISIONS:
        raise UsageError(f"--decision {decision!r}: expected commit or abort")
    if index_interval_bytes < 0:
        raise UsageError(f"--index-interval-bytes must not be negative, got {index_interval_bytes}")
    dirs = as_log_dirs(log_dirs)
    settings_notes: list[str] = []
    # max_timeout_ms None: the broker configs' transaction.max.timeout.ms (--broker-config), as find-hanging.
    max_timeout_ms, partitions_count = hanging_settings(dirs, max_timeout_ms, partitions_count, settings_notes)
    work = _analyse(dirs, partitions_count, metadata_log_dir)
    work.notices[:0] = settings_notes
    if after_analysis is not None:
        after_analysis()
    work.index_interval_bytes = index_interval_bytes
    require_match(work.dirs, topic, partition)
    unknown = [t for t in transactional_ids if t not in work.coord.transactions and t not in force_terminate]
    # (--force-terminate of an unknown id is _check_force_terminate's usage error)
    if unknown:
        known = sorted(work.coord.transactions)
        shown = ", ".join(known[:8]) + (f" and {len(known) - 8} more" if len(known) > 8 else "")
        gone = [t for t in unknown if t in work.coord.tombstoned]
        why = f" ({', '.join(gone)} expired: tombstoned)" if gone else ""
        raise MissingFile(f"--transactional-id {', '.join(unknown)}: not known to the coordinator in these log "
                          f"dirs{why}; known ids: {shown or 'none'}")
    _cluster_transaction_version(work, metadata_log_dir)
    found = _hanging.find_hanging(work.coord, list(work.states.values()), now=now, max_timeout_ms=max_timeout_ms,
                                  notices=work.notices)
    found = apply_ghost_rule(found, work.states)
    _check_force_terminate(work.coord, found, force_terminate)
    selected = _select(found, transactional_ids=transactional_ids, topic=topic, partition=partition,
                       producer_id=producer_id, all_=all_)
    in_scope = [u for u in work.incomplete if topic is None or u.partition.rpartition("-")[0] == topic
                or u.partition.startswith(TXN_STATE_TOPIC)]
    touches = _touched_names(work, selected)
    for tid in transactional_ids:  # an asked-for id whose own partition is unreadable may hang right there
        owned = work.coord.transactions.get(tid)
        if owned is not None:
            touches.update(f"{t}-{p}" for t, p in owned.partitions)
            touches.add(f"{TXN_STATE_TOPIC}-{owned.coordinator_partition}")
    blocked = [u for u in work.incomplete if u.partition in touches]
    if blocked:
        names = ", ".join(sorted({u.partition for u in blocked}))
        bad = {u.partition for u in blocked}
        rows = [_row(h, f"{REFUSED}partition(s) {names} of the selection could not be read; restore them "
                        "first (see verify)" if _touched_names(work, [h]) & bad or h.transactional_id in
                        transactional_ids else "not planned: the selection touches an unreadable partition")
                for h in selected]
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           notices=work.notices, skipped=work.skipped, incomplete=blocked + [
                               u for u in in_scope if u not in blocked], blocked=True)
    if in_scope and not allow_partial:
        # A partition of the selection could not be read: it may hold a hanging transaction too. Nothing
        # is planned (so ``execute_abort_hanging`` applies nothing) unless the caller accepts a partial plan.
        rows = [_row(h, "not planned: a partition of the selection could not be read") for h in selected]
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           notices=work.notices, skipped=work.skipped, incomplete=in_scope)
    try:
        rows, ops_phase1, ops_phase3, moves = _plan_rows(work, selected, now, ghost_strategy, set(force_terminate),
                                                         decision)
    except KafkaTxError as err:
        # A file we must append to cannot be (torn tail, missing partition): refuse everything.
        rows = [_row(h, f"{REFUSED}{err}") for h in selected]
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           notices=work.notices, skipped=work.skipped, incomplete=in_scope)
    if any(r.refused for r in rows):
        return OfflinePlan(rows=rows, plan=RepairPlan(log_dirs=tuple(d.path for d in work.dirs), operations=()),
                           notices=work.notices, skipped=work.skipped, incomplete=in_scope)
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
                       notices=work.notices, skipped=work.skipped, touched=touched, incomplete=in_scope)


def _touched_names(work: _Work, rows: Sequence[HangingRow]) -> set[str]:
    """The partitions repairing ``rows`` reads or writes: a coordinator-side repair every partition of
    the transaction and its __transaction_state partition; a partition-side marker its own partition."""
    names: set[str] = set()
    for h in rows:
        names.add(f"{h.topic}-{h.partition}")
        meta = work.coord.transactions.get(h.transactional_id) if h.transactional_id is not None else None
        if meta is not None and h.kind in COORDINATOR_KINDS:
            names.update(f"{t}-{p}" for t, p in meta.partitions)
            names.add(f"{TXN_STATE_TOPIC}-{meta.coordinator_partition}")
    return names


def _cluster_transaction_version(work: _Work, metadata_log_dir: Path | None = None) -> None:
    """The finalized ``transaction.version`` of a ``__cluster_metadata-0`` in the log dirs (or in
    ``metadata_log_dir``), if any."""
    try:
        image = cluster_image(work.dirs, metadata_log_dir)
    except KafkaTxError as err:
        work.notices.append(f"__cluster_metadata-0 could not be read ({err}); the transaction version of each "
                            "transaction is taken from its own last record")
        return
    if image is not None:
        work.transaction_version = image.transaction_version
        work.transaction_version_source = ("the cluster's finalized transaction.version in "
                                           f"{image.source('transaction.version')}")
    elif work.coord.transactions:
        work.notices.append(f"no __cluster_metadata-0 in these log dirs: {TXN_STATE_TOPIC} is assumed to have "
                            f"{work.coord.partitions_count} partitions (from its folders or the flag) and each "
                            "transaction's version is taken from its own last record (--metadata-log-dir "
                            "names a metadata log elsewhere)")


def _transaction_version(work: _Work, tid: str, last: TxnLogValue) -> tuple[int, str]:
    """The transaction version a coordinator-side abort uses, and where it came from.

    Kafka uses the cluster's finalized ``transaction.version`` (``TransactionStateManager.
    transactionVersionLevel``); without a metadata log the transaction's own last record's
    ``ClientTransactionVersion`` is the best evidence there is."""
    if work.transaction_version is not None:
        return work.transaction_version, work.transaction_version_source
    return last.client_transaction_version, (f"from {tid}'s last __transaction_state record "
                                             f"(ClientTransactionVersion={last.client_transaction_version}); "
                                             "no __cluster_metadata-0 says the cluster's")


def _coordinator_epoch(work: _Work, meta: TransactionMetadata) -> int:
    """The coordinator epoch = leader epoch of the id's ``__transaction_state`` partition."""
    part = work.parts.get((TXN_STATE_TOPIC, meta.coordinator_partition))
    if part is None:
        return 0
    return work.appender(part.key).leader_epoch


def _check_force_terminate(coord: CoordinatorState, found: list[HangingRow], ids: Sequence[str]) -> None:
    """``--force-terminate ID`` must name a prepared 2PC transaction that find-hanging lists."""
    listed = {r.transactional_id for r in found if r.kind == HangingKind.PREPARED_2PC}
    for tid in ids:
        if tid in listed:
            continue
        meta = coord.transactions.get(tid)
        if meta is None:
            raise UsageError(f"--force-terminate {tid}: no such transactional id in these log dirs")
        if not (meta.state in TIMEOUT_STATES and is_distributed_two_phase_commit(meta.timeout_ms)):
            raise UsageError(f"--force-terminate {tid}: not a prepared two-phase-commit transaction (state "
                             f"{meta.state.kafka_name}, timeout {meta.timeout_ms} ms); select it with "
                             "--transactional-id")
        raise UsageError(f"--force-terminate {tid}: its 2PC transaction holds no partition's LSO here for "
                         "longer than --max-transaction-timeout; find-hanging does not list it")


def _plan_rows(work: _Work, selected: list[HangingRow], now: int, ghost_strategy: str,
               force_terminate: set[str] | None = None, decision: str | None = None,
               ) -> tuple[list[AbortPlanRow], list[Operation], list[Operation], list[Operation]]:
    rows: list[AbortPlanRow] = []
    coordinated: dict[str, list[HangingRow]] = {}
    marker_rows: list[HangingRow] = []
    forced = force_terminate or set()
    for h in selected:
        if h.kind == HangingKind.PREPARED_2PC and h.transactional_id not in forced:
            rows.append(_row(h, UNTOUCHED_2PC))  # an external transaction manager owns its outcome
            continue
        if h.kind in _COORDINATED and h.transactional_id is not None:
            coordinated.setdefault(h.transactional_id, []).append(h)
        else:
            marker_rows.append(h)

    # Phase 1: the coordinator's PrepareAbort for timed-out transactions.
    plans: list[tuple[str, TransactionMetadata, TxnLogValue, list[HangingRow], ControlType, int]] = []
    for tid, hrows in sorted(coordinated.items()):
        meta = work.coord.transactions[tid]
        missing = sorted(f"{t}-{p}" for t, p in meta.partitions if (t, p) not in work.parts)
        if (TXN_STATE_TOPIC, meta.coordinator_partition) not in work.parts:
            missing.insert(0, f"{TXN_STATE_TOPIC}-{meta.coordinator_partition}")
        if missing:
            rows += [_row(h, f"{REFUSED}partition(s) {', '.join(missing)} of this transaction are not in these "
                             "log dirs; give every log dir that holds them") for h in hrows]
            continue
        last = _last_value(work, meta)
        if meta.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
            if meta.producer_epoch >= SHORT_MAX:
                rows += [_row(h, f"{REFUSED}producer epoch {meta.producer_epoch} is Short.MaxValue: Kafka's "
                                 "prepareFenceProducerEpoch cannot bump it (it would overflow)") for h in hrows]
                continue
            tv, source = _transaction_version(work, tid, last)
            epochs = coordinator_abort_epochs(meta.producer_epoch, tv)
            if epochs.needs_new_producer_id:
                rows += [_row(h, f"{REFUSED}producer epoch {epochs.fence} is exhausted: with transaction version "
                                 f"{tv} the coordinator moves the id to a new producer id (nextProducerId) "
                                 "from the controller's blocks, which an offline repair cannot allocate")
                         for h in hrows]
                continue
            work.notices.append(f"{tid}: aborted as transaction version {tv} ({source}): PrepareAbort, markers and "
                                f"CompleteAbort at producer epoch {epochs.final}")
            epoch = epochs.final
            # A flexible (v1) value carries ClientTransactionVersion; TV2 needs it (TransactionLog.valueToBytes).
            version = max(last.version, 1) if supports_epoch_bump(tv) else last.version
            prepare = replace(last, version=version, producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                              last_update_timestamp=now, partitions=_partition_list(meta, last),
                              start_timestamp=meta.start_timestamp, client_transaction_version=tv)
            _txn_log_append(work, meta, prepare, now)
            plans.append((tid, meta, prepare, hrows, ControlType.ABORT, epoch))
        else:
            control = ControlType.COMMIT if meta.state is TxnState.PREPARE_COMMIT else ControlType.ABORT
            plans.append((tid, meta, last, hrows, control, meta.producer_epoch))
    ops_phase1: list[Operation] = []
    for _tp, app in sorted(work.appenders.items()):
        ops_phase1 += app.flush()

    # Phase 2: markers. Timed-out: every partition of the transaction; decided: the ones still open.
    for _tid, meta, value, hrows, control, epoch in plans:
        cepoch = _coordinator_epoch(work, meta)
        if meta.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
            targets = sorted(meta.partitions)
            action = ACTION_FORCE_TERMINATE if is_distributed_two_phase_commit(meta.timeout_ms) \
                else ACTION_ABORT_TIMED_OUT
        else:
            targets = sorted({(h.topic, h.partition) for h in hrows})
            action = ACTION_COMPLETE_COMMIT if control == ControlType.COMMIT else ACTION_COMPLETE_ABORT
        bad = [f"{t}-{p}" for t, p in targets
               if (ps := work.producer((t, p), meta.producer_id)) is not None and ps.producer_epoch > epoch]
        if bad:
            rows += [_row(h, f"{REFUSED}producer {meta.producer_id} already has a higher epoch than {epoch} in "
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
            for _off, path in part.snapshots:
                if path not in moved:
                    moved.add(path)
                    moves.append(MoveToBackup(path=path, expected_sha256=hash_file(path)))
            if part.log_dir is not None:
                flag = part.log_dir.path / CLEAN_SHUTDOWN
                if flag.is_file() and flag not in moved:
                    # Without it the broker rebuilds producer state from the log for partitions with no
                    # snapshot; with it (and no snapshot) LogLoader skips the rebuild and forgets every
                    # open transaction of the partition, legitimate ones too.
                    moved.add(flag)
                    moves.append(MoveToBackup(path=flag, expected_sha256=hash_file(flag)))
            rows.append(_row(h, ACTION_DROP_SNAPSHOTS))
            continue
        owner = h.transactional_id or work.coord.expired_transactional_id_for(h.producer_id)
        decided = coordinator_decision(work.coord.history.get(owner, ()) if owner is not None else (),
                                       transactional_id=owner, producer_id=h.producer_id,
                                       producer_epoch=h.producer_epoch, partition=f"{h.topic}-{h.partition}",
                                       start_ms=h.start_ms)
        why = decided.why
        control_name = decided.control
        if control_name is None and decision is None and h.kind == KIND_GHOST:
            # Retention deleted the data: no reader can see it either way; the marker only frees the LSO.
            control_name = "ABORT"
            why = f"{why}; its data is below the log start (deleted), so the marker only releases the LSO"
        if control_name is None:
            if decision is None:
                rows.append(_row(h, f"{REFUSED}{why}; give --decision commit or --decision abort for it", why=why))
                continue
            control_name = decision.upper()
            why = f"{why}; --decision {decision} given"
        control = ControlType.COMMIT if control_name == COMMIT else ControlType.ABORT
        ps = work.producer(tp, h.producer_id)
        epoch = ps.producer_epoch if ps is not None else h.producer_epoch
        ce = max(ps.coordinator_epoch if ps is not None else 0, 0)
        mo = work.marker(tp, control=control, producer_id=h.producer_id, producer_epoch=epoch,
                         coordinator_epoch=ce, now=now)
        rows.append(_row(h, ACTION_COMMIT_MARKER if control == ControlType.COMMIT else ACTION_ABORT_MARKER,
                         coordinator_epoch=ce, control_type=control.name, marker_offset=mo, marker_epoch=epoch,
                         why=why))
    ops_phase3: list[Operation] = []
    rows.sort(key=lambda r: (r.topic or "", r.partition or 0, r.first_offset or 0, r.producer_id or 0))
    return rows, ops_phase1, ops_phase3, moves


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
    """New log ends into replication-offset / recovery-point checkpoints where they held the old one."""
    ops: list[Operation] = []
    by_dir: dict[Path, list[tuple[tuple[str, int], _Appender]]] = {}
    for tp, app in work.appenders.items():
        if app.next_offset == app.old_log_end or app.part.log_dir is None:
            continue
        by_dir.setdefault(app.part.log_dir.path, []).append((tp, app))
    for d in work.dirs:
        items = by_dir.get(d.path)
        if not items:
            continue
        for name, current in ((REPLICATION_CHECKPOINT, d.high_watermarks), (RECOVERY_CHECKPOINT, d.recovery_points)):
            path = d.path / name
            if not path.is_file():
                continue
            updated = dict(current)
            for tp, app in items:
                old = current.get(tp)
                if old == app.old_log_end:
                    updated[tp] = app.next_offset
                elif old is not None and name == REPLICATION_CHECKPOINT:
                    work.notices.append(f"{app.part.name}: high watermark {old} is below the old log end "
                                        f"{app.old_log_end} (unreplicated tail); left as is")
            if updated != current:
                ops.append(ReplaceFile(path=path, expected_sha256=hash_file(path),
                                       data=encode_offset_checkpoint(updated).encode()))
    return ops


# ----------------------------------------------------------------------------- post-check

# A condition the post-check finds: (check, file, byte position) and the line that says it. The same
# key before and after the repair is the same condition: the repair only appends to the files it
# writes (and replaces checkpoints), so a byte position keeps naming the same bytes.
Condition = tuple[tuple[str, str, int | None], str]


def _conditions(touched: Sequence[tuple[Path, str, int]]) -> list[Condition]:
    """Every error the post-check looks for in the touched partitions: a batch of the active segment
    that does not decode or has a bad CRC, and ``verify``'s error rows."""
    from kafkatx.txn.verify import verify_partition

    found: list[Condition] = []
    dirs = {p: LogDir(p) for p in {t[0] for t in touched}}
    for d, topic, num in touched:
        part = dirs[d].partition(topic, num)
        if part is None:
            found.append((("missing-partition", str(d), None), f"{d}: partition {topic}-{num} disappeared"))
            continue
        seg = part.segments[-1]
        try:
            with seg.open() as buf:
                for h in seg.iter_batches(buf):
                    if not crc_valid(buf, h):
                        found.append((("crc", str(seg.log_path), h.position),
                                      f"{seg.log_path}: byte {h.position}: batch at offset {h.base_offset} has a "
                                      f"bad CRC"))
        except DecodeError as err:
            found.append((("log-decode", str(seg.log_path), err.position), str(err.at(seg.log_path))))
        ld = dirs[d]
        for p in verify_partition(part, high_watermark=ld.high_watermarks.get(part.key),
                                  recovery_point=ld.recovery_points.get(part.key),
                                  log_start=ld.log_start_offsets.get(part.key)):
            if p.severity == "error":
                found.append(((p.check, p.file or str(part.path), p.position),
                              f"{p.file or part.path}: {p.check}: {p.message}"))
    return found


class PostCheck:
    """What ``apply_plan`` runs after the repair: it judges only what the repair changed.

    Built before the repair (it records the conditions of the touched partitions then); called
    after it, it returns the conditions that are new (the repair's own effects that do not check
    out: a failure) and keeps in :attr:`pre_existing` those that were there before and are still
    there, untouched (reported once, never a failure). A condition the repair removed is not
    mentioned. The CLI exits 0 when the call returns nothing.
    """

    def __init__(self, plan: OfflinePlan) -> None:
        self.touched = plan.touched
        self.before = {key for key, _line in _conditions(self.touched)}
        self.pre_existing: list[str] = []

    def __call__(self) -> list[str]:
        after = _conditions(self.touched)
        self.pre_existing = list(dict.fromkeys(line for key, line in after if key in self.before))
        return list(dict.fromkeys(line for key, line in after if key not in self.before))


def post_check_for(plan: OfflinePlan) -> PostCheck:
    """The post-check of ``plan`` (:class:`PostCheck`); make it before applying the plan: it records
    the touched partitions' conditions as they are before the repair."""
    return PostCheck(plan)


__all__ = [
    "ACTION_ABORT_MARKER", "ACTION_ABORT_TIMED_OUT", "ACTION_COMMIT_MARKER", "ACTION_COMPLETE_ABORT",
    "ACTION_COMPLETE_COMMIT", "ACTION_DROP_SNAPSHOTS", "ACTION_FORCE_TERMINATE", "DECISIONS",
    "DEFAULT_INDEX_INTERVAL_BYTES", "GHOST_STRATEGIES", "SHORT_MAX", "AbortPlanRow",
    "OfflinePlan", "PostCheck", "plan_abort_hanging", "post_check_for",
]
