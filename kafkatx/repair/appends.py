"""What an offline repair plan appends, and where: the plan being made from one analysis (:class:`PlanWork`),
one :class:`Appender` per partition written to (control batches and ``__transaction_state`` records after
the bytes the analysis read, with the offset/time/transaction index entries Kafka's recovery would add),
and the checkpoints whose log end moves with them. Nothing here reads a file: every expectation (size,
sha256) chains from what the analysis read (:mod:`kafkatx.repair.plan` decides what is appended)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from msgspec import Struct, field

from kafkatx.coordinator.state import TransactionMetadata
from kafkatx.coordinator.state_manager import CoordinatorState
from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
from kafkatx.errors import KafkaTxError, MissingFile
from kafkatx.format.checkpoint import encode_offset_checkpoint
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
from kafkatx.format.txn_log import TxnLogValue, encode_txn_log_key, encode_txn_log_value
from kafkatx.repair.analysis import (
    TP,
    FileRead,
    RepairAnalysis,
    SegmentTail,
)
from kafkatx.repair.ops import AppendBytes, CreateFile, Operation, ReplaceFile
from kafkatx.rows import (
    Report,
    Unreadable,
)
from kafkatx.storage.log_dir import RECOVERY_CHECKPOINT, REPLICATION_CHECKPOINT, LogDir
from kafkatx.storage.lso import txn_index_last_stable_offset
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import PartitionProducerState, ProducerState
from kafkatx.storage.segment import Segment

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes default


class AppendedFile:
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


class Appender:
    """Appends batches to the active segment of one partition, with index/timeindex/txnindex upkeep,
    after the bytes the analysis read (:class:`~kafkatx.repair.analysis.SegmentTail`)."""

    def __init__(self, part: Partition, tail: SegmentTail, *, index_interval_bytes: int) -> None:
        self.part = part
        self.segment: Segment = tail.segment
        self.old_log_end = tail.last_offset + 1 if tail.last_offset is not None else tail.segment.base_offset
        self.next_offset = self.old_log_end
        epochs = tail.leader_epochs
        self.leader_epoch = max([tail.last_epoch, 0] + ([epochs[-1][0]] if epochs else []))
        self.log = AppendedFile(tail.log)
        self.log_position = self.log.size
        # offset index: position of the last entry, only when the file is exactly its entries
        self.index: AppendedFile | None = AppendedFile(tail.index) if tail.index is not None else None
        self.last_index_position = tail.last_index_position
        self.timeindex: AppendedFile | None = AppendedFile(tail.timeindex) if tail.timeindex is not None else None
        self.last_time = tail.last_time
        self.txnindex = AppendedFile(tail.txnindex)
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


class PlanWork(Struct):
    """The plan being made from one analysis: the appenders it queues bytes on."""

    a: RepairAnalysis
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    transaction_timeout_ms: int = 60_000
    appenders: dict[TP, Appender] = field(default_factory=dict)
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

    def appender(self, tp: TP) -> Appender:
        if tp not in self.appenders:
            tail = self.a.tails.get(tp)
            if tail is None:  # the analysis reads every partition a selected transaction can write to
                raise MissingFile(f"{self.parts[tp].path}: not read by the analysis; nothing is appended to it")
            if isinstance(tail, KafkaTxError):
                raise tail
            self.report.note(*tail.notices)
            self.appenders[tp] = Appender(self.parts[tp], tail, index_interval_bytes=self.index_interval_bytes)
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


def txn_log_append(work: PlanWork, meta: TransactionMetadata, value: TxnLogValue, now: int) -> int:
    """Queue one ``__transaction_state`` record (the id's new value) on its coordinator partition; its offset."""
    tp = (TXN_STATE_TOPIC, meta.coordinator_partition)
    app = work.appender(tp)
    offset = app.next_offset
    rec = Record(offset=offset, timestamp=now, key=encode_txn_log_key(meta.transactional_id),
                 value=encode_txn_log_value(value))
    # TransactionStateManager.appendTransactionToLog: one record, no producer id, not transactional.
    batch = build_batch([rec], base_offset=offset, partition_leader_epoch=app.leader_epoch)
    app.append(batch, last_offset=offset, timestamp=now)
    return offset


def checkpoint_ops(work: PlanWork) -> list[Operation]:
    """New log ends into replication-offset / recovery-point checkpoints where they held the old one
    (the checkpoints as the analysis read them)."""
    ops: list[Operation] = []
    by_dir: dict[Path, list[tuple[TP, Appender]]] = {}
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
            read = as_read(reads[name])
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


def as_read(got: _T | KafkaTxError) -> _T:
    """What the analysis read, or the error it met reading it (raised where the plan needs the file)."""
    if isinstance(got, KafkaTxError):
        raise got
    return got
