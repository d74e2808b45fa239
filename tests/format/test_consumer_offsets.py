"""__consumer_offsets keys and values (OffsetCommitKey/Value.json, GroupMetadataKey/Value.json).

Expected bytes are assembled from the JSON schemas with kio's primitive writers
(kio has no coordinator-record schemas), independent of our encoder.
"""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import writers as kw
from msgspec.structs import replace

from kafkatx.errors import BadLength, DecodeError, Truncated, UnknownVersion
from kafkatx.format.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    UnknownValue,
    decode_offsets_key,
    decode_offsets_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


def _kio(*parts):
    buf = io.BytesIO()
    for fn, value in parts:
        fn(buf, value)
    return buf.getvalue()


def _no_tags():
    return _kio((kw.write_unsigned_varint, 0))


# ---------------------------------------------------------------- keys


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_key(version):
    raw = _kio((kw.write_int16, version), (kw.write_legacy_string, "billing"),
               (kw.write_legacy_string, "orders"), (kw.write_int32, 7))
    key = decode_offsets_key(raw)
    assert key == OffsetCommitKey(version=version, group="billing", topic="orders", partition=7)
    assert encode_offset_commit_key(key) == raw


def test_group_metadata_key():
    raw = _kio((kw.write_int16, 2), (kw.write_legacy_string, "billing"))
    key = decode_offsets_key(raw)
    assert key == GroupMetadataKey(version=2, group="billing")
    assert encode_group_metadata_key(key) == raw


def test_unknown_key_types_are_unknown_not_errors():
    # types 3-24 are the newer group records (tests/format/test_group_records.py); 25 is nobody's
    raw = b"\x00\x19\x00\x01g\x99"
    key = decode_offsets_key(raw)
    assert key == UnknownKey(version=25, raw=raw)
    assert decode_offsets_value(key, b"\x00\x00zz") == UnknownValue(raw=b"\x00\x00zz")


def test_negative_key_version():
    with pytest.raises(UnknownVersion) as exc:
        decode_offsets_key(b"\xff\xff")
    assert exc.value.position == 0


@pytest.mark.parametrize("cut,pos", [(0, 0), (1, 0), (2, 2), (3, 2), (4, 2), (5, 5), (6, 5), (8, 5), (9, 9), (12, 9)])
def test_offset_commit_key_truncated(cut, pos):
    raw = encode_offset_commit_key(OffsetCommitKey(version=1, group="g", topic="tt", partition=1))
    assert len(raw) == 13
    with pytest.raises(Truncated) as exc:
        decode_offsets_key(raw[:cut])
    assert exc.value.position == pos


def test_key_trailing_bytes():
    raw = encode_group_metadata_key(GroupMetadataKey(version=2, group="g")) + b"x"
    with pytest.raises(DecodeError) as exc:
        decode_offsets_key(raw)
    assert exc.value.position == 5


# ---------------------------------------------------------------- offset commit values

OC_KEY = OffsetCommitKey(version=1, group="g", topic="t", partition=0)


def test_offset_commit_value_every_version():
    v0 = _kio((kw.write_int16, 0), (kw.write_int64, 42), (kw.write_legacy_string, "m"), (kw.write_int64, 1000))
    v1 = _kio((kw.write_int16, 1), (kw.write_int64, 42), (kw.write_legacy_string, "m"),
              (kw.write_int64, 1000), (kw.write_int64, 2000))
    v2 = _kio((kw.write_int16, 2), (kw.write_int64, 42), (kw.write_legacy_string, "m"), (kw.write_int64, 1000))
    v3 = _kio((kw.write_int16, 3), (kw.write_int64, 42), (kw.write_int32, 5), (kw.write_legacy_string, "m"),
              (kw.write_int64, 1000))
    v4 = _kio((kw.write_int16, 4), (kw.write_int64, 42), (kw.write_int32, 5), (kw.write_compact_string, "m"),
              (kw.write_int64, 1000)) + _no_tags()
    expected = {
        0: OffsetCommitValue(version=0, offset=42, metadata="m", commit_timestamp=1000),
        1: OffsetCommitValue(version=1, offset=42, metadata="m", commit_timestamp=1000, expire_timestamp=2000),
        2: OffsetCommitValue(version=2, offset=42, metadata="m", commit_timestamp=1000),
        3: OffsetCommitValue(version=3, offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000),
        4: OffsetCommitValue(version=4, offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000),
    }
    for version, raw in enumerate([v0, v1, v2, v3, v4]):
        value = decode_offsets_value(OC_KEY, raw)
        assert value == expected[version]
        assert encode_offset_commit_value(expected[version]) == raw


def test_offset_commit_value_unknown_tag_kept():
    raw = _kio((kw.write_int16, 4), (kw.write_int64, 1), (kw.write_int32, -1), (kw.write_compact_string, ""),
               (kw.write_int64, 9), (kw.write_unsigned_varint, 1))
    raw += _kio((kw.write_unsigned_varint, 0), (kw.write_unsigned_varint, 2)) + b"\xab\xcd"
    value = decode_offsets_value(OC_KEY, raw)
    assert isinstance(value, OffsetCommitValue) and value.unknown_tags == ((0, b"\xab\xcd"),)
    assert encode_offset_commit_value(value) == raw


def test_offset_commit_tombstone_and_unknown_version():
    assert decode_offsets_value(OC_KEY, None) is None
    with pytest.raises(UnknownVersion) as exc:
        decode_offsets_value(OC_KEY, b"\x00\x05" + bytes(20))
    assert exc.value.position == 0


def test_encoder_refuses_fields_the_version_lacks():
    with pytest.raises(ValueError):
        encode_offset_commit_value(OffsetCommitValue(version=2, offset=1, leader_epoch=3, metadata="",
                                                     commit_timestamp=0))
    with pytest.raises(ValueError):
        encode_offset_commit_value(OffsetCommitValue(version=3, offset=1, metadata="", commit_timestamp=0,
                                                     expire_timestamp=5))


def test_offset_commit_v4_compact_string_null_is_rejected():
    raw = _kio((kw.write_int16, 4), (kw.write_int64, 1), (kw.write_int32, -1),
               (kw.write_unsigned_varint, 0), (kw.write_int64, 9)) + _no_tags()
    with pytest.raises(BadLength) as exc:
        decode_offsets_value(OC_KEY, raw)
    assert exc.value.position == 14


@pytest.mark.parametrize("cut", range(0, 25))
def test_offset_commit_v3_truncated_everywhere(cut):
    raw = encode_offset_commit_value(OffsetCommitValue(version=3, offset=1, leader_epoch=2, metadata="abcd",
                                                       commit_timestamp=3))
    assert len(raw) == 28
    # fields: version 0, offset 2, leader epoch 10, metadata length 14 (data 16..20), commit ts 20
    expected = 0 if cut < 2 else 2 if cut < 10 else 10 if cut < 14 else 14 if cut < 20 else 20
    with pytest.raises(Truncated) as exc:
        decode_offsets_value(OC_KEY, raw[:cut])
    assert exc.value.position == expected


# ---------------------------------------------------------------- group metadata values

GM_KEY = GroupMetadataKey(version=2, group="g")


def _member_bytes(version, m: MemberMetadata):
    flexible = version >= 4
    s = kw.write_compact_string if flexible else kw.write_legacy_string
    ns = kw.write_nullable_compact_string if flexible else kw.write_nullable_legacy_string
    b = kw.write_compact_string if flexible else kw.write_legacy_bytes
    out = _kio((s, m.member_id))
    if version >= 3:
        out += _kio((ns, m.group_instance_id))
    out += _kio((s, m.client_id), (s, m.client_host))
    if version >= 1:
        out += _kio((kw.write_int32, m.rebalance_timeout))
    out += _kio((kw.write_int32, m.session_timeout), (b, m.subscription), (b, m.assignment))
    return out + (_no_tags() if flexible else b"")


def _group_bytes(version, protocol_type, generation, protocol, leader, ts, members):
    flexible = version >= 4
    s = kw.write_compact_string if flexible else kw.write_legacy_string
    ns = kw.write_nullable_compact_string if flexible else kw.write_nullable_legacy_string
    out = _kio((kw.write_int16, version), (s, protocol_type), (kw.write_int32, generation), (ns, protocol),
               (ns, leader))
    if version >= 2:
        out += _kio((kw.write_int64, ts))
    out += _kio((kw.write_compact_array_length if flexible else kw.write_legacy_array_length, len(members)))
    out += b"".join(_member_bytes(version, m) for m in members)
    return out + (_no_tags() if flexible else b"")


@pytest.mark.parametrize("version", range(0, 5))
def test_group_metadata_every_version(version):
    member = MemberMetadata(member_id="consumer-1-abc", group_instance_id="i-1" if version >= 3 else None,
                            client_id="consumer-1", client_host="/10.0.0.1",
                            rebalance_timeout=300000 if version >= 1 else 10000, session_timeout=10000,
                            subscription=b"\x00\x01sub", assignment=b"")
    raw = _group_bytes(version, "consumer", 12, "range", "consumer-1-abc", 1_700_000_000_000, [member])
    value = decode_offsets_value(GM_KEY, raw)
    assert value == GroupMetadataValue(version=version, protocol_type="consumer", generation=12,
                                       protocol="range", leader="consumer-1-abc",
                                       current_state_timestamp=1_700_000_000_000 if version >= 2 else -1,
                                       members=(member,))
    assert encode_group_metadata_value(value) == raw


def test_v0_member_rebalance_timeout_is_session_timeout():
    member = MemberMetadata(member_id="m", group_instance_id=None, client_id="c", client_host="h",
                            rebalance_timeout=0, session_timeout=6000, subscription=b"", assignment=b"")
    raw = _group_bytes(0, "consumer", 1, None, None, -1, [member])
    value = decode_offsets_value(GM_KEY, raw)
    assert isinstance(value, GroupMetadataValue)
    assert value.members[0].rebalance_timeout == 6000
    assert value.protocol is None and value.leader is None


def test_empty_group():
    raw = _group_bytes(4, "", 0, None, None, 5, [])
    value = decode_offsets_value(GM_KEY, raw)
    assert isinstance(value, GroupMetadataValue) and value.members == () and value.protocol_type == ""


def test_group_absurd_member_count_and_negative_bytes():
    raw = bytearray(_group_bytes(1, "consumer", 1, None, None, -1, []))
    raw[-4:] = struct.pack(">i", 2**31 - 1)
    with pytest.raises(Truncated) as exc:
        decode_offsets_value(GM_KEY, bytes(raw))
    assert exc.value.position == len(raw) - 4
    member = MemberMetadata(member_id="m", group_instance_id=None, client_id="c", client_host="h",
                            rebalance_timeout=1, session_timeout=1, subscription=b"", assignment=b"")
    raw2 = bytearray(_group_bytes(1, "consumer", 1, None, None, -1, [member]))
    raw2[-8:-4] = struct.pack(">i", -7)  # subscription length
    with pytest.raises(BadLength) as exc2:
        decode_offsets_value(GM_KEY, bytes(raw2))
    assert exc2.value.position == len(raw2) - 8


# ---------------------------------------------------------------- round trips

_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_tags = st.dictionaries(st.integers(0, 2**20), st.binary(max_size=6), max_size=3).map(
    lambda d: tuple(sorted(d.items())))


@st.composite
def _offset_values(draw):
    v = draw(st.integers(0, 4))
    return OffsetCommitValue(
        version=v, offset=draw(_i64), leader_epoch=draw(_i32) if v >= 3 else -1,
        metadata=draw(st.text(max_size=40)), commit_timestamp=draw(_i64),
        expire_timestamp=draw(_i64) if v == 1 else -1, unknown_tags=draw(_tags) if v >= 4 else ())


@given(_offset_values())
def test_offset_commit_value_round_trip(value):
    assert decode_offsets_value(OC_KEY, encode_offset_commit_value(value)) == value


@given(st.integers(0, 1), st.text(max_size=30), st.text(max_size=30), _i32)
def test_offset_commit_key_round_trip(version, group, topic, partition):
    key = OffsetCommitKey(version=version, group=group, topic=topic, partition=partition)
    assert decode_offsets_key(encode_offset_commit_key(key)) == key


@st.composite
def _group_values(draw):
    v = draw(st.integers(0, 4))
    members = []
    for _ in range(draw(st.integers(0, 3))):
        session = draw(_i32)
        members.append(MemberMetadata(
            member_id=draw(st.text(max_size=20)),
            group_instance_id=draw(st.none() | st.text(max_size=10)) if v >= 3 else None,
            client_id=draw(st.text(max_size=10)), client_host=draw(st.text(max_size=10)),
            rebalance_timeout=draw(_i32) if v >= 1 else session, session_timeout=session,
            subscription=draw(st.binary(max_size=20)), assignment=draw(st.binary(max_size=20))))
    return GroupMetadataValue(
        version=v, protocol_type=draw(st.text(max_size=10)), generation=draw(_i32),
        protocol=draw(st.none() | st.text(max_size=10)), leader=draw(st.none() | st.text(max_size=10)),
        current_state_timestamp=draw(_i64) if v >= 2 else -1, members=tuple(members),
        unknown_tags=draw(_tags) if v >= 4 else ())


@given(_group_values())
def test_group_metadata_round_trip(value):
    assert decode_offsets_value(GM_KEY, encode_group_metadata_value(value)) == value


def test_replace_keeps_records_frozen():
    value = OffsetCommitValue(version=0, offset=1, metadata="", commit_timestamp=0)
    assert replace(value, offset=2).offset == 2
    with pytest.raises(AttributeError):
        value.offset = 3  # type: ignore[misc]
