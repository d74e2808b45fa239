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
frame's declared maximum block size); zstd is decompressed once, streaming,
capped at ``limit + 1`` (refused up front when the first frame declares more).
Every output lands in a per-thread scratch map (:class:`_Scratch`) that the
kernel backs only where a decoder writes, so a cap is a reservation, not a
cost: memory and time follow the bytes actually produced - an empty zstd block
costs nothing although its header allows 128 KiB, an lz4 frame declaring 4 MiB
blocks costs what its blocks hold - and a corrupt or hostile batch costs what a
valid batch of its size does. Nothing retries with bigger buffers. The codecs
themselves are cramjam's / zlib's; nothing here is a hand-written codec.

Error positions are relative to the start of ``data``.
"""

from __future__ import annotations

import mmap
import struct
import threading
import zlib
from collections.abc import Callable
from enum import IntEnum

import cramjam

from kafkatx.errors import CompressionError, DecompressionBomb
from kafkatx.format._primitives import Buffer

__all__ = ["Compression", "compress", "decompress", "decompress_in_place", "XERIAL_MAGIC"]


class Compression(IntEnum):
    """Codec id, attribute bits 0-2 (``CompressionType.java``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


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

# What cramjam's streaming ``*_into`` says when the output buffer (the cap) is full. zstd's own
# "Destination buffer is too small" is not that: it reports a corrupt frame.
_CAP_REACHED = ("failed to write whole buffer",)


class _Scratch(threading.local):
    """One lazily backed output buffer per thread, reused by every decompression.

    A ``bytearray`` output buffer is zero-filled up front (its whole size costs memory and time at
    once). This is a private anonymous map instead: the kernel gives it pages only where a decoder
    writes, so an output cap taken from the batch's framing or from ``limit`` (256 MiB by default)
    costs only the bytes actually produced. The streaming decoders (cramjam's ``*_into``) write from
    the start and stop with an error at the buffer's end, which is the output cap. After a large
    output (or an error, whose extent is unknown) the touched pages are handed back
    (``MADV_DONTNEED``), so memory does not stay at the largest batch seen.
    """

    def __init__(self) -> None:
        self.map: mmap.mmap | None = None
        self.busy = False
        self.keep = False  # decompress_in_place: the output stays where it was written (no copy)

    def get(self, size: int) -> memoryview:
        if self.busy:  # re-entered (a nested decompression): a private buffer, same laziness
            return memoryview(mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS))
        if self.map is None or len(self.map) < size:
            if self.map is not None:
                self.map.close()
            self.map = mmap.mmap(-1, max(size, _SCRATCH_MIN), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.busy = True
        return memoryview(self.map)[:size]

    def hand_over(self, view: memoryview, produced: int) -> memoryview:
        """The ``produced`` bytes of ``view`` kept where they were written, for the caller (no copy): the
        map goes with them (this thread's scratch is mapped anew next time), freed with the last view."""
        base = view.obj
        assert isinstance(base, mmap.mmap)
        out = memoryview(base)[:produced]
        view.release()
        if base is self.map:
            self.map = None
            self.busy = False
        return out

    def done(self, view: memoryview, produced: int | None) -> None:
        """Release ``view``; ``produced``: bytes written (None: unknown, after an error)."""
        base = view.obj
        extent = len(view)
        view.release()
        if base is not self.map:
            assert isinstance(base, mmap.mmap)
            base.close()
            return
        self.busy = False
        # a decoder writes only inside the view: after an error, at most its length was touched
        touched = extent if produced is None else produced
        if touched > _KEEP_RESIDENT:
            assert self.map is not None
            self.map.madvise(mmap.MADV_DONTNEED, 0, touched)


_SCRATCH_MIN = 257 << 20  # the default limit (256 MiB) + 1, rounded: a reservation, not memory
_KEEP_RESIDENT = 4 << 20  # outputs up to this size leave their pages for the next batch
_scratch = _Scratch()


def _into(fn: Callable[[Buffer, memoryview], int], data: Buffer, size: int) -> bytes:
    """Stream-decompress ``data`` with ``fn`` into at most ``size`` bytes of the lazy scratch; the output.

    Raises whatever ``fn`` raises (the caller turns it into a CompressionError/DecompressionBomb).
    """
    out = _scratch.get(size)
    produced: int | None = None
    try:
        n = fn(data, out)
        produced = n
        if _scratch.keep and n > _KEEP_RESIDENT:  # decompress_in_place: a big output is not copied
            _scratch.keep = False  # this output only
            kept = _scratch.hand_over(out, n)
            produced = -1  # handed over: nothing to release
            return kept  # type: ignore[return-value]
        return bytes(out[:n])
    finally:
        if produced != -1:
            _scratch.done(out, produced)


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


def decompress_in_place(codec: Compression | int, data: Buffer, *, limit: int) -> memoryview:
    """:func:`decompress`, a big output not copied: for zstd, snappy and the one-block paths, an output
    over 4 MiB is the view of the lazily backed scratch map the decoder wrote into, handed over (this
    thread's scratch is mapped anew; the map is freed with the last view of it); otherwise a view of
    :func:`decompress`'s bytes. One copy of a big output, where :func:`decompress` briefly holds two (its
    scratch, then the bytes): what bounds ``dump-segment``'s memory on a batch of 250 MB of records."""
    _scratch.keep = True
    try:
        return memoryview(decompress(codec, data, limit=limit))
    finally:
        _scratch.keep = False


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

# What one byte of a raw snappy block can regenerate at most (format_description.txt in google/snappy):
# a literal regenerates its own bytes, a copy with a 1-byte offset 4-11 bytes from 2, a copy with a
# 2- or 4-byte offset 1-64 bytes from 3 or 5. So a body of n bytes (after the length varint) holds at
# most n // 3 * 64 + 11 bytes; a block declaring more is corrupt (snappy-java's SnappyInputStream
# fails on it too) and is refused before anything is decompressed or reserved.
_SNAPPY_COPY_MAX, _SNAPPY_COPY_BYTES, _SNAPPY_TAIL_MAX = 64, 3, 11


def _snappy_varint_len(block: Buffer) -> int:
    """Bytes of the block's length varint (at most 5; the decoder rejects a malformed one)."""
    view = memoryview(block)
    for i in range(min(5, len(view))):
        if not view[i] & 0x80:
            return i + 1
    return min(5, len(view))


def _raw_snappy_block(block: Buffer, limit: int, position: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except Exception as err:  # cramjam raises its own error types
        raise CompressionError(f"bad snappy block: {err}", position=position) from err
    if size > limit:
        raise DecompressionBomb(f"snappy block declares {size} bytes, over the limit of {limit}",
                                position=position)
    body = len(block) - _snappy_varint_len(block)
    if size > body // _SNAPPY_COPY_BYTES * _SNAPPY_COPY_MAX + _SNAPPY_TAIL_MAX:
        raise CompressionError(f"bad snappy block: declares {size} bytes, more than its {body} bytes can hold",
                               position=position)
    try:
        # into the declared length of the lazy scratch: a lying header costs nothing
        return _into(cramjam.snappy.decompress_raw_into, block, size)
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
    scratch = _scratch.get(max_block)  # lazily backed: a frame declaring 4 MiB blocks costs what it writes
    produced: int | None = None
    try:
        got = _unlz4_blocks(view, pos, end, scratch, max_block, limit, block_checksum, content_checksum)
        produced = min(len(got), max_block)
        return got
    finally:
        _scratch.done(scratch, produced)


def _unlz4_blocks(view: memoryview, pos: int, end: int, scratch: memoryview, max_block: int,
                  limit: int, block_checksum: bool, content_checksum: bool) -> bytes:
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


def _unzstd(data: Buffer, limit: int) -> bytes:
    """One streaming decompression into the lazy scratch, capped at ``limit + 1`` bytes.

    Only the first frame's header is read here (O(1), no walk over block headers): its magic, its
    reserved bit and its Frame_Content_Size, which is exact when present (zstd checks it), so a
    frame declaring more than ``limit`` is refused before any work. Everything else - every block,
    every further frame - is the decoder's: it stops at the first corrupt byte, and its output lands
    in a buffer whose memory follows what it writes (an empty block costs nothing, although its
    header would allow 128 KiB), so a hostile batch costs what a valid batch of its size does.
    """
    view = memoryview(data)
    declared = _zstd_first_frame(view)
    if declared is not None and declared > limit:
        raise DecompressionBomb(f"zstd frame declares {declared} bytes, over the limit of {limit}", position=0)
    return _decompress_bounded(cramjam.zstd.decompress_into, view, limit, limit + 1, "zstd")


def _zstd_first_frame(view: memoryview) -> int | None:
    """Check the first frame's header; its declared content size (None: absent or a skippable frame)."""
    end = len(view)
    if end == 0:
        raise CompressionError("empty zstd data (no frame)", position=0)
    if end < 4:
        raise CompressionError("zstd frame magic is truncated", position=0)
    (magic,) = _U32LE.unpack_from(view, 0)
    if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
        if end < 8:
            raise CompressionError("zstd skippable frame header is truncated", position=0)
        size = _U32LE.unpack_from(view, 4)[0]
        if size > end - 8:
            raise CompressionError(f"zstd skippable frame of {size} bytes runs past the data", position=0)
        return None
    if magic != _ZSTD_MAGIC:
        raise CompressionError("not a zstd frame (bad magic)", position=0)
    if end < 5:
        raise CompressionError("zstd frame header is truncated", position=0)
    fhd = view[4]
    if fhd & 0x08:
        raise CompressionError("zstd frame header has its reserved bit set", position=4)
    single = bool(fhd & 0x20)
    fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    hpos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    if end < hpos + fcs_len + 3:  # the header, then at least one block header
        raise CompressionError("zstd frame header is truncated", position=0)
    if not fcs_len:
        return None
    return int.from_bytes(view[hpos:hpos + fcs_len], "little") + (256 if fcs_len == 2 else 0)


def _decompress_bounded(fn: Callable[[Buffer, memoryview], int], data: Buffer, limit: int, bound: int,
                        name: str) -> bytes:
    """One streaming decompression into a buffer of ``min(bound, limit + 1)`` bytes; no retries.

    ``bound`` is an upper bound of a valid stream's output computed from its framing, so
    a "destination too small" answer means corrupt data (or, when ``bound`` passes
    ``limit``, output over the limit).
    """
    try:
        out = _into(fn, data, min(limit + 1, bound))  # the lazy scratch: memory follows the output
    except Exception as err:
        text = str(err)
        if bound > limit and any(t in text for t in _CAP_REACHED):
            raise DecompressionBomb(f"{name} output exceeds the limit of {limit} bytes", position=0) from None
        raise CompressionError(f"bad {name} data: {text}", position=0) from err
    if len(out) > limit:
        raise DecompressionBomb(f"{name} output exceeds the limit of {limit} bytes", position=0)
    return out
