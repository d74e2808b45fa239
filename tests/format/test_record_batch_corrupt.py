"""Crafted corrupt inputs: each raises the right DecodeError subclass at the right byte."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatx.errors import (
    BadLength,
    BadVarint,
    CrcMismatch,
    DecodeError,
    DecompressionBomb,
    Truncated,
    UnknownVersion,
)
from kafkatx.format.compression import compress
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    Compression,
    Record,
    build_batch,
    build_control_batch,
    crc_valid,
    iter_batches,
    iter_records,
    read_batch_header,
    read_control_record,
)

RECS = [Record(offset=10 + i, timestamp=1000 + i, key=b"key%d" % i, value=b"value" * i,
               headers=(("h", b"v"),)) for i in range(4)]
GOOD = build_batch(RECS, producer_id=5, producer_epoch=1, base_sequence=0)
PREFIX = b"\xaa" * 7   # batches start mid-buffer so positions are absolute, not relative


def _refix_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


# header fields: (name, offset) -- truncating inside any of them is Truncated at the batch start
FIELDS = [("baseOffset", 0), ("batchLength", 8), ("partitionLeaderEpoch", 12), ("magic", 16),
          ("crc", 17), ("attributes", 21), ("lastOffsetDelta", 23), ("baseTimestamp", 27),
          ("maxTimestamp", 35), ("producerId", 43), ("producerEpoch", 51), ("baseSequence", 53),
          ("recordsCount", 57), ("records", 61)]


@pytest.mark.parametrize(("name", "cut"), FIELDS)
def test_truncated_at_every_header_field(name: str, cut: int) -> None:
    buf = PREFIX + GOOD[:cut + 1]
    with pytest.raises(Truncated) as info:
        read_batch_header(buf, len(PREFIX))
    assert info.value.position == len(PREFIX)
    with pytest.raises(Truncated) as info:
        list(iter_batches(buf, len(PREFIX)))
    assert info.value.position == len(PREFIX)


def test_garbage_after_last_batch_reported_at_its_start() -> None:
    buf = GOOD + GOOD + b"\x00\x01\x02"
    it = iter_batches(buf)
    assert [h.position for h in (next(it), next(it))] == [0, len(GOOD)]
    with pytest.raises(Truncated) as info:
        next(it)
    assert info.value.position == 2 * len(GOOD)


def test_wrong_crc() -> None:
    bad = bytearray(GOOD)
    bad[-1] ^= 0x01
    buf = PREFIX + bytes(bad)
    (h,) = list(iter_batches(buf, len(PREFIX)))
    assert not crc_valid(buf, h)
    with pytest.raises(CrcMismatch) as info:
        list(iter_batches(buf, len(PREFIX), verify_crc=True))
    assert info.value.position == len(PREFIX) + 17
    assert crc_valid(PREFIX + GOOD, read_batch_header(PREFIX + GOOD, len(PREFIX)))


def test_wrong_legacy_crc() -> None:
    bad = bytearray(build_batch(RECS[1:2], magic=1))  # value "value": flip its last byte
    bad[-1] ^= 0x10
    h = read_batch_header(bytes(bad), 0)
    assert not crc_valid(bytes(bad), h)
    with pytest.raises(CrcMismatch):
        list(iter_batches(bytes(bad), verify_crc=True))


@pytest.mark.parametrize("length", [2**31 - 1, 2**30, 48, 0, -1, -(2**31)])
def test_absurd_batch_length(length: int) -> None:
    bad = bytearray(GOOD)
    struct.pack_into(">i", bad, 8, length)
    with pytest.raises(BadLength) as info:
        read_batch_header(PREFIX + bytes(bad), len(PREFIX))
    assert info.value.position == len(PREFIX) + 8


def test_unknown_magic() -> None:
    bad = bytearray(GOOD)
    bad[16] = 3
    with pytest.raises(UnknownVersion) as info:
        list(iter_batches(PREFIX + bytes(bad), len(PREFIX)))
    assert info.value.position == len(PREFIX) + 16


def test_negative_records_count() -> None:
    bad = bytearray(GOOD)
    struct.pack_into(">i", bad, 57, -3)
    buf = _refix_crc(bad)
    with pytest.raises(BadLength) as info:
        list(iter_records(buf, read_batch_header(buf, 0)))
    assert info.value.position == 57


def test_records_count_larger_than_bytes() -> None:
    bad = bytearray(GOOD)
    struct.pack_into(">i", bad, 57, 10_000_000)
    buf = _refix_crc(bad)
    with pytest.raises(BadLength):
        list(iter_records(buf, read_batch_header(buf, 0)))


def _single_record_batch(record_body: bytes) -> bytes:
    """A v2 batch whose records section is the given bytes, with a valid CRC."""
    hdr = bytearray(struct.pack(">qiibIhiqqqhii", 0, 49 + len(record_body), 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1))
    return _refix_crc(bytearray(bytes(hdr) + record_body))


def test_negative_key_length() -> None:
    # length 6, attributes 0, ts 0, offset 0, key length -5 (zigzag 9), value -1, headers 0
    body = bytes([12, 0, 0, 0, 9, 1, 0])
    buf = PREFIX + _single_record_batch(body)
    with pytest.raises(BadLength) as info:
        list(iter_records(buf, read_batch_header(buf, len(PREFIX))))
    assert info.value.position == len(PREFIX) + 61 + 4


def test_key_longer_than_record() -> None:
    body = bytes([12, 0, 0, 0, 100, 1, 0])
    buf = _single_record_batch(body)
    with pytest.raises(BadLength) as info:
        list(iter_records(buf, read_batch_header(buf, 0)))
    assert info.value.position == 61 + 4


def test_record_length_past_batch() -> None:
    body = bytes([200, 1, 0, 0, 0, 1, 1, 0])   # length 100 in a 8-byte section
    buf = _single_record_batch(body)
    with pytest.raises(Truncated) as info:
        list(iter_records(buf, read_batch_header(buf, 0)))
    assert info.value.position == 61


def test_bad_varint() -> None:
    body = bytes([14, 0]) + b"\xff" * 11 + b"\x00"   # timestamp delta varlong longer than 10 bytes
    buf = _single_record_batch(body)
    with pytest.raises(BadVarint) as info:
        list(iter_records(buf, read_batch_header(buf, 0)))
    assert info.value.position >= 61


def test_leftover_bytes_after_records() -> None:
    body = bytes([12, 0, 0, 0, 1, 1, 0]) + b"\x00\x00"  # one 6-byte record then 2 stray bytes
    buf = _single_record_batch(body)
    with pytest.raises(BadLength):
        list(iter_records(buf, read_batch_header(buf, 0)))


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD, Compression.LZ4, Compression.SNAPPY])
def test_bomb_in_a_batch(codec: Compression) -> None:
    rec = Record(offset=0, timestamp=0, key=None, value=b"\0" * 2_000_000)
    buf = PREFIX + build_batch([rec], compression=codec)
    h = read_batch_header(buf, len(PREFIX))
    assert h.batch_length < 200_000
    with pytest.raises(DecompressionBomb) as info:
        list(iter_records(buf, h, max_decompressed=100_000))
    assert info.value.position >= len(PREFIX) + 61


def test_corrupt_compressed_body() -> None:
    bad = bytearray(build_batch(RECS, compression=Compression.GZIP))
    bad[70:80] = b"\xff" * 10
    buf = _refix_crc(bad)
    with pytest.raises(DecodeError) as info:
        list(iter_records(buf, read_batch_header(buf, 0)))
    assert info.value.position is not None and info.value.position >= 61


def test_legacy_wrapper_that_does_not_decompress_keeps_framing() -> None:
    good = build_batch(RECS, magic=1, compression=Compression.GZIP)
    bad = bytearray(good)
    bad[-5] ^= 0xFF
    buf = bytes(bad) + GOOD
    hs = list(iter_batches(buf))
    assert [h.magic for h in hs] == [1, 2] and hs[0].records_count == -1
    assert not crc_valid(buf, hs[0])
    with pytest.raises(DecodeError):
        list(iter_records(buf, hs[0]))


def test_legacy_negative_key_length() -> None:
    msg = bytearray(build_batch(RECS[:1], magic=0))
    struct.pack_into(">i", msg, 18, -7)
    with pytest.raises(BadLength) as info:
        read_batch_header(bytes(msg), 0)
    assert info.value.position == 18


def test_control_record_of_non_control_batch() -> None:
    with pytest.raises(DecodeError):
        read_control_record(GOOD, read_batch_header(GOOD, 0))


def test_control_record_with_short_key() -> None:
    buf = build_batch([Record(offset=0, timestamp=0, key=b"\x00", value=None)], is_control=True)
    with pytest.raises(Truncated) as info:
        read_control_record(buf, read_batch_header(buf, 0))
    assert info.value.position == 61


# ---------------------------------------------------------------- only DecodeErrors escape

VALID = [GOOD, build_control_batch(offset=3, control_type=ControlType.ABORT, producer_id=1, producer_epoch=0,
                                   coordinator_epoch=2, timestamp=0)] + \
    [build_batch(RECS, compression=c) for c in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                                Compression.ZSTD)] + \
    [build_batch(RECS, magic=m, compression=c) for m in (0, 1) for c in (Compression.NONE, Compression.GZIP)]


def _exercise(buf: bytes) -> None:
    try:
        for h in iter_batches(buf):
            crc_valid(buf, h)
            for _ in iter_records(buf, h, max_decompressed=1 << 20):
                pass
            if h.is_control:
                read_control_record(buf, h)
    except DecodeError as err:
        assert err.position is not None and 0 <= err.position <= len(buf)
    try:
        read_batch_header(buf, 0)
    except DecodeError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes(buf: bytes) -> None:
    _exercise(buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       st.integers(0, 10**6), st.booleans())
def test_mutated_batches(base: bytes, flips: list[tuple[int, int]], cut: int, fix_crc: bool) -> None:
    buf = bytearray(base)
    for pos, val in flips:
        buf[pos % len(buf)] = val
    if fix_crc and buf[16] == 2 and len(buf) > 21:
        _refix_crc(buf)   # get past the CRC into the record decoder
    buf = buf[: len(buf) - cut % 8]
    _exercise(bytes(buf))


def test_mutated_compressed_inner_records() -> None:
    # valid codec stream around broken records: errors come from the record decoder
    inner = bytes([200, 1, 0, 0, 0, 0, 0, 0])  # record length 100 in 8 bytes
    hdr = struct.pack(">qiibIhiqqqhii", 0, 0, 0, 2, 0, int(Compression.ZSTD), 0, 0, 0, -1, -1, -1, 1)
    body = compress(Compression.ZSTD, inner)
    batch = bytearray(hdr + body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    buf = _refix_crc(batch)
    with pytest.raises(DecodeError) as info:
        list(iter_records(buf, read_batch_header(buf, 0)))
    assert "decompressed" in str(info.value) and info.value.position == 61
