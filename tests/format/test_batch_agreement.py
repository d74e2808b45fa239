"""Independent agreement with kafka-python, aiokafka and kio on the same bytes.

Their writers -> our reader, and our writers -> their readers (CRC validated by
them). kafka-python here has no snappy/lz4/zstd libraries, so it covers none and
gzip; aiokafka (cramjam-backed, compiled reader) covers every codec; kio writes
and reads uncompressed magic 2 only.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import kafka.codec as kafka_codec
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import given, settings
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
from kafka.record.memory_records import MemoryRecordsBuilder as KpMemoryRecordsBuilder
from kio.records import readers as kio_readers
from kio.records import schema as kio_schema
from kio.records import writers as kio_writers
from kio.static.primitive import i8, i16, i32, i64

from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    Compression,
    Record,
    build_batch,
    build_control_batch,
    crc_valid,
    iter_batches,
    iter_records,
)
from tests.format.conftest import record_lists

# kafka-python compresses through optional libraries (python-snappy, lz4, zstandard: all in the
# `test` extra); a codec whose library is missing cannot be cross-checked, and the test extra
# installs them all, so a missing one fails test_kafka_python_has_every_codec.
_KP_HAS = {Compression.NONE: True, Compression.GZIP: kafka_codec.has_gzip(),
           Compression.SNAPPY: kafka_codec.has_snappy(), Compression.LZ4: kafka_codec.has_lz4(),
           Compression.ZSTD: kafka_codec.has_zstd()}
KP_CODECS = [c for c, ok in _KP_HAS.items() if ok]
ALL = list(Compression)


def _ours(data: bytes) -> list[tuple]:
    out = []
    for h in iter_batches(data):
        assert crc_valid(data, h)
        out += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in iter_records(data, h)]
    return out


def _theirs(batches) -> list[tuple]:  # type: ignore[no-untyped-def]
    out = []
    for b in batches:
        assert b.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(x) for x in (r.headers or ())))
                for r in b]
    return out


def _kp_batches(data: bytes):  # type: ignore[no-untyped-def]
    mr = KpMemoryRecords(data)
    while (b := mr.next_batch()) is not None:
        yield b


def _aio_batches(data: bytes):  # type: ignore[no-untyped-def]
    mr = AioMemoryRecords(data)
    while (b := mr.next_batch()) is not None:
        yield b


def _blob(v: bytes | None) -> bytes | None:
    return None if v is None else bytes(v)


# ---------------------------------------------------------------- their writers, our reader

@pytest.mark.parametrize("codec", KP_CODECS, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(recs=record_lists())
def test_kafka_python_v2_builder(codec: Compression, recs: list[Record]) -> None:
    b = KpBuilder(magic=2, compression_type=int(codec), is_transactional=True, producer_id=99,
                  producer_epoch=2, base_sequence=7, batch_size=1 << 24)
    base = recs[0].offset
    for r in recs:  # kafka-python's builder takes offsets relative to a base of 0
        b.append(r.offset - base, r.timestamp, r.key, r.value, list(r.headers))
    data = bytes(b.build())
    (h,) = list(iter_batches(data))
    theirs = KpMemoryRecords(data).next_batch()
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (theirs.producer_id, theirs.producer_epoch,
                                                                  theirs.base_sequence) == (99, 2, 7)
    assert h.is_transactional == theirs.is_transactional is True
    assert h.attributes == theirs.attributes and h.last_offset_delta == theirs.last_offset_delta
    # kafka-python keeps the batch uncompressed when compression would not shrink it
    assert h.compression == theirs.compression_type and h.compression in (codec, Compression.NONE)
    assert _ours(data) == _theirs(_kp_batches(data))
    assert [r[0] + base for r in _ours(data)] == [r.offset for r in recs]


@pytest.mark.parametrize("magic", [0, 1])
# zstd needs magic 2 (KIP-110): Kafka and kafka-python refuse it in legacy message sets
@pytest.mark.parametrize("codec", [c for c in KP_CODECS if c != Compression.ZSTD], ids=lambda c: c.name)
@settings(max_examples=20, deadline=None)
@given(recs=record_lists(with_headers=False))
def test_kafka_python_legacy_builder(magic: int, codec: Compression, recs: list[Record]) -> None:
    b = KpLegacyBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 24)
    for i, r in enumerate(recs):
        b.append(i, r.timestamp if magic else None, r.key, r.value)
    data = bytes(b.build())
    ours = [(o, t if magic else None, k, v) for o, t, k, v, _ in _ours(data)]
    theirs = [x[:4] for x in _theirs(_kp_batches(data))]
    assert ours == theirs


def test_kafka_python_memory_records_builder() -> None:
    mb = KpMemoryRecordsBuilder(magic=2, compression_type=1, batch_size=1 << 20, offset=500, transactional=True,
                                producer_id=3, producer_epoch=4, base_sequence=0)
    for i in range(20):
        mb.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * i, headers=[("n", str(i).encode())])
    mb.close()
    data = bytes(mb.buffer())
    (h,) = list(iter_batches(data))
    theirs = KpMemoryRecords(data).next_batch()
    # kafka-python writes baseOffset 0 and deltas from 500: a valid batch whose base precedes its records
    assert (h.base_offset, h.last_offset_delta) == (theirs.base_offset, theirs.last_offset_delta)
    assert (h.last_offset, h.records_count, h.producer_id) == (519, 20, 3)
    assert [r.offset for r in iter_records(data, h)] == list(range(500, 520))
    assert _ours(data) == _theirs(_kp_batches(data))


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(recs=record_lists())
def test_aiokafka_v2_builder(codec: Compression, recs: list[Record]) -> None:
    b = AioBuilder(2, int(codec), 1, 1234, 5, 42, 1 << 24)
    base = recs[0].offset
    for r in recs:
        b.append(r.offset - base, r.timestamp, r.key, r.value, list(r.headers))
    data = bytes(b.build())
    (h,) = list(iter_batches(data))
    theirs = AioMemoryRecords(data).next_batch()
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (theirs.producer_id, theirs.producer_epoch,
                                                                  theirs.base_sequence)
    assert h.compression == theirs.compression_type and h.compression in (codec, Compression.NONE)
    assert h.is_transactional
    assert _ours(data) == _theirs(_aio_batches(data))


@pytest.mark.parametrize(("magic", "codec"), [(0, Compression.NONE), (0, Compression.GZIP), (0, Compression.SNAPPY),
                                              (1, Compression.NONE), (1, Compression.GZIP), (1, Compression.SNAPPY),
                                              (1, Compression.LZ4)])
def test_aiokafka_legacy_builder(magic: int, codec: Compression) -> None:
    b = AioLegacyBuilder(magic, int(codec), 1 << 20)
    for i in range(5):
        b.append(i, 1000 + i if magic else None, b"key%d" % i if i % 2 else None, b"val" * i)
    data = bytes(b.build())
    ours = [(o, t if magic else None, k, v) for o, t, k, v, _ in _ours(data)]
    assert ours == [x[:4] for x in _theirs(_aio_batches(data))]
    assert len(ours) == 5


def _kio_batch(recs: list[Record]) -> bytes:
    kio_recs = tuple(
        kio_schema.Record(attributes=i8(0), timestamp=datetime.fromtimestamp(r.timestamp / 1000, UTC),
                          offset=i64(r.offset), key=r.key, value=r.value,
                          headers=tuple(kio_schema.RecordHeader(key=k.encode(), value=v) for k, v in r.headers))
        for r in recs)
    buf = io.BytesIO()
    kio_writers.write_new_batch(buf, kio_schema.NewRecordBatch(
        producer_id=i64(8), producer_epoch=i16(1), base_sequence=i32(0), records=kio_recs, attributes=i16(0)))
    return buf.getvalue()


@settings(max_examples=25, deadline=None)
@given(recs=record_lists(max_size=6))
def test_kio_writer(recs: list[Record]) -> None:
    data = _kio_batch(recs)
    (h,) = list(iter_batches(data))
    assert crc_valid(data, h) and h.producer_id == 8
    got = list(iter_records(data, h))
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [(r.offset, r.key, r.value, r.headers) for r in recs]
    # kio writes timestamps from a datetime in whole milliseconds
    assert [r.timestamp for r in got] == [int(datetime.fromtimestamp(r.timestamp / 1000, UTC).timestamp() * 1000)
                                          for r in recs]


# ---------------------------------------------------------------- our writers, their readers

@pytest.mark.parametrize("codec", KP_CODECS, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(recs=record_lists())
def test_our_v2_read_by_kafka_python(codec: Compression, recs: list[Record]) -> None:
    data = build_batch(recs, compression=codec, producer_id=11, producer_epoch=1, base_sequence=0,
                       is_transactional=True)
    theirs = KpMemoryRecords(data).next_batch()
    assert theirs.base_offset == recs[0].offset and theirs.producer_id == 11 and theirs.is_transactional
    assert _theirs(_kp_batches(data)) == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None)
@given(recs=record_lists())
def test_our_v2_read_by_aiokafka(codec: Compression, recs: list[Record]) -> None:
    data = build_batch(recs, compression=codec, producer_id=11, producer_epoch=1, base_sequence=0)
    theirs = AioMemoryRecords(data).next_batch()
    assert theirs.base_offset == recs[0].offset and theirs.compression_type == int(codec)
    assert _theirs(_aio_batches(data)) == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in
                                              (Compression.NONE, Compression.GZIP, Compression.SNAPPY)])
@settings(max_examples=15, deadline=None)
@given(recs=record_lists(with_headers=False))
def test_our_legacy_read_by_aiokafka_and_kafka_python(magic: int, codec: Compression, recs: list[Record]) -> None:
    data = build_batch(recs, magic=magic, compression=codec)
    want = [(r.offset, r.timestamp if magic else None, r.key, r.value) for r in recs]
    assert [x[:4] for x in _theirs(_aio_batches(data))] == want
    if codec in KP_CODECS:
        assert [x[:4] for x in _theirs(_kp_batches(data))] == want


@settings(max_examples=25, deadline=None)
@given(recs=record_lists(max_size=6))
def test_our_v2_read_by_kio(recs: list[Record]) -> None:
    data = build_batch(recs, producer_id=4, producer_epoch=2, base_sequence=1)
    batch, size = kio_readers.read_batch(data, 0)   # kio validates the CRC-32C itself
    assert size == len(data) and batch.producer_id == 4 and batch.base_sequence == 1
    assert [(r.offset, r.key, r.value, tuple((h.key.decode(), h.value) for h in r.headers))
            for r in batch.records] == [(r.offset, r.key, r.value, r.headers) for r in recs]


@pytest.mark.parametrize("ctype", [ControlType.ABORT, ControlType.COMMIT])
def test_control_batch_read_by_others(ctype: ControlType) -> None:
    data = build_control_batch(offset=77, control_type=ctype, producer_id=5, producer_epoch=6,
                               coordinator_epoch=9, timestamp=1000)
    for batch in (KpMemoryRecords(data).next_batch(), AioMemoryRecords(data).next_batch()):
        assert batch.validate_crc()
        assert batch.is_control_batch and batch.is_transactional
        assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 5, 6, -1)
    from aiokafka.record.control_record import ControlRecord as AioControl
    (rec,) = list(AioMemoryRecords(data).next_batch())
    parsed = AioControl.parse(rec.key)
    assert parsed.type_ == int(ctype)


def test_kafka_python_has_every_codec() -> None:
    """The agreement tests above cover every codec only when kafka-python can compress with it."""
    assert KP_CODECS == list(Compression)
