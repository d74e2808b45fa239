"""Codecs: round trips, the framings Kafka writes, and bounded decompression."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatx.errors import CompressionError, DecompressionBomb
from kafkatx.format.compression import XERIAL_MAGIC, Compression, compress, decompress

ALL = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=200_000))
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), limit=len(data)) == data


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
def test_large_input_spans_many_blocks(codec: Compression) -> None:
    data = bytes(range(256)) * 4096 + b"tail" * 70000   # > 1 MiB: many xerial chunks / lz4 blocks
    assert decompress(codec, compress(codec, data), limit=len(data)) == data


def test_snappy_is_written_in_xerial_framing() -> None:
    out = compress(Compression.SNAPPY, b"x" * 100_000)
    magic, version, compat = struct.unpack_from(">8sii", out, 0)
    assert (magic, version, compat) == (XERIAL_MAGIC, 1, 1)
    (first,) = struct.unpack_from(">i", out, 16)
    # each chunk is a raw block of at most 32 KiB input (snappy-java's default block size)
    assert cramjam.snappy.decompress_raw_len(out[20:20 + first]) == 32 * 1024


def test_snappy_accepts_raw_blocks() -> None:
    raw = bytes(cramjam.snappy.compress_raw(b"hello kafka" * 100))
    assert decompress(Compression.SNAPPY, raw, limit=10_000) == b"hello kafka" * 100


def test_lz4_frame_has_independent_blocks() -> None:
    out = compress(Compression.LZ4, b"abc" * 100_000)
    assert struct.unpack_from("<I", out, 0)[0] == 0x184D2204
    assert out[4] & 0x20, "Kafka's Lz4BlockInputStream needs independent blocks"


def test_lz4_with_wrong_header_checksum_still_reads() -> None:
    # Kafka before 0.10 (magic 0) computed the frame header checksum over the magic too.
    out = bytearray(compress(Compression.LZ4, b"old kafka" * 50))
    hc_pos = 6 + (8 if out[4] & 0x08 else 0)
    out[hc_pos] ^= 0xFF
    assert decompress(Compression.LZ4, bytes(out), limit=1000) == b"old kafka" * 50


def test_lz4_linked_blocks_from_other_writers() -> None:
    data = bytes(range(256)) * 2000
    linked = bytes(cramjam.lz4.compress(data))
    assert not linked[4] & 0x20
    assert decompress(Compression.LZ4, linked, limit=len(data)) == data
    with pytest.raises(DecompressionBomb):
        decompress(Compression.LZ4, linked, limit=len(data) - 1)


def test_gzip_concatenated_members() -> None:
    assert decompress(Compression.GZIP, gzip.compress(b"a" * 10) + gzip.compress(b"b" * 5), limit=15) == \
        b"a" * 10 + b"b" * 5


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
def test_bomb_past_limit(codec: Compression) -> None:
    bomb = compress(codec, b"\0" * 5_000_000)
    assert len(bomb) < 300_000
    with pytest.raises(DecompressionBomb) as info:
        decompress(codec, bomb, limit=64 * 1024)
    assert info.value.position is not None and 0 <= info.value.position <= len(bomb)
    # exactly at the limit is fine
    assert len(decompress(codec, bomb, limit=5_000_000)) == 5_000_000


def test_zstd_bomb_without_content_size_is_still_bounded() -> None:
    comp = cramjam.zstd.Compressor()
    comp.compress(b"\0" * 3_000_000)  # streaming: no frame content size, like zstd-jni's stream
    bomb = bytes(comp.finish())
    with pytest.raises(DecompressionBomb):
        decompress(Compression.ZSTD, bomb, limit=100_000)


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
def test_garbage_raises_compression_error(codec: Compression) -> None:
    with pytest.raises(CompressionError):
        decompress(codec, b"\x13\x37 definitely not compressed \xff\xfe" * 3, limit=10_000)


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
def test_truncated_stream(codec: Compression) -> None:
    good = compress(codec, bytes(range(256)) * 300)
    with pytest.raises(CompressionError):
        decompress(codec, good[: len(good) // 2], limit=1_000_000)


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_bytes_only_raise_compression_errors(codec: Compression, data: bytes) -> None:
    try:
        out = decompress(codec, data, limit=4096)
    except CompressionError:
        return
    assert len(out) <= 4096


def test_xerial_chunk_length_bounded() -> None:
    bad = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 2**30) + b"abc"
    with pytest.raises(CompressionError) as info:
        decompress(Compression.SNAPPY, bad, limit=1000)
    assert info.value.position == 16
