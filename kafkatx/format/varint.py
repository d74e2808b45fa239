"""Zigzag varints and varlongs as Kafka writes them (``ByteUtils.java``).

Kafka's record format (``DefaultRecord.java``) uses protobuf-style base-128
varints with zigzag sign folding, so -1 (the "null" length) is one byte 0x01.
A varint has at most 5 bytes (32 bits), a varlong at most 10 (64 bits);
``ByteUtils.readVarint`` throws past that width and so do we (:class:`BadVarint`).

https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/utils/ByteUtils.java
"""

from __future__ import annotations

from kafkatx.errors import BadVarint
from kafkatx.format._primitives import Buffer

__all__ = [
    "VARINT_MAX_BYTES", "VARLONG_MAX_BYTES", "read_varint", "read_varlong", "read_zigzag",
    "encode_varint", "encode_varlong", "size_of_varint",
]

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


def read_zigzag(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    """Decode one zigzag varint of at most ``max_bytes`` at ``pos``; return ``(value, next_pos)``."""
    result = 0
    shift = 0
    start = pos
    end = len(buf)
    while True:
        if pos >= end:
            raise BadVarint("varint runs past the end of the data", position=start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise BadVarint(f"varint longer than {max_bytes} bytes", position=start)
    if max_bytes == VARINT_MAX_BYTES and result > 0xFFFFFFFF:
        # Java would silently keep the low 32 bits; a 5th byte with bits past 2^32 is corruption.
        raise BadVarint("varint does not fit in 32 bits", position=start)
    return (result >> 1) ^ -(result & 1), pos


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A signed 32-bit zigzag varint: ``(value, next_pos)``."""
    return read_zigzag(buf, pos, VARINT_MAX_BYTES)


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A signed 64-bit zigzag varlong: ``(value, next_pos)``."""
    return read_zigzag(buf, pos, VARLONG_MAX_BYTES)


def _encode(value: int, bits: int) -> bytes:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise ValueError(f"{value} does not fit in a {bits}-bit varint")
    z = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 32-bit value."""
    return _encode(value, 32)


def encode_varlong(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit value."""
    return _encode(value, 64)


def size_of_varint(value: int) -> int:
    return len(_encode(value, 64))
