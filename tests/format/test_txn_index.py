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
