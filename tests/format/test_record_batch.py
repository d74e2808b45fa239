"""Round trips, header semantics and framing of record batches (magic 0, 1, 2)."""

from __future__ import annotations

import mmap
import struct
import zlib

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    crc_valid,
    iter_batches,
    iter_records,
    read_batch_header,
    read_control_record,
)
from tests.format.conftest import record_lists

CODECS_V2 = list(Compression)
CODECS_LEGACY = [c for c in Compression if c is not Compression.ZSTD]


def _fields(r: Record, *, headers: bool = True) -> tuple:
    return (r.offset, r.timestamp, r.key, r.value, r.headers if headers else ())


@pytest.mark.parametrize("codec", CODECS_V2, ids=lambda c: c.name)
@settings(max_examples=40, deadline=None)
@given(recs=record_lists())
def test_v2_round_trip(codec: Compression, recs: list[Record]) -> None:
    data = build_batch(recs, compression=codec, producer_id=77, producer_epoch=3, base_sequence=5,
                       is_transactional=True)
    (h,) = list(iter_batches(data))
    assert h.size == len(data) and h.magic == 2 and h.compression is codec
    assert h.base_offset == recs[0].offset and h.last_offset == recs[-1].offset
    assert h.records_count == len(recs)
    assert h.max_timestamp == max(r.timestamp for r in recs)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, 5)
    assert h.is_transactional and not h.is_control
    assert crc_valid(data, h)
    assert [_fields(r) for r in iter_records(data, h)] == [_fields(r) for r in recs]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS_LEGACY, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(recs=record_lists(with_headers=False))
def test_legacy_round_trip(magic: int, codec: Compression, recs: list[Record]) -> None:
    data = build_batch(recs, magic=magic, compression=codec)
    headers = list(iter_batches(data))
    expected_batches = len(recs) if codec is Compression.NONE else 1
    assert len(headers) == expected_batches
    got = [r for h in headers for r in iter_records(data, h)]
    ts = (lambda r: r.timestamp) if magic == 1 else (lambda r: -1)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == \
        [(r.offset, ts(r), r.key, r.value) for r in recs]
    for h in headers:
        assert crc_valid(data, h)
        assert h.magic == magic and h.producer_id == -1 and h.base_sequence == -1
        assert h.timestamp_type == (TimestampType.NO_TIMESTAMP if magic == 0 else TimestampType.CREATE_TIME)
    # Kafka: baseOffset of a compressed wrapper is its first inner offset, lastOffset the wrapper's.
    assert headers[0].base_offset == recs[0].offset
    assert headers[-1].last_offset == recs[-1].offset
    assert sum(h.records_count for h in headers) == len(recs)


def test_log_append_time_overrides_record_timestamps() -> None:
    recs = [Record(offset=5, timestamp=100, key=None, value=b"a"),
            Record(offset=6, timestamp=250, key=None, value=b"b")]
    data = build_batch(recs, timestamp_type=TimestampType.LOG_APPEND_TIME)
    h = read_batch_header(data, 0)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in iter_records(data, h)] == [250, 250]
    # legacy magic 1 compressed wrapper with LogAppendTime: inner records take the wrapper's
    legacy = build_batch(recs, magic=1, compression=Compression.GZIP,
                         timestamp_type=TimestampType.LOG_APPEND_TIME)
    lh = read_batch_header(legacy, 0)
    assert lh.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in iter_records(legacy, lh)] == [250, 250]


def test_header_fields_at_their_byte_positions() -> None:
    recs = [Record(offset=1000, timestamp=1_700_000_000_000, key=b"k", value=b"v")]
    data = build_batch(recs, partition_leader_epoch=9, producer_id=0x0102030405, producer_epoch=7,
                       base_sequence=11, is_transactional=True)
    h = read_batch_header(data, 0)
    assert struct.unpack_from(">q", data, 0)[0] == h.base_offset == 1000
    assert struct.unpack_from(">i", data, 8)[0] == h.batch_length == len(data) - 12
    assert struct.unpack_from(">i", data, 12)[0] == h.partition_leader_epoch == 9
    assert data[16] == 2
    assert struct.unpack_from(">I", data, 17)[0] == h.crc == crc32c.crc32c(data[21:])
    assert struct.unpack_from(">h", data, 21)[0] == h.attributes == 0x10
    assert struct.unpack_from(">q", data, 43)[0] == 0x0102030405
    assert struct.unpack_from(">i", data, 57)[0] == 1
    assert len(data) > HEADER_SIZE


def test_headers_are_frozen_slotted_dataclasses() -> None:
    data = build_batch([Record(offset=0, timestamp=0, key=None, value=None)])
    h = next(iter_batches(data))
    r = next(iter_records(data, h))
    assert type(h) is BatchHeader and type(r) is Record
    with pytest.raises(AttributeError):
        h.base_offset = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        r.value = b"x"  # type: ignore[misc]
    assert r == Record(offset=0, timestamp=0, key=None, value=None)
    assert h == read_batch_header(data, 0)


@pytest.mark.parametrize(("base", "delta", "expected"), [
    (-1, 5, -1), (0, 0, 0), (10, 4, 14), (2**31 - 1, 0, 2**31 - 1),
    (2**31 - 1, 1, 0), (2**31 - 3, 5, 2),  # DefaultRecordBatch.incrementSequence wraps to 0
])
def test_last_sequence_wraps_like_kafka(base: int, delta: int, expected: int) -> None:
    recs = [Record(offset=o, timestamp=0, key=None, value=b"") for o in (0, delta)] if delta else \
        [Record(offset=0, timestamp=0, key=None, value=b"")]
    h = read_batch_header(build_batch(recs, producer_id=1, producer_epoch=0, base_sequence=base), 0)
    assert h.last_offset_delta == delta
    assert h.last_sequence == expected


def test_offsets_with_gaps_and_base_before_first_record() -> None:
    recs = [Record(offset=100, timestamp=1, key=b"a", value=b"1"), Record(offset=140, timestamp=2, key=b"b", value=b"2")]
    data = build_batch(recs, base_offset=90)
    h = read_batch_header(data, 0)
    assert (h.base_offset, h.last_offset_delta, h.last_offset) == (90, 50, 140)
    assert [r.offset for r in iter_records(data, h)] == [100, 140]


def test_empty_batch_left_by_compaction() -> None:
    data = build_batch([], base_offset=500)
    h = read_batch_header(data, 0)
    assert h.records_count == 0 and list(iter_records(data, h)) == []
    assert crc_valid(data, h)


@pytest.mark.parametrize("coordinator_epoch", [0, 1, 2, 17, 255, 65_536, 2**31 - 1])
@pytest.mark.parametrize("ctype", [ControlType.ABORT, ControlType.COMMIT])
def test_control_batch(ctype: ControlType, coordinator_epoch: int) -> None:
    data = build_control_batch(offset=42, control_type=ctype, producer_id=9000, producer_epoch=4,
                               coordinator_epoch=coordinator_epoch, timestamp=1234, partition_leader_epoch=3)
    h = read_batch_header(data, 0)
    assert h.is_control and h.is_transactional and h.base_sequence == -1
    assert (h.base_offset, h.last_offset, h.records_count) == (42, 42, 1)
    assert (h.producer_id, h.producer_epoch, h.partition_leader_epoch) == (9000, 4, 3)
    (rec,) = list(iter_records(data, h))
    assert rec.key == struct.pack(">hh", 0, int(ctype)) and rec.value == struct.pack(">hi", 0, coordinator_epoch)
    cr = read_control_record(data, h)
    assert (cr.version, cr.type_id, cr.coordinator_epoch, cr.type_name) == (
        0, int(ctype), coordinator_epoch, ctype.name)


def test_control_record_of_other_types() -> None:
    leader_change = build_batch([Record(offset=0, timestamp=0, key=struct.pack(">hh", 0, 2), value=b"\x00\x00")],
                                is_control=True)
    cr = read_control_record(leader_change, read_batch_header(leader_change, 0))
    assert cr.type_name == "LEADER_CHANGE" and cr.coordinator_epoch is None
    unknown = build_batch([Record(offset=0, timestamp=0, key=struct.pack(">hh", 0, 99), value=None)],
                          is_control=True)
    cr = read_control_record(unknown, read_batch_header(unknown, 0))
    assert cr.type_name == "99" and cr.type_id == 99


def test_iter_batches_over_mmap_mixed_magics(tmp_path) -> None:
    recs = [Record(offset=i, timestamp=i, key=None, value=bytes([i]) * i) for i in range(6)]
    parts = [build_batch(recs[:2], magic=0), build_batch(recs[2:4], magic=1, compression=Compression.SNAPPY),
             build_batch(recs[4:], compression=Compression.LZ4)]
    path = tmp_path / "seg.log"
    path.write_bytes(b"".join(parts))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        hs = list(iter_batches(mm))
        assert [h.position for h in hs] == [0, len(parts[0]) // 2, len(parts[0]),
                                           len(parts[0]) + len(parts[1])]
        assert [h.magic for h in hs] == [0, 0, 1, 2]
        assert all(crc_valid(mm, h) for h in hs)
        assert [r.value for h in hs for r in iter_records(mm, h)] == [r.value for r in recs]
        # start/end select a window and stop cleanly at end
        assert [h.position for h in iter_batches(mm, len(parts[0]), len(parts[0]) + len(parts[1]))] == \
            [len(parts[0])]
        del hs


def test_legacy_crc_is_crc32_of_message_from_magic() -> None:
    data = build_batch([Record(offset=3, timestamp=9, key=b"k", value=b"v")], magic=1)
    h = read_batch_header(data, 0)
    assert h.crc == zlib.crc32(data[16:])
    assert h.base_timestamp == 9 == h.max_timestamp and h.partition_leader_epoch == -1


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=5))
def test_big_deltas_take_long_varints(values: list[int]) -> None:
    # header and key/value lengths past 1-2 byte varints, offsets and timestamps far apart
    recs = []
    off = 0
    for i, v in enumerate(values):
        off += abs(v) % 2**28 + 1  # offset deltas stay int32
        recs.append(Record(offset=off, timestamp=abs(v) * 1000, key=b"k" * (i * 3000), value=None,
                           headers=(("h" * 100, b"x" * 9000),)))
    data = build_batch(recs)
    h = read_batch_header(data, 0)
    assert [_fields(r) for r in iter_records(data, h)] == [_fields(r) for r in recs]
