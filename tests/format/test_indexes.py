"""Offset and time indexes: hand-assembled bytes per OffsetIndex.java / TimeIndex.java."""

from __future__ import annotations

import struct
from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatx.errors import Truncated
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index, read_offset_index
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index, read_time_index

BASE = 1000


def test_offset_index_entries_are_relative_and_absolute_on_read():
    raw = struct.pack(">ii", 0, 0) + struct.pack(">ii", 17, 4096) + struct.pack(">ii", 40, 8200)
    assert read_offset_index(raw, BASE) == [
        OffsetIndexEntry(offset=1000, position=0),
        OffsetIndexEntry(offset=1017, position=4096),
        OffsetIndexEntry(offset=1040, position=8200),
    ]


def test_offset_index_stops_at_zero_padding_but_keeps_a_zero_first_entry():
    raw = struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, 300) + bytes(8 * 100)
    entries = read_offset_index(raw, 0)
    assert [(e.offset, e.position) for e in entries] == [(0, 0), (5, 300)]


def test_offset_index_all_zero_preallocated_file_has_one_entry_at_base():
    # a preallocated, never-written index: the first entry reads as (base, 0), which is
    # also what Kafka's lastEntry would report for it
    assert read_offset_index(bytes(80), 7) == [OffsetIndexEntry(offset=7, position=0)]


def test_offset_index_empty_file():
    assert read_offset_index(b"", 0) == []


@pytest.mark.parametrize("tail", [1, 3, 7])
def test_offset_index_partial_entry_is_truncated_at_its_position(tail):
    raw = struct.pack(">ii", 1, 10) + struct.pack(">ii", 2, 20) + b"\x01" * tail
    with pytest.raises(Truncated) as exc:
        read_offset_index(raw, 0)
    assert exc.value.position == 16
    # lenient mode drops the partial entry
    assert len(read_offset_index(raw, 0, strict=False)) == 2


def test_offset_index_partial_tail_after_padding_is_not_reached():
    raw = struct.pack(">ii", 1, 10) + bytes(8) + b"\x00\x00\x00"
    assert read_offset_index(raw, 0) == [OffsetIndexEntry(offset=1, position=10)]


def test_offset_index_reads_memoryview_slices():
    raw = b"JUNK" + struct.pack(">ii", 3, 99)
    assert read_offset_index(memoryview(raw)[4:], 10) == [OffsetIndexEntry(offset=13, position=99)]


def test_offset_index_encode_is_hand_layout():
    out = encode_offset_index([OffsetIndexEntry(offset=105, position=77)], 100)
    assert out == b"\x00\x00\x00\x05\x00\x00\x00\x4d"


def test_offset_index_encode_rejects_offsets_below_base():
    with pytest.raises(ValueError):
        encode_offset_index([OffsetIndexEntry(offset=99, position=0)], 100)


def test_time_index_layout():
    raw = struct.pack(">qi", 1_700_000_000_000, 0) + struct.pack(">qi", 1_700_000_000_500, 12)
    assert read_time_index(raw, 50) == [
        TimeIndexEntry(timestamp=1_700_000_000_000, offset=50),
        TimeIndexEntry(timestamp=1_700_000_000_500, offset=62),
    ]
    assert encode_time_index(read_time_index(raw, 50), 50) == raw


def test_time_index_stops_at_zero_padding():
    raw = struct.pack(">qi", 5, 1) + bytes(12 * 3)
    assert read_time_index(raw, 0) == [TimeIndexEntry(timestamp=5, offset=1)]


@pytest.mark.parametrize("tail", [1, 8, 11])
def test_time_index_partial_entry(tail):
    raw = struct.pack(">qi", 5, 1) + b"\xff" * tail
    with pytest.raises(Truncated) as exc:
        read_time_index(raw, 0)
    assert exc.value.position == 12
    assert read_time_index(raw, 0, strict=False) == [TimeIndexEntry(timestamp=5, offset=1)]


_rel = st.integers(1, 2**31 - 1)


@given(st.integers(0, 2**40), st.lists(st.tuples(_rel, st.integers(1, 2**31 - 1)), max_size=30))
def test_offset_index_round_trip(base, pairs):
    entries = [OffsetIndexEntry(offset=base + r, position=p) for r, p in pairs]
    assert read_offset_index(encode_offset_index(entries, base), base) == entries


@given(st.integers(0, 2**40), st.lists(st.tuples(st.integers(1, 2**62), st.integers(0, 2**31 - 1)),
                                       max_size=30))
def test_time_index_round_trip(base, pairs):
    entries = [TimeIndexEntry(timestamp=t, offset=base + r) for t, r in pairs]
    assert read_time_index(encode_time_index(entries, base), base) == entries


# By column (verify's readers): the same entries and the same errors as the entry readers, on
# raw bytes that mix real entries, zero padding, zero runs that straddle entries and partial tails.
_raw_entry = st.one_of(st.binary(min_size=1, max_size=12),
                       st.sampled_from([b"\x00" * 4, b"\x00" * 8, b"\x00" * 12, b"\x00\x00\x00\x05"]))


def _by_entry_or_error(read, raw: bytes):  # type: ignore[no-untyped-def]
    try:
        return read(raw)
    except Truncated as err:
        return (str(err), err.position)


def _column_readers():  # type: ignore[no-untyped-def]
    from kafkatx.format.offset_index import OffsetIndexColumns, read_offset_index_columns
    from kafkatx.format.time_index import TimeIndexColumns, read_time_index_columns

    return [(read_offset_index, OffsetIndexColumns, read_offset_index_columns),
            (read_time_index, TimeIndexColumns, read_time_index_columns)]


@pytest.mark.parametrize("which", [0, 1], ids=["index", "timeindex"])
@given(raw=st.lists(_raw_entry, max_size=20).map(b"".join), base=st.integers(0, 2**40), strict=st.booleans())
def test_index_columns_are_the_entries(which: int, raw: bytes, base: int, strict: bool) -> None:
    by_entry, columns, read_columns = _column_readers()[which]
    for buf in (raw, bytearray(raw), memoryview(raw)):
        got = _by_entry_or_error(lambda b: read_columns(b, base, strict=strict), buf)
        expected = _by_entry_or_error(lambda b: columns.of(by_entry(b, base, strict=strict)), buf)
        if isinstance(got, columns):
            assert [list(c) for c in got] == [list(c) for c in expected]
        else:
            assert got == expected


def test_index_columns_stop_at_the_zero_padding_but_not_at_zeros_across_entries() -> None:
    from kafkatx.format.offset_index import read_offset_index_columns

    # entry 1 is (5, 0) and entry 2 (0, 9): eight zero bytes straddle them; entry 3 is the padding
    raw = struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, 0) + struct.pack(">ii", 0, 9) + bytes(8) + b"\x01" * 3
    cols = read_offset_index_columns(raw, 100)
    assert (list(cols.offsets), list(cols.positions)) == ([100, 105, 100], [0, 0, 9])


def test_struct_columns_by_hand() -> None:
    from kafkatx.format._primitives import struct_columns

    entry = struct.Struct(">hqi")
    raw = entry.pack(-2, 2**62 + 5, -7) + entry.pack(3, -(2**63), 2**31 - 1) + b"\xff" * 5  # a partial tail
    with memoryview(raw) as view:
        assert struct_columns(view, 2, entry) == [[-2, 3], [2**62 + 5, -(2**63)], [-7, 2**31 - 1]]
        assert struct_columns(view, 1, entry, fields=(0, 2)) == [[-2], [], [-7]]
        assert struct_columns(view, 0, entry) == [[], [], []]


@given(st.sampled_from([">ii", ">qi", ">hiq", ">q"]), st.integers(0, 24), st.binary(min_size=600, max_size=600),
       st.sampled_from([None, {0}, {1}, set()]))
def test_struct_columns_few_entries_path_is_the_strided_one(fmt, n, raw, fields) -> None:
    # up to _FEW_ENTRIES entries are unpacked as tuples; the strided gather does the rest
    import kafkatx.format._primitives as primitives

    entry = struct.Struct(fmt)
    few = primitives.struct_columns(memoryview(raw), n, entry, fields)
    saved, primitives._FEW_ENTRIES = primitives._FEW_ENTRIES, -1
    try:
        strided = primitives.struct_columns(memoryview(raw), n, entry, fields)
    finally:
        primitives._FEW_ENTRIES = saved
    assert few == strided
    assert [type(c) for c in few] == [list] * len(few)
    assert all(len(c) == (n if fields is None or k in fields else 0) for k, c in enumerate(few))


@given(st.sampled_from([">ii", ">qi", ">hiq", ">q"]), st.integers(0, 24), st.binary(min_size=600, max_size=600),
       st.sampled_from([None, {0}, {1}, set()]))
def test_struct_columns_few_entries_arrays_are_the_strided_ones(fmt, n, raw, fields) -> None:
    # arrays=True (verify's offset index, mostly empty at 10,000 partitions) takes the tuple
    # path up to _FEW_ENTRIES too: the same native arrays, the same typecodes, as the strided gather
    import kafkatx.format._primitives as primitives

    entry = struct.Struct(fmt)
    few = primitives.struct_columns(memoryview(raw), n, entry, fields, arrays=True)
    saved, primitives._FEW_ENTRIES = primitives._FEW_ENTRIES, -1
    try:
        strided = primitives.struct_columns(memoryview(raw), n, entry, fields, arrays=True)
    finally:
        primitives._FEW_ENTRIES = saved
    assert few == strided
    assert [type(c) for c in few] == [type(c) for c in strided]
    assert [getattr(c, "typecode", None) for c in few] == [getattr(c, "typecode", None) for c in strided]


@given(st.sampled_from([">ii", ">qi", ">hiq", ">q", ">qq", ">hh"]), st.integers(0, 40),
       st.binary(min_size=800, max_size=800), st.sampled_from([None, {0}, {1}, set()]), st.booleans())
def test_struct_columns_are_the_entries_by_column(fmt, n, raw, fields, arrays) -> None:
    # every path (tuples for few entries, one array for fields of one width, a gather per field) gives
    # each field's values of the first n entries, as lists or native arrays
    from kafkatx.format._primitives import struct_columns

    entry = struct.Struct(fmt)
    want = list(zip(*entry.iter_unpack(raw[:n * entry.size]), strict=True)) if n else [()] * len(fmt[1:])
    got = struct_columns(memoryview(raw), n, entry, fields, arrays=arrays)
    for k, column in enumerate(got):
        if fields is not None and k not in fields:
            assert column == []
            continue
        assert list(column) == list(want[k])
        assert isinstance(column, array) if arrays else type(column) is list


@given(st.sampled_from([">ii", ">qi", ">hiq", ">q"]), st.binary(min_size=30, max_size=30), st.booleans(),
       st.booleans(), st.sampled_from([bytes, bytearray, memoryview]))
def test_sparse_columns_of_one_entry_are_struct_columns(fmt, raw, arrays, zero, kind) -> None:
    # a file of exactly one entry (most time indexes at 10,000 partitions) is unpacked
    # directly: the columns (lists, or arrays of the same typecodes) struct_columns gives for it,
    # an all-zero entry included (the first entry is never the padding)
    from kafkatx.format._primitives import read_sparse_columns, struct_columns

    entry = struct.Struct(fmt)
    one = bytes(entry.size) if zero else raw[:entry.size]
    got = read_sparse_columns(kind(one), entry, "test index", strict=True, arrays=arrays)
    expected = struct_columns(memoryview(one), 1, entry, arrays=arrays)
    assert got == expected
    assert [type(c) for c in got] == [type(c) for c in expected]
    if arrays:
        assert [c.typecode for c in got] == [c.typecode for c in expected]
