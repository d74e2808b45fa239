"""Control record keys and end-transaction markers (ControlRecordType / EndTransactionMarker)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatx.errors import DecodeError, Truncated, UnknownVersion
from kafkatx.format.control import (
    ControlRecord,
    ControlType,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
)


def test_kafka_type_ids() -> None:
    assert [(t.name, t.value) for t in ControlType] == [
        ("ABORT", 0), ("COMMIT", 1), ("LEADER_CHANGE", 2), ("SNAPSHOT_HEADER", 3),
        ("SNAPSHOT_FOOTER", 4), ("KRAFT_VERSION", 5), ("KRAFT_VOTERS", 6)]


def test_key_and_marker_layout() -> None:
    assert encode_control_key(ControlType.COMMIT) == b"\x00\x00\x00\x01"
    assert encode_end_txn_marker(5) == b"\x00\x00\x00\x00\x00\x05"
    assert decode_control_key(b"\x00\x00\x00\x00") == (0, 0)
    assert decode_end_txn_marker(struct.pack(">hi", 0, -1)) == (0, -1)


def test_newer_key_version_is_still_read() -> None:
    # ControlRecordType.parseTypeId logs and reads the type of a newer version
    assert decode_control_key(struct.pack(">hh", 3, 1)) == (3, 1)


def test_type_names() -> None:
    assert ControlRecord(version=0, type_id=1, coordinator_epoch=3).type_name == "COMMIT"
    assert ControlRecord(version=0, type_id=42, coordinator_epoch=None).type_name == "42"


@pytest.mark.parametrize("key", [b"", b"\x00", b"\x00\x00\x00", None])
def test_short_keys(key: bytes | None) -> None:
    with pytest.raises(DecodeError) as info:
        decode_control_key(key)
    assert info.value.position == 0


def test_negative_version() -> None:
    with pytest.raises(UnknownVersion):
        decode_control_key(struct.pack(">hh", -1, 0))
    with pytest.raises(Truncated):
        decode_end_txn_marker(b"\x00\x00\x00")


@given(st.binary(max_size=10))
def test_random_only_decode_errors(data: bytes) -> None:
    for fn in (decode_control_key, decode_end_txn_marker):
        try:
            fn(data)
        except DecodeError:
            pass


@given(st.sampled_from(list(ControlType)), st.integers(-(2**31), 2**31 - 1))
def test_round_trip(ctype: ControlType, epoch: int) -> None:
    assert decode_control_key(encode_control_key(ctype)) == (0, ctype)
    assert decode_end_txn_marker(encode_end_txn_marker(epoch)) == (0, epoch)
