"""Magic 0 and 1 messages ("legacy records"), still found in old segments.

In a log every message is framed by the log overhead, then the message
(``LegacyRecord.java``, ``AbstractLegacyRecordBatch.java``):

    offset      i64   absolute offset (of the *last* inner message for a compressed wrapper)
    size        i32   bytes after this field
    crc         u32   CRC-32 (zlib's, not CRC-32C) of every byte from magic to the end
    magic       i8    0 or 1
    attributes  i8    bits 0-2 codec (no zstd before magic 2), bit 3 LogAppendTime (magic 1)
    timestamp   i64   magic 1 only
    key         i32 length (-1 = null) + bytes
    value       i32 length (-1 = null) + bytes

A compressed message's value is a whole inner message set (deep iteration).
For magic 1 the inner offsets are *relative* (0, 1, ...) and the wrapper holds
the absolute offset of the last one, so absolute = wrapper offset - last inner
offset + inner offset; a wrapper offset of 0 (written by some librdkafka
versions) means base 0. Magic 0 inner offsets are already absolute. Inner magic
1 messages take the wrapper's timestamp when the wrapper says LogAppendTime.
Kafka's ``baseOffset()`` for such a batch is the first inner offset, its
``lastOffset()`` the wrapper offset.

https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/LegacyRecord.java
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/AbstractLegacyRecordBatch.java
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence

from msgspec import Struct

from kafkatx.errors import BadLength, DecodeError, Truncated, UnknownVersion
from kafkatx.format._primitives import Buffer
from kafkatx.format.compression import Compression, compress, decompress

__all__ = [
    "LegacyMessage", "read_message", "iter_message_set", "deep_messages", "encode_message",
    "build_message_set", "RECORD_OVERHEAD_V0", "RECORD_OVERHEAD_V1", "LOG_OVERHEAD",
]

# offset i64, size i32, crc u32, magic i8, attributes i8
_V0 = struct.Struct(">qiIbb")
# offset i64, size i32, crc u32, magic i8, attributes i8, timestamp i64
_V1 = struct.Struct(">qiIbbq")
_LEN = struct.Struct(">i")
LOG_OVERHEAD = 12
# crc 4 + magic 1 + attributes 1 + key length 4 + value length 4 (+ timestamp 8 in v1)
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
TIMESTAMP_TYPE_BIT = 0x08
CODEC_MASK = 0x07


class LegacyMessage(Struct, frozen=True, kw_only=True):
    position: int       # of the offset field
    offset: int         # as stored (relative for magic 1 inner messages)
    size: int           # the size field (bytes after it)
    crc: int
    magic: int
    attributes: int
    timestamp: int      # -1 for magic 0
    key: bytes | None
    value: bytes | None
    value_position: int  # where the value bytes start (-1 when null)

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & CODEC_MASK)

    @property
    def log_append_time(self) -> bool:
        return self.magic == 1 and bool(self.attributes & TIMESTAMP_TYPE_BIT)


def read_message(buf: Buffer, pos: int, end: int | None = None, *, with_data: bool = True) -> LegacyMessage:
    """Decode one framed legacy message at ``pos`` (must end by ``end``)."""
    if end is None:
        end = len(buf)
    if end - pos < LOG_OVERHEAD + 6:
        raise Truncated(f"legacy message needs at least {LOG_OVERHEAD + 6} bytes, {end - pos} left",
                        position=pos)
    offset, size, crc, magic, attributes = _V0.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise UnknownVersion(f"unknown message magic {magic}", position=pos + 16)
    overhead = RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1
    if size < overhead:
        raise BadLength(f"message size {size} is below the magic {magic} minimum {overhead}", position=pos + 8)
    msg_end = pos + LOG_OVERHEAD + size
    if msg_end > end:
        raise Truncated(f"message of {size} bytes runs past the end ({end - pos - LOG_OVERHEAD} left)",
                        position=pos)
    timestamp = -1
    p = pos + 18
    if magic == 1:
        timestamp = _V1.unpack_from(buf, pos)[5]
        p += 8
    key: bytes | None = None
    value: bytes | None = None
    (klen,) = _LEN.unpack_from(buf, p)
    if klen < -1 or p + 4 + max(klen, 0) + 4 > msg_end:
        raise BadLength(f"message key length {klen} does not fit the message", position=p)
    p += 4
    if klen >= 0:
        if with_data:
            key = bytes(buf[p:p + klen])
        p += klen
    (vlen,) = _LEN.unpack_from(buf, p)
    if vlen < -1 or p + 4 + max(vlen, 0) != msg_end:
        raise BadLength(f"message value length {vlen} does not match the message size", position=p)
    p += 4
    value_position = -1
    if vlen >= 0:
        value_position = p
        if with_data:
            value = bytes(buf[p:p + vlen])
    return LegacyMessage(position=pos, offset=offset, size=size, crc=crc, magic=magic, attributes=attributes,
                         timestamp=timestamp, key=key, value=value, value_position=value_position)


def iter_message_set(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[LegacyMessage]:
    if end is None:
        end = len(buf)
    pos = start
    while pos < end:
        msg = read_message(buf, pos, end)
        yield msg
        pos += LOG_OVERHEAD + msg.size


def deep_messages(buf: Buffer, wrapper: LegacyMessage, *, max_decompressed: int) -> list[tuple[int, LegacyMessage]]:
    """``(absolute offset, inner message)`` pairs of a compressed wrapper (Kafka's DeepRecordsIterator).

    Error positions are the wrapper's value position for codec errors, and the
    wrapper's position (with the inner byte in the message) for inner-set errors.
    """
    if wrapper.value is None:
        raise BadLength("compressed message has a null value", position=wrapper.position)
    codec = wrapper.attributes & CODEC_MASK
    if codec == Compression.ZSTD:
        raise UnknownVersion("zstd is not allowed in magic 0/1 messages", position=wrapper.position + 17)
    try:
        inner_bytes = decompress(codec, wrapper.value, limit=max_decompressed)
    except DecodeError as err:
        raise err.at(None, wrapper.value_position) from err
    try:
        inner = list(iter_message_set(inner_bytes))
    except DecodeError as err:
        raise type(err)(f"in the decompressed message set at byte {err.position}: {err.message}",
                        position=wrapper.position) from err
    if not inner:
        raise BadLength("compressed message set has no inner messages", position=wrapper.position)
    for msg in inner:
        if msg.attributes & CODEC_MASK:
            raise BadLength("inner messages must not be compressed", position=wrapper.position)
    if wrapper.magic == 1:
        if wrapper.offset == 0:
            base = 0   # librdkafka wrote 0 wrapper offsets; Kafka treats inner offsets as absolute
        else:
            last = inner[-1].offset
            if wrapper.offset < last:
                raise BadLength(f"wrapper offset {wrapper.offset} is below the last inner offset {last}",
                                position=wrapper.position)
            base = wrapper.offset - last
        return [(base + m.offset, m) for m in inner]
    return [(m.offset, m) for m in inner]


def encode_message(*, offset: int, magic: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    """One framed message (log overhead + message) with its CRC-32."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(struct.pack(">q", timestamp))
    for blob in (key, value):
        if blob is None:
            parts.append(_LEN.pack(-1))
        else:
            parts.append(_LEN.pack(len(blob)))
            parts.append(bytes(blob))
    body = b"".join(parts)
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def build_message_set(items: Sequence[tuple[int, int, bytes | None, bytes | None]], *, magic: int,
                      compression: Compression = Compression.NONE, log_append_time: bool = False,
                      wrapper_timestamp: int | None = None) -> bytes:
    """A legacy message set from ``(offset, timestamp, key, value)`` items.

    Uncompressed: one message per item with absolute offsets. Compressed: one
    wrapper holding the inner set; magic 1 inner offsets are written relative
    to the first item (as Kafka's producer does) and the wrapper takes the last
    absolute offset and the max timestamp (or the LogAppendTime).
    """
    ts_attr = TIMESTAMP_TYPE_BIT if (log_append_time and magic == 1) else 0
    compression = Compression(compression)
    if compression is Compression.NONE:
        return b"".join(encode_message(offset=o, magic=magic, attributes=ts_attr, timestamp=t, key=k, value=v)
                        for o, t, k, v in items)
    if compression is Compression.ZSTD:
        raise ValueError("zstd needs magic 2")
    if not items:
        raise ValueError("a compressed message set needs at least one message")
    first = items[0][0]
    inner = b"".join(
        encode_message(offset=(o - first) if magic == 1 else o, magic=magic, attributes=0, timestamp=t,
                       key=k, value=v)
        for o, t, k, v in items)
    wts = wrapper_timestamp if wrapper_timestamp is not None else max(t for _, t, _, _ in items)
    return encode_message(offset=items[-1][0], magic=magic, attributes=int(compression) | ts_attr,
                          timestamp=wts, key=None, value=compress(compression, inner))
