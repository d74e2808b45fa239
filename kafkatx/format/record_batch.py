"""Record batches: the unit of a Kafka log segment (``.log``).

Magic 2 (``DefaultRecordBatch.java``), 61-byte header, big-endian:

    baseOffset            i64   @0
    batchLength           i32   @8   bytes after this field
    partitionLeaderEpoch  i32   @12
    magic                 i8    @16  (2)
    crc                   u32   @17  CRC-32C of bytes 21..end (attributes to the last record)
    attributes            i16   @21  bits 0-2 codec, 3 LogAppendTime, 4 transactional,
                                     5 control, 6 baseTimestamp is a delete horizon
    lastOffsetDelta       i32   @23
    baseTimestamp         i64   @27
    maxTimestamp          i64   @35
    producerId            i64   @43
    producerEpoch         i16   @51
    baseSequence          i32   @53
    recordsCount          i32   @57
    records                     @61  (compressed as a whole when a codec is set)

Record (``DefaultRecord.java``), zigzag varints:

    length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint, value,
    headerCount varint, [headerKeyLength varint, headerKey (utf-8),
                         headerValueLength varint (-1 = null), headerValue]*

The CRC sits *after* partitionLeaderEpoch so that a leader can stamp its epoch
into a batch without recomputing the checksum. Magic 0/1 message sets
(``legacy.py``) share the first 17 bytes' shape (offset i64, size i32, then the
magic at byte 16), which is how a reader tells the formats apart.

https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/DefaultRecordBatch.java
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/DefaultRecord.java
"""

from __future__ import annotations

import mmap
import struct
import zlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

from kafkatx.errors import BadLength, BadVarint, CrcMismatch, DecodeError, Truncated, UnknownVersion
from kafkatx.format import _primitives, compiled, legacy
from kafkatx.format._primitives import Buffer
from kafkatx.format.compression import Compression, compress, decompress, decompress_in_place
from kafkatx.format.control import (
    ControlRecord,
    ControlType,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
)
from kafkatx.format.varint import encode_varint, encode_varlong, read_zigzag

try:  # the optional compiled fast path (setup.py builds it when a C compiler is present); other
    # modules reach it as record_batch._batch (None when absent or switched off), hence "as"
    from kafkatx.format import _batch as _batch
except ImportError:  # pragma: no cover - depends on the build
    _batch = None  # type: ignore[assignment]

__all__ = [
    "Compression", "TimestampType", "BatchHeader", "Record", "ControlRecord", "ControlType",
    "MAX_BATCH_SIZE", "DEFAULT_MAX_DECOMPRESSED", "HEADER_SIZE",
    "frame_batch", "frame_columns", "FRAME_COLUMNS", "read_batch_header", "iter_batches", "crc_valid", "iter_records", "records_in_place", "read_control_record",
    "build_batch", "build_control_batch", "increment_sequence", "decrement_sequence",
]

# baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32, attributes i16,
# lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16,
# baseSequence i32, recordsCount i32
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size            # 61
LOG_OVERHEAD = 12                     # baseOffset + batchLength
_CRC_START = 21                       # the CRC covers attributes onwards
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# Smallest possible record: length, attributes, timestampDelta, offsetDelta, key length,
# value length, header count, one byte each.
_MIN_RECORD = 7

MAX_BATCH_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

# The attribute bits of a magic 2 batch, named and valued as in Kafka's DefaultRecordBatch; stated here
# once (the BatchHeader predicates below are DefaultRecordBatch's compressionType(), timestampType(),
# isTransactional(), isControlBatch() and hasDeleteHorizonMs()); the C twins mirror them.
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40
_INT32_MAX = 0x7FFFFFFF
_INT32_MIN = -0x80000000
_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_INT64_WIDTH = array("q").itemsize  # frame_columns' buffer holds native int64s


def _java_int(value: int) -> int:
    """``value`` as a Java ``int`` holds it: its low 32 bits, two's complement (JLS 4.2.2: int arithmetic
    wraps modulo 2^32, and so does every intermediate of an int expression)."""
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence(int, int)`` for two int32s, in Java int arithmetic.

    Valid sequences run from 0 to Integer.MAX_VALUE and then on from 0 (not from Integer.MIN_VALUE): the
    sum is taken 2^31 further when the sequence is past ``Integer.MAX_VALUE - increment``. Java computes
    that bound as an int too, so a negative increment (a crafted batch's last offset delta: ``LogSegment
    .recover`` checks CRCs and sizes, not the delta's sign) wraps it below the sequence, and each result
    is wrapped to 32 bits: kafka-dump-log.sh's lastSequence for every int32 pair, never a value int32
    cannot hold. The one statement of the rule; its C twin (``_framer.h``'s ``kx_increment_sequence``, which
    ``render/_dump.c`` and ``storage/_replay.c`` call) and the Arrow one (``spark/tasks._last_sequence``) are
    tested against it (tests/format/test_sequence_wrap.py)."""
    bound = _INT32_MAX - increment  # an int in Java: wraps when the increment is negative
    if not _INT32_MIN <= bound <= _INT32_MAX:
        bound = _java_int(bound)
    total = sequence + increment
    if sequence > bound:  # past Integer.MAX_VALUE: on from 0, i.e. 2^31 further
        total += _INT32_MIN
    return total if _INT32_MIN <= total <= _INT32_MAX else _java_int(total)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence(int, int)`` for two int32s (``BatchMetadata.firstSeq``): the
    inverse of :func:`increment_sequence`, below 0 back from Integer.MAX_VALUE, wrapped like Java's int."""
    total = sequence - decrement
    if sequence < decrement:  # below 0: back from Integer.MAX_VALUE, i.e. 2^31 further
        total -= _INT32_MIN
    return total if _INT32_MIN <= total <= _INT32_MAX else _java_int(total)


class TimestampType(IntEnum):
    NO_TIMESTAMP = -1     # magic 0
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchHeader:
    position: int               # byte position of the batch (its baseOffset field) in the buffer
    base_offset: int
    batch_length: int           # bytes after the length field
    partition_leader_epoch: int  # -1 for magic 0/1
    magic: int
    crc: int
    attributes: int             # magic 0/1: the wrapper message's attributes
    last_offset_delta: int
    base_timestamp: int         # -1 when absent (magic 0)
    max_timestamp: int
    producer_id: int            # -1 for magic 0/1
    producer_epoch: int         # -1 for magic 0/1
    base_sequence: int          # -1 for magic 0/1
    records_count: int          # magic 0/1: inner messages; -1 if a compressed wrapper did not decompress

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        try:
            return Compression(self.attributes & COMPRESSION_CODEC_MASK)
        except ValueError:
            return self.attributes & COMPRESSION_CODEC_MASK  # type: ignore[return-value]  # unknown codec id 5-7

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_sequence(self) -> int:
        # DefaultRecordBatch.lastSequence: NO_SEQUENCE (-1) stays -1, any other base sequence (a crafted one
        # below -1 too) is incremented by the last offset delta.
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)


# BatchHeader's fields in order: the wire order _make_header takes them in, and the order in which the C
# extension's header builder must fill them (tests/format/test_batch_header_fields.py).
BATCH_HEADER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(BatchHeader))


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


# ------------------------------------------------------------------ compiled fast path
# kafkatx/format/_batch.c mirrors the hot loops below (iter_batches' magic-2 fast
# path, _v2_records, CRC-32C) and is used when it is built and the compiled paths are on
# (kafkatx.format.compiled: KAFKATX_PURE_PYTHON unset or "0"); results and errors (type,
# message, position) are identical, which tests/format/test_speedups.py checks. It makes
# Record/BatchHeader instances by writing their slots directly, so it learns their slot
# offsets here, once.
_batch = compiled.bind(__name__, "_batch", _batch, lambda m: m.setup(Record, BatchHeader))  # type: ignore[assignment]

# Buffers the C code reads in place through the buffer protocol (a memoryview only
# when it is a flat byte view, like these).
_DIRECT = (bytes, bytearray, mmap.mmap)
# Records decoded per C call: a batch of up to this many uncompressed records is
# decoded straight from the caller's buffer in one call (no copy of the body); a
# bigger one is copied as the Python path does and decoded lazily in chunks, which
# bounds the list each call builds.
_CHUNK = 4096
# Headers framed per C call, and the bytes they may span (with verify_crc the CRC
# of every one is computed before the first is yielded).
_SCAN_COUNT = 256
_SCAN_BYTES = 4 * 1024 * 1024


def _direct(buf: Buffer) -> bool:
    return type(buf) in _DIRECT or (isinstance(buf, memoryview) and buf.c_contiguous and buf.itemsize == 1
                                    and buf.ndim == 1)


def _make_header(position: int, values: Sequence[int]) -> BatchHeader:
    """The BatchHeader at ``position`` whose other fields are ``values`` in BATCH_HEADER_FIELDS order (the
    wire order; a wrong count raises ValueError)."""
    (base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
     base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count) = values
    return BatchHeader(position=position, base_offset=base_offset, batch_length=batch_length,
                       partition_leader_epoch=partition_leader_epoch, magic=magic, crc=crc, attributes=attributes,
                       last_offset_delta=last_offset_delta, base_timestamp=base_timestamp,
                       max_timestamp=max_timestamp, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence, records_count=records_count)


# ---------------------------------------------------------------------------------- framing

def last_offset_overflows(base_offset: int, last_offset_delta: int) -> bool:
    """A v2 batch whose last offset (``DefaultRecordBatch.lastOffset()`` = base offset + last offset
    delta, a Java long that would wrap) leaves int64: ``LogSegment.recover`` ->
    ``ensureOffsetInRange(batch.lastOffset())`` rejects it. The C twin (``_framer.h`` ``kx_frame``) mirrors it."""
    return not _INT64_MIN <= base_offset + last_offset_delta <= _INT64_MAX


def frame_batch(buf: Buffer, pos: int, end: int) -> BatchHeader | None:
    """The framer every walker takes its magic-2 batches from (the twin of ``_framer.h``'s ``kx_frame``;
    Kafka's ``FileLogInputStream.nextBatch`` with ``DefaultRecordBatch``'s header accessors): the header of
    the whole magic-2 batch at ``pos`` -- a whole header, a length field inside
    [``RECORD_BATCH_OVERHEAD - LOG_OVERHEAD``, :data:`MAX_BATCH_SIZE`], the whole batch before ``end``, a
    last offset inside int64 (:func:`last_offset_overflows`) -- or None when the bytes there are not such a
    batch: then :func:`read_batch_header` reads them (a magic 0/1 batch) or says what is wrong with them."""
    left = end - pos
    if pos < 0 or left < HEADER_SIZE or buf[pos + 16] != 2:
        return None
    v = _HEADER.unpack_from(buf, pos)
    length = v[1]
    if (length < _MIN_BATCH_LENGTH or length > MAX_BATCH_SIZE or length + LOG_OVERHEAD > left
            or last_offset_overflows(v[0], v[6])):
        return None
    return _make_header(pos, v)


def read_batch_header(buf: Buffer, pos: int, end: int | None = None) -> BatchHeader:
    """The header of the batch (magic 0, 1 or 2) at ``pos``; the whole batch must lie before ``end``.
    A magic-2 batch is :func:`frame_batch`'s; bytes it does not frame raise the :class:`DecodeError` that
    says why (or are read as a magic 0/1 batch)."""
    if end is None:
        end = len(buf)
    framed = frame_batch(buf, pos, end)
    if framed is not None:
        return framed
    if pos < 0:  # FileRecords.slice: "Invalid position" (never a batch counted back from the end)
        raise DecodeError(f"invalid position {pos}: a batch position is never negative", position=pos)
    left = end - pos
    if left < 17:
        raise Truncated(f"batch header needs at least 17 bytes, {left} left", position=pos)
    magic = buf[pos + 16]
    if magic == 2:  # what frame_batch refused, said
        if left < HEADER_SIZE:
            raise Truncated(f"batch header needs {HEADER_SIZE} bytes, {left} left", position=pos)
        v = _HEADER.unpack_from(buf, pos)
        length = v[1]
        if length < _MIN_BATCH_LENGTH or length > MAX_BATCH_SIZE:
            raise BadLength(f"batch length {length} is outside [{_MIN_BATCH_LENGTH}, {MAX_BATCH_SIZE}]",
                            position=pos + 8)
        if length + LOG_OVERHEAD > left:
            raise Truncated(f"batch of {length + LOG_OVERHEAD} bytes runs past the end ({left} left)",
                            position=pos)
        raise DecodeError(f"base offset {v[0]} + last offset delta {v[6]} overflows int64 (Kafka's "
                          "LogSegment.recover rejects the batch)", position=pos + 23)
    if magic in (0, 1):
        return _legacy_header(buf, pos, end)
    raise UnknownVersion(f"unknown record batch magic {magic}", position=pos + 16)


def _legacy_header(buf: Buffer, pos: int, end: int) -> BatchHeader:
    (size,) = struct.unpack_from(">i", buf, pos + 8)
    if size > MAX_BATCH_SIZE:
        raise BadLength(f"message size {size} exceeds {MAX_BATCH_SIZE}", position=pos + 8)
    msg = legacy.read_message(buf, pos, end, with_data=False)
    base_offset = msg.offset
    count = 1
    max_ts = msg.timestamp
    if msg.attributes & legacy.CODEC_MASK:
        # Kafka's baseOffset() of a compressed wrapper is its first inner offset, which
        # takes a decompression. A wrapper that does not decompress keeps its framing
        # (so scans go on) with records_count -1; iter_records reports the error.
        try:
            full = legacy.read_message(buf, pos, end)
            inner = legacy.deep_messages(buf, full, max_decompressed=DEFAULT_MAX_DECOMPRESSED)
            base_offset = inner[0][0]
            count = len(inner)
        except DecodeError:
            count = -1
    return _make_header(pos, (base_offset, msg.size, -1, msg.magic, msg.crc, msg.attributes,
                              msg.offset - base_offset, msg.timestamp, max_ts, -1, -1, -1, count))


def iter_batches(buf: Buffer, start: int = 0, end: int | None = None, *,
                 verify_crc: bool = False, last_only: bool = False) -> Iterator[BatchHeader]:
    """Frame the batches in ``buf[start:end]`` by their length fields (no decompression).

    Stops cleanly at ``end``; raises a :class:`DecodeError` at the position of the
    first bytes that do not form a batch. With ``verify_crc`` (the strict reader) a
    batch whose CRC does not match raises :class:`CrcMismatch` at its crc field.
    ``last_only`` is for callers that keep only the last batch before the end or the
    error: the compiled reader then builds (and yields) only some of the headers, always
    including that last one.
    """
    n = len(buf)
    end = n if end is None else min(end, n)
    pos = start
    sp = _batch
    if sp is not None and pos >= 0 and (type(buf) in _DIRECT or _direct(buf)):
        scan = sp.scan_headers
        count = -1 if last_only else _SCAN_COUNT
        while pos < end:
            # Magic-2 batches are framed in C; whatever it stops at (end, legacy batch,
            # bad bytes) takes the same slow path as below.
            hdrs, pos, bad_crc = scan(buf, pos, end, verify_crc, count, _SCAN_BYTES)
            yield from hdrs
            if bad_crc is not None:
                raise CrcMismatch(f"batch CRC-32C mismatch (stored {bad_crc:#010x})", position=pos + 17)
            if hdrs or pos >= end:
                continue
            hdr = read_batch_header(buf, pos, end)
            if verify_crc and not crc_valid(buf, hdr):
                raise CrcMismatch(f"batch CRC mismatch (stored {hdr.crc:#010x})",
                                  position=pos + (17 if hdr.magic >= 2 else 12))
            yield hdr
            pos += hdr.batch_length + LOG_OVERHEAD
        return
    frame = frame_batch
    crc_fn = _primitives.crc32c_function()
    mv = memoryview(buf) if verify_crc else None
    try:
        while pos < end:
            # A magic-2 batch is framed by frame_batch; anything unusual goes through read_batch_header.
            framed = frame(buf, pos, end)
            if framed is not None:
                if mv is not None and crc_fn(mv[pos + _CRC_START:pos + framed.size]) != framed.crc:
                    raise CrcMismatch(f"batch CRC-32C mismatch (stored {framed.crc:#010x})", position=pos + 17)
                yield framed
                pos += framed.size
                continue
            hdr = read_batch_header(buf, pos, end)
            if verify_crc and not crc_valid(buf, hdr):
                raise CrcMismatch(f"batch CRC mismatch (stored {hdr.crc:#010x})",
                                  position=pos + (17 if hdr.magic >= 2 else 12))
            yield hdr
            pos += hdr.batch_length + LOG_OVERHEAD
    finally:
        if mv is not None:
            mv.release()  # an mmap cannot close while a view is exported


# The columns of frame_columns, in order: BatchHeader's fields and what DefaultRecordBatch derives from them
# (sizeInBytes, lastOffset, compressionType's id, isControlBatch, isTransactional); _framer.h's
# kx_column_names (tests/format/test_shared_constants.py holds the two together).
FRAME_COLUMNS: tuple[str, ...] = (
    "position", "size", "base_offset", "last_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
    "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "records_count", "codec", "control", "transactional")


def _frame_row(h: BatchHeader) -> tuple[int, ...]:
    """One framed batch as its FRAME_COLUMNS values."""
    return (h.position, h.size, h.base_offset, h.last_offset, h.batch_length, h.partition_leader_epoch, h.magic,
            h.crc, h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.producer_id,
            h.producer_epoch, h.base_sequence, h.records_count, h.attributes & COMPRESSION_CODEC_MASK,
            int(h.is_control), int(h.is_transactional))


def frame_columns_py(buf: Buffer, pos: int, end: int, *, verify_crc: bool = False, max_count: int = _SCAN_COUNT,
                     max_bytes: int = _SCAN_BYTES) -> tuple[tuple[array[int], ...], int, int | None]:
    """The pure-Python twin of ``_batch.frame_columns``: the batches :func:`frame_batch` frames from ``pos``
    (with ``verify_crc``, each whose CRC holds), at most ``max_count`` of them, spanning less than
    ``max_bytes`` before the last, as columns (one ``array('q')`` per :data:`FRAME_COLUMNS` name); where the
    walk stopped (the first batch it did not take, or ``end``), and the stored CRC of the batch there when
    its CRC check failed, else None."""
    if max_count < 0:
        raise ValueError("max_count must not be negative")
    end = min(end, len(buf))
    if pos < 0:
        raise ValueError("range outside the buffer")
    rows: list[tuple[int, ...]] = []
    scanned = 0
    bad: int | None = None
    while len(rows) < max_count and scanned < max_bytes and pos < end:
        h = frame_batch(buf, pos, end)
        if h is None:
            break
        if verify_crc and not crc_valid(buf, h):
            bad = h.crc
            break
        rows.append(_frame_row(h))
        pos += h.size
        scanned += h.size
    return tuple(array("q", col) for col in zip(*rows, strict=True)) if rows else tuple(
        array("q") for _ in FRAME_COLUMNS), pos, bad


def frame_columns(buf: Buffer, pos: int, end: int, *, verify_crc: bool = False, max_count: int = _SCAN_COUNT,
                  max_bytes: int = _SCAN_BYTES) -> tuple[tuple[array[int], ...], int, int | None]:
    """:func:`frame_columns_py`, compiled (``_framer.h``'s walk filling struct-of-arrays) where it is built."""
    sp = _batch
    if sp is not None and pos >= 0 and _direct(buf):
        data, count, pos, bad = sp.frame_columns(buf, pos, min(end, len(buf)), verify_crc, max_count, max_bytes)
        # column k is the native int64s at bytes [k * width, (k + 1) * width): each copied in one go
        raw, width = memoryview(data), count * _INT64_WIDTH
        columns = tuple(array("q") for _ in FRAME_COLUMNS)
        for k, column in enumerate(columns):
            column.frombytes(raw[k * width:(k + 1) * width])
        return columns, pos, bad
    return frame_columns_py(buf, pos, end, verify_crc=verify_crc, max_count=max_count, max_bytes=max_bytes)


def crc_valid(buf: Buffer, header: BatchHeader) -> bool:
    """Does the stored CRC match: CRC-32C for magic 2, CRC-32 of the wrapper message for 0/1."""
    pos = header.position
    end = pos + header.batch_length + LOG_OVERHEAD
    if header.magic >= 2:
        sp = _batch
        if (sp is not None and (type(buf) in _DIRECT or _direct(buf))
                and 0 <= pos and pos + _CRC_START <= end <= len(buf)):
            return sp.crc32c(buf, pos + _CRC_START, end) == header.crc
        return _primitives.crc32c(memoryview(buf)[pos + _CRC_START:end]) == header.crc
    return zlib.crc32(memoryview(buf)[pos + 16:end]) == header.crc


# ---------------------------------------------------------------------------------- records

def iter_records(buf: Buffer, header: BatchHeader, *,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
    """Deep iteration: every record of the batch with absolute offsets and timestamps, lazily."""
    if header.magic < 2:
        return _iter_legacy(buf, header, max_decompressed)
    return _iter_v2(buf, header, max_decompressed)


def _v2_frame(buf: Buffer, header: BatchHeader) -> tuple[int, int, int, int | None]:
    """A magic 2 batch's records section as the record loops read it: (its start, its end, the records
    count, the LogAppendTime timestamp or None); a section past the buffer or a negative count raised."""
    pos = header.position
    body_start = pos + HEADER_SIZE
    body_end = pos + header.batch_length + LOG_OVERHEAD
    if body_end > len(buf):
        raise Truncated("batch runs past the end of the buffer", position=pos)
    count = header.records_count
    if count < 0:
        raise BadLength(f"negative records count {count}", position=pos + 57)
    return body_start, body_end, count, header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None


def _iter_v2(buf: Buffer, header: BatchHeader, max_decompressed: int) -> Iterator[Record]:
    pos = header.position
    body_start, body_end, count, append_ts = _v2_frame(buf, header)
    codec = header.attributes & COMPRESSION_CODEC_MASK
    sp = _batch
    if (sp is not None and codec == 0 and count <= _CHUNK and pos >= 0
            and count * _MIN_RECORD <= body_end - body_start and (type(buf) in _DIRECT or _direct(buf))):
        # The common case in C: decode straight from the caller's buffer (an mmap
        # is read in place; keys and values become bytes copies, nothing else is copied).
        try:
            first = sp.decode_records(buf, body_start, body_end, 0, 0, count, header.base_offset,
                                      header.base_timestamp, append_ts, _CHUNK)
        except (OverflowError, TypeError):  # header fields past int64 (hand-made headers)
            pass
        else:
            return _c_records(sp, None, first, count, header.base_offset, header.base_timestamp,
                              append_ts, body_start, body_start)
    with memoryview(buf) as mv, mv[body_start:body_end] as body:
        if codec == 0:
            # One copy of this batch (bounded by MAX_BATCH_SIZE), so keys and values are cheap slices.
            data = bytes(body)
            err_base: int | None = body_start
        else:
            try:
                data = decompress(codec, body, limit=max_decompressed)
            except DecodeError as err:
                raise err.at(None, body_start) from err
            err_base = None
    return _records_of(data, header, count, append_ts, err_base, body_start)


def _records_of(data: bytes, header: BatchHeader, count: int, append_ts: int | None, err_base: int | None,
                body_start: int) -> Iterator[Record]:
    """The records of a batch's records section ``data`` (read or decompressed): compiled, or the Python loop."""
    sp = _batch
    pos = header.position
    if count * _MIN_RECORD > len(data):
        raise BadLength(f"records count {count} cannot fit in {len(data)} bytes of records", position=pos + 57)
    if sp is not None:
        try:
            first = sp.decode_records(data, 0, len(data), 0, 0, count, header.base_offset,
                                      header.base_timestamp, append_ts, _CHUNK)
        except (OverflowError, TypeError):
            pass
        else:
            return _c_records(sp, data, first, count, header.base_offset, header.base_timestamp,
                              append_ts, err_base, body_start)
    return _v2_records(data, count, header.base_offset, header.base_timestamp, append_ts, err_base, body_start)


_IN_PLACE_FROM = 4 << 20  # records_in_place: batches from this size on are read in place


def records_in_place(buf: Buffer, header: BatchHeader, *,
                     max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
    """:func:`iter_records` of a magic 2 batch without a copy of its keys and values: each is a
    ``memoryview`` of the segment (uncompressed) or of the records section decompressed once
    (:func:`~kafkatx.format.compression.decompress_in_place`), so the batch costs its decompressed
    size once, whatever its records hold (a record of 250 MB of zeros in a 7 KB zstd batch). The
    same records, errors and positions as :func:`iter_records`, decoded by the Python loop; for a
    reader that looks at a bounded part of each value (``dump-segment``). Records sections of a few MB at
    most (read or decompressed), and magic 0/1: as :func:`iter_records` reads them (copies then cost less
    than the Python loop)."""
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if header.magic < 2 or (codec == 0 and header.size <= _IN_PLACE_FROM):
        return iter_records(buf, header, max_decompressed=max_decompressed)
    pos = header.position
    body_start, body_end, count, append_ts = _v2_frame(buf, header)
    data: memoryview
    with memoryview(buf) as mv:
        if codec == 0:
            data = mv[body_start:body_end]
            err_base: int | None = body_start
        else:
            try:
                data = decompress_in_place(codec, mv[body_start:body_end], limit=max_decompressed)
            except DecodeError as err:
                raise err.at(None, body_start) from err
            err_base = None
            if len(data) <= _IN_PLACE_FROM:  # a few MB: copied, for the compiled decoder
                with data:
                    return _records_of(data.tobytes(), header, count, append_ts, err_base, body_start)
    if count * _MIN_RECORD > len(data):
        raise BadLength(f"records count {count} cannot fit in {len(data)} bytes of records", position=pos + 57)
    return _v2_records(data, count, header.base_offset, header.base_timestamp, append_ts,  # type: ignore[arg-type]
                       err_base, body_start)


# The error kinds _batch.decode_records reports, by index.
_C_ERRORS: tuple[type[DecodeError], ...] = (DecodeError, BadLength, Truncated, BadVarint)


def _c_records(sp: Any, data: bytes | None, first: tuple[list[Record], int, int, Any], count: int,
               base_offset: int, base_ts: int, append_ts: int | None, err_base: int | None,
               body_start: int) -> Iterator[Record]:
    recs, p, rec, err = first
    if err is None and rec >= count:
        return iter(recs)   # the whole batch in one call (always the case for up to _CHUNK records)
    return _c_more(sp, data, first, count, base_offset, base_ts, append_ts, err_base, body_start)


def _c_more(sp: Any, data: bytes | None, first: tuple[list[Record], int, int, Any], count: int,
            base_offset: int, base_ts: int, append_ts: int | None, err_base: int | None,
            body_start: int) -> Iterator[Record]:
    # Yield what was decoded, then the next chunks, then raise what the Python loop
    # would have raised at that point (same class, message and position).
    recs, p, rec, err = first
    yield from recs
    while err is None and rec < count and data is not None:
        recs, p, rec, err = sp.decode_records(data, 0, len(data), p, rec, count, base_offset, base_ts,
                                              append_ts, _CHUNK)
        yield from recs
    if err is not None:
        kind, message, position = err
        cause = _C_ERRORS[kind](message, position=position)
        raise _rebase(cause, err_base, body_start) from cause


def _rebase(err: DecodeError, err_base: int | None, body_start: int) -> DecodeError:
    if err_base is not None:
        return err.at(None, err_base)
    return type(err)(f"at byte {err.position} of the decompressed records: {err.message}", position=body_start)


def _v2_records(data: bytes, count: int, base_offset: int, base_ts: int, append_ts: int | None,
                err_base: int | None, body_start: int) -> Iterator[Record]:
    # The hot loop. Varints are inlined for their 1- and 2-byte forms (|v| < 8192), which
    # cover lengths, deltas and sizes of typical records; longer ones take read_zigzag.
    n = len(data)
    p = 0
    record = Record
    zz = read_zigzag
    rec = 0
    rec_start = 0
    try:
        for rec in range(count):
            rec_start = p
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p = p + 1
            else:
                c = data[p + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    length = (z >> 1) ^ -(z & 1)
                    p = p + 2
                else:
                    length, p = zz(data, p, 5)
            rec_end = p + length
            if length < _MIN_RECORD - 1:
                raise BadLength(f"record {rec} has length {length}", position=rec_start)
            if rec_end > n:
                raise Truncated(f"record {rec} of {length} bytes runs past the batch ({n - p} left)",
                                position=rec_start)
            attributes = data[p]
            b = data[p + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p = p + 1 + 1
            else:
                c = data[p + 1 + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    ts_delta = (z >> 1) ^ -(z & 1)
                    p = p + 1 + 2
                else:
                    ts_delta, p = zz(data, p + 1, 10)
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p = p + 1
            else:
                c = data[p + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    off_delta = (z >> 1) ^ -(z & 1)
                    p = p + 2
                else:
                    off_delta, p = zz(data, p, 5)
            b = data[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p = p + 1
            else:
                c = data[p + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    klen = (z >> 1) ^ -(z & 1)
                    p = p + 2
                else:
                    klen, p = zz(data, p, 5)
            if klen < 0:
                if klen != -1:
                    raise BadLength(f"record {rec} has key length {klen}", position=p - 1)
                key = None
            else:
                q = p + klen
                if q > rec_end:
                    raise BadLength(f"record {rec} key of {klen} bytes runs past the record", position=p - 1)
                key = data[p:q]
                p = q
            b = data[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p = p + 1
            else:
                c = data[p + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    vlen = (z >> 1) ^ -(z & 1)
                    p = p + 2
                else:
                    vlen, p = zz(data, p, 5)
            if vlen < 0:
                if vlen != -1:
                    raise BadLength(f"record {rec} has value length {vlen}", position=p - 1)
                value = None
            else:
                q = p + vlen
                if q > rec_end:
                    raise BadLength(f"record {rec} value of {vlen} bytes runs past the record",
                                    position=p - 1)
                value = data[p:q]
                p = q
            if data[p] == 0:
                headers: tuple[tuple[str, bytes | None], ...] = ()
                p += 1
            else:
                headers, p = _read_headers(data, p, rec_end, rec)
            if p != rec_end:
                raise BadLength(f"record {rec} declares {length} bytes but its fields end "
                                f"{p - rec_end:+d} bytes from there", position=rec_start)
            yield record(offset=base_offset + off_delta,
                         timestamp=append_ts if append_ts is not None else base_ts + ts_delta,
                         key=key, value=value, headers=headers, attributes=attributes)
        if p != n:
            # DefaultRecordBatch: "Incorrect declared batch size, records still remaining in file"
            raise BadLength(f"{n - p} bytes left after the {count} declared records", position=p)
    except DecodeError as err:
        raise _rebase(err, err_base, body_start) from err
    except IndexError as err:
        raise _rebase(Truncated(f"record {rec} runs past the end of the records", position=rec_start),
                      err_base, body_start) from err


def _read_headers(data: bytes, p: int, rec_end: int, rec: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    zz = read_zigzag
    b = data[p]
    if b < 0x80:
        count = (b >> 1) ^ -(b & 1)
        p += 1
    else:
        count, p = zz(data, p, 5)
    if count < 0 or count * 2 > rec_end - p:
        raise BadLength(f"record {rec} has header count {count}", position=p - 1)
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        start = p
        b = data[p]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            klen, p = zz(data, p, 5)
        q = p + klen
        if klen < 0 or q > rec_end:
            raise BadLength(f"record {rec} has header key length {klen}", position=start)
        try:
            hkey = str(data[p:q], "utf-8")  # bytes or a memoryview (records_in_place)
        except UnicodeDecodeError as err:
            raise DecodeError(f"record {rec} header key is not UTF-8: {err.reason}", position=p) from err
        p = q
        b = data[p]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            vlen, p = zz(data, p, 5)
        if vlen < 0:
            if vlen != -1:
                raise BadLength(f"record {rec} has header value length {vlen}", position=q)
            out.append((hkey, None))
        else:
            if p + vlen > rec_end:
                raise BadLength(f"record {rec} header value of {vlen} bytes runs past the record",
                                position=q)
            out.append((hkey, data[p:p + vlen]))
            p += vlen
    return tuple(out), p


def _iter_legacy(buf: Buffer, header: BatchHeader, max_decompressed: int) -> Iterator[Record]:
    pos = header.position
    end = pos + header.batch_length + LOG_OVERHEAD
    msg = legacy.read_message(buf, pos, end)
    if not msg.attributes & legacy.CODEC_MASK:
        pairs = [(msg.offset, msg)]
        wrapper_lat = False
    else:
        pairs = legacy.deep_messages(buf, msg, max_decompressed=max_decompressed)
        wrapper_lat = msg.log_append_time
    return _legacy_records(pairs, wrapper_lat, msg.timestamp)


def _legacy_records(pairs: list[tuple[int, legacy.LegacyMessage]], wrapper_lat: bool,
                    wrapper_ts: int) -> Iterator[Record]:
    for offset, m in pairs:
        ts = wrapper_ts if (wrapper_lat and m.magic == 1) else m.timestamp
        yield Record(offset=offset, timestamp=ts, key=m.key, value=m.value, attributes=m.attributes)


def read_control_record(buf: Buffer, header: BatchHeader) -> ControlRecord:
    """Decode the control record of a control batch (its first record)."""
    if not header.is_control:
        raise DecodeError("not a control batch", position=header.position + 21)
    record = next(iter(iter_records(buf, header)), None)
    if record is None:
        raise BadLength("control batch has no record", position=header.position + 57)
    try:
        version, type_id = decode_control_key(record.key)
        epoch: int | None = None
        if type_id in (ControlType.ABORT, ControlType.COMMIT):
            _, epoch = decode_end_txn_marker(record.value)
    except DecodeError as err:
        raise type(err)(f"control record: {err.message}", position=header.position + HEADER_SIZE) from err
    return ControlRecord(version=version, type_id=type_id, coordinator_epoch=epoch)


# ---------------------------------------------------------------------------------- writers

def _encode_record(r: Record, base_offset: int, base_ts: int) -> bytes:
    parts = [bytes((r.attributes & 0xFF,)), encode_varlong(r.timestamp - base_ts),
             encode_varint(r.offset - base_offset)]
    for blob in (r.key, r.value):
        if blob is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(blob)))
            parts.append(bytes(blob))
    parts.append(encode_varint(len(r.headers)))
    for hkey, hval in r.headers:
        kb = hkey.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(hval)))
            parts.append(bytes(hval))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def build_batch(records: Sequence[Record], *, base_offset: int | None = None, magic: int = 2,
                compression: Compression = Compression.NONE, partition_leader_epoch: int = 0,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                is_transactional: bool = False, is_control: bool = False,
                timestamp_type: TimestampType = TimestampType.CREATE_TIME) -> bytes:
    """Encode ``records`` (absolute offsets/timestamps, gaps allowed) as one batch with its CRC.

    Magic 2 gives one batch. Magic 0/1 give a message set: one message per record,
    or one compressed wrapper (deep) when ``compression`` is set. ``base_offset``
    defaults to the first record's offset (a v2 batch may start before it, as
    compaction leaves them). With LogAppendTime the max timestamp is taken from the
    records (as the broker stamps it) and every record reads back with it.
    """
    compression = Compression(compression)
    if magic in (0, 1):
        items = [(r.offset, r.timestamp if magic == 1 else -1, r.key, r.value) for r in records]
        return legacy.build_message_set(items, magic=magic, compression=compression,
                                        log_append_time=timestamp_type == TimestampType.LOG_APPEND_TIME)
    if magic != 2:
        raise ValueError(f"unknown magic {magic}")
    if base_offset is None:
        base_offset = records[0].offset if records else 0
    if records:
        base_ts = records[0].timestamp
        max_ts = max(r.timestamp for r in records)
        last_delta = records[-1].offset - base_offset
    else:
        base_ts = max_ts = -1
        last_delta = 0
    body = b"".join(_encode_record(r, base_offset, base_ts) for r in records)
    if compression is not Compression.NONE:
        body = compress(compression, body)
    attributes = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = bytearray(_HEADER.pack(base_offset, length, partition_leader_epoch, 2, 0, attributes,
                                    last_delta, base_ts, max_ts, producer_id, producer_epoch,
                                    base_sequence, len(records)))
    crc = _primitives.crc32c(body, _primitives.crc32c(bytes(header[_CRC_START:])))
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + body


def build_control_batch(*, offset: int, control_type: ControlType, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, timestamp: int, partition_leader_epoch: int = 0) -> bytes:
    """A transaction marker batch as the broker writes it (``MemoryRecords.writeEndTransactionalMarker``):
    control + transactional attributes, one record at offset delta 0, baseSequence -1."""
    value = encode_end_txn_marker(coordinator_epoch)
    record = Record(offset=offset, timestamp=timestamp, key=encode_control_key(control_type), value=value)
    return build_batch([record], base_offset=offset, partition_leader_epoch=partition_leader_epoch,
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                       is_transactional=True, is_control=True)


# read_zigzag and BadVarint are re-exported for callers that parse record fields themselves.
__all__ += ["read_zigzag", "BadVarint"]
