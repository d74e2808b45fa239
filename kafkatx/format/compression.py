"""Kafka's record-batch codecs, bounded.

Kafka compresses the whole records section of a batch (magic 2) or the value of
a wrapper message (magic 0/1) with one of four codecs (attribute bits 0-2):

    1 gzip    java.util.zip.GZIPOutputStream; readers accept concatenated members
    2 snappy  snappy-java's SnappyOutputStream ("xerial" framing, see below);
              some non-Java clients write a plain raw snappy block instead
    3 lz4     Kafka's own Lz4BlockOutputStream: the LZ4 frame format with
              *independent* blocks (Lz4BlockInputStream decompresses every block
              on its own, so linked blocks are not Kafka-compatible)
    4 zstd    zstd-jni's ZstdOutputStreamNoFinalizer (no frame content size)

https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/compress/

Every decompression is bounded: no call allocates more than ``limit`` (+1)
bytes of output, and output past ``limit`` raises :class:`DecompressionBomb`.
gzip streams through ``zlib.decompressobj(max_length=...)``; snappy blocks
carry their decompressed length in a varint header that is checked before
decompressing; lz4 frames are walked block by block (each block is at most the
frame's declared maximum block size); zstd frames are walked block header by
block header (no decompression) for an upper bound of their output, then
decompressed once into a buffer of that size (never past ``limit + 1``): the
work per batch is bounded by the batch's own bytes, a corrupt frame costs what
a valid one does, and nothing retries with bigger buffers. The codecs
themselves are cramjam's / zlib's; nothing here is a hand-written codec.

Error positions are relative to the start of ``data``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum

import cramjam

from kafkatx.errors import CompressionError, DecompressionBomb

__all__ = ["Compression", "compress", "decompress", "XERIAL_MAGIC"]


class Compression(IntEnum):
    """Codec id, attribute bits 0-2 (``CompressionType.java``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


Buffer = bytes | bytearray | memoryview

# --- snappy-java's xerial framing (SnappyOutputStream / SnappyCodec.java) ---
# header: magic [0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00], version i32 (1),
#         compatible version i32 (1)                          -- 16 bytes, big-endian
# then chunks: compressed length i32, raw snappy block        -- repeated
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_CHUNK_LEN = struct.Struct(">i")
# SnappyOutputStream's default block size (what Kafka's SnappyFactory uses).
_XERIAL_BLOCK = 32 * 1024

# --- LZ4 frame (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md) ---
# magic u32 LE 0x184D2204, FLG u8, BD u8, [content size u64 LE], [dict id u32 LE], HC u8
# blocks: size u32 LE (bit 31 = stored uncompressed, 0 = end mark), data, [block checksum u32]
# after the end mark: [content checksum u32]
_LZ4_MAGIC = 0x184D2204
_U32LE = struct.Struct("<I")
_LZ4_INCOMPRESSIBLE = 0x80000000
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}

# --- zstd frame header (RFC 8878 3.1.1.1) ---
_ZSTD_MAGIC = 0xFD2FB528

_TOO_SMALL = ("failed to write whole buffer", "isn't large enough", "too small")


def compress(codec: Compression | int, data: Buffer) -> bytes:
    """Compress ``data`` the way Kafka's Java producer writes ``codec``."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return zlib_gzip(data)
    if codec is Compression.SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
            parts.append(_XERIAL_CHUNK_LEN.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec is Compression.LZ4:
        # Independent blocks: Kafka's Lz4BlockInputStream cannot read linked ones.
        comp = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        comp.compress(bytes(data))
        return bytes(comp.finish())
    return bytes(cramjam.zstd.compress(bytes(data), level=3))


def zlib_gzip(data: Buffer) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    return comp.compress(data) + comp.flush()


def decompress(codec: Compression | int, data: Buffer, *, limit: int) -> bytes:
    """Decompress ``data`` written with ``codec``; raise if the output would pass ``limit`` bytes.

    Raises :class:`CompressionError` for data that does not decompress and
    :class:`DecompressionBomb` when the output would be larger than ``limit``.
    """
    try:
        codec = Compression(codec)
    except ValueError:
        raise CompressionError(f"unknown compression codec {codec}", position=0) from None
    if codec is Compression.NONE:
        if len(data) > limit:
            raise DecompressionBomb(f"{len(data)} bytes exceed the limit of {limit}", position=0)
        return bytes(data)
    if codec is Compression.GZIP:
        return _gunzip(data, limit)
    if codec is Compression.SNAPPY:
        return _unsnappy(data, limit)
    if codec is Compression.LZ4:
        return _unlz4(data, limit)
    return _unzstd(data, limit)


# ---------------------------------------------------------------------------- gzip

def _gunzip(data: Buffer, limit: int) -> bytes:
    # Java's GZIPInputStream reads concatenated members, so we do too.
    chunks: list[bytes] = []
    total = 0
    consumed = 0  # bytes of `data` consumed by finished members (for positions)
    pending: Buffer = data
    dec = zlib.decompressobj(31)
    try:
        while True:
            want = limit + 1 - total
            out = dec.decompress(pending, want)
            total += len(out)
            if total > limit:
                raise DecompressionBomb(f"gzip output exceeds the limit of {limit} bytes",
                                        position=consumed)
            chunks.append(out)
            if dec.eof:
                rest = dec.unused_data
                consumed = len(data) - len(rest)
                if not rest:
                    break
                dec = zlib.decompressobj(31)
                pending = rest
                continue
            if dec.unconsumed_tail:
                pending = dec.unconsumed_tail
                continue
            if len(out) == want:  # output buffer full: more may be pending inside zlib
                pending = b""
                continue
            raise CompressionError("gzip stream is truncated", position=len(data))
    except zlib.error as err:
        raise CompressionError(f"bad gzip data: {err}", position=consumed) from err
    return b"".join(chunks)


# ---------------------------------------------------------------------------- snappy

def _raw_snappy_block(block: Buffer, limit: int, position: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except Exception as err:  # cramjam raises its own error types
        raise CompressionError(f"bad snappy block: {err}", position=position) from err
    if size > limit:
        raise DecompressionBomb(f"snappy block declares {size} bytes, over the limit of {limit}",
                                position=position)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as err:
        raise CompressionError(f"bad snappy block: {err}", position=position) from err


def _unsnappy(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        # snappy-java's SnappyInputStream falls back to a raw block without the magic.
        return _raw_snappy_block(view, limit, 0)
    if len(view) < _XERIAL_HEADER.size:
        raise CompressionError("xerial snappy header is truncated", position=0)
    pos = _XERIAL_HEADER.size
    end = len(view)
    chunks: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise CompressionError("xerial snappy chunk length is truncated", position=pos)
        (size,) = _XERIAL_CHUNK_LEN.unpack_from(view, pos)
        if size < 0 or size > end - pos - 4:
            raise CompressionError(f"xerial snappy chunk length {size} runs past the data ({end - pos - 4} left)",
                                   position=pos)
        out = _raw_snappy_block(view[pos + 4:pos + 4 + size], limit - total, pos + 4)
        total += len(out)
        chunks.append(out)
        pos += 4 + size
    return b"".join(chunks)


# ---------------------------------------------------------------------------- lz4

def _unlz4(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    end = len(view)
    if end < 7:
        raise CompressionError("lz4 frame header is truncated", position=0)
    if _U32LE.unpack_from(view, 0)[0] != _LZ4_MAGIC:
        raise CompressionError("not an lz4 frame (bad magic)", position=0)
    flg = view[4]
    bd = view[5]
    if flg >> 6 != 1:
        raise CompressionError(f"unsupported lz4 frame version {flg >> 6}", position=4)
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    has_content_size = bool(flg & 0x08)
    content_checksum = bool(flg & 0x04)
    has_dict = bool(flg & 0x01)
    max_block = _LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
    if max_block is None:
        raise CompressionError(f"bad lz4 block maximum size code {(bd >> 4) & 7}", position=5)
    pos = 6
    if has_content_size:
        if end < pos + 8:
            raise CompressionError("lz4 frame header is truncated", position=pos)
        content_size = int.from_bytes(view[pos:pos + 8], "little")
        if content_size > limit:
            raise DecompressionBomb(f"lz4 frame declares {content_size} bytes, over the limit of {limit}",
                                    position=pos)
        pos += 8
    if has_dict:
        pos += 4
    # The header checksum byte (HC) is not verified: Kafka's own magic 0/1 writers
    # computed it over the magic too (KAFKA-3160), and Lz4BlockInputStream ignores it
    # for those batches. Block decoding below still rejects corrupt data.
    pos += 1
    if not independent:
        # Kafka never writes linked blocks; other tools might. cramjam's frame decoder
        # handles them, into one buffer sized from the block headers (each block
        # regenerates at most the frame's maximum block size).
        blocks = 0
        bpos = pos
        while True:
            if end - bpos < 4:
                raise CompressionError("lz4 frame is truncated (no end mark)", position=bpos)
            size = _U32LE.unpack_from(view, bpos)[0] & ~_LZ4_INCOMPRESSIBLE
            if size == 0:
                break
            if size > max_block or size > end - bpos - 4:
                raise CompressionError(f"lz4 block of {size} bytes is too large or runs past the data",
                                       position=bpos)
            blocks += 1
            bpos += 4 + size + (4 if block_checksum else 0)
        return _decompress_bounded(cramjam.lz4.decompress_into, view, limit, max(1, blocks * max_block), "lz4")
    scratch = bytearray(max_block)
    chunks: list[bytes] = []
    total = 0
    while True:
        if end - pos < 4:
            raise CompressionError("lz4 frame is truncated (no end mark)", position=pos)
        (word,) = _U32LE.unpack_from(view, pos)
        size = word & ~_LZ4_INCOMPRESSIBLE
        if size == 0:
            pos += 4
            break
        if size > max_block:
            raise CompressionError(f"lz4 block size {size} exceeds the frame maximum {max_block}", position=pos)
        if size > end - pos - 4:
            raise CompressionError(f"lz4 block of {size} bytes runs past the data", position=pos)
        block = view[pos + 4:pos + 4 + size]
        if word & _LZ4_INCOMPRESSIBLE:
            out = bytes(block)
        else:
            try:
                n = cramjam.lz4.decompress_block_into(block, scratch)
            except Exception as err:
                raise CompressionError(f"bad lz4 block: {err}", position=pos + 4) from err
            out = bytes(scratch[:n])
        total += len(out)
        if total > limit:
            raise DecompressionBomb(f"lz4 output exceeds the limit of {limit} bytes", position=pos)
        chunks.append(out)
        pos += 4 + size + (4 if block_checksum else 0)
    if content_checksum:
        pos += 4
    if pos > end:
        raise CompressionError("lz4 frame is truncated (checksum missing)", position=end)
    return b"".join(chunks)


# ---------------------------------------------------------------------------- zstd
# Frame (RFC 8878 3.1.1): magic u32 LE, Frame_Header_Descriptor u8 (FCS flag bits 7-6,
# Single_Segment bit 5, reserved bit 3, Content_Checksum bit 2, Dict_ID flag bits 1-0),
# [Window_Descriptor u8], [Dictionary_ID 1/2/4], [Frame_Content_Size 1/2/4/8], then blocks:
# header u24 LE (Last_Block bit 0, Block_Type bits 1-2: raw, RLE, compressed, reserved;
# Block_Size bits 3-23), then Block_Size bytes (1 byte for RLE), then [checksum u32].
# Skippable frames: magic 0x184D2A5? u32 LE, size u32 LE, data.
_ZSTD_SKIPPABLE = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024  # Block_Maximum_Size: no block regenerates more (RFC 8878 3.1.1.2.3)


def _zstd_output_bound(view: memoryview) -> int:
    """An upper bound of what the zstd frames in ``view`` can decompress to, from their headers alone.

    Walking the block headers costs no decompression: a raw or RLE block regenerates exactly
    its Block_Size, a compressed block at most Block_Maximum_Size (128 KiB), a frame at most
    its declared content size. So the output buffer can be sized from the batch's own bytes
    and one decompression attempt suffices: a corrupt frame costs what a valid one of the
    same size would, instead of retries with ever larger buffers. Bad framing raises here.
    """
    end = len(view)
    pos = 0
    total = 0
    if end == 0:
        raise CompressionError("empty zstd data (no frame)", position=0)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("zstd frame magic is truncated", position=pos)
        (magic,) = _U32LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            if end - pos < 8:
                raise CompressionError("zstd skippable frame header is truncated", position=pos)
            size = _U32LE.unpack_from(view, pos + 4)[0]
            if size > end - pos - 8:
                raise CompressionError(f"zstd skippable frame of {size} bytes runs past the data", position=pos)
            pos += 8 + size
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError("not a zstd frame (bad magic)", position=pos)
        if end - pos < 5:
            raise CompressionError("zstd frame header is truncated", position=pos)
        fhd = view[pos + 4]
        if fhd & 0x08:
            raise CompressionError("zstd frame header has its reserved bit set", position=pos + 4)
        single = bool(fhd & 0x20)
        fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
        hpos = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
        if end < hpos + fcs_len:
            raise CompressionError("zstd frame header is truncated", position=pos)
        declared: int | None = None
        if fcs_len:
            declared = int.from_bytes(view[hpos:hpos + fcs_len], "little") + (256 if fcs_len == 2 else 0)
        bpos = hpos + fcs_len
        frame_total = 0
        while True:
            if end - bpos < 3:
                raise CompressionError("zstd block header is truncated", position=bpos)
            word = int.from_bytes(view[bpos:bpos + 3], "little")
            last, kind, size = word & 1, (word >> 1) & 3, word >> 3
            if kind == 3:
                raise CompressionError("zstd block of the reserved type", position=bpos)
            if size > _ZSTD_BLOCK_MAX:
                raise CompressionError(f"zstd block size {size} exceeds the 128 KiB block maximum", position=bpos)
            stored = 1 if kind == 1 else size
            if stored > end - bpos - 3:
                raise CompressionError(f"zstd block of {stored} bytes runs past the data", position=bpos)
            frame_total += _ZSTD_BLOCK_MAX if kind == 2 else size
            bpos += 3 + stored
            if last:
                break
        if fhd & 0x04:
            bpos += 4
            if bpos > end:
                raise CompressionError("zstd frame checksum is truncated", position=end)
        total += frame_total if declared is None else min(frame_total, declared)
        pos = bpos
    return total


def _unzstd(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    declared = _zstd_content_size(view)
    if declared is not None and declared > limit:
        raise DecompressionBomb(f"zstd frame declares {declared} bytes, over the limit of {limit}", position=0)
    return _decompress_bounded(cramjam.zstd.decompress_into, view, limit, _zstd_output_bound(view), "zstd")


def _zstd_content_size(view: memoryview) -> int | None:
    """Frame content size from the first frame header, or None when absent/unparseable."""
    if len(view) < 5 or _U32LE.unpack_from(view, 0)[0] != _ZSTD_MAGIC:
        return None
    fhd = view[4]
    fcs_flag = fhd >> 6
    single = bool(fhd & 0x20)
    dict_len = (0, 1, 2, 4)[fhd & 3]
    pos = 5 + (0 if single else 1) + dict_len
    fcs_len = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if fcs_len == 0 or len(view) < pos + fcs_len:
        return None
    size = int.from_bytes(view[pos:pos + fcs_len], "little")
    return size + 256 if fcs_len == 2 else size


def _decompress_bounded(fn: Callable[[Buffer, bytearray], int], data: Buffer, limit: int, bound: int,
                        name: str) -> bytes:
    """One decompression into a buffer of ``min(bound, limit + 1)`` bytes; no retries.

    ``bound`` is an upper bound of a valid stream's output computed from its framing, so
    a "destination too small" answer means corrupt data (or, when ``bound`` passes
    ``limit``, output over the limit).
    """
    size = min(limit + 1, bound)
    out = bytearray(size)
    try:
        n = fn(data, out)
    except Exception as err:
        text = str(err)
        if bound > limit and any(t in text for t in _TOO_SMALL):
            raise DecompressionBomb(f"{name} output exceeds the limit of {limit} bytes", position=0) from None
        raise CompressionError(f"bad {name} data: {text}", position=0) from err
    if n > limit:
        raise DecompressionBomb(f"{name} output exceeds the limit of {limit} bytes", position=0)
    del out[n:]
    return bytes(out)
