"""A batch whose last offset (base offset + last offset delta) leaves int64.

Kafka's ``DefaultRecordBatch.lastOffset()`` is ``baseOffset + lastOffsetDelta`` in Java longs (it would
wrap); ``LogSegment.recover`` then calls ``ensureOffsetInRange(batch.lastOffset())``, which rejects a
last offset the segment cannot hold, so the broker never accepts such a batch. kafkatx reports it as one
DecodeError at the batch's last-offset-delta field (byte 23 of the batch), the same from the compiled
fold, its pure-Python twin, the header reader and the batch iterator.
"""

from __future__ import annotations

import struct

import pytest

import kafkatx.format.record_batch as rb
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format import segment_fold as sf
from kafkatx.format.record_batch import Record, build_batch, iter_batches, read_batch_header

sp = pytest.importorskip("kafkatx.format._fold")
sp.setup(rb.BatchHeader, sf.FoldEvent)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def _batch(base: int, delta: int) -> bytes:
    """One valid batch with the given base offset and last offset delta (CRC recomputed)."""
    recs = [Record(offset=i, timestamp=1_700_000_000_000, key=None, value=b"v") for i in range(6)]
    raw = bytearray(build_batch(recs, base_offset=0))
    struct.pack_into(">q", raw, 0, base)
    struct.pack_into(">i", raw, 23, delta)
    from kafkatx.format import _primitives
    struct.pack_into(">I", raw, 17, _primitives.crc32c_function()(bytes(raw[21:])))
    return bytes(raw)


def _fold_error(chunk_fn, buf: bytes) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    """Run SegmentFold with ``chunk_fn`` as its chunk function; the DecodeError it ends with."""
    saved = sf._fold_chunk
    sf._fold_chunk = chunk_fn
    try:
        with pytest.raises(DecodeError) as info:
            for _ in sf.SegmentFold(buf, want_table=True).chunks():
                pass
    finally:
        sf._fold_chunk = saved
    return str(info.value), info.value.position


def _c_chunk(buf, start, end, mode, breaks, seg_base, prev, table, max_bytes,  # type: ignore[no-untyped-def]
             clean_until=0):
    events, pos, batches, prev_last, order, tbl = sp.fold_segment(buf, start, end, mode, list(breaks), seg_base,
                                                                   prev, table, max_bytes, clean_until)
    return sf.FoldChunk(events, pos, batches, prev_last, order, tbl)


@pytest.mark.parametrize(("base", "delta"), [(INT64_MAX - 1, 5), (INT64_MAX, 1), (INT64_MIN, -1),
                                             (INT64_MIN + 2, -3)])
def test_last_offset_overflow_is_one_decode_error_in_both_twins(base: int, delta: int) -> None:
    good = _batch(100, 5)
    buf = good + _batch(base, delta)
    where = len(good) + 23  # the last offset delta field of the second batch
    c_msg, c_pos = _fold_error(_c_chunk, buf)
    p_msg, p_pos = _fold_error(sf.fold_chunk_py, buf)
    assert (c_msg, c_pos) == (p_msg, p_pos)
    assert c_pos == where
    assert "overflows int64" in c_msg
    # the compiled fold stops before the batch instead of returning a wrapped last offset
    chunk = _c_chunk(buf, 0, len(buf), 0, (), 0, None, True, 1 << 40)
    assert chunk.pos == len(good) and chunk.batches == 1
    with pytest.raises(DecodeError) as info:
        read_batch_header(buf, len(good))
    assert info.value.position == where
    for pure in (False, True):
        with compiled.pure_python(pure), pytest.raises(DecodeError) as info:
            list(iter_batches(buf))
        assert info.value.position == where


@pytest.mark.parametrize(("base", "delta"), [(INT64_MAX - 5, 5), (INT64_MAX, 0), (INT64_MIN + 1, -1)])
def test_last_offset_on_the_boundary_is_accepted(base: int, delta: int) -> None:
    buf = _batch(base, delta)
    c = _c_chunk(buf, 0, len(buf), 0, (), INT64_MIN, None, True, 1 << 40)
    p = sf.fold_chunk_py(buf, 0, len(buf), 0, [], INT64_MIN, None, True, 1 << 40)
    assert c.batches == p.batches == 1
    assert c.prev_last == p.prev_last == base + delta
    assert read_batch_header(buf, 0).last_offset == base + delta
