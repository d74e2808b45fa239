"""What ``kafkatx scan``'s executors run, as Arrow record batches in and out (``mapInArrow``).

Every function here takes an iterator of ``pyarrow.RecordBatch`` (the rows of the DataFrame it maps) and
yields record batches of the schema named beside it; pyspark is never imported (the tests run them
without a session), pyarrow inside the functions only. No replay rule lives here: each task runs the
single-process code on whole partitions and hands back what that code returns, reduced where it ran.

* :func:`batch_rows` (``BATCHES``): the ``batches/`` rows of a bin of segments (``rows.decode_segment``:
  one row per batch, an error row where bytes stop forming batches).
* :func:`replay_partitions` (``REPLAY``): each chosen partition replayed as ``kafkatx timeline`` does
  (``session.timeline.replay_spans`` over the files, the compiled fold; one fold when the broker starts at
  the log start), reduced where it was replayed: its ``lag`` row (``offline.lag_row``), its spans
  (``transactions/``; the transactional id is filled in later), its open transactions (classified once the
  coordinator is known), its notes, or why it was skipped; the notes told to the driver.
* :func:`fold_coordinator` (``COORDINATOR``): one ``__transaction_state`` partition folded as
  ``replay_transaction_log`` folds it (``coordinator.fold_txn_partition``, the compiled fold): a row per
  transactional id a producer id the partitions name could resolve to, or past its timeout (its latest
  value, the producer ids it claims, those its history used, the named ones), its findings and notes.
* :func:`resolve_groups` (``RESOLVED``): one named producer id's group of the joined rows resolved to the
  id it belongs to as ``CoordinatorState.transactional_id_for`` says (else the expired id a notice would
  name): ``groupBy("pid").applyInArrow``.
* :func:`classify_groups` (``hanging/``): one transactional id's group (cogroup) of open transactions, each
  joined with its producer's entry, and of its timed-out row: each open transaction classified by
  ``offline.hanging_rows`` (``coordinator/rules.py``, the ghost rule), and the id's owed abort
  (``hanging.owed_abort_notices``) decided from the pairs they hold open; the notes told back.
"""

from __future__ import annotations

import os
import pickle
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from kafkatx.checks.hanging import owed_abort_notices
from kafkatx.coordinator.groups import OFFSETS_TOPIC, with_blocked_groups
from kafkatx.coordinator.rules import TIMEOUT_STATES, TWO_PHASE_COMMIT_TIMEOUT_MS, is_timed_out
from kafkatx.coordinator.state import NO_PRODUCER_ID, TransactionMetadata
from kafkatx.coordinator.state_manager import CoordinatorState
from kafkatx.coordinator.txn_fold import TxnHistory, TxnIds, TxnLatest, fold_txn_partition, history_items
from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format import record_batch
from kafkatx.format.txn_log import (
    F_NEXT_PRODUCER_ID,
    F_PREVIOUS_PRODUCER_ID,
    F_PRODUCER_ID,
    F_START_TIMESTAMP,
    F_STATE,
    F_TIMEOUT_MS,
)
from kafkatx.rows import Finding, HangingRow, LagRow, Report
from kafkatx.session.offline import hanging_key, hanging_rows, lag_row
from kafkatx.session.timeline import replay_spans, transaction_spans
from kafkatx.spark.rows import (
    BATCH,
    EVENTS,
    TRANSACTION_COLUMNS,
    PartitionInfo,
    SegmentEvents,
    SegmentTask,
    _attribute_columns,
    _LogDirStub,
    decode_segment,
)
from kafkatx.storage.events import FileEvents
from kafkatx.storage.loading import DELETE_SEGMENT, TRUNCATE_SEGMENT, plan_load
from kafkatx.storage.log_dir import collector_paused
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import CompletedTxn, OpenTxn, PartitionProducerState
from kafkatx.storage.replay import replay_partition_events
from kafkatx.storage.segment import child_path, open_windowed

ROWS_PER_BATCH = 65_536  # rows per Arrow record batch handed to Spark

# ----------------------------------------------------------------------------- schemas
# (name, Spark type) per column; Spark's DDL and pyarrow's schema are made from the same list.

# LagRow's remote_segments (a list of rows) crosses as its JSON text, as docs/scan.md's partitions/ has it
_LAG_TYPES = {"partition": "int", "open_transactions": "int", "held_by_ghost": "boolean", "topic": "string",
              "remote_storage": "string", "remote_segments": "string"}
_LAG = [(f.name, _LAG_TYPES.get(f.name, "bigint")) for f in msgspec.structs.fields(LagRow)]
_REMOTE_SEGMENTS_I = [f.name for f in msgspec.structs.fields(LagRow)][2:].index("remote_segments")
_HANGING = [("kind", "string"), ("topic", "string"), ("partition", "int"), ("producer_id", "bigint"),
            ("producer_epoch", "int"), ("transactional_id", "string"), ("coordinator_state", "string"),
            ("first_offset", "bigint"), ("start_ms", "bigint"), ("duration_ms", "bigint"),
            ("blocked_groups", "array<string>"), ("upload_blocked_bytes", "bigint"), ("remote_copied_offset", "bigint")]
_TRANSACTION = [("topic", "string"), ("partition", "int"), ("producer_id", "bigint"), ("producer_epoch", "int"),
                ("transactional_id", "string"), ("first_offset", "bigint"), ("last_offset", "bigint"),
                ("marker_offset", "bigint"), ("outcome", "string"), ("coordinator_epoch", "int"),
                ("start_timestamp_ms", "bigint"), ("end_timestamp_ms", "bigint"), ("duration_ms", "bigint")]
assert tuple(n for n, _t in _TRANSACTION) == TRANSACTION_COLUMNS
assert tuple(n for n, _t in _HANGING) == tuple(f.name for f in msgspec.structs.fields(HangingRow))

# Kinds of the REPLAY rows
LAG, SPAN, OPEN, NOTE, SKIP = 0, 1, 2, 3, 4

REPLAY = [("kind", "int"), ("seq", "int"),
          *[(f"lag_{n}" if n not in ("topic", "partition") else n, t) for n, t in _LAG],
          *[(f"span_{n}", t) for n, t in _TRANSACTION if n not in ("topic", "partition")],
          ("open_txn", "binary"), ("snapshot_offset", "bigint"), ("stand_in", "boolean"), ("text", "string"),
          ("info", "binary")]
# Kinds of the COORDINATOR rows
ID, FINDING, CSKIP, CNOTICE = 0, 1, 2, 3  # CNOTICE: what the loader's plan did (a truncation)
COORDINATOR = [("kind", "int"), ("fold", "int"), ("seq", "int"), ("tid", "string"), ("home", "boolean"),
               ("tomb", "boolean"), ("offset", "bigint"), ("timed_out", "boolean"), ("claims", "array<bigint>"),
               ("hist", "array<bigint>"), ("pids", "array<bigint>"), ("fields", "binary"), ("text", "string")]
CNOTE = 2  # the kind of a classification's note (Said)


def ddl(columns: Sequence[tuple[str, str]]) -> str:
    """The Spark DDL of ``columns``."""
    return ", ".join(f"`{n}` {t}" for n, t in columns)


def arrow_schema(columns: Sequence[tuple[str, str]], not_null: Iterable[str] = ()) -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "boolean": pa.bool_(),
             "binary": pa.binary(), "array<bigint>": pa.list_(pa.int64()), "array<string>": pa.list_(pa.string())}
    keep = set(not_null)
    return pa.schema([pa.field(n, types[t], nullable=n not in keep) for n, t in columns])


class _Rows:
    """Rows (tuples in schema order) kept until :meth:`flush` makes them one Arrow record batch of ``schema``
    (an empty one when there are none); callers flush at ``ROWS_PER_BATCH``."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.rows: list[Sequence[Any]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: Sequence[Any]) -> None:
        self.rows.append(row)

    def extend(self, rows: Iterable[Sequence[Any]]) -> None:
        self.rows.extend(rows)

    def flush(self) -> Any:
        import pyarrow as pa

        columns = list(zip(*self.rows, strict=True)) if self.rows else [() for _ in self.schema]
        batch = pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, self.schema,
                                                                                         strict=True)],
                                           schema=self.schema)
        self.rows = []
        return batch


def _items(batches: Iterable[Any], column: str = "work") -> Iterator[bytes]:
    for batch in batches:
        yield from batch.column(column).to_pylist()


# ----------------------------------------------------------------------------- batches/

def batch_schema() -> Any:
    from kafkatx.spark.schema import COLUMNS, NOT_NULL, TYPES

    spark_to_ddl = {"string": "string", "int": "int", "long": "bigint", "boolean": "boolean"}
    return arrow_schema([(c, spark_to_ddl[TYPES["batches"][c]]) for c in COLUMNS["batches"]], NOT_NULL["batches"])


def batch_rows(batches: Iterable[Any], counted: Callable[[int, int, int, int], None] | None = None) -> Iterator[Any]:
    """``batches/`` rows of every :class:`SegmentTask` of the bins in ``batches`` (column ``work``: a msgspec
    list of tasks). ``counted(batches, crc errors, decode errors, bytes)`` is told each segment's counts.

    A segment's magic-2 batches are framed and their CRCs checked in C (``record_batch.frame_columns``, the
    framer every walker takes its batches from, as struct-of-arrays) and their rows made Arrow columns from
    those arrays, no Python object per batch; where the framer stops at bytes it does not take (a legacy
    batch, bytes that do not frame) the rest of the segment goes through ``rows.decode_segment``, the
    per-batch reference, and so does every segment on the windowed pread path or in pure-Python mode."""
    out = _BatchColumns(batch_schema())
    decoder = msgspec.msgpack.Decoder(list[SegmentTask])
    for blob in _items(batches):
        for task in decoder.decode(blob):
            got = [0, 0, 0]
            yield from _segment_rows(task, out, got)
            if counted is not None:
                counted(got[0], got[1], got[2], task.size)
    if len(out):
        yield out.flush()


# frame_columns' column indexes (record_batch.FRAME_COLUMNS)
_FC = {name: k for k, name in enumerate(record_batch.FRAME_COLUMNS)}
_INT32_MAX = 2**31 - 1
_ALL_BYTES = 1 << 62  # frame_columns' max_bytes: the walk is bounded by its row count alone
Control = tuple[str | None, int | None, str | None]  # control_type, coordinator_epoch, error


class _Framed:
    """Framed magic-2 batches a column at a time: chunks as the compiled ``frame_columns`` walk gives them
    (one buffer of ``count`` rows, column k of FRAME_COLUMNS at int64s ``[k * count, (k + 1) * count)``),
    with the rows whose CRC failed and the control batches' columns (by row)."""

    __slots__ = ("chunks", "n", "bad", "controls", "_gathered")

    def __init__(self) -> None:
        self.chunks: list[tuple[memoryview, int]] = []  # (the chunk's int64s, its row count)
        self.n = 0
        self.bad: list[int] = []
        self.controls: dict[int, Control] = {}
        self._gathered: tuple[Any, Any, Any] | None = None  # (all chunks' int64s, row base index, row count)

    def __len__(self) -> int:
        return self.n

    def add(self, data: Any, count: int) -> memoryview:
        """A chunk of ``count`` rows; its int64s."""
        flat = memoryview(data).cast("B").cast("q")
        if count:
            self.chunks.append((flat, count))
            self.n += count
            self._gathered = None
        return flat

    def extend(self, other: _Framed) -> None:
        n = self.n
        self._gathered = None
        self.chunks.extend(other.chunks)
        self.n += other.n
        if other.bad:
            self.bad.extend(n + i for i in other.bad)
        if other.controls:
            self.controls.update((n + i, c) for i, c in other.controls.items())

    def column(self, name: str) -> Any:
        """FRAME_COLUMNS ``name`` of every row as an Arrow int64 array (on the chunk's bytes when there is one)."""
        import pyarrow as pa

        k = _FC[name]
        if len(self.chunks) == 1:
            flat, count = self.chunks[0]
            data = pa.py_buffer(flat).slice(8 * k * count, 8 * count)
            return pa.Array.from_buffers(pa.int64(), self.n, [None, data])
        import pyarrow.compute as pc

        whole, base, counts = self._gather()
        return pc.take(whole, pc.add(base, pc.multiply(counts, k)))  # row i of chunk j: o_j + k * c_j + (i - R_j)

    def _gather(self) -> tuple[Any, Any, Any]:
        """Every chunk's int64s in one Arrow array (one join, not one slice per chunk and column), with each
        row's index in it less ``k * count`` (chunk j's start o_j, less the rows R_j before it, plus the row's
        index i) and its chunk's row count c_j: column k of row i is at ``base + k * count``."""
        if self._gathered is None:
            import pyarrow as pa
            import pyarrow.compute as pc

            starts: list[int] = []
            counts: list[int] = []
            ends: list[int] = []
            at = rows = 0
            for flat, count in self.chunks:
                starts.append(at - rows)
                counts.append(count)
                at += len(flat)
                rows += count
                ends.append(rows)
            whole = pa.Array.from_buffers(pa.int64(), at, [None, pa.py_buffer(b"".join([f for f, _c in self.chunks]))])
            run_ends = pa.array(ends, pa.int64())

            def per_row(values: list[int]) -> Any:
                return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array(values, pa.int64())))

            index = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), rows)), 1)  # 0 .. rows - 1
            self._gathered = (whole, pc.add(index, per_row(starts)), per_row(counts))
        return self._gathered


class _BatchColumns:
    """``batches/`` rows as they come, in order: framed runs (one :class:`_Framed` for consecutive segments,
    with each segment's place and row end) and rows of the per-batch reference (tuples), each sealed into a
    record batch when the other kind follows; :meth:`flush` makes them one record batch."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.pieces: list[Any] = []  # sealed record batches
        self.sealed = 0  # their rows
        self.framed = _Framed()
        self.places: list[tuple[tuple[str, str, int, str, int], int]] = []  # (place columns, row end)
        self.rows = _Rows(schema)

    def __len__(self) -> int:
        return self.sealed + len(self.framed) + len(self.rows)

    def add(self, row: tuple[Any, ...]) -> None:
        if len(self.framed):
            self._seal()
        self.rows.add(row)

    def add_framed(self, task: SegmentTask, seg: _Framed) -> None:
        if not len(seg):
            return
        if len(self.rows):
            self._seal()
        self.framed.extend(seg)
        place = (task.log_dir, task.topic, task.partition, os.path.basename(task.segment_path),
                 task.segment_base_offset)
        self.places.append((place, len(self.framed)))

    def _seal(self) -> None:
        if len(self.rows):
            self.sealed += len(self.rows)
            self.pieces.append(self.rows.flush())
        if len(self.framed):
            self.pieces.append(_framed_batch(self.schema, self.framed, self.places))
            self.sealed += len(self.framed)
            self.framed = _Framed()
            self.places = []

    def flush(self) -> Any:
        import pyarrow as pa

        self._seal()
        pieces, self.pieces, self.sealed = self.pieces, [], 0
        if len(pieces) == 1:
            return pieces[0]
        if not pieces:
            return self.rows.flush()  # no rows: an empty record batch of the schema
        return pa.RecordBatch.from_arrays([pa.concat_arrays([p.column(k) for p in pieces])
                                           for k in range(len(self.schema))], schema=self.schema)


def _attribute_names() -> tuple[list[str], list[str]]:
    """The ``compression`` names by codec id (0-7) and the ``timestamp_type`` names by the timestamp type bit
    of a magic-2 batch, as the per-batch rows name them (``rows._attribute_columns``)."""
    def names(attributes: int) -> tuple[str, str, bool, bool]:
        return _attribute_columns(record_batch.BatchHeader(
            position=0, base_offset=0, batch_length=0, partition_leader_epoch=-1, magic=2, crc=0,
            attributes=attributes, last_offset_delta=0, base_timestamp=-1, max_timestamp=-1, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, records_count=0))

    return ([names(codec)[0] for codec in range(record_batch.COMPRESSION_CODEC_MASK + 1)],
            [names(bit * record_batch.TIMESTAMP_TYPE_MASK)[1] for bit in (0, 1)])


_NAMES: list[tuple[Any, Any]] = []  # (compression names, timestamp type names) as Arrow arrays, made once


def _last_sequence(base_sequence: Any, last_offset_delta: Any) -> Any:
    """Kafka's ``DefaultRecordBatch.lastSequence`` of int64 columns holding int32s: NO_SEQUENCE (-1) stays
    -1, else ``incrementSequence(baseSequence, lastOffsetDelta)`` in Java int arithmetic
    (``record_batch.increment_sequence``, the reference): past ``Integer.MAX_VALUE - delta`` the sum goes
    2^31 further (on from 0), and that bound and the sum wrap modulo 2^32 as Java's ints do, so a crafted
    batch (a negative delta, a base sequence below -1) gives Java's value, always an int32."""
    import pyarrow.compute as pc

    def java_int(v: Any) -> Any:  # the low 32 bits, two's complement (int64 in, int64 out)
        return pc.subtract(pc.bit_wise_and(pc.add(v, 2**31), 0xFFFFFFFF), 2**31)

    bound = java_int(pc.subtract(_INT32_MAX, last_offset_delta))  # Integer.MAX_VALUE - increment
    total = pc.add(base_sequence, last_offset_delta)
    seq = java_int(pc.if_else(pc.greater(base_sequence, bound), pc.add(total, 2**31), total))
    return pc.if_else(pc.equal(base_sequence, -1), -1, seq)


def _framed_batch(schema: Any, framed: _Framed, places: list[tuple[tuple[str, str, int, str, int], int]]) -> Any:
    """The ``batches/`` record batch of framed rows: the int64 columns on ``frame_columns``' arrays (no copy),
    int32 ones cast from them, the place columns run-end decoded from one value per segment, the names taken
    from a table of eight, booleans cast from the 0/1 columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(framed)
    i64 = framed.column

    def i32(name: str) -> Any:
        return i64(name).cast(pa.int32())

    if not _NAMES:
        codecs, ts_types = _attribute_names()
        _NAMES.append((pa.array(codecs, pa.string()), pa.array(ts_types, pa.string())))
    codec_names, ts_names = _NAMES[0]
    ends = pa.array([end for _p, end in places], pa.int64())

    def place(k: int, typ: Any) -> Any:
        values = pa.array([p[k] for p, _end in places], typ)
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, values))

    attributes = i64("attributes")
    ts_bit = pc.shift_right(pc.bit_wise_and(attributes, record_batch.TIMESTAMP_TYPE_MASK), 3)
    if framed.bad:
        valid = [True] * n
        for i in framed.bad:
            valid[i] = False
        crc_ok = pa.array(valid, pa.bool_())
    else:
        crc_ok = pa.repeat(pa.scalar(True, pa.bool_()), n)
    if framed.controls:
        control_type: list[str | None] = [None] * n
        coordinator_epoch: list[int | None] = [None] * n
        error: list[str | None] = [None] * n
        for i, (ctype, epoch, err) in framed.controls.items():
            control_type[i], coordinator_epoch[i], error[i] = ctype, epoch, err
        controls = [pa.array(control_type, pa.string()), pa.array(coordinator_epoch, pa.int32()),
                    pa.array(error, pa.string())]
    else:
        controls = [pa.nulls(n, pa.string()), pa.nulls(n, pa.int32()), pa.nulls(n, pa.string())]
    base_sequence = i64("base_sequence")
    arrays = [
        place(0, pa.string()), place(1, pa.string()), place(2, pa.int32()), place(3, pa.string()),
        place(4, pa.int64()), i64("position"), i64("base_offset"), i64("last_offset"), i32("records_count"),
        i64("size"), i32("magic"), attributes.cast(pa.int32()), pc.take(codec_names, i64("codec")),
        pc.take(ts_names, ts_bit), i64("crc"), crc_ok, i32("partition_leader_epoch"), i64("producer_id"),
        i32("producer_epoch"), base_sequence.cast(pa.int32()),
        _last_sequence(base_sequence, i64("last_offset_delta")).cast(pa.int32()),
        i64("transactional").cast(pa.bool_()), i64("control").cast(pa.bool_()), controls[0], controls[1],
        i64("base_timestamp"), i64("max_timestamp"), controls[2],
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _frame_segment(buf: Any, pos: int, end: int, room: int, path: str) -> tuple[_Framed, int, bool]:
    """Up to ``room`` batches from ``pos`` framed (``frame_columns``, CRCs checked): a batch whose CRC fails
    is taken as a row of its own (its CRC false) and the walk goes on after it; each control batch's record
    read (``read_control_record``, as ``rows.decode_segment`` reads it). Returns the rows, where the walk
    stopped and whether it stopped at bytes the framer does not take (the reference reads those)."""
    rb = record_batch
    walk = rb._batch.frame_columns  # record_batch.frame_columns' compiled walk, its columns left in one buffer
    seg = _Framed()
    stuck = False
    control, count_, position = _FC["control"], _FC["records_count"], _FC["position"]
    size_, magic_, attributes_ = _FC["size"], _FC["magic"], _FC["attributes"]
    while pos < end and len(seg) < room:
        data, count, pos, bad = walk(buf, pos, end, True, room - len(seg), _ALL_BYTES)
        first = len(seg)
        flat = seg.add(data, count)
        for i in compress(range(count), flat[control * count:(control + 1) * count]):
            records = flat[count_ * count + i]
            if records > 0:  # isControlBatch with a record (decode_segment reads the same)
                at = flat[position * count + i]
                seg.controls[first + i] = _control(buf, at, end, path, _control_key(
                    buf, at, flat[size_ * count + i], flat[magic_ * count + i], flat[attributes_ * count + i], records))
        if bad is not None:  # the batch at pos frames but its CRC does not hold
            h = rb.frame_batch(buf, pos, end)
            if h is None:  # cannot be: frame_columns framed it
                return seg, pos, True
            seg.bad.append(len(seg))
            seg.add(array("q", rb._frame_row(h)), 1)
            if h.is_control and h.records_count > 0:
                seg.controls[len(seg) - 1] = _control(buf, pos, end, path, _control_key(
                    buf, pos, h.size, h.magic, h.attributes, h.records_count))
            pos += h.size
        elif not count:
            stuck = pos < end
            break
    return seg, pos, stuck


# What read_control_record made of a control batch, by everything it reads of it: magic, attributes (the
# codec), records count and the bytes of its records section. Kafka's markers repeat those bytes exactly
# (a COMMIT or ABORT of one coordinator epoch, every delta 0), so a segment's markers are read once per kind.
# Only answers are kept: an error names the batch's file and byte, so it is read each time.
_CONTROLS: dict[tuple[int, int, int, bytes], Control] = {}
_MAX_CONTROLS = 4096  # emptied past this, never grown without bound
_MAX_CONTROL_BYTES = 256  # a records section longer than this (not Kafka's marker) is read, not kept


def _control_key(buf: Any, position: int, size: int, magic: int, attributes: int,
                 records: int) -> tuple[int, int, int, bytes] | None:
    """The :data:`_CONTROLS` key of the control batch of ``size`` bytes at ``position`` (None: not kept)."""
    lo, hi = position + record_batch.HEADER_SIZE, position + size
    if 0 <= lo <= hi <= len(buf) and hi - lo <= _MAX_CONTROL_BYTES:
        return (magic, attributes, records, bytes(buf[lo:hi]))
    return None


def _control(buf: Any, at: int, end: int, path: str, key: tuple[int, int, int, bytes] | None) -> Control:
    """The ``control_type, coordinator_epoch, error`` of the control batch at ``at`` as ``rows.decode_segment``
    reads them (``read_control_record``): the answer kept in :data:`_CONTROLS` under ``key``
    (:func:`_control_key`) when one is, else the batch's header framed and its record read."""
    got = _CONTROLS.get(key) if key is not None else None
    if got is not None:
        return got
    h = record_batch.frame_batch(buf, at, end)
    assert h is not None  # the framer framed it
    try:
        rec = record_batch.read_control_record(buf, h)
    except DecodeError as err:
        return (None, None, str(err.at(path)))
    got = (rec.type_name, rec.coordinator_epoch, None)
    if key is not None:
        if len(_CONTROLS) >= _MAX_CONTROLS:
            _CONTROLS.clear()
        _CONTROLS[key] = got
    return got


def _segment_rows(task: SegmentTask, out: _BatchColumns, got: list[int]) -> Iterator[Any]:
    """One segment's rows added to ``out`` (a record batch yielded whenever it holds ``ROWS_PER_BATCH``),
    ``got`` told its (batches, CRC errors, decode errors).

    The framed rows are handed on once the file is closed, or when the flush size is reached: a read
    that fails (a file cut under it) leaves none of the rows not handed on, and the reference reads the
    segment from where the rows handed on end (its start when none were), as it reads a segment the
    framer stops in from where it stopped."""
    start = task.start  # where the reference reads from, if it reads
    if getattr(record_batch._batch, "frame_columns", None) is not None:
        try:
            with open_windowed(Path(task.segment_path)) as (buf, win):
                if win is None:
                    end = len(buf) if task.end is None else min(task.end, len(buf))
                    pos = task.start
                    while True:
                        seg, pos, stuck = _frame_segment(buf, pos, end, ROWS_PER_BATCH - len(out), task.segment_path)
                        if stuck or pos >= end:
                            break
                        _hand_on(task, seg, out, got)  # the flush size reached; the walk goes on
                        start = pos
                        yield out.flush()
            if win is None:
                _hand_on(task, seg, out, got)
                start = pos
                if not stuck:
                    if len(out) >= ROWS_PER_BATCH:
                        yield out.flush()
                    return
        except (DecodeError, KafkaTxError):
            pass
    for kind, payload in decode_segment(msgspec.structs.replace(task, chosen=False, start=start)):
        if kind == BATCH:
            out.add(payload)  # type: ignore[arg-type]
            if len(out) >= ROWS_PER_BATCH:
                yield out.flush()
        elif kind == EVENTS:
            counts: SegmentEvents = payload  # type: ignore[assignment]
            got[0] += counts.batches
            got[1] += counts.crc_errors
            got[2] += counts.decode_errors


def _hand_on(task: SegmentTask, seg: _Framed, out: _BatchColumns, got: list[int]) -> None:
    out.add_framed(task, seg)
    got[0] += len(seg)
    got[1] += len(seg.bad)


# ----------------------------------------------------------------------------- the partitions' replay

_FOLDERS: dict[str, Path] = {}  # a folder's Path by its string: the log dirs and the folders holding partitions
_MAX_FOLDERS = 4096  # a task sees a few log dirs; the cache is emptied past this, never grown without bound


def _folder(path: str) -> Path:
    """``Path(path)`` made once per folder string (a Path parses its string: ~5 us, twice per partition)."""
    got = _FOLDERS.get(path)
    if got is None:
        if len(_FOLDERS) >= _MAX_FOLDERS:
            _FOLDERS.clear()
        got = _FOLDERS[path] = Path(path)
    return got


def _child(path: str) -> Path:
    """``Path(path)`` as the child of its folder's cached Path (``segment.child_path``, no parse), where that
    is the same path: a normalised parent (what ``Path`` would print back) and a plain last name; else parsed."""
    parent, name = os.path.split(path)
    if parent and name and name not in (".", ".."):
        folder = _folder(parent)
        if str(folder) == parent:
            return child_path(folder, name)
    return Path(path)


def _partition(info: PartitionInfo) -> Partition:
    key = (info.topic, info.partition)
    stub = _LogDirStub(_folder(info.log_dir), key, info.log_start_offset, clean_shutdown=info.clean_shutdown,
                       recovery_point=info.recovery_point)
    return Partition(_child(info.partition_path), topic=info.topic, partition=info.partition,
                     log_dir=stub)  # type: ignore[arg-type]


def _skipped(part: Partition, err: BaseException) -> str:
    """The skipped line of ``offline._reduce_partitions``."""
    where = f"{err.filename}: " if isinstance(err, OSError) and err.filename else ""
    return f"{part.name} ({part.path}): {where}{err}"


_NO_LAG = (None,) * (len(_LAG) - 2)
_LAG_I = [n for n, _t in _LAG][2:].index("lag")  # in a REPLAY row: 4 + this
_OUTCOME_I = [n for n, _t in _TRANSACTION][2:].index("outcome")  # in a REPLAY row: 4 + len(_NO_LAG) + this
_NO_SPAN = (None,) * (len(_TRANSACTION) - 2)


_COLUMN_I = {n: i for i, (n, _t) in enumerate(REPLAY)}
_STAND_IN_I, _TEXT_I = _COLUMN_I["stand_in"], _COLUMN_I["text"]
Said = tuple[int, str, int, int, str | None]  # (kind, topic, partition, seq, text): a note the driver prints


def _uncounted(_what: str, _n: int = 1) -> None:
    pass


def replay_partitions(batches: Iterable[Any], *, now: int, count: Callable[[str, int], None] = _uncounted,
                      said: Callable[[list[Said]], None] | None = None) -> Iterator[Any]:
    """Each chosen partition of the bins in ``batches`` (column ``work``: a msgspec list of
    :class:`PartitionInfo`) replayed as ``kafkatx timeline`` replays it, reduced to REPLAY rows.
    ``count(what, n)``: the summary's counts (partitions, with_lag, COMMIT, ABORT, OPEN). ``said(notes)``,
    once at the task's end: what the driver prints (the NOTE and SKIP rows, the LAG rows of a stand-in
    high watermark, as ``(kind, topic, partition, seq, text)``)."""
    schema = arrow_schema(REPLAY, ("kind", "seq", "topic", "partition"))
    out = _Rows(schema)
    decoder = msgspec.msgpack.Decoder(list[PartitionInfo])
    told: list[Said] = []
    span_pid = 4 + len(_NO_LAG)
    for blob in _items(batches):
        for info in decoder.decode(blob):
            for row in _replay_one(info, now):
                kind = row[0]
                if kind == LAG:
                    count("partitions", 1)
                    if row[4 + _LAG_I]:
                        count("with_lag", 1)
                    if row[_STAND_IN_I]:
                        told.append((LAG, row[2], row[3], 0, None))
                elif kind == SPAN:
                    count(row[span_pid + _OUTCOME_I], 1)
                elif kind == OPEN:
                    pass
                else:
                    told.append((kind, row[2], row[3], row[1], row[_TEXT_I]))
                out.add(row)
                if len(out) >= ROWS_PER_BATCH:
                    yield out.flush()
    if len(out):
        yield out.flush()
    if said is not None:
        said(told)


def _replay(part: Partition, now: int, completed: list[CompletedTxn]) -> PartitionProducerState:
    """``timeline.replay_spans``: every completed span on disk appended to ``completed`` (a replay from the
    log start) and the producer state the broker builds at ``now`` (a replay from where
    ``ProducerStateManager`` starts). When the broker itself starts at the log start (no usable snapshot,
    ``LogLoader``'s rebuild from ``logStartOffset``) and reloads no snapshot of its own after it, the two
    replays are one: the same fold from the same state over the same batches (``now`` only expires
    producers at the end), so it runs once."""
    read: dict[str, bytes] = {}  # the last segment as the plan's log end read it: both replays fold those bytes
    plan = plan_load(part, read=read)
    events = FileEvents.of_plan(part, plan, known=read)  # read as recovery leaves the files, as find-hanging reads them
    chain = plan.chain
    if plan.tail_error is None and chain.kind == "log-start" and chain.offset == plan.log_start_offset \
            and not any(r > chain.offset for r in chain.reloads):
        return replay_partition_events(part, events, plan=plan, now=now, on_completed=completed.append)
    return replay_spans(part, events, now=now, plan=plan, completed=completed)


def _lag_values(row: LagRow) -> tuple[Any, ...]:
    """A lag row's values after topic and partition, its remote segments (if any) as JSON text."""
    values = msgspec.structs.astuple(row)[2:]
    segments = values[_REMOTE_SEGMENTS_I]
    if segments is None:
        return values
    return (*values[:_REMOTE_SEGMENTS_I], msgspec.json.encode(segments).decode(), *values[_REMOTE_SEGMENTS_I + 1:])


def _row(kind: int, seq: int, topic: str, partition: int, *, lag: tuple[Any, ...] = _NO_LAG,
         span: tuple[Any, ...] = _NO_SPAN,
         open_txn: bytes | None = None, snapshot_offset: int | None = None, stand_in: bool | None = None,
         text: str | None = None, info: bytes | None = None) -> tuple[Any, ...]:
    return (kind, seq, topic, partition, *lag, *span, open_txn, snapshot_offset, stand_in, text, info)


def _replay_one(info: PartitionInfo, now: int) -> Iterator[tuple[Any, ...]]:
    part = _partition(info)
    t, p = info.topic, info.partition
    completed: list[CompletedTxn] = []
    try:
        state = _replay(part, now, completed)
    except (KafkaTxError, OSError) as err:
        yield _row(SKIP, 0, t, p, text=_skipped(part, err))
        return
    notes = [*state.notices, *(f"{f.severity}: {f.message}" for f in state.findings)]
    row, stand_in = lag_row(state, info.high_watermark, Report(notices=notes))
    for i, note in enumerate(notes):
        yield _row(NOTE, i, t, p, text=note)
    yield _row(LAG, 0, t, p, lag=_lag_values(row), stand_in=stand_in, snapshot_offset=state.snapshot_offset)
    for s in transaction_spans(completed, state, _no_id, now):
        yield _row(SPAN, 0, t, p, span=(s.producer_id, s.producer_epoch, None, s.first_offset, s.last_offset,
                                        s.marker_offset, s.outcome, s.coordinator_epoch, s.start_ms, s.end_ms,
                                        s.duration_ms))
    # a __consumer_offsets partition's open transactions carry the partition: the groups a hanging one
    # blocks are read from its files where it is classified (coordinator/groups.py)
    where = msgspec.msgpack.encode(info) if t == OFFSETS_TOPIC else None
    for txn in state.open_transactions:
        yield _row(OPEN, 0, t, p, lag=(state.log_start_offset, *_NO_LAG[1:]), open_txn=msgspec.msgpack.encode(txn),
                   snapshot_offset=state.snapshot_offset, span=(txn.producer_id, *_NO_SPAN[1:]), info=where)


def _no_id(_producer_id: int) -> None:
    return None  # the transactional ids are joined on by producer id (resolve_groups)


# ----------------------------------------------------------------------------- the coordinator

class TxnPartitionWork(msgspec.Struct, frozen=True):
    """One chosen ``__transaction_state`` partition for :func:`fold_coordinator`; ``tids``: the ids whose ID
    rows are wanted (the filter's second form, :func:`_id_rows`), None for the named form or none."""

    info: PartitionInfo
    partitions_count: int
    tids: list[str] | None = None


CoordinatorSaid = tuple[int, int, int, str | None]  # (kind, fold, seq, text): a coordinator note the driver prints


def _work_named(batches: Iterable[Any]) -> Iterator[tuple[bytes, frozenset[int] | None]]:
    """Each row's ``work`` and, where the batches have the column (the driver's one-row aggregate of the
    named producer ids, cross-joined onto the work rows), its ``named`` set (else None: no filter)."""
    for batch in batches:
        works = batch.column("work").to_pylist()
        if "named" not in batch.schema.names:
            yield from ((w, None) for w in works)
            continue
        for w, named in zip(works, batch.column("named").to_pylist(), strict=True):
            yield w, frozenset(named or ())


def fold_coordinator(batches: Iterable[Any], *, now: int,
                     said: Callable[[list[CoordinatorSaid], list[tuple[str, int]]], None] | None = None,
                     ) -> Iterator[Any]:
    """Each ``__transaction_state`` partition in ``batches`` (column ``work``: a msgspec
    :class:`TxnPartitionWork`, or a list of them: a bin) folded as ``replay_transaction_log`` folds it:
    COORDINATOR rows, the ID rows of the transactional ids the filter keeps (:func:`_id_rows`: its latest
    value, the producer ids it claims, those its history used and those of both that are named), and the
    partition's FINDING, CSKIP and CNOTICE rows. The filter: the row's ``named`` column (the producer ids
    the partitions name, joined onto the work rows by Spark; absent: every id), else the work's ``tids``.
    ``said(notes, misplaced)``, once at the task's end: the non-ID rows as ``(kind, fold, seq, text)`` (what
    the driver prints) and the (id, partition) of each id found in a partition it does not hash to, every
    one, whether its row is kept or not (each one a ``wrong-coordinator-partition`` finding, which
    ``coordinator_from_folds`` decides on)."""
    out = _Rows(arrow_schema(COORDINATOR, ("kind", "fold", "seq")))
    decoder = msgspec.msgpack.Decoder(list[TxnPartitionWork] | TxnPartitionWork)
    told: list[CoordinatorSaid] = []
    misplaced: list[tuple[str, int]] = []
    for blob, named in _work_named(batches):
        got = decoder.decode(blob)
        for work in got if isinstance(got, list) else [got]:
            tids = frozenset(work.tids) if work.tids is not None else None
            rows = _fold_one(work.info, work.partitions_count, now, named=named, tids=tids, misplaced=misplaced)
            told.extend((row[0], row[1], row[2], row[-1]) for row in rows if row[0] != ID)
            for i in range(0, len(rows), ROWS_PER_BATCH):
                out.extend(rows[i:i + ROWS_PER_BATCH])
                yield out.flush()
    if said is not None:
        said(told, misplaced)


def _fold_one(info: PartitionInfo, n: int, now: int, *, named: frozenset[int] | None = None,
              tids: frozenset[str] | None = None, misplaced: list[tuple[str, int]] | None = None,
              ) -> list[tuple[Any, ...]]:
    """One ``__transaction_state`` partition's COORDINATOR rows (see :func:`fold_coordinator`): the loader's
    notices, the fold's findings or the skip, then the ID rows of the ids the filter (``named``, ``tids``)
    keeps (:func:`_id_rows`; the C fold's table makes them itself, ``TxnTable.id_rows``, the same rows).
    ``misplaced`` gets (id, partition) of every id found here that hashes to another partition."""
    part = _partition(info)
    number = info.partition
    findings: list[Finding] = []
    rows: list[tuple[Any, ...]] = []
    try:
        plan = plan_load(part)
        for a in plan.actions:
            if a.action in (TRUNCATE_SEGMENT, DELETE_SEGMENT):
                rows.append((CNOTICE, number, len(rows), None, None, None, None, None, None, None, None, None,
                             a.message))
        ids = fold_txn_partition(part, plan, n, findings, history_for=())
    except (KafkaTxError, OSError) as err:
        rows.extend((FINDING, number, len(rows) + i, None, None, None, None, None, None, None, None, None,
                     f"{f.severity}: {f.message}") for i, f in enumerate(findings))
        where = f"{err.filename}: " if isinstance(err, OSError) and err.filename else ""
        rows.append((CSKIP, number, len(rows), None, None, None, None, None, None, None, None, None,
                     f"{part.path}: {where}{err}"))
        return rows
    rows.extend((FINDING, number, len(rows) + i, None, None, None, None, None, None, None, None, None,
                 f"{f.severity}: {f.message}") for i, f in enumerate(findings))
    if misplaced is not None:  # every id that hashes elsewhere (ids.latest holds each: first sight sets it)
        misplaced.extend((tid, number) for tid in ids.misplaced)
    # a few objects per id and no cycle (a row, two lists of ints, its bytes): with the collector on, its
    # young collections walk them again and again, as much time as making them (storage.collector_paused)
    with collector_paused():
        if isinstance(ids.latest, TxnLatest):  # the C fold's table: its rows made where it lies
            ids.latest.table.id_rows(ID, number, now, ids.misplaced, TIMEOUT_STATES, TWO_PHASE_COMMIT_TIMEOUT_MS,
                                     is_timed_out, pickle.dumps, pickle.HIGHEST_PROTOCOL, named, tids, rows)
        else:
            rows.extend(_id_rows(ids, number, now, named=named, tids=tids))
    return rows


def _id_rows(ids: TxnIds, number: int, now: int, *, named: Container[int] | None = None,
             tids: Container[str] | None = None) -> Iterator[tuple[Any, ...]]:
    """The ID rows of one folded partition, per transactional id in first-seen order: (ID, partition, 0, id,
    whether it hashes here, whether its latest record is a tombstone, that record's offset, whether it is
    past its timeout (``TransactionStateManager.timedOutTransactions``: ``rules.is_timed_out`` in
    ``TIMEOUT_STATES``), the producer ids its value claims (``producerId``, ``prevProducerId``,
    ``nextProducerId`` that are not ``NO_PRODUCER_ID``), the producer ids of its records kept, those of
    both (claims first) that ``named`` holds, each once (all of them when ``named`` is None), its value
    pickled, None). The reference of ``_coordinator.TxnTable.id_rows``.

    The filter, when ``named`` or ``tids`` is given: an id's row only when ``named`` holds a producer id it
    claims or its records used (``CoordinatorState.transactional_id_for`` could resolve that producer id to
    it, or ``expired_transactional_id_for`` name it) or it is past its timeout (the owed-abort check reads
    those), or when ``tids`` holds the id; nothing is made (no list, no pickle) for an id it skips."""
    history = ids.history
    # the C fold's history read straight from its table (a Mapping's get costs a Python call and a KeyError)
    history_get = history.table.history_get if isinstance(history, TxnHistory) else history.get
    misplaced = ids.misplaced
    dumps = pickle.dumps
    no_pid = NO_PRODUCER_ID
    every = named is None and tids is None
    for tid, (offset, value) in ids.latest.items():
        entries = history_get(tid)
        hist = [h[F_PRODUCER_ID] for _o, h in history_items(entries) if h is not None and h[F_PRODUCER_ID] >= 0] \
            if entries else []
        claims = [] if value is None else [
            pid for pid in (value[F_PRODUCER_ID], value[F_PREVIOUS_PRODUCER_ID], value[F_NEXT_PRODUCER_ID])
            if pid != no_pid]
        timed_out = value is not None and value[F_STATE] in TIMEOUT_STATES and \
            is_timed_out(value[F_START_TIMESTAMP], value[F_TIMEOUT_MS], now)
        if not every and not (
                (named is not None and (timed_out or any(pid in named for pid in (*claims, *hist))))
                or (tids is not None and tid in tids)):
            continue
        pids = list(dict.fromkeys(pid for pid in (*claims, *hist) if named is None or pid in named))
        home = tid not in misplaced
        yield (ID, number, 0, tid, home, value is None, offset, timed_out, claims, hist, pids,
               None if value is None else dumps(value, protocol=pickle.HIGHEST_PROTOCOL), None)


class _History(NamedTuple):
    """What ``index_producers`` and ``expired_transactional_id_for`` read of a history entry."""

    producer_id: int


Producer = tuple[str | None, int | None, int | None, bytes | None, str | None, int | None]
"""What a producer id resolves to: (transactional id, its coordinator partition, offset, fields) of the live
id it belongs to, else (None x 4, the expired id a notice would name, that id's tombstone offset)."""

_UNKNOWN: Producer = (None, None, None, None, None, None)

# What a named producer id resolves to (:func:`resolve_groups`): the columns joined onto its spans and
# open transactions
RESOLVED = [("pid", "bigint"), ("tid", "string"), ("rfold", "int"), ("roffset", "bigint"), ("rfields", "binary"),
            ("expired", "string"), ("expired_offset", "bigint")]
# The claimant rows a group of :func:`resolve_groups` reads (one per taken ID row and producer id it names)
CLAIMANT = ("pid", "tid", "fold", "tomb", "offset", "claims", "hist", "fields")


def resolve_producer(pid: int, claimants: Iterable[Mapping[str, Any]], *, partitions_count: int) -> Producer:
    """What producer id ``pid`` belongs to, from the taken ID rows that claim it or whose history used it
    (``claimants``): the live id ``CoordinatorState.transactional_id_for`` gives (current claims over
    history, the greatest id of a tie) with that id's row, else the expired id a notice would name
    (``expired_transactional_id_for``) and its tombstone's offset."""
    rows = list(claimants)
    live = {r["tid"]: r for r in rows if not r["tomb"]}
    transactions = {tid: TransactionMetadata.from_fields(tid, pickle.loads(r["fields"]), offset=r["offset"],  # noqa: S301
                                                         coordinator_partition=r["fold"])
                    for tid, r in live.items()}
    history = {r["tid"]: [_History(h) for h in r["hist"]] for r in rows}
    tombstoned = {r["tid"]: r["offset"] for r in rows if r["tomb"]}
    coord = CoordinatorState(transactions=transactions, history=history,  # type: ignore[arg-type]
                             tombstoned=tombstoned, partitions_count=partitions_count, partitions_found=())
    tid = coord.transactional_id_for(pid)
    if tid is not None:
        r = live[tid]
        return (tid, r["fold"], r["offset"], r["fields"], None, None)
    expired = coord.expired_transactional_id_for(pid)
    return (None, None, None, None, expired, tombstoned.get(expired) if expired else None)


def resolve_groups(table: Any, *, partitions_count: int) -> Any:
    """One ``groupBy("pid").applyInArrow`` group: the claimant rows (:data:`CLAIMANT`) of one named producer
    id, resolved by :func:`resolve_producer` where the join put them. Returns one RESOLVED row."""
    import pyarrow as pa

    rows = table.select(list(CLAIMANT)).to_pylist()
    pid = rows[0]["pid"]
    got = resolve_producer(pid, rows, partitions_count=partitions_count)
    schema = arrow_schema(RESOLVED, ("pid",))
    return pa.Table.from_pylist([dict(zip([n for n, _t in RESOLVED], (pid, *got), strict=True))], schema=schema)


def _opener(part: Partition) -> Callable[[tuple[str, int]], Partition]:
    return lambda _tp: part


class _OneOpen:
    """What ``offline.hanging_rows`` reads of a replayed partition, for one of its open transactions."""

    __slots__ = ("topic", "partition", "open_transactions", "snapshot_offset", "log_start_offset")

    def __init__(self, txn: OpenTxn, snapshot_offset: int | None, log_start_offset: int) -> None:
        self.topic, self.partition = txn.topic, txn.partition
        self.open_transactions = [txn]
        self.snapshot_offset = snapshot_offset
        self.log_start_offset = log_start_offset

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


# The open transactions' columns a group of :func:`classify_groups` reads (after the join by producer id)
OPENED = ("open_txn", "snapshot_offset", "log_start_offset", "info", *[n for n, _t in RESOLVED])
# The timed-out ids' columns (one taken ID row per id Ongoing past its timeout)
TIMED = ("tid", "fold", "offset", "fields")


def classify_groups(opened: Any, timed: Any, *, now: int, max_timeout_ms: int, partitions_count: int,
                    count: Callable[[str, int], None] = _uncounted,
                    said: Callable[[list[Said], list[tuple[str, str]]], None] | None = None) -> Any:
    """One ``cogroup(...).applyInArrow`` group of one transactional id (or of the producer ids no live id
    claims: the null key): its open transactions (:data:`OPENED`: each joined with what its producer id
    resolved to) and, when it is ``Ongoing`` past its timeout, its ID row (:data:`TIMED`).

    Each open transaction classified by ``offline.hanging_rows`` against a coordinator that holds that one
    entry: the ``hanging/`` rows (returned). The pairs they hold open decide this id's owed abort
    (``hanging.owed_abort_notices``: a pair held open is always of the id the producer resolves to, so the
    id's own group holds every pair its notice looks at). ``said(notes, owed)``: the partitions' notes as
    ``(CNOTE, topic, partition, seq, text)`` and the owed-abort notes as (id, text)."""
    import pyarrow as pa

    schema = arrow_schema(_HANGING, ("kind", "topic", "partition", "producer_id", "producer_epoch", "first_offset"))
    decoder = msgspec.msgpack.Decoder(OpenTxn)
    info_decoder = msgspec.msgpack.Decoder(PartitionInfo)
    notes: list[Said] = []
    held: set[tuple[str, tuple[str, int]]] = set()
    out: list[tuple[Any, ...]] = []
    for r in opened.select(list(OPENED)).to_pylist():
        txn = decoder.decode(r["open_txn"])
        pid = txn.producer_id
        tid, fold, offset, fields = r["tid"], r["rfold"], r["roffset"], r["rfields"]
        expired, expired_offset = r["expired"], r["expired_offset"]
        transactions = {}
        if tid is not None:
            assert fields is not None and offset is not None and fold is not None
            transactions[tid] = TransactionMetadata.from_fields(tid, pickle.loads(fields),  # noqa: S301
                                                                offset=offset, coordinator_partition=fold)
        coord = CoordinatorState(
            transactions=transactions,
            history={expired: [_History(pid)]} if expired else {},  # type: ignore[list-item]
            tombstoned={expired: expired_offset} if expired and expired_offset is not None else {},
            partitions_count=partitions_count, partitions_found=(), _by_producer={pid: tid} if tid is not None else {})
        told: list[str] = []
        rows = hanging_rows(coord, [_OneOpen(txn, r["snapshot_offset"], r["log_start_offset"])],  # type: ignore[list-item]
                            now=now, max_timeout_ms=max_timeout_ms, report=Report(notices=told), held_open=held)
        if rows and r["info"] is not None:  # the consumer groups it blocks (coordinator/groups.py), from the files
            rows = with_blocked_groups(rows, _opener(_partition(info_decoder.decode(r["info"]))),
                                       Report(notices=told), key=hanging_key)
        for h in rows:
            count("hanging", 1)
            out.append(msgspec.structs.astuple(h))
        notes.extend((CNOTE, txn.topic, txn.partition, i, note) for i, note in enumerate(told))
    owed: list[tuple[str, str]] = []
    for t in timed.select(list(TIMED)).to_pylist():
        tid = t["tid"]
        meta = TransactionMetadata.from_fields(tid, pickle.loads(t["fields"]), offset=t["offset"],  # noqa: S301
                                               coordinator_partition=t["fold"])
        coord = CoordinatorState(transactions={tid: meta}, history={}, tombstoned={},
                                 partitions_count=partitions_count, partitions_found=())
        owed.extend((tid, note) for note in owed_abort_notices(coord, held, now=now))
    if said is not None and (notes or owed):
        said(notes, owed)
    columns = list(zip(*out, strict=True)) if out else [() for _ in schema]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                                schema=schema)
