"""The per-batch reference of ``kafkatx scan``'s ``batches/`` rows and the units of work, as plain Python.

* :func:`decode_segment` turns one :class:`SegmentTask` (one ``.log`` file, or a byte range of one) into
  one ``batches/`` row per batch (CRC checked, control record read), an *error row* naming file and
  byte position when bytes stop forming batches, and the segment's counts (:class:`SegmentEvents`).
  ``spark/tasks.py`` makes the same rows a column at a time for clean magic-2 segments and falls back
  to this for everything else; tests hold the two to each other.
* :class:`PartitionInfo`: what the driver knows of one chosen partition (its log dir's checkpoints), from
  which an executor opens it (:class:`_LogDirStub`) and replays it with the single-process code.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from msgspec import Struct

from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format.record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    crc_valid,
    read_control_record,
)
from kafkatx.render.rows import ScanBatchRow
from kafkatx.storage.segment import as_path, iter_batches_windowed, open_windowed

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


class SegmentEvents(Struct, frozen=True, kw_only=True):
    """A decoded segment's counts (the summary's)."""

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
               coord_epoch: int | None, error: str | None) -> tuple[Any, ...]:
    compression, ts_type, is_txn, is_control = _attribute_columns(h)
    delta = h.last_offset_delta
    return (
        task.log_dir, task.topic, task.partition, seg_name, task.segment_base_offset, h.position,
        h.base_offset, h.base_offset + delta, h.records_count, h.batch_length + LOG_OVERHEAD, h.magic, h.attributes,
        compression, ts_type, h.crc, valid, h.partition_leader_epoch, h.producer_id, h.producer_epoch,
        h.base_sequence, h.last_sequence, is_txn, is_control, control, coord_epoch,
        h.base_timestamp, h.max_timestamp, error,
    )


def error_row(task: SegmentTask, err: KafkaTxError, position: int | None) -> tuple[Any, ...]:
    """A ``batches/`` row for bytes that do not decode: only the place and the message are set.

    ``position`` is where the bytes that do not form a batch begin (cli.md's "trailing bytes
    from P"); the message names the exact byte the decoder stopped at.
    """
    row: list[Any] = [None] * len(BATCH_COLUMNS)
    row[_B["log_dir"]] = task.log_dir
    row[_B["topic"]] = task.topic
    row[_B["partition"]] = task.partition
    row[_B["segment"]] = Path(task.segment_path).name
    row[_B["segment_base_offset"]] = task.segment_base_offset
    row[_B["position"]] = position
    row[_B["error"]] = str(err)
    return tuple(row)


def decode_segment(task: SegmentTask) -> Iterator[tuple[int, object]]:
    """Decode one segment: its batch rows, error rows, then its counts (one :data:`EVENTS` item).

    The file is mapped (never read whole; on the pread path, a live broker, read forward in windows of
    ``log.segment.DEFAULT_READ_WINDOW``). A decode error ends the segment with one error row naming
    the file and byte position; it never fails the Spark task.
    """
    seg_name = Path(task.segment_path).name
    n_batches = n_crc = n_err = 0
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
                    n_err += 1
                    yield BATCH, error_row(task, err.at(task.segment_path), next_pos)
                    break
                next_pos = h.position + h.batch_length + LOG_OVERHEAD
                n_batches += 1
                valid = crc_valid(buf, h)
                n_crc += not valid
                control = coord_epoch = error = None
                if _attribute_columns(h)[3] and h.records_count > 0:
                    try:
                        rec = read_control_record(buf, h)
                        control, coord_epoch = rec.type_name, rec.coordinator_epoch
                    except DecodeError as err:
                        error = str(err.at(task.segment_path))
                yield BATCH, _batch_row(task, seg_name, h, valid, control, coord_epoch, error)
    except KafkaTxError as err:  # MissingFile: the segment vanished or cannot be mapped
        n_err += 1
        yield BATCH, error_row(task, err, None)
    yield EVENTS, SegmentEvents(batches=n_batches, crc_errors=n_crc, decode_errors=n_err)


# ----------------------------------------------------------------------------- partition side

class _LogDirStub:
    """What :class:`Partition` and the loader (storage/loading.py) ask its log dir for: the log start
    and recovery point checkpoint entries and whether the broker shut down cleanly."""

    __slots__ = ("path", "log_start_offsets", "recovery_points", "clean_shutdown")

    def __init__(self, path: str | Path, key: tuple[str, int], log_start_offset: int, *, clean_shutdown: bool = True,
                 recovery_point: int | None = None) -> None:
        self.path = as_path(path)  # a Path the caller made once per log dir is taken as it is
        self.log_start_offsets = {key: log_start_offset}
        self.recovery_points = {key: recovery_point} if recovery_point is not None else {}
        self.clean_shutdown = clean_shutdown
