"""Aborted transaction index: 34-byte AbortedTxn entries (AbortedTxn.java)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatx.errors import Truncated, UnknownVersion
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn, read_txn_index


def _entry(version, pid, first, last, lso):
    return (struct.pack(">h", version) + struct.pack(">q", pid) + struct.pack(">q", first)
            + struct.pack(">q", last) + struct.pack(">q", lso))


def test_reads_hand_built_entries():
    raw = _entry(0, 4000, 10, 15, 10) + _entry(0, 4001, 20, 31, 16)
    assert len(raw) == 68
    assert read_txn_index(raw) == [
        AbortedTxn(version=0, producer_id=4000, first_offset=10, last_offset=15, last_stable_offset=10),
        AbortedTxn(version=0, producer_id=4001, first_offset=20, last_offset=31, last_stable_offset=16),
    ]


def test_encode_matches_hand_layout():
    txn = AbortedTxn(version=0, producer_id=7, first_offset=1, last_offset=2, last_stable_offset=1)
    assert encode_aborted_txn(txn) == _entry(0, 7, 1, 2, 1)
    assert len(encode_aborted_txn(txn)) == 34


def test_empty_index():
    assert read_txn_index(b"") == []


def test_unknown_version_names_the_entry():
    raw = _entry(0, 1, 1, 2, 1) + _entry(3, 1, 3, 4, 3)
    with pytest.raises(UnknownVersion) as exc:
        read_txn_index(raw)
    assert exc.value.position == 34


@pytest.mark.parametrize("cut", [1, 2, 10, 33])
def test_partial_entry_is_truncated(cut):
    raw = _entry(0, 1, 1, 2, 1) + _entry(0, 2, 3, 4, 3)[:cut]
    with pytest.raises(Truncated) as exc:
        read_txn_index(raw)
    assert exc.value.position == 34


_i64 = st.integers(-(2**63), 2**63 - 1)


@given(st.lists(st.tuples(_i64, _i64, _i64, _i64), max_size=20))
def test_round_trip(rows):
    txns = [AbortedTxn(version=0, producer_id=a, first_offset=b, last_offset=c, last_stable_offset=d)
            for a, b, c, d in rows]
    assert read_txn_index(b"".join(encode_aborted_txn(t) for t in txns)) == txns


# ---------------------------------------------------------------- TransactionIndex.sanityCheck


def _sanity_reference(raw: bytes, start: int) -> int | None | str:
    """The per-entry walk (Kafka's sanityCheck loop), on what read_txn_index reads."""
    whole = raw[: len(raw) - len(raw) % 34]
    try:
        entries = read_txn_index(whole)
    except UnknownVersion as err:
        return f"version@{err.position}"
    for i, e in enumerate(entries):
        if e.last_offset < start:
            return i * 34
    return None


def _first_below(raw: bytes, start: int) -> int | None | str:
    from kafkatx.format.txn_index import first_entry_below

    try:
        return first_entry_below(raw, start)
    except UnknownVersion as err:
        return f"version@{err.position}"


def test_first_entry_below_by_hand():
    from kafkatx.format.txn_index import first_entry_below

    raw = _entry(0, 1, 100, 150, 100) + _entry(0, 2, 90, 99, 90) + _entry(0, 3, 10, 20, 10)
    assert first_entry_below(raw, 100) == 34  # the second entry ends at 99 < 100
    assert first_entry_below(raw, 20) is None
    assert first_entry_below(raw, 21) == 68
    assert first_entry_below(raw + b"\x00" * 33, 21) == 68  # a partial trailing entry is not read
    assert first_entry_below(b"", 5) is None
    assert first_entry_below(_entry(0, 1, -5, -(2**63), 0), -(2**63) + 1) == 0
    with pytest.raises(UnknownVersion) as info:
        first_entry_below(raw + _entry(1, 4, 200, 210, 200), 0)
    assert info.value.position == 102


@given(st.lists(st.tuples(st.sampled_from([0, 0, 0, 0, 1, -1, 256]), st.integers(-(2**63), 2**63 - 1),
                          st.integers(-(2**63), 2**63 - 1)), max_size=40),
       st.integers(-(2**63), 2**63 - 1), st.integers(0, 33))
def test_first_entry_below_equals_the_entry_walk(entries, start, tail):
    raw = b"".join(_entry(v, 7, 0, last, lso) for v, last, lso in entries) + b"\x01" * tail
    assert _first_below(raw, start) == _sanity_reference(raw, start)


# ---------------------------------------------------------------- by column


def _entries_or_error(raw: bytes):  # type: ignore[no-untyped-def]
    from kafkatx.format.txn_index import iter_txn_index

    try:
        return [e[1:] for e in iter_txn_index(raw)]
    except (Truncated, UnknownVersion) as err:
        return f"{type(err).__name__}@{err.position}: {err}"


def _columns_or_error(raw: bytes):  # type: ignore[no-untyped-def]
    from kafkatx.format.txn_index import read_txn_index_columns

    try:
        return list(zip(*read_txn_index_columns(raw), strict=True))
    except (Truncated, UnknownVersion) as err:
        return f"{type(err).__name__}@{err.position}: {err}"


def test_columns_by_hand():
    from kafkatx.format.txn_index import read_txn_index_columns

    raw = _entry(0, 4000, 10, 15, 10) + _entry(0, 4001, 20, 31, 16)
    cols = read_txn_index_columns(raw)
    assert (list(cols.producer_ids), list(cols.first_offsets), list(cols.last_offsets),
            list(cols.last_stable_offsets)) == ([4000, 4001], [10, 20], [15, 31], [10, 16])
    assert list(map(list, read_txn_index_columns(b""))) == [[], [], [], []]
    with pytest.raises(UnknownVersion) as exc:
        read_txn_index_columns(raw + _entry(2, 1, 1, 1, 1) + b"\x00" * 5)  # the version comes first
    assert exc.value.position == 68
    with pytest.raises(Truncated) as trunc:
        read_txn_index_columns(raw + b"\x00" * 5)
    assert trunc.value.position == 68


@given(st.lists(st.tuples(st.sampled_from([0, 0, 0, 0, 1, -1]), _i64, _i64, _i64, _i64), max_size=30),
       st.integers(0, 33))
def test_columns_equal_the_entry_walk(rows, tail):
    raw = b"".join(_entry(*r) for r in rows) + b"\x07" * tail
    assert _columns_or_error(raw) == _entries_or_error(raw)
