"""The twins on int64 boundaries: property tests for decode_records and fold_segment.

Batches are built here byte by byte (records included, so offset and timestamp deltas can be anything
a varint holds) with base offsets near 2^63-1, near -2^63 and near 0, last offset deltas near 2^31-1,
near -2^31 and small, record offset deltas likewise. The rules, from Kafka's source:

* ``DefaultRecordBatch.lastOffset()`` is ``baseOffset + lastOffsetDelta``; ``LogSegment.recover`` runs
  ``ensureOffsetInRange(batch.lastOffset())``, so a batch whose last offset leaves int64 is never
  accepted: kafkatx reports one DecodeError at the batch's last-offset-delta field (byte 23).
* ``DefaultRecord``'s offset is ``baseOffset + offsetDelta`` and its timestamp ``baseTimestamp +
  timestampDelta``; kafkatx gives them as Python ints (never wrapped), in both twins.

Each example runs the public readers (``iter_batches``/``iter_records``, ``SegmentFold``) once compiled
and once under ``compiled.pure_python()``, and requires the same values or the same DecodeError
(class, message, position) -- and the rules above, computed here from the bytes written.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkatx.errors import DecodeError
from kafkatx.format import _primitives, compiled
from kafkatx.format import segment_fold as sf
from kafkatx.format.record_batch import HEADER_SIZE, iter_batches, iter_records
from kafkatx.format.varint import encode_varint, encode_varlong

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)

pytestmark = pytest.mark.skipif(
    not (compiled.active("kafkatx.format._batch") and compiled.active("kafkatx.format._fold")),
    reason="the C extension is not built (or KAFKATX_PURE_PYTHON is set): nothing compiled to compare")

# boundary strategies: near the ends of int64 / int32, near zero, and the ends themselves
base_offsets = st.one_of(st.integers(INT64_MAX - 2**32, INT64_MAX), st.integers(INT64_MIN, INT64_MIN + 2**32),
                         st.integers(-8, 8), st.sampled_from([INT64_MAX, INT64_MIN, INT64_MAX - INT32_MAX]))
deltas32 = st.one_of(st.integers(INT32_MAX - 8, INT32_MAX), st.integers(INT32_MIN, INT32_MIN + 8),
                     st.integers(-8, 8))
deltas64 = st.one_of(st.integers(INT64_MAX - 8, INT64_MAX), st.integers(INT64_MIN, INT64_MIN + 8),
                     st.integers(-8, 8))


def _record(off_delta: int, ts_delta: int, value: bytes) -> bytes:
    """One DefaultRecord: attributes, timestampDelta (varlong), offsetDelta (varint), null key, value,
    no headers; length-prefixed."""
    body = (b"\x00" + encode_varlong(ts_delta) + encode_varint(off_delta) + encode_varint(-1)
            + encode_varint(len(value)) + value + encode_varint(0))
    return encode_varint(len(body)) + body


def _batch(base: int, last_delta: int, records: list[tuple[int, int]], *, base_ts: int = 1_700_000_000_000,
           pid: int = -1, txn: bool = False) -> bytes:
    """A magic-2 batch (DefaultRecordBatch layout) with these fields, its CRC-32C computed here."""
    body = b"".join(_record(o, t, b"v%d" % i) for i, (o, t) in enumerate(records))
    attributes = 0x10 if txn else 0
    rest = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, base_ts, pid, 0 if pid >= 0 else -1,
                       0 if pid >= 0 else -1, len(records)) + body
    crc = _primitives.crc32c_function()(rest)
    head = struct.pack(">qiibI", base, 4 + 1 + 4 + len(rest), 0, 2, crc)
    assert len(head) + len(rest) - len(body) == HEADER_SIZE
    return head + rest


def _walk(buf: bytes) -> list:
    out: list = []
    try:
        for h in iter_batches(buf, 0, verify_crc=True):
            out.append(("batch", h.base_offset, h.last_offset))
            try:
                out.extend(("record", r.offset, r.timestamp, r.value) for r in iter_records(buf, h))
            except DecodeError as e:
                out.append(("error", type(e), e.message, e.position))
    except DecodeError as e:
        out.append(("error", type(e), e.message, e.position))
    return out


def _fold(buf: bytes) -> list:
    out: list = []
    try:
        for chunk in sf.SegmentFold(buf, crc_mode=2, want_table=True, seg_base=INT64_MIN).chunks():
            out.append((chunk.events, chunk.batches, chunk.prev_last, chunk.order, chunk.table))
    except DecodeError as e:
        out.append(("error", type(e), e.message, e.position))
    return out


batch_specs = st.lists(st.tuples(base_offsets, deltas32, st.lists(st.tuples(deltas32, deltas64), min_size=1,
                                                                      max_size=3)),
                       min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_specs)
def test_decode_records_twins_agree_on_int64_boundaries(specs) -> None:  # type: ignore[no-untyped-def]
    raws = [_batch(base, last, recs) for base, last, recs in specs]
    buf = b"".join(raws)
    fast = _walk(buf)
    with compiled.pure_python():
        pure = _walk(buf)
    assert fast == pure
    # the rules, from the bytes written: every batch up to the first whose last offset leaves int64,
    # its records at base + offsetDelta and base timestamp + timestampDelta; then one DecodeError at
    # byte 23 of that batch
    want: list = []
    pos = 0
    for raw, (base, last, recs) in zip(raws, specs, strict=True):
        if not INT64_MIN <= base + last <= INT64_MAX:
            event("a batch's last offset leaves int64")
            assert fast[len(want)][0] == "error" and fast[len(want)][3] == pos + 23
            assert "overflows int64" in fast[len(want)][2]
            assert len(fast) == len(want) + 1
            break
        want.append(("batch", base, base + last))
        want.extend(("record", base + o, 1_700_000_000_000 + t, b"v%d" % i) for i, (o, t) in enumerate(recs))
        pos += len(raw)
    else:
        assert fast == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(base_offsets, deltas32, st.sampled_from([-1, 7, 2**40]), st.booleans()),
                min_size=1, max_size=6))
def test_fold_segment_twins_agree_on_int64_boundaries(specs) -> None:  # type: ignore[no-untyped-def]
    raws = [_batch(base, last, [(0, 0)], pid=pid, txn=txn and pid >= 0) for base, last, pid, txn in specs]
    buf = b"".join(raws)
    fast = _fold(buf)
    with compiled.pure_python():
        pure = _fold(buf)
    assert fast == pure
    bad = [i for i, (base, last, _pid, _txn) in enumerate(specs) if not INT64_MIN <= base + last <= INT64_MAX]
    if bad:
        event("a batch's last offset leaves int64")
        assert fast[-1][0] == "error" and issubclass(fast[-1][1], DecodeError) and "overflows int64" in fast[-1][2]
        assert fast[-1][3] == sum(len(r) for r in raws[:bad[0]]) + 23
    else:
        table = b"".join(t for *_, t in fast if t)
        lasts = struct.unpack(f"={len(table) // 8}q", table)[2::4]
        assert list(lasts) == [base + last for base, last, _pid, _txn in specs]
