"""The one batch framer: ``_framer.h`` (``_batch.frame_columns``) against ``record_batch.frame_batch``.

Every compiled walker takes its batches from ``_framer.h``; its Python twin is ``record_batch.frame_batch``
(Kafka's ``FileLogInputStream.nextBatch`` + ``DefaultRecordBatch``'s header accessors). Here the two walk the
same random and corrupted segments and must give the same rows, column for column, and stop at the same byte
with the same CRC verdict; and each row is held to the bytes it came from, read by the layout of
``DefaultRecordBatch`` (an oracle that is neither framer).
"""

from __future__ import annotations

import struct
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkatx.format.record_batch as rb
from kafkatx.format import compiled
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    FRAME_COLUMNS,
    Compression,
    Record,
    build_batch,
    build_control_batch,
    frame_columns,
    frame_columns_py,
)
from tests.format.test_record_batch_corrupt import VALID, _refix_crc

sp = pytest.importorskip("kafkatx.format._batch")
if not compiled.active("kafkatx.format._batch"):
    pytest.skip("KAFKATX_PURE_PYTHON is set: nothing compiled to compare", allow_module_level=True)

# DefaultRecordBatch's header, big-endian: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence,
# recordsCount
_LAYOUT = struct.Struct(">qiibIhiqqqhii")


def _batch(i: int, kind: int, codec: Compression) -> bytes:
    if kind == 3:
        return build_control_batch(offset=10 * i, control_type=ControlType.COMMIT if i % 2 else ControlType.ABORT,
                                   producer_id=7 + i, producer_epoch=i % 3, coordinator_epoch=i, timestamp=5 * i)
    recs = [Record(offset=10 * i + k, timestamp=1000 + k, key=b"k%d" % k, value=b"v" * (k + i)) for k in range(3)]
    return build_batch(recs, compression=codec, producer_id=-1 if kind == 0 else 100 + i,
                       producer_epoch=-1 if kind == 0 else 1, base_sequence=-1 if kind == 0 else 3 * i,
                       is_transactional=kind == 2)


@st.composite
def segments(draw: st.DrawFn) -> bytes:
    """A few magic-2 batches (plain, idempotent, transactional, markers; every codec), then corrupted: bytes
    overwritten (their CRC fixed or not), the end cut, a legacy batch in between."""
    parts = []
    for i in range(draw(st.integers(0, 6))):
        parts.append(_batch(i, draw(st.integers(0, 3)), draw(st.sampled_from(list(Compression)))))
        if draw(st.integers(0, 9)) == 0:
            parts.append(draw(st.sampled_from(VALID)))
    buf = bytearray(b"".join(parts))
    for at, value in draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4)):
        if buf:
            buf[at % len(buf)] = value
    if draw(st.booleans()):
        pos = 0
        while pos + 61 <= len(buf) and buf[pos + 16] == 2:  # the CRCs made to hold again, where they frame
            size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
            if size < 61 or pos + size > len(buf):
                break
            buf[pos:pos + size] = _refix_crc(bytearray(buf[pos:pos + size]))
            pos += size
    return bytes(buf[:len(buf) - draw(st.integers(0, 80))] if buf else buf)


def _rows(cols: tuple[array[int], ...]) -> list[dict[str, int]]:
    return [dict(zip(FRAME_COLUMNS, row, strict=True)) for row in zip(*cols, strict=True)]


def _oracle(buf: bytes, row: dict[str, int]) -> None:
    """The row against the bytes at its position, read by DefaultRecordBatch's layout."""
    (base, length, ple, magic, crc, attributes, lod, base_ts, max_ts, pid, epoch, seq,
     count) = _LAYOUT.unpack_from(buf, row["position"])
    assert (row["base_offset"], row["batch_length"], row["partition_leader_epoch"], row["magic"], row["crc"],
            row["attributes"], row["last_offset_delta"], row["base_timestamp"], row["max_timestamp"],
            row["producer_id"], row["producer_epoch"], row["base_sequence"], row["records_count"]) == (
        base, length, ple, magic, crc, attributes, lod, base_ts, max_ts, pid, epoch, seq, count)
    assert magic == 2 and row["size"] == length + 12 and row["last_offset"] == base + lod
    assert (row["codec"], row["control"], row["transactional"]) == (
        attributes & 0x07, int(bool(attributes & 0x20)), int(bool(attributes & 0x10)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments(), st.integers(0, 200), st.booleans(), st.integers(0, 8), st.integers(1, 4000))
def test_the_compiled_framer_gives_the_python_rows(buf: bytes, start: int, verify: bool, max_count: int,
                                                   max_bytes: int) -> None:
    start = min(start, len(buf))
    got = frame_columns(buf, start, len(buf), verify_crc=verify, max_count=max_count, max_bytes=max_bytes)
    want = frame_columns_py(buf, start, len(buf), verify_crc=verify, max_count=max_count, max_bytes=max_bytes)
    assert got[1:] == want[1:]
    assert _rows(got[0]) == _rows(want[0])
    pos = start
    for row in _rows(got[0]):
        assert row["position"] == pos
        _oracle(buf, row)
        pos += row["size"]
    assert got[1] == pos


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments())
def test_the_framer_takes_what_iter_batches_takes(buf: bytes) -> None:
    """The framer's walk (no CRC checked) takes the magic-2 batches iter_batches yields before anything else."""
    cols, pos, bad = frame_columns(buf, 0, len(buf), max_count=1 << 20, max_bytes=1 << 30)
    assert bad is None
    headers = []
    try:
        with compiled.pure_python():
            for h in rb.iter_batches(buf):
                if h.magic != 2:
                    break
                headers.append(h)
    except rb.DecodeError:
        pass
    assert [r["position"] for r in _rows(cols)] == [h.position for h in headers]
    assert pos == (headers[-1].position + headers[-1].size if headers else 0)


def test_a_failing_crc_stops_the_walk_at_that_batch() -> None:
    good = _batch(0, 1, Compression.NONE)
    bad = bytearray(_batch(1, 2, Compression.NONE))
    bad[-1] ^= 0xFF
    buf = good + bytes(bad) + good
    for frame in (frame_columns, frame_columns_py):
        cols, pos, stored = frame(buf, 0, len(buf), verify_crc=True)
        assert [r["position"] for r in _rows(cols)] == [0]
        assert pos == len(good) and stored == struct.unpack_from(">I", bad, 17)[0]
        cols, pos, stored = frame(buf, 0, len(buf))
        assert len(cols[0]) == 3 and pos == len(buf) and stored is None


def test_the_columns_are_named_alike_on_both_sides() -> None:
    assert sp.FRAME_COLUMNS == FRAME_COLUMNS
