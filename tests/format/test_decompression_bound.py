"""Decompression work is bounded by the batch's own size.

The attack: a 309-byte v2 batch with a valid CRC whose zstd frame is corrupt. zstd reports
such a frame as "Destination buffer is too small", which the old reader took for "grow the
buffer 4x and retry", up to 256 MiB: 8 attempts and ~340 MiB allocated for one 309-byte batch.
"""

from __future__ import annotations

import struct
import tracemalloc

import cramjam
import crc32c
import pytest

from kafkatx.errors import CompressionError, DecodeError, DecompressionBomb
from kafkatx.format import compression
from kafkatx.format.compression import Compression, decompress
from kafkatx.format.record_batch import (
    DEFAULT_MAX_DECOMPRESSED,
    Record,
    build_batch,
    crc_valid,
    iter_records,
    read_batch_header,
)

HEADER = 61  # v2 batch header; the records section (the zstd frame) follows


def _corrupt_zstd_batch() -> bytes:
    """A 309-byte zstd batch whose frame decodes to "Destination buffer is too small", CRC recomputed."""
    for n in range(1, 40):
        recs = [Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"key-%d" % i, value=b"v%d" % (i * 7919) * 3)
                for i in range(n)]
        batch = bytearray(build_batch(recs, base_offset=0, compression=Compression.ZSTD))
        if len(batch) < 309:
            continue
        for i in range(HEADER + 8, len(batch)):
            bad = bytearray(batch)
            bad[i] ^= 0x5A
            try:
                cramjam.zstd.decompress_into(bytes(bad[HEADER:]), bytearray(1 << 20))
            except Exception as err:  # noqa: BLE001 - looking for the one message
                if "too small" not in str(err):
                    continue
            else:
                continue
            struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
            return bytes(bad)
    raise AssertionError("no corrupt frame of the wanted kind found")


@pytest.fixture(scope="module")
def corrupt_batch() -> bytes:
    return _corrupt_zstd_batch()


def test_the_attack_batch(corrupt_batch: bytes) -> None:
    header = read_batch_header(corrupt_batch, 0)
    assert header.compression is Compression.ZSTD
    assert crc_valid(corrupt_batch, header)  # gets past the checksum
    assert 300 <= len(corrupt_batch) <= 330


def test_corrupt_frame_costs_one_bounded_attempt(corrupt_batch: bytes, monkeypatch) -> None:
    calls: list[int] = []
    real = cramjam.zstd.decompress_into

    def counting(data, out):  # type: ignore[no-untyped-def]
        calls.append(len(out))
        return real(data, out)

    monkeypatch.setattr(compression.cramjam.zstd, "decompress_into", counting)
    header = read_batch_header(corrupt_batch, 0)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError) as exc:
            list(iter_records(corrupt_batch, header))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(exc.value, CompressionError) and not isinstance(exc.value, DecompressionBomb)
    assert exc.value.position == HEADER
    # one attempt, where the old code made 8 attempts up to 256 MiB; its buffer is the lazily backed
    # scratch (a cap is a reservation, memory follows what is written), capped at limit + 1
    assert len(calls) == 1, calls
    assert calls[0] <= DEFAULT_MAX_DECOMPRESSED + 1
    assert peak < 2 * 1024 * 1024, peak


def test_thousand_corrupt_batches_stay_small(corrupt_batch: bytes) -> None:
    """The file-sized version: 1,000 such batches allocate no more at peak than one does."""
    data = corrupt_batch * 1000
    tracemalloc.start()
    failures = 0
    try:
        pos = 0
        while pos < len(data):
            header = read_batch_header(data, pos)
            try:
                list(iter_records(data, header))
            except CompressionError:
                failures += 1
            pos += header.size
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert failures == 1000
    assert peak < 2 * 1024 * 1024, peak


def test_valid_frames_still_decompress_at_any_ratio() -> None:
    """The bound is an upper bound: highly compressible data (RLE blocks) still comes back whole."""
    for payload in (b"", b"x", b"\0" * (5 << 20), bytes(range(256)) * 4000):
        frame = bytes(cramjam.zstd.compress(payload))
        assert decompress(Compression.ZSTD, frame, limit=64 << 20) == payload
    with pytest.raises(DecompressionBomb):
        decompress(Compression.ZSTD, bytes(cramjam.zstd.compress(b"\0" * (5 << 20))), limit=1 << 20)


@pytest.mark.parametrize("bad, what", [
    (b"", "empty"),
    (b"\x28\xb5\x2f", "truncated"),
    (b"\x28\xb5\x2f\xfd\x00\x00", "truncated"),
    (b"\x28\xb5\x2f\xfd\x08\x00\x01\x00\x00", "reserved"),
    (b"\x28\xb5\x2f\xfd\x00\x00\x07\x00\x00", "bad zstd data"),  # block type 3: the decoder's error
    (b"\x28\xb5\x2f\xfd\x00\x00" + (((1 << 20) << 3) | 1).to_bytes(3, "little"), "bad zstd data"),
    (b"\x50\x2a\x4d\x18\xff\x00\x00\x00", "skippable"),
    (b"junkjunk", "bad magic"),
], ids=["empty", "short-magic", "no-block", "reserved-bit", "reserved-block", "huge-block", "skippable", "magic"])
def test_bad_zstd_framing_is_a_compression_error(bad: bytes, what: str) -> None:
    with pytest.raises(CompressionError, match=what):
        decompress(Compression.ZSTD, bad, limit=1 << 20)


def test_skippable_frame_before_real_one() -> None:
    skip = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert decompress(Compression.ZSTD, skip + bytes(cramjam.zstd.compress(b"hello")), limit=100) == b"hello"


def test_linked_lz4_blocks_one_attempt(monkeypatch) -> None:
    comp = cramjam.lz4.Compressor(block_linked=True)
    payload = b"abcdefgh" * 50_000
    comp.compress(payload)
    frame = bytes(comp.finish())
    calls: list[int] = []
    real = cramjam.lz4.decompress_into

    def counting(data, out):  # type: ignore[no-untyped-def]
        calls.append(len(out))
        return real(data, out)

    monkeypatch.setattr(compression.cramjam.lz4, "decompress_into", counting)
    if frame[4] & 0x20:
        pytest.skip("cramjam wrote independent blocks")
    assert decompress(Compression.LZ4, frame, limit=64 << 20) == payload
    assert len(calls) == 1


# -- the output cap is a reservation, memory and work follow the output --------------

_CHILD = r"""
import json, resource, sys
from fixtures import hostile_codecs as hc
from kafkatx.errors import DecodeError
from kafkatx.format.record_batch import iter_records, read_batch_header
case, label = sys.argv[1], sys.argv[2]
codec, build = hc.HOSTILE[case]
hostile = build()
batch = hostile if label == "hostile" else hc.valid(codec, len(hostile))
def once(b):
    try:
        list(iter_records(b, read_batch_header(b, 0)))
    except DecodeError:
        pass
once(hc.valid(codec, 100))  # the codec's first use (imports, tables) before the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(20):
    once(batch)
print(json.dumps({"size": len(batch), "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base}))
"""


def _rss_growth(case: str, label: str) -> tuple[int, int]:
    """(batch size, growth of a fresh child's peak RSS in KiB) over 20 decodes of the batch."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", _CHILD, case, label], capture_output=True, text=True, check=True,
                         cwd=root, env=env)
    got = json.loads(out.stdout)
    return got["size"], got["rss_kib"]


@pytest.mark.parametrize("case", ["zstd-empty-blocks", "lz4-4mib-block", "snappy-declares-big", "gzip-truncated"])
def test_hostile_batch_costs_what_a_valid_batch_of_its_size_costs(case: str) -> None:
    """Peak RSS counts every allocation (Python's, the codec's Rust code's, anonymous maps): a hostile
    batch grows it by less than twice what a valid batch of its size does (plus one 1 MiB allowance for
    page and allocator granularity). Before: zstd-empty-blocks grew it by ~256 MiB per decode."""
    hsize, hostile = _rss_growth(case, "hostile")
    vsize, valid = _rss_growth(case, "valid")
    assert vsize >= hsize
    assert hostile < 2 * valid + 1024, (case, hostile, valid)


def test_empty_block_zstd_batch_decodes_with_one_call_and_no_reservation(monkeypatch) -> None:
    """The 6 KB batch of 2,000 empty zstd blocks: one decoder call, Python allocations under 2x those of
    a valid zstd batch of its size, and no output (the old bound reserved 250 MiB, zero-filled)."""
    from fixtures import hostile_codecs as hc

    hostile = hc.zstd_empty_blocks()
    valid = hc.valid(Compression.ZSTD, len(hostile))
    calls: list[int] = []
    real = cramjam.zstd.decompress_into

    def counting(data, out):  # type: ignore[no-untyped-def]
        n = real(data, out)
        calls.append(n)
        return n

    monkeypatch.setattr(compression.cramjam.zstd, "decompress_into", counting)
    peaks = []
    for batch in (hostile, valid):
        list(iter_records(batch, read_batch_header(batch, 0)))  # warm-up
        tracemalloc.start()
        try:
            list(iter_records(batch, read_batch_header(batch, 0)))
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert calls[0] == 0 and len(calls) == 4  # hostile produced nothing; one call per decode
    assert peaks[0] < 2 * peaks[1], peaks


def test_snappy_block_declaring_more_than_its_body_can_hold_is_refused_before_decoding(monkeypatch) -> None:
    """The hostile batch's raw block says 200 MiB and holds 5 bytes. A body of
    n bytes regenerates at most n // 3 * 64 + 11 bytes (snappy's format: a copy element of 3 bytes makes at
    most 64), so the block is refused by its length header alone: the decoder is never called and nothing
    of the scratch is reserved or released. Before, the decoder ran into a 200 MiB view and the error path
    released the whole 257 MiB scratch (2.5x a valid batch's CPU)."""
    from fixtures import hostile_codecs as hc

    def never(*args):  # type: ignore[no-untyped-def]
        raise AssertionError("the decoder was called")

    monkeypatch.setattr(compression.cramjam.snappy, "decompress_raw_into", never)
    batch = hc.snappy_declares_big()
    with pytest.raises(DecodeError, match=r"declares 209715200 bytes, more than its 5 bytes can hold"):
        list(iter_records(batch, read_batch_header(batch, 0)))
    block = b"\x0c\x0cabcd"  # declares 12, body of 5 bytes: 5 // 3 * 64 + 11 = 75 could be valid; the decoder is asked
    with pytest.raises(CompressionError, match="decoder was called"):
        decompress(Compression.SNAPPY, block, limit=1 << 20)


@pytest.mark.parametrize("data", [b"\0" * (1 << 20), b"ab" * (1 << 18), bytes(range(256)) * 300, b"x", b""])
def test_snappy_blocks_at_the_highest_ratio_still_decode(data: bytes) -> None:
    """The body bound is snappy's own: a megabyte of zeros (21.3x, one 64-byte copy per 3 bytes) is below it."""
    block = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Compression.SNAPPY, block, limit=1 << 21) == data
    assert decompress(Compression.SNAPPY, compression.compress(Compression.SNAPPY, data), limit=1 << 21) == data
