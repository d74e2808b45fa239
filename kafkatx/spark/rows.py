"""The work ``kafkatx scan`` runs on Spark executors, as plain Python (no pyspark import).

Everything here is a function of picklable values so Spark can ship it, and so the
tests can run it without a SparkSession:

* :func:`decode_segment` turns one :class:`SegmentTask` (one ``.log`` file, or a byte
  range of one) into rows: one ``batches/`` row per batch (kafkatx's own header decoder,
  CRC check, control record), a ``batches/`` *error row* naming file and byte position
  when bytes stop forming batches, and for ``__transaction_state`` segments one
  :data:`TXN_RECORD` row per key/value record (``format/txn_log.py``).
* :class:`PartitionFold` folds one partition's batch rows, in offset order, with
  ``kafkatx.txn.replay.ProducerReplay`` (the partition-side replay the offline commands
  use) into a :class:`~kafkatx.txn.replay.PartitionProducerState`, then the ``lag`` row
  (``txn/lso.py``), the hanging rows (``txn/hanging.find_hanging``) and the transaction
  spans.
* :func:`fold_txn_records` / :func:`assemble_coordinator` replay ``__transaction_state``
  per transactional id with ``txn/state.apply_record`` and build the same
  :class:`~kafkatx.txn.replay.CoordinatorState` ``replay_transaction_log`` builds.

Parity with ``kafkatx lag`` / ``find-hanging`` comes from calling the same rule code;
the adapters below only re-drive it from rows instead of files. They mirror
``txn/replay.py``'s ``_replay`` and ``_replay_txn_partition`` loops step by step (what is
skipped, what makes a partition unreadable); the hooks that would remove that mirroring
are named in docs/scan.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    BatchHeader,
    crc_valid,
    iter_batches,
    iter_records,
    read_control_record,
)
from kafkatx.format.txn_log import TxnLogValue, decode_txn_log_key, decode_txn_log_value
from kafkatx.log.partition import Partition
from kafkatx.log.segment import map_file
from kafkatx.txn import replay as _replay
from kafkatx.txn.hanging import find_hanging
from kafkatx.txn.lso import clamp_high_watermark, high_watermark_or_log_end, last_stable_offset
from kafkatx.txn.model import HangingRow, HistoryEntry, LagRow
from kafkatx.txn.replay import (
    TXN_STATE_TOPIC,
    CompletedTxn,
    CoordinatorState,
    PartitionProducerState,
    ProducerReplay,
    log_end_offset,
    replay_partition,
)
from kafkatx.txn.state import Finding, TransactionMetadata, apply_record

# ----------------------------------------------------------------------------- row layouts
# Tuples (not dicts) travel between Python workers and the JVM: the column order is the
# schema order of kafkatx/spark/schema.py and docs/scan.md.

BATCH_COLUMNS = (
    "log_dir", "topic", "partition", "segment", "segment_base_offset", "position",
    "base_offset", "last_offset", "count", "size", "magic", "attributes", "compression", "timestamp_type",
    "crc", "crc_valid", "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
    "last_sequence", "is_transactional", "is_control", "control_type", "coordinator_epoch",
    "base_timestamp_ms", "max_timestamp_ms", "error",
)
_B = {name: i for i, name in enumerate(BATCH_COLUMNS)}

TRANSACTION_COLUMNS = (
    "topic", "partition", "producer_id", "producer_epoch", "transactional_id", "first_offset", "last_offset",
    "marker_offset", "outcome", "coordinator_epoch", "start_timestamp_ms", "end_timestamp_ms", "duration_ms",
)

# Kinds of the tagged tuples decode_segment yields: (kind, payload).
BATCH = 0  # payload: a BATCH_COLUMNS tuple
TXN_RECORD = 1  # payload: TxnRecordRow
TXN_SKIP = 2  # payload: (partition_path, message): the __transaction_state partition cannot be replayed


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentTask:
    """One unit of work: a segment file (or the byte range ``[start, end)`` of one)."""

    log_dir: str
    topic: str
    partition: int
    partition_path: str
    segment_path: str
    segment_base_offset: int
    size: int
    chosen: bool  # this copy is the replica the replay uses (choose_replicas)
    start: int = 0
    end: int | None = None

    @property
    def is_txn_state(self) -> bool:
        return self.topic == TXN_STATE_TOPIC


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnRecordRow:
    """One ``__transaction_state`` record, decoded on an executor."""

    partition_path: str
    coordinator_partition: int  # the __transaction_state partition number
    offset: int
    transactional_id: str
    value: TxnLogValue | None  # None: tombstone
    file: str
    position: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    """What the driver knows of one replayed partition (the chosen replica)."""

    log_dir: str
    topic: str
    partition: int
    partition_path: str
    log_start_offset: int
    high_watermark: int | None  # replication-offset-checkpoint of its log dir; None when absent


# ----------------------------------------------------------------------------- decode

def control_type_id(name: str | None) -> int | None:
    """Inverse of ``ControlRecord.type_name``: the enum name, or the number for unknown types."""
    if name is None:
        return None
    member = ControlType.__members__.get(name)
    return int(member) if member is not None else int(name)


def _batch_row(task: SegmentTask, seg_name: str, h: BatchHeader, valid: bool, control: str | None,
               coord_epoch: int | None, error: str | None) -> tuple:
    compression = h.compression
    return (
        task.log_dir, task.topic, task.partition, seg_name, task.segment_base_offset, h.position,
        h.base_offset, h.last_offset, h.records_count, h.size, h.magic, h.attributes,
        compression.name.lower() if hasattr(compression, "name") else str(compression),
        h.timestamp_type.name, h.crc, valid, h.partition_leader_epoch, h.producer_id, h.producer_epoch,
        h.base_sequence, h.last_sequence, h.is_transactional, h.is_control, control, coord_epoch,
        h.base_timestamp, h.max_timestamp, error,
    )


def error_row(task: SegmentTask, err: KafkaTxError, position: int | None) -> tuple:
    """A ``batches/`` row for bytes that do not decode: only the place and the message are set.

    ``position`` is where the bytes that do not form a batch begin (cli.md's "trailing bytes
    from P"); the message names the exact byte the decoder stopped at.
    """
    row: list = [None] * len(BATCH_COLUMNS)
    row[_B["log_dir"]] = task.log_dir
    row[_B["topic"]] = task.topic
    row[_B["partition"]] = task.partition
    row[_B["segment"]] = Path(task.segment_path).name
    row[_B["segment_base_offset"]] = task.segment_base_offset
    row[_B["position"]] = position
    row[_B["error"]] = str(err)
    return tuple(row)


def decode_segment(task: SegmentTask) -> Iterator[tuple[int, object]]:
    """Decode one segment on an executor: batch rows, an error row, and txn-log records.

    The file is mapped (never read whole). A decode error ends the segment with one error
    row naming the file and byte position; it never fails the Spark task.
    """
    seg_name = Path(task.segment_path).name
    txn_state = task.is_txn_state and task.chosen
    try:
        with map_file(Path(task.segment_path)) as buf:
            it = iter_batches(buf, task.start, task.end)
            next_pos = task.start  # where the next batch should start: the error row's position
            while True:
                try:
                    h = next(it)
                except StopIteration:
                    break
                except DecodeError as err:
                    located = err.at(task.segment_path)
                    yield BATCH, error_row(task, located, next_pos)
                    if txn_state:
                        # _replay_txn_partition raises here: the coordinator skips the partition.
                        yield TXN_SKIP, (task.partition_path, str(located))
                    break
                next_pos = h.position + h.size
                valid = crc_valid(buf, h)
                control = coord_epoch = error = None
                if h.is_control and h.records_count > 0:
                    try:
                        rec = read_control_record(buf, h)
                        control, coord_epoch = rec.type_name, rec.coordinator_epoch
                    except DecodeError as err:
                        error = str(err.at(task.segment_path))
                yield BATCH, _batch_row(task, seg_name, h, valid, control, coord_epoch, error)
                if txn_state and valid and not h.is_control and h.records_count != 0:
                    yield from _txn_records(task, buf, h)
    except KafkaTxError as err:  # MissingFile: the segment vanished or cannot be mapped
        yield BATCH, error_row(task, err, None)
        if txn_state:
            yield TXN_SKIP, (task.partition_path, str(err))


def _txn_records(task: SegmentTask, buf, h: BatchHeader) -> Iterator[tuple[int, object]]:
    """The records of one ``__transaction_state`` batch, as ``_replay_txn_partition`` reads them."""
    try:
        records = list(iter_records(buf, h))
    except DecodeError as err:
        yield TXN_SKIP, (task.partition_path, str(err.at(task.segment_path)))
        return
    for record in records:
        if record.key is None:
            continue
        try:
            key = decode_txn_log_key(record.key)
            value = decode_txn_log_value(record.value)
        except DecodeError:
            continue  # a finding offline (txn-log-record); the record does not count
        yield TXN_RECORD, TxnRecordRow(
            partition_path=task.partition_path, coordinator_partition=task.partition, offset=record.offset,
            transactional_id=key.transactional_id, value=value, file=task.segment_path, position=h.position)


def header_from_row(row: Sequence) -> BatchHeader:
    """The :class:`BatchHeader` a ``batches/`` row was made from (the replay takes headers)."""
    base = row[_B["base_offset"]]
    return BatchHeader(
        position=row[_B["position"]], base_offset=base, batch_length=row[_B["size"]] - 12,
        partition_leader_epoch=row[_B["partition_leader_epoch"]], magic=row[_B["magic"]], crc=row[_B["crc"]],
        attributes=row[_B["attributes"]], last_offset_delta=row[_B["last_offset"]] - base,
        base_timestamp=row[_B["base_timestamp_ms"]], max_timestamp=row[_B["max_timestamp_ms"]],
        producer_id=row[_B["producer_id"]], producer_epoch=row[_B["producer_epoch"]],
        base_sequence=row[_B["base_sequence"]], records_count=row[_B["count"]])


def fold_key(row: Sequence) -> tuple[str, int, int, int]:
    """Shuffle/sort key of a batch row: partition first, then file order (= offset order)."""
    pos = row[_B["position"]]
    return (row[_B["topic"]], row[_B["partition"]], row[_B["segment_base_offset"]], -1 if pos is None else pos)


# ----------------------------------------------------------------------------- partition side

class _LogDirStub:
    """What :class:`Partition` asks its log dir for: the log start offset checkpoint entry."""

    __slots__ = ("path", "log_start_offsets")

    def __init__(self, path: str, key: tuple[str, int], log_start_offset: int) -> None:
        self.path = Path(path)
        self.log_start_offsets = {key: log_start_offset}


class _Replay:
    """One pass of ``txn.replay._replay`` driven by rows instead of ``Partition.iter_batch_buffers``."""

    def __init__(self, partition: Partition, producers: dict, start: int, keep_completed: bool) -> None:
        self.findings: list[Finding] = []
        self.ctx = ProducerReplay(partition, producers, self.findings, keep_completed, None)
        self.producers = producers
        self.path = partition.path
        self.start = start
        segs = partition.segments
        self.first_segment_base = segs[partition.segment_for(start)].base_offset if segs else 0
        self.last_offset: int | None = None
        self.batches = 0
        self.error: str | None = None

    def feed(self, row: Sequence) -> None:
        if self.error is not None or row[_B["segment_base_offset"]] < self.first_segment_base:
            return
        if row[_B["base_offset"]] is None:  # an error row: iter_batch_buffers would raise here
            self.error = row[_B["error"]]
            return
        if row[_B["last_offset"]] < self.start:
            return
        h = header_from_row(row)
        self.last_offset = h.last_offset
        self.batches += 1
        if h.producer_id < 0:
            return
        if h.is_control:
            seg = self.path / row[_B["segment"]]  # the .log, for finding messages
            if not row[_B["crc_valid"]]:
                self.error = f"{seg}: byte {h.position}: control batch at offset {h.base_offset} has a bad CRC"
                return
            if h.records_count == 0:
                return
            if row[_B["error"]] is not None:
                self.error = row[_B["error"]]
                return
            self.ctx.marker(seg, h, control_type_id(row[_B["control_type"]]), row[_B["coordinator_epoch"]])
        else:
            self.ctx.data(h)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    lag: LagRow | None  # None when the partition could not be replayed (skipped)
    hanging: list[HangingRow]
    transactions: list[tuple]  # TRANSACTION_COLUMNS tuples
    notices: list[str] = field(default_factory=list)
    skipped: str | None = None
    hw_stand_in: bool = False


class PartitionFold:
    """Fold one partition's batch rows (offset order) into its lag row, hanging rows and spans.

    Two replays run over the one stream: the state replay starts at the newest usable
    ``.snapshot`` exactly like ``replay_partition`` (so ``lag``/``find-hanging`` parity
    holds), and a span replay starts at the log start without a snapshot (like ``verify``)
    so ``transactions/`` lists every COMMIT/ABORT span still on disk.
    """

    def __init__(self, info: PartitionInfo, coordinator: CoordinatorState, *, now: int, max_timeout_ms: int) -> None:
        self.info = info
        self.coordinator = coordinator
        self.now = now
        self.max_timeout_ms = max_timeout_ms
        key = (info.topic, info.partition)
        self.partition = Partition(Path(info.partition_path), topic=info.topic, partition=info.partition,
                                   log_dir=_LogDirStub(info.log_dir, key, info.log_start_offset))  # type: ignore[arg-type]
        self.notices: list[str] = []
        snap = None
        if self.partition.snapshots:
            snap = _replay._load_snapshot(self.partition, None, self.notices)  # hook: see docs/scan.md
        self.snapshot = snap
        start = self.partition.log_start_offset
        snapshot_offset = None
        producers: dict = {}
        if snap is not None:
            snapshot_offset, producers = snap
            start = max(start, snapshot_offset)
        self.snapshot_offset = snapshot_offset
        self.state_replay = _Replay(self.partition, producers, start, keep_completed=False)
        self.span_replay = _Replay(self.partition, {}, self.partition.log_start_offset, keep_completed=True)

    def feed(self, row: Sequence) -> None:
        self.state_replay.feed(row)
        self.span_replay.feed(row)

    def _state(self) -> PartitionProducerState:
        r = self.state_replay
        part = self.partition
        log_end = r.last_offset + 1 if r.last_offset is not None else log_end_offset(part)
        if self.snapshot_offset is not None and self.snapshot_offset > log_end:
            # LogLoader drops snapshots past the log end and loads an older one: rare, and it needs
            # a second pass, so let the file-based replay do it.
            return replay_partition(part)
        if r.error is not None:
            raise KafkaTxError(r.error)
        if self.snapshot_offset is not None:
            _replay._fill_start_timestamps(part, r.producers, self.snapshot_offset)  # hook: see docs/scan.md
        notices = list(self.notices)
        if part.snapshots and self.snapshot is None:
            notices.append(f"{part.name}: no usable producer snapshot; replayed from the log start "
                           f"{part.log_start_offset}")
        return PartitionProducerState(
            topic=part.topic, partition=part.partition, path=str(part.path),
            log_start_offset=part.log_start_offset, log_end_offset=log_end, replay_start_offset=r.start,
            snapshot_offset=self.snapshot_offset, batches=r.batches,
            producers={pid: e.freeze() for pid, e in sorted(r.producers.items())},
            completed=[], findings=r.findings, notices=notices)

    def finish(self) -> PartitionResult:
        info = self.info
        try:
            state = self._state()
        except KafkaTxError as err:
            return PartitionResult(lag=None, hanging=[], transactions=self._spans(None),
                                   skipped=f"{self.partition.name} ({info.partition_path}): {err}")
        # Mirrors txn/offline.lag (hook wanted: a shared lag_row(); see docs/scan.md).
        notices = state.notices + [f"{f.severity}: {f.message}" for f in state.findings]
        hw, stand_in = high_watermark_or_log_end(info.high_watermark, state.log_end_offset)
        clamped = clamp_high_watermark(hw, state.log_start_offset, state.log_end_offset)
        if clamped != hw:
            notices.append(f"{state.name}: checkpointed high watermark {hw} is outside the log "
                           f"[{state.log_start_offset}, {state.log_end_offset}]; using {clamped} as the broker would")
            hw = clamped
        opened = state.open_transactions
        lso = last_stable_offset((t.first_offset for t in opened), hw, state.log_start_offset)
        lag = LagRow(
            topic=info.topic, partition=info.partition, log_start_offset=state.log_start_offset, lso=lso,
            high_watermark=hw, log_end_offset=state.log_end_offset, lag=hw - lso, open_transactions=len(opened),
            oldest_open_producer_id=opened[0].producer_id if opened else None,
            oldest_open_first_offset=opened[0].first_offset if opened else None)
        hanging = find_hanging(self.coordinator, [state], now=self.now, max_timeout_ms=self.max_timeout_ms)
        return PartitionResult(lag=lag, hanging=hanging, transactions=self._spans(state), notices=notices,
                               hw_stand_in=stand_in)

    def _spans(self, state: PartitionProducerState | None) -> list[tuple]:
        tid_for = self.coordinator.transactional_id_for
        rows = [_span_row(c, tid_for(c.producer_id)) for c in self.span_replay.ctx.completed]
        if state is not None:
            for t in state.open_transactions:
                start = t.start_timestamp if t.start_timestamp is not None and t.start_timestamp >= 0 else None
                rows.append((t.topic, t.partition, t.producer_id, t.producer_epoch, tid_for(t.producer_id),
                             t.first_offset, t.last_offset, None, "OPEN", t.coordinator_epoch, start, None,
                             self.now - start if start is not None else None))
        return rows


def _span_row(c: CompletedTxn, tid: str | None) -> tuple:
    start = c.start_timestamp if c.start_timestamp is not None and c.start_timestamp >= 0 else None
    end = c.end_timestamp if c.end_timestamp >= 0 else None
    duration = end - start if start is not None and end is not None else None
    return (c.topic, c.partition, c.producer_id, c.producer_epoch, tid, c.first_offset, c.last_offset,
            c.marker_offset, c.outcome, c.coordinator_epoch, start, end, duration)


def fold_partitions(items: Iterable[tuple[tuple, object]], coordinator: CoordinatorState, *, now: int,
                    max_timeout_ms: int) -> Iterator[PartitionResult]:
    """Fold a stream sorted by :func:`fold_key` where each partition starts with its :class:`PartitionInfo`.

    Used as the ``mapPartitions`` function after ``repartitionAndSortWithinPartitions``: a
    partition's rows are consecutive and never all in memory at once.
    """
    for _tp, group in itertools.groupby(items, key=lambda kv: (kv[0][0], kv[0][1])):
        fold: PartitionFold | None = None
        for _key, value in group:
            if isinstance(value, PartitionInfo):
                fold = PartitionFold(value, coordinator, now=now, max_timeout_ms=max_timeout_ms)
            elif fold is not None:
                fold.feed(value)  # type: ignore[arg-type]
        if fold is not None:
            yield fold.finish()


# ----------------------------------------------------------------------------- coordinator side

@dataclass(frozen=True, slots=True, kw_only=True)
class TxnIdState:
    """One transactional id replayed over one ``__transaction_state`` partition."""

    transactional_id: str
    partition_path: str
    coordinator_partition: int
    metadata: TransactionMetadata | None
    history: list[HistoryEntry]
    tombstone_offset: int | None
    findings: list[Finding]


def fold_txn_records(records: Iterable[TxnRecordRow]) -> list[TxnIdState]:
    """``apply_record`` over one transactional id's records, per ``__transaction_state`` partition, in offset order."""
    by_part: dict[tuple[str, int], list[TxnRecordRow]] = {}
    for r in records:
        by_part.setdefault((r.partition_path, r.coordinator_partition), []).append(r)
    out = []
    for (path, number), rows in by_part.items():
        rows.sort(key=lambda r: r.offset)
        meta: TransactionMetadata | None = None
        history: list[HistoryEntry] = []
        findings: list[Finding] = []
        tomb: int | None = None
        for r in rows:
            applied = apply_record(meta, r.transactional_id, r.value, offset=r.offset,
                                   coordinator_partition=number, file=r.file, position=r.position)
            meta = applied.metadata
            history.append(applied.history)
            tomb = r.offset if r.value is None else None
            if applied.finding is not None:
                findings.append(applied.finding)
        out.append(TxnIdState(transactional_id=rows[0].transactional_id, partition_path=path,
                              coordinator_partition=number, metadata=meta, history=history,
                              tombstone_offset=tomb, findings=findings))
    return out


def assemble_coordinator(states: Iterable[TxnIdState], *, chosen_partitions: Sequence[tuple[int, str]],
                         skipped: dict[str, str], partitions_count: int | None = None,
                         notices: list[str] | None = None) -> CoordinatorState:
    """The :class:`CoordinatorState` ``replay_transaction_log`` would build, from per-id folds.

    ``chosen_partitions``: (number, path) of the replica of each ``__transaction_state``
    partition the replay uses, sorted by number; ``skipped``: path -> why, for partitions
    whose bytes do not decode (the offline replay skips them whole).
    """
    from kafkatx.format.txn_log import coordinator_partition

    numbers = tuple(n for n, _p in chosen_partitions)
    notes = list(notices or [])
    if partitions_count is None:
        n = (max(numbers) + 1) if numbers else _replay.DEFAULT_TXN_STATE_PARTITIONS
        if numbers and len(numbers) != n:
            notes.append(f"only {len(numbers)} of at least {n} {TXN_STATE_TOPIC} partitions are in these log "
                         f"dirs: transactional ids coordinated elsewhere are not listed")
    else:
        n = partitions_count
    by_path: dict[str, list[TxnIdState]] = {}
    for s in states:
        by_path.setdefault(s.partition_path, []).append(s)
    current: dict[str, TransactionMetadata] = {}
    history: dict[str, list[HistoryEntry]] = {}
    tombstoned: dict[str, int] = {}
    findings: list[Finding] = []
    skipped_list: list[str] = []
    seen_in: dict[str, int] = {}
    for number, path in chosen_partitions:
        if path in skipped:
            skipped_list.append(f"{path}: {skipped[path]}")
            continue
        for s in sorted(by_path.get(path, []), key=lambda s: s.history[0].offset if s.history else -1):
            tid = s.transactional_id
            findings.extend(s.findings)
            if tid in seen_in and number != coordinator_partition(tid, n):
                continue
            seen_in[tid] = number
            history[tid] = s.history
            if s.metadata is None:
                current.pop(tid, None)
                if s.tombstone_offset is not None:
                    tombstoned[tid] = s.tombstone_offset
            else:
                current[tid] = s.metadata
                tombstoned.pop(tid, None)
    return CoordinatorState(transactions=current, history=history, tombstoned=tombstoned, partitions_count=n,
                            partitions_found=numbers, findings=findings, notices=notes, skipped=skipped_list,
                            _by_producer=_replay._index_producers(current, history))  # hook: see docs/scan.md
