"""``record_batch.records_in_place`` reads the records ``iter_records`` reads, keys and values as views of one
decompressed (or mapped) records section instead of copies: the same offsets, timestamps, bytes, headers and
errors, for every codec, small batches (the compiled decoder) and big ones (the Python loop in place)."""

from __future__ import annotations

import pytest

from kafkatx.errors import DecodeError
from kafkatx.format import record_batch as rb
from kafkatx.format.compression import Compression


def _plain(records) -> list[tuple]:
    return [(r.offset, r.timestamp, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
             tuple((k, None if v is None else bytes(v)) for k, v in r.headers), r.attributes) for r in records]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
@pytest.mark.parametrize("count", [40, 20_000], ids=["small", "over-4-mib"])
def test_the_same_records_as_iter_records(codec: Compression, count: int) -> None:
    records = [rb.Record(offset=i, timestamp=1_700_000_000_000 + i, key=None if i % 11 == 0 else b"k%d" % i,
                         value=None if i % 13 == 0 else bytes([i % 251]) * (i % 700),
                         headers=(("h", b"x" * (i % 5)), ("n", None))) for i in range(count)]
    batch = rb.build_batch(records, base_offset=0, compression=codec)
    header = rb.read_batch_header(batch, 0)
    got = list(rb.records_in_place(batch, header))
    assert _plain(got) == _plain(rb.iter_records(batch, header))
    if count > 40 and (codec != Compression.NONE or header.size > rb._IN_PLACE_FROM):
        assert any(type(r.value) is memoryview for r in got)  # read in place, not copied


def test_the_same_error_for_a_damaged_big_batch() -> None:
    records = [rb.Record(offset=i, timestamp=1, key=None, value=b"v" * 500) for i in range(10_000)]
    batch = bytearray(rb.build_batch(records, base_offset=0))
    batch[57:61] = (10_001).to_bytes(4, "big")  # one record more declared than the section holds
    header = rb.read_batch_header(bytes(batch), 0)
    errors = []
    for read in (rb.iter_records, rb.records_in_place):
        with pytest.raises(DecodeError) as err:
            list(read(bytes(batch), header))
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1]
