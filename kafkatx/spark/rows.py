"""The work ``kafkatx scan`` runs on Spark executors, as plain Python (no pyspark import).

Everything here is a function of picklable values so Spark can ship it, and so the
tests can run it without a SparkSession. No replay rule lives here: the folds are
``kafkatx.txn``'s own, fed from what the executors decoded.

* :func:`decode_segment` turns one :class:`SegmentTask` (one ``.log`` file, or a byte
  range of one) into one ``batches/`` row per batch (CRC checked, control record read),
  an *error row* naming file and byte position when bytes stop forming batches, and one
  compact :data:`EVENTS` item: the segment's producer-state events
  (:class:`~kafkatx.txn.events.BatchEvent`), where each producer's consecutive data batches
  of one epoch and transactional flag are one *run* event. That item is all the partition
  fold needs, so the shuffle carries a few events per producer per segment, not every batch.
  For ``__transaction_state`` segments it also yields the decoded records
  (``txn.coordinator.txn_log_field_records``: plain tuples, the values in ``value_fields`` form,
  decoded by the compiled ``txn_log_decode`` where built).
* :func:`fold_partition` replays one partition's events with
  ``txn.replay.replay_partition_events`` (the fold ``replay_partition`` itself runs) and
  builds the ``lag`` row with ``txn.offline.lag_row`` and the hanging rows with
  ``txn.offline.hanging_rows`` (find-hanging + the ghost rule), plus the transaction spans
  (``txn.timeline``, which ``kafkatx timeline`` uses too).
* :func:`fold_txn_partitions` replays ``__transaction_state`` with ``txn.coordinator.fold_txn_fields``;
  ``txn.coordinator.coordinator_from_folds`` merges the result as ``replay_transaction_log`` does.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from pathlib import Path

from msgspec import Struct, field
from msgspec.structs import replace

from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    crc_valid,
    read_control_record,
)
from kafkatx.log.partition import Partition
from kafkatx.log.segment import iter_batches_windowed, open_windowed
from kafkatx.render.rows import ScanBatchRow
from kafkatx.spark.trace import span
from kafkatx.txn.coordinator import (
    TXN_STATE_TOPIC,
    CoordinatorState,
    TxnLoadWindow,
    TxnPartitionFold,
    fold_txn_fields,
    txn_log_field_records,
)
from kafkatx.txn.events import BatchEvent
from kafkatx.txn.groups import OFFSETS_TOPIC, with_blocked_groups
from kafkatx.txn.loading import plan_load
from kafkatx.txn.model import HangingRow, LagRow
from kafkatx.txn.offline import hanging_key, hanging_rows, lag_row
from kafkatx.txn.producer_state import CompletedTxn
from kafkatx.txn.state import Finding
from kafkatx.txn.timeline import replay_spans, transaction_spans

# ----------------------------------------------------------------------------- row layouts
# Tuples (not dicts) travel between Python workers and the JVM: the column order is the field
# order of kafkatx.render.rows.ScanBatchRow (schema.py and docs/scan.md take it from there).

BATCH_COLUMNS: tuple[str, ...] = ScanBatchRow.__struct_fields__  # the row model (kafkatx.render.rows)
_B = {name: i for i, name in enumerate(BATCH_COLUMNS)}

TRANSACTION_COLUMNS = (
    "topic", "partition", "producer_id", "producer_epoch", "transactional_id", "first_offset", "last_offset",
    "marker_offset", "outcome", "coordinator_epoch", "start_timestamp_ms", "end_timestamp_ms", "duration_ms",
)

# Kinds of the tagged tuples decode_segment yields: (kind, payload).
BATCH = 0  # payload: a BATCH_COLUMNS tuple
EVENTS = 1  # payload: SegmentEvents (exactly one per task)
TXN_RECORD = 2  # payload: (partition_path, (segment_base_offset, position), coordinator.TxnFieldRecord)
TXN_FINDING = 3  # payload: (partition_path, (segment_base_offset, position), Finding)
TXN_SKIP = 4  # payload: (partition_path, message): the __transaction_state partition cannot be replayed
# decode_tasks (the Spark task) splits each EVENTS item in two, so the steps that only need
# the counts never unpickle the events (see pack_events):
COUNTS = 5  # payload: SegmentEvents with events=[] (one per segment task)
PACKED = 6  # payload: (partition_path, order, pack_events(...)) (chosen replicas only)


class SegmentTask(Struct, frozen=True, kw_only=True):
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
    # A chosen __transaction_state partition's segments: what the coordinator reads after LogLoader.
    txn_window: TxnLoadWindow | None = None

    @property
    def is_txn_state(self) -> bool:
        return self.topic == TXN_STATE_TOPIC


class SegmentEvents(Struct, frozen=True, kw_only=True):
    """What one task hands the partition fold and the summary: compact events and counts."""

    partition_path: str
    order: tuple[int, int]  # (segment base offset, byte start): the task's place in the partition
    chosen: bool
    events: list[BatchEvent]  # empty when the replica is not the chosen one
    batches: int
    crc_errors: int
    decode_errors: int


class PartitionInfo(Struct, frozen=True, kw_only=True):
    """What the driver knows of one replayed partition (the chosen replica)."""

    log_dir: str
    topic: str
    partition: int
    partition_path: str
    log_start_offset: int
    high_watermark: int | None  # replication-offset-checkpoint of its log dir; None when absent
    clean_shutdown: bool = True  # .kafka_cleanshutdown in its log dir
    recovery_point: int | None = None  # recovery-point-offset-checkpoint entry; None when absent


# ----------------------------------------------------------------------------- decode

def control_type_id(name: str | None) -> int | None:
    """Inverse of ``ControlRecord.type_name``: the enum name, or the number for unknown types."""
    if name is None:
        return None
    member = ControlType.__members__.get(name)
    return int(member) if member is not None else int(name)


_ATTRIBUTE_COLUMNS: dict[tuple[int, int], tuple[str, str, bool, bool]] = {}


def _attribute_columns(h: BatchHeader) -> tuple[str, str, bool, bool]:
    """``compression, timestamp_type, is_transactional, is_control`` of a header, cached per
    (magic, attributes): the enum lookups behind those properties cost more than the rest of
    the row, and a log holds only a handful of distinct attribute values."""
    key = (h.magic, h.attributes)
    cols = _ATTRIBUTE_COLUMNS.get(key)
    if cols is None:
        compression = h.compression
        cols = (compression.name.lower() if hasattr(compression, "name") else str(compression),
                h.timestamp_type.name, h.is_transactional, h.is_control)
        _ATTRIBUTE_COLUMNS[key] = cols
    return cols


def _batch_row(task: SegmentTask, seg_name: str, h: BatchHeader, valid: bool, control: str | None,
               coord_epoch: int | None, error: str | None) -> tuple:
    compression, ts_type, is_txn, is_control = _attribute_columns(h)
    delta = h.last_offset_delta
    return (
        task.log_dir, task.topic, task.partition, seg_name, task.segment_base_offset, h.position,
        h.base_offset, h.base_offset + delta, h.records_count, h.batch_length + LOG_OVERHEAD, h.magic, h.attributes,
        compression, ts_type, h.crc, valid, h.partition_leader_epoch, h.producer_id, h.producer_epoch,
        h.base_sequence, h.last_sequence, is_txn, is_control, control, coord_epoch,
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


class _Runs:
    """Builds one segment's event list, collapsing each producer's consecutive data batches.

    A run holds batches of one producer with one epoch and one transactional flag and no
    marker of that producer between them (``BatchEvent`` says why the fold may skip the
    middle). Non-idempotent batches (producer id -1) carry no state: one run counts them all.
    A run sits in the list at its first batch, which is where the fold applies it.
    """

    __slots__ = ("path", "events", "open")

    def __init__(self, path: str) -> None:
        self.path = path
        self.events: list[BatchEvent | list] = []
        self.open: dict[int, list] = {}  # producer id (-1: none) -> [first, last, count, index]

    def data(self, h: BatchHeader) -> None:
        key = h.producer_id if h.producer_id >= 0 else -1
        run = self.open.get(key)
        if run is not None and (key < 0 or (run[0].producer_epoch == h.producer_epoch
                                            and run[0].is_transactional == h.is_transactional)):
            run[1] = h
            run[2] += 1
            return
        run = [h, h, 1, len(self.events)]
        self.events.append(run)
        self.open[key] = run

    def single(self, event: BatchEvent) -> None:
        h = event.header
        if h is not None and h.producer_id >= 0:
            self.open.pop(h.producer_id, None)  # the producer's next data batch starts a new run
        self.events.append(event)

    def finish(self) -> list[BatchEvent]:
        out = []
        for e in self.events:
            if isinstance(e, list):
                first, last, count, _i = e
                e = BatchEvent(self.path, first, last if count > 1 else None, count)
            out.append(e)
        return out


def decode_segment(task: SegmentTask) -> Iterator[tuple[int, object]]:
    """Decode one segment on an executor: batch rows, error rows, its events, txn-log records.

    The file is mapped (never read whole; on the pread path, a live broker, read forward in windows of
    ``log.segment.DEFAULT_READ_WINDOW``). A decode error ends the segment with one error
    row naming the file and byte position; it never fails the Spark task.
    """
    seg_name = Path(task.segment_path).name
    txn_state = task.is_txn_state and task.chosen
    runs = _Runs(task.segment_path)
    order = (task.segment_base_offset, task.start)
    n_batches = n_crc = n_err = 0
    next_offset = task.segment_base_offset  # what the bad bytes would have held (error events)
    try:
        with open_windowed(Path(task.segment_path)) as (buf, win):
            it = iter_batches_windowed(buf, win, task.start, end=task.end)
            next_pos = task.start  # where the next batch should start: the error row's position
            while True:
                try:
                    h = next(it)
                except StopIteration:
                    break
                except DecodeError as err:
                    located = err.at(task.segment_path)
                    n_err += 1
                    yield BATCH, error_row(task, located, next_pos)
                    runs.single(BatchEvent(task.segment_path, None, error=str(located), error_offset=next_offset))
                    if txn_state and not (task.txn_window is not None
                                          and task.txn_window.gone(task.segment_path, next_pos)):
                        # replay_transaction_log skips the partition here (unless recovery truncates these bytes).
                        yield TXN_SKIP, (task.partition_path, f"{task.partition_path}: {located}")
                    break
                next_pos = h.position + h.batch_length + LOG_OVERHEAD
                next_offset = h.base_offset + h.last_offset_delta + 1
                n_batches += 1
                valid = crc_valid(buf, h)
                n_crc += not valid
                control = coord_epoch = error = None
                is_control = _attribute_columns(h)[3]
                if is_control and h.records_count > 0:
                    try:
                        rec = read_control_record(buf, h)
                        control, coord_epoch = rec.type_name, rec.coordinator_epoch
                    except DecodeError as err:
                        error = str(err.at(task.segment_path))
                yield BATCH, _batch_row(task, seg_name, h, valid, control, coord_epoch, error)
                if not task.chosen:
                    continue
                if not is_control or h.producer_id < 0:
                    runs.data(h)
                elif not valid:
                    runs.single(BatchEvent(task.segment_path, h, crc_valid=False))
                elif error is not None:
                    runs.single(BatchEvent(task.segment_path, h, error=error))
                else:
                    runs.single(BatchEvent(task.segment_path, h, control_type=control_type_id(control),
                                           coordinator_epoch=coord_epoch))
                if txn_state and (task.txn_window is None or task.txn_window.reads(task.segment_path, h)):
                    yield from _txn_records(task, buf, h)
    except KafkaTxError as err:  # MissingFile: the segment vanished or cannot be mapped
        n_err += 1
        yield BATCH, error_row(task, err, None)
        runs.single(BatchEvent(task.segment_path, None, error=str(err), error_offset=next_offset))
        if txn_state:
            yield TXN_SKIP, (task.partition_path, f"{task.partition_path}: {err}")
    yield EVENTS, SegmentEvents(partition_path=task.partition_path, order=order, chosen=task.chosen,
                                events=runs.finish() if task.chosen else [], batches=n_batches,
                                crc_errors=n_crc, decode_errors=n_err)


# ----------------------------------------------------------------------------- packed events
# The events cross Spark twice (kept with the decode's output, then shuffled by partition).
# Pickling them as they are costs more than building them: BatchHeader is a frozen slotted
# dataclass, whose pickle support sets every field through object.__setattr__, ~2 per event,
# on every pass. So a segment's events travel as one bytes object holding plain tuples: the
# JVM and the Python steps that only route them copy bytes, and the fold task unpacks them
# once.
_HEADER_SLOTS = BatchHeader.__slots__
_header_values = attrgetter(*_HEADER_SLOTS)


class _HeaderTwin:
    """Same slots as BatchHeader: filled with plain slot stores, then retyped (CPython allows
    ``__class__`` assignment between classes of identical slot layout), which skips the frozen
    dataclass's per-field ``object.__setattr__``; the result is an ordinary BatchHeader."""

    __slots__ = _HEADER_SLOTS


def _header(values: tuple) -> BatchHeader:
    h = object.__new__(_HeaderTwin)
    for name, value in zip(_HEADER_SLOTS, values, strict=True):
        setattr(h, name, value)
    h.__class__ = BatchHeader  # type: ignore[assignment]
    return h  # type: ignore[return-value]


def pack_events(events: Sequence[BatchEvent]) -> bytes:
    """``events`` as one pickled list of plain tuples (header fields as ints): :func:`unpack_events`."""
    packed = [(e.log_path, None if e.header is None else _header_values(e.header),
               None if e.last is None else _header_values(e.last), *e[3:]) for e in events]
    return pickle.dumps(packed, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_events(blob: bytes) -> list[BatchEvent]:
    """The events :func:`pack_events` packed, equal to the originals."""
    return [BatchEvent(path, None if h is None else _header(h), None if last is None else _header(last), *rest)
            for path, h, last, *rest in pickle.loads(blob)]  # noqa: S301 - our own bytes, from our own task


def decode_tasks(batches_path: str, index: int, tasks: Iterable[SegmentTask]) -> Iterator[tuple[int, object]]:
    """One Spark task: :func:`decode_segment` over ``tasks``, ``batches/`` rows written here.

    The batch rows never go back to Spark: they stream into this task's Parquet file(s)
    under ``batches_path`` (:class:`kafkatx.spark.parquet.PartitionedWriter`, one Arrow
    record batch per ``ROWS_PER_CHUNK`` rows) and only the small items are yielded: per
    segment one :data:`COUNTS` and (chosen replicas) one :data:`PACKED` (its events, see
    :func:`pack_events`), and the ``__transaction_state`` records. Tasks run in
    (topic, partition, segment) order so one file is open at a time.
    """
    ordered = sorted(tasks, key=lambda t: (t.topic, t.log_dir, t.partition, t.segment_base_offset, t.start))
    with span("decode-task", index=index, tasks=len(ordered), bytes=sum(t.size for t in ordered)):
        yield from _decode_tasks(batches_path, index, ordered)


def _decode_tasks(batches_path: str, index: int, ordered: list[SegmentTask]) -> Iterator[tuple[int, object]]:
    from kafkatx.spark.parquet import PartitionedWriter

    writer = PartitionedWriter(batches_path, "batches", index)
    try:
        for task in ordered:
            for kind, payload in decode_segment(task):
                if kind == BATCH:
                    writer.write(payload)  # type: ignore[arg-type]
                elif kind == EVENTS:
                    seg: SegmentEvents = payload  # type: ignore[assignment]
                    yield COUNTS, replace(seg, events=[])
                    if seg.chosen:
                        yield PACKED, (seg.partition_path, seg.order, pack_events(seg.events))
                else:
                    yield kind, payload
    except BaseException:
        writer.abort()
        raise
    writer.close()


def _txn_records(task: SegmentTask, buf, h: BatchHeader) -> Iterator[tuple[int, object]]:
    """The records of one ``__transaction_state`` batch, as ``replay_transaction_log`` reads them."""
    findings: list[Finding] = []
    where = (task.segment_base_offset, h.position)
    try:
        records = list(txn_log_field_records([(task.segment_path, buf, h)], f"{task.topic}-{task.partition}",
                                             findings, loader_crc=task.txn_window is None))
    except DecodeError as err:
        yield TXN_SKIP, (task.partition_path, f"{task.partition_path}: {err}")
        return
    for f in findings:
        yield TXN_FINDING, (task.partition_path, where, f)
    for r in records:
        yield TXN_RECORD, (task.partition_path, where, r)


def fold_txn_partitions(items: Iterable[tuple[int, tuple]], chosen: Sequence[tuple[int, str]],
                        partitions_count: int) -> list[TxnPartitionFold]:
    """``fold_txn_fields`` per chosen ``__transaction_state`` partition over the collected txn items.

    ``items``: the TXN_RECORD / TXN_FINDING / TXN_SKIP payloads (any order); ``chosen``:
    (number, path) sorted by number. Returns the folds in that order for ``coordinator_from_folds``.
    """
    by_path: dict[str, list[tuple[tuple[int, int], int, int, object]]] = {}
    skips: dict[str, tuple[tuple[int, int], str]] = {}
    for kind, payload in items:
        if kind == TXN_SKIP:
            path, why = payload
            skips.setdefault(path, ((0, 0), why))
            continue
        path, where, obj = payload
        # Findings before the records of their batch, as txn_log_field_records reports them.
        offset = obj[0] if kind == TXN_RECORD else -1  # type: ignore[index]
        by_path.setdefault(path, []).append((where, 0 if kind == TXN_FINDING else 1, offset, obj))
    folds = []
    for number, path in chosen:
        name = f"{TXN_STATE_TOPIC}-{number}"
        items_sorted = sorted(by_path.get(path, []), key=lambda x: x[:3])
        findings: list[Finding] = []
        records = []
        for _w, kind, _o, obj in items_sorted:
            if kind == 0:
                findings.append(obj)  # type: ignore[arg-type]
            else:
                records.append(obj)
        ids = fold_txn_fields(number, name, partitions_count, records, findings)  # type: ignore[arg-type]
        if path in skips:
            folds.append(TxnPartitionFold(partition=number, name=name, path=path, findings=findings,
                                          skipped=skips[path][1]))
        else:
            folds.append(TxnPartitionFold(partition=number, name=name, path=path, ids=ids, findings=findings))
    return folds


# ----------------------------------------------------------------------------- partition side

class _LogDirStub:
    """What :class:`Partition` and the loader (txn/loading.py) ask its log dir for: the log start
    and recovery point checkpoint entries and whether the broker shut down cleanly."""

    __slots__ = ("path", "log_start_offsets", "recovery_points", "clean_shutdown")

    def __init__(self, path: str, key: tuple[str, int], log_start_offset: int, *, clean_shutdown: bool = True,
                 recovery_point: int | None = None) -> None:
        self.path = Path(path)
        self.log_start_offsets = {key: log_start_offset}
        self.recovery_points = {key: recovery_point} if recovery_point is not None else {}
        self.clean_shutdown = clean_shutdown


class PartitionResult(Struct, frozen=True, kw_only=True):
    lag: LagRow | None  # None when the partition could not be replayed (skipped)
    hanging: list[HangingRow]
    transactions: list[tuple]  # TRANSACTION_COLUMNS tuples
    notices: list[str] = field(default_factory=list)
    skipped: str | None = None
    hw_stand_in: bool = False
    # (transactional id, partition) pairs this partition holds open: the driver says the coordinator-level
    # notices once, from all partitions' (hanging.owed_abort_notices)
    held_open: set[tuple[str, tuple[str, int]]] = field(default_factory=set)


def fold_partition(info: PartitionInfo, segments: Iterable[SegmentEvents], coordinator: CoordinatorState, *,
                   now: int, max_timeout_ms: int) -> PartitionResult:
    """One partition's lag row, hanging rows and spans from its segments' events (any order).

    The state replay is ``replay_partition_events`` from the newest usable snapshot, exactly
    what ``kafkatx lag`` / ``find-hanging`` run; the spans come from a replay from the log
    start without a snapshot (like ``verify``) so ``transactions/`` lists every COMMIT/ABORT
    span still on disk (both in ``txn.timeline.replay_spans``).
    """
    key = (info.topic, info.partition)
    part = Partition(Path(info.partition_path), topic=info.topic, partition=info.partition,
                     log_dir=_LogDirStub(info.log_dir, key, info.log_start_offset,  # type: ignore[arg-type]
                                         clean_shutdown=info.clean_shutdown, recovery_point=info.recovery_point))
    ordered = sorted(segments, key=lambda s: s.order)
    events = [e for s in ordered for e in s.events]
    completed: list[CompletedTxn] = []
    source = lambda _start: events  # noqa: E731 - the fold skips events below its start itself
    try:
        state = replay_spans(part, source, now=now, plan=plan_load(part), completed=completed)
    except KafkaTxError as err:
        return PartitionResult(lag=None, hanging=[], transactions=_span_rows(completed, None, coordinator, now),
                               skipped=f"{part.name} ({info.partition_path}): {err}")
    notices = state.notices + [f"{f.severity}: {f.message}" for f in state.findings]
    row, stand_in = lag_row(state, info.high_watermark, notices)
    held: set[tuple[str, tuple[str, int]]] = set()
    hanging = hanging_rows(coordinator, [state], now=now, max_timeout_ms=max_timeout_ms, notices=notices,
                           held_open=held)
    if info.topic == OFFSETS_TOPIC and hanging:  # the groups they block (txn/groups.py), from the files
        hanging = with_blocked_groups(hanging, lambda _tp: part, notices, key=hanging_key)
    return PartitionResult(lag=row, hanging=hanging, transactions=_span_rows(completed, state, coordinator, now),
                           held_open=held,
                           notices=notices, hw_stand_in=stand_in)


def key_packed(index: int, items: Iterable[tuple[int, object]]) -> Iterator[tuple[str, tuple]]:
    """The shuffle's map side: the :data:`PACKED` items of a decode task, keyed by partition path."""
    with span("shuffle-map", index=index) as info:
        n = size = 0
        for kind, payload in items:
            if kind == PACKED:
                packed: tuple = payload  # type: ignore[assignment]
                n += 1
                size += len(packed[2])
                yield packed[0], packed
        info.update(items=n, bytes=size)


def fold_partitions(transactions_path: str, index: int, groups: Iterable[tuple[str, Iterable[tuple]]],
                    infos: dict[str, PartitionInfo], coordinator: CoordinatorState, *, now: int,
                    max_timeout_ms: int) -> Iterator[tuple]:
    """One Spark task of the partition side: :func:`fold_partition` per (path, segments) group,
    ``segments`` being the :data:`PACKED` payloads ``(path, order, blob)`` of the partition.

    The spans are written here to this task's ``transactions/`` file(s) (sorted by topic, so
    one file per topic); yielded per partition, for the driver: ``(lag, hanging, notices,
    skipped, hw_stand_in, {outcome: count}, held_open)``.
    """
    with span("fold-task", index=index) as info:
        results = _fold_groups(transactions_path, index, groups, infos, coordinator, now=now,
                               max_timeout_ms=max_timeout_ms)
        info["partitions"] = len(results)
    yield from results


def _fold_groups(transactions_path: str, index: int, groups: Iterable[tuple[str, Iterable[tuple]]],
                 infos: dict[str, PartitionInfo], coordinator: CoordinatorState, *, now: int,
                 max_timeout_ms: int) -> list[tuple]:
    from kafkatx.spark.parquet import write_rows

    spans: list[tuple] = []
    outcome_i = TRANSACTION_COLUMNS.index("outcome")
    results = []
    for path, packed in groups:
        with span("fold-partition", index=index, path=path) as info:
            segments = [SegmentEvents(partition_path=p, order=order, chosen=True, events=unpack_events(blob),
                                      batches=0, crc_errors=0, decode_errors=0) for p, order, blob in packed]
            info["events"] = sum(len(s.events) for s in segments)
            r = fold_partition(infos[path], segments, coordinator, now=now, max_timeout_ms=max_timeout_ms)
        spans.extend(r.transactions)
        outcomes: dict[str, int] = {}
        for t in r.transactions:
            outcomes[t[outcome_i]] = outcomes.get(t[outcome_i], 0) + 1
        results.append((r.lag, r.hanging, r.notices, r.skipped, r.hw_stand_in, outcomes, r.held_open))
    spans.sort(key=lambda t: (t[0], t[1]))
    with span("fold-write", index=index, rows=len(spans)):
        write_rows(transactions_path, "transactions", index, spans)
    return results


def _span_rows(completed: list[CompletedTxn], state, coordinator: CoordinatorState, now: int) -> list[tuple]:
    """``txn.timeline.transaction_spans`` as TRANSACTION_COLUMNS tuples."""
    return [(s.topic, s.partition, s.producer_id, s.producer_epoch, s.transactional_id, s.first_offset,
             s.last_offset, s.marker_offset, s.outcome, s.coordinator_epoch, s.start_ms, s.end_ms, s.duration_ms)
            for s in transaction_spans(completed, state, coordinator.transactional_id_for, now)]
