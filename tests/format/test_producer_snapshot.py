"""Producer snapshots (ProducerSnapshot.json, ProducerStateManager.read/writeSnapshot)."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatx.errors import BadLength, CrcMismatch, DecodeError, Truncated, UnknownVersion
from kafkatx.format.producer_snapshot import (
    ProducerSnapshotEntry,
    encode_producer_snapshot,
    read_producer_snapshot,
)


def _hand_entry(pid, epoch, seq, last_offset, delta, ts, coord_epoch, txn_first):
    return (struct.pack(">q", pid) + struct.pack(">h", epoch) + struct.pack(">i", seq)
            + struct.pack(">q", last_offset) + struct.pack(">i", delta) + struct.pack(">q", ts)
            + struct.pack(">i", coord_epoch) + struct.pack(">q", txn_first))


def _hand_file(entries: list[bytes], version=1, crc=None):
    body = struct.pack(">i", len(entries)) + b"".join(entries)
    # PRODUCER_ENTRIES_OFFSET = 6: the CRC covers the count and the entries, not the version
    if crc is None:
        crc = crc32c.crc32c(body)
    return struct.pack(">h", version) + struct.pack(">I", crc) + body


ENTRY_A = _hand_entry(1000, 2, 41, 500, 4, 1_700_000_000_000, 3, -1)
ENTRY_B = _hand_entry(1001, 0, 9, 510, 0, 1_700_000_000_100, 0, 505)


def test_reads_hand_built_file():
    raw = _hand_file([ENTRY_A, ENTRY_B])
    assert len(ENTRY_A) == 46 and len(raw) == 10 + 92
    snap = read_producer_snapshot(raw)
    assert snap.version == 1
    assert snap.crc_valid
    assert snap.crc == struct.unpack(">I", raw[2:6])[0]
    assert snap.entries == (
        ProducerSnapshotEntry(producer_id=1000, producer_epoch=2, last_sequence=41, last_offset=500,
                              offset_delta=4, timestamp=1_700_000_000_000, coordinator_epoch=3,
                              current_txn_first_offset=-1),
        ProducerSnapshotEntry(producer_id=1001, producer_epoch=0, last_sequence=9, last_offset=510,
                              offset_delta=0, timestamp=1_700_000_000_100, coordinator_epoch=0,
                              current_txn_first_offset=505),
    )


def test_encoder_matches_hand_built_bytes():
    snap = read_producer_snapshot(_hand_file([ENTRY_A, ENTRY_B]))
    assert encode_producer_snapshot(snap.entries) == _hand_file([ENTRY_A, ENTRY_B])


def test_empty_snapshot():
    raw = _hand_file([])
    assert len(raw) == 10
    snap = read_producer_snapshot(raw)
    assert snap.entries == () and snap.crc_valid


def test_bad_crc_is_reported_not_raised():
    raw = bytearray(_hand_file([ENTRY_A]))
    raw[20] ^= 0x01  # flip a bit inside the entry
    snap = read_producer_snapshot(bytes(raw))
    assert not snap.crc_valid
    with pytest.raises(CrcMismatch) as exc:
        read_producer_snapshot(bytes(raw), verify_crc=True)
    assert exc.value.position == 2


def test_version_byte_is_not_covered_by_crc():
    # only the version differs; a version-0 file is still rejected for its version
    raw = _hand_file([ENTRY_A], version=0)
    with pytest.raises(UnknownVersion) as exc:
        read_producer_snapshot(raw)
    assert exc.value.position == 0


@pytest.mark.parametrize("cut", range(0, 10))
def test_header_truncated_at_every_field(cut):
    raw = _hand_file([ENTRY_A])[:cut]
    with pytest.raises(Truncated) as exc:
        read_producer_snapshot(raw)
    assert exc.value.position == (0 if cut < 2 else 2 if cut < 6 else 6)


@pytest.mark.parametrize("cut", [11, 30, 55])
def test_entries_truncated(cut):
    raw = _hand_file([ENTRY_A, ENTRY_B])[:cut]
    with pytest.raises(Truncated) as exc:
        read_producer_snapshot(raw)
    assert exc.value.position == 6


def test_negative_and_absurd_counts():
    raw = bytearray(_hand_file([ENTRY_A]))
    raw[6:10] = struct.pack(">i", -1)
    with pytest.raises(BadLength) as exc:
        read_producer_snapshot(bytes(raw))
    assert exc.value.position == 6
    raw[6:10] = struct.pack(">i", 2**31 - 1)
    with pytest.raises(Truncated) as exc2:
        read_producer_snapshot(bytes(raw))
    assert exc2.value.position == 6


def test_trailing_bytes_are_an_error_at_their_position():
    raw = _hand_file([ENTRY_A]) + b"\x00\x01"
    with pytest.raises(DecodeError) as exc:
        read_producer_snapshot(raw)
    assert exc.value.position == 56


_entries = st.lists(
    st.builds(
        ProducerSnapshotEntry,
        producer_id=st.integers(-(2**63), 2**63 - 1),
        producer_epoch=st.integers(-(2**15), 2**15 - 1),
        last_sequence=st.integers(-(2**31), 2**31 - 1),
        last_offset=st.integers(-(2**63), 2**63 - 1),
        offset_delta=st.integers(-(2**31), 2**31 - 1),
        timestamp=st.integers(-(2**63), 2**63 - 1),
        coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
        current_txn_first_offset=st.integers(-(2**63), 2**63 - 1),
    ),
    max_size=10,
)


@given(_entries)
def test_round_trip(entries):
    snap = read_producer_snapshot(encode_producer_snapshot(entries), verify_crc=True)
    assert snap.entries == tuple(entries)
    assert snap.crc_valid
