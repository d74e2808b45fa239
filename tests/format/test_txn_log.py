"""__transaction_state keys and values (TransactionLogKey.json, TransactionLogValue.json).

Expected bytes are assembled field by field from the JSON schemas with kio's
independent primitive writers (kio ships no TransactionLog schema of its own),
so the encoder is never checked only against itself.
"""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import writers as kw

from kafkatx.errors import BadLength, BadVarint, DecodeError, Truncated, UnknownVersion
from kafkatx.format.txn_log import (
    TxnLogKey,
    TxnLogValue,
    TxnState,
    coordinator_partition,
    decode_txn_log_key,
    decode_txn_log_value,
    encode_txn_log_key,
    encode_txn_log_value,
    java_string_hash,
)


def _kio(*parts):
    buf = io.BytesIO()
    for fn, value in parts:
        fn(buf, value)
    return buf.getvalue()


def _tagged(tags):
    """KIP-482 tagged-field section via kio: count, then tag/size/data per field."""
    buf = io.BytesIO()
    kw.write_unsigned_varint(buf, len(tags))
    for tag, fn, value in tags:
        kw.write_tagged_field(buf, tag, fn, value)
    return buf.getvalue()


def v0_bytes(pid, epoch, timeout, status, partitions, last_update, start):
    out = _kio((kw.write_int16, 0), (kw.write_int64, pid), (kw.write_int16, epoch),
               (kw.write_int32, timeout), (kw.write_int8, status))
    if partitions is None:
        out += _kio((kw.write_int32, -1))
    else:
        out += _kio((kw.write_int32, len(partitions)))
        for topic, ids in partitions:
            out += _kio((kw.write_legacy_string, topic), (kw.write_int32, len(ids)))
            out += b"".join(_kio((kw.write_int32, i)) for i in ids)
    return out + _kio((kw.write_int64, last_update), (kw.write_int64, start))


def v1_bytes(pid, epoch, timeout, status, partitions, last_update, start, tags=()):
    out = _kio((kw.write_int16, 1), (kw.write_int64, pid), (kw.write_int16, epoch),
               (kw.write_int32, timeout), (kw.write_int8, status))
    if partitions is None:
        out += _kio((kw.write_compact_array_length, None))
    else:
        out += _kio((kw.write_compact_array_length, len(partitions)))
        for topic, ids in partitions:
            out += _kio((kw.write_compact_string, topic), (kw.write_compact_array_length, len(ids)))
            out += b"".join(_kio((kw.write_int32, i)) for i in ids)
            out += _tagged([])
    return out + _kio((kw.write_int64, last_update), (kw.write_int64, start)) + _tagged(list(tags))


# ---------------------------------------------------------------- key


def test_key_layout():
    raw = _kio((kw.write_int16, 0), (kw.write_legacy_string, "payments-tx-1"))
    assert encode_txn_log_key("payments-tx-1") == raw
    assert decode_txn_log_key(raw) == TxnLogKey(version=0, transactional_id="payments-tx-1")


def test_key_unknown_version():
    with pytest.raises(UnknownVersion) as exc:
        decode_txn_log_key(b"\x00\x01\x00\x00")
    assert exc.value.position == 0


@pytest.mark.parametrize("cut", range(0, 6))
def test_key_truncated(cut):
    raw = encode_txn_log_key("abcd")
    with pytest.raises(Truncated) as exc:
        decode_txn_log_key(raw[:cut])
    assert exc.value.position == (0 if cut < 2 else 2)


def test_key_null_and_negative_string_lengths():
    with pytest.raises(BadLength) as exc:
        decode_txn_log_key(b"\x00\x00\xff\xff")
    assert exc.value.position == 2
    with pytest.raises(BadLength):
        decode_txn_log_key(b"\x00\x00\x80\x00")


def test_key_bad_utf8_position():
    with pytest.raises(DecodeError) as exc:
        decode_txn_log_key(b"\x00\x00\x00\x03a\xffb")
    assert exc.value.position == 5


# ---------------------------------------------------------------- value v0


def test_value_v0_ongoing():
    raw = v0_bytes(4000, 3, 60000, 1, [("orders", [0, 2]), ("audit", [5])], 1_700_000_001_000,
                   1_700_000_000_000)
    value = decode_txn_log_value(raw)
    assert value == TxnLogValue(version=0, producer_id=4000, producer_epoch=3, transaction_timeout_ms=60000,
                                state=TxnState.ONGOING, partitions=(("orders", (0, 2)), ("audit", (5,))),
                                last_update_timestamp=1_700_000_001_000, start_timestamp=1_700_000_000_000)
    assert encode_txn_log_value(value) == raw


def test_value_v0_empty_state_null_partitions():
    raw = v0_bytes(1, 0, 900000, 0, None, 5, -1)
    value = decode_txn_log_value(raw)
    assert value is not None and value.partitions is None and value.state is TxnState.EMPTY
    assert encode_txn_log_value(value) == raw


def test_tombstone():
    assert decode_txn_log_value(None) is None


def test_v0_cannot_carry_tags():
    value = decode_txn_log_value(v0_bytes(1, 0, 1, 0, None, 5, -1))
    assert value is not None
    from msgspec.structs import replace
    with pytest.raises(ValueError):
        encode_txn_log_value(replace(value, next_producer_id=9))


# ---------------------------------------------------------------- value v1


def test_value_v1_without_tags():
    raw = v1_bytes(77, 1, 30000, 2, [("t", [3])], 100, 90)
    value = decode_txn_log_value(raw)
    assert value == TxnLogValue(version=1, producer_id=77, producer_epoch=1, transaction_timeout_ms=30000,
                                state=TxnState.PREPARE_COMMIT, partitions=(("t", (3,)),),
                                last_update_timestamp=100, start_timestamp=90)
    assert encode_txn_log_value(value) == raw


def test_value_v1_all_known_tags_and_an_unknown_one():
    tags = [(0, kw.write_int64, 76), (1, kw.write_int64, 78), (2, kw.write_int16, 2),
            (3, kw.write_int16, 0), (9, kw.write_int32, 0x01020304)]
    raw = v1_bytes(77, 32767, 30000, 7, None, 100, 90, tags)
    value = decode_txn_log_value(raw)
    assert value is not None
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version,
            value.next_producer_epoch) == (76, 78, 2, 0)
    assert value.state.kafka_name == "PrepareEpochFence"
    assert value.unknown_tags == ((9, b"\x01\x02\x03\x04"),)
    assert encode_txn_log_value(value) == raw


def test_value_v1_tags_out_of_order_still_decode():
    raw = v1_bytes(1, 1, 1, 4, None, 1, 1, [(2, kw.write_int16, 2), (0, kw.write_int64, 5)])
    value = decode_txn_log_value(raw)
    assert value is not None and value.previous_producer_id == 5 and value.client_transaction_version == 2


def test_value_v1_known_tag_with_wrong_size():
    raw = v1_bytes(1, 1, 1, 4, None, 1, 1, [(0, kw.write_int32, 5)])
    with pytest.raises(BadLength) as exc:
        decode_txn_log_value(raw)
    assert exc.value.position == len(raw) - 4


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in TxnState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]


# ---------------------------------------------------------------- corrupt values

V0 = v0_bytes(4000, 3, 60000, 1, [("orders", [0, 2])], 11, 10)
# field start positions in V0: version 0, pid 2, epoch 10, timeout 12, status 16, partitions count 17,
# topic len 21, topic 23, ids count 29, id 33, id 37, last update 41, start 49, end 57


def _expected_truncation_position(cut: int) -> int:
    """Where a V0 cut at ``cut`` must be reported: the field that cannot be read, or the
    count/length field whose promised bytes are missing (each partition element needs >= 6 bytes)."""
    if cut < 2:
        return 0
    if cut < 10:
        return 2
    if cut < 12:
        return 10
    if cut < 16:
        return 12
    if cut < 17:
        return 16
    if cut < 27:  # count unreadable, or 1 element but fewer than 6 bytes after it
        return 17
    if cut < 29:  # topic length 6, topic cut
        return 21
    if cut < 41:  # ids count unreadable, or 2 ids but fewer than 8 bytes
        return 29
    if cut < 49:
        return 41
    return 49


@pytest.mark.parametrize("cut", range(0, len(V0)))
def test_v0_truncated_at_every_byte(cut):
    with pytest.raises(Truncated) as exc:
        decode_txn_log_value(V0[:cut])
    assert exc.value.position == _expected_truncation_position(cut)


def test_v0_unknown_version_and_state():
    with pytest.raises(UnknownVersion) as exc:
        decode_txn_log_value(b"\x00\x02" + V0[2:])
    assert exc.value.position == 0
    bad = bytearray(V0)
    bad[16] = 9
    with pytest.raises(DecodeError) as exc2:
        decode_txn_log_value(bytes(bad))
    assert exc2.value.position == 16 and "state 9" in str(exc2.value)


@pytest.mark.parametrize("count,exc_type", [(-2, BadLength), (2**31 - 1, Truncated), (7, Truncated)])
def test_v0_bad_partition_counts(count, exc_type):
    bad = bytearray(V0)
    bad[17:21] = struct.pack(">i", count)
    with pytest.raises(exc_type) as exc:
        decode_txn_log_value(bytes(bad))
    assert exc.value.position == 17


def test_v0_trailing_bytes():
    with pytest.raises(DecodeError) as exc:
        decode_txn_log_value(V0 + b"\x00")
    assert exc.value.position == len(V0)


def test_v1_bad_varint_in_array_length():
    raw = v1_bytes(1, 1, 1, 1, [("t", [1])], 1, 1)
    # partitions compact count sits at byte 17: make it a 6-byte varint
    bad = raw[:17] + b"\xff\xff\xff\xff\xff\x01" + raw[18:]
    with pytest.raises(BadVarint) as exc:
        decode_txn_log_value(bad)
    assert exc.value.position == 17


def test_v1_varint_running_off_the_end():
    raw = v1_bytes(1, 1, 1, 1, None, 1, 1)
    with pytest.raises(BadVarint) as exc:
        decode_txn_log_value(raw[:-1] + b"\x80")
    assert exc.value.position == len(raw) - 1


def test_v1_absurd_tag_size():
    raw = v1_bytes(1, 1, 1, 1, None, 1, 1)
    bad = raw[:-1] + b"\x01\x05\xff\xff\xff\xff\x07"
    with pytest.raises(Truncated) as exc:
        decode_txn_log_value(bad)
    # raw[:-1] drops the empty tag section; then count @len-1, tag @len, size @len+1
    assert exc.value.position == len(raw) + 1


# ---------------------------------------------------------------- round trips

_i16 = st.integers(-(2**15), 2**15 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_partitions = st.none() | st.lists(
    st.tuples(st.text(max_size=30), st.lists(_i32, max_size=5).map(tuple)), max_size=5
).map(tuple)


@st.composite
def _values(draw, version):
    kwargs = {}
    if version == 1:
        kwargs = dict(previous_producer_id=draw(_i64), next_producer_id=draw(_i64),
                      client_transaction_version=draw(_i16), next_producer_epoch=draw(_i16),
                      unknown_tags=tuple(sorted(draw(st.dictionaries(st.integers(4, 2**20),
                                                                     st.binary(max_size=8),
                                                                     max_size=3)).items())))
    return TxnLogValue(version=version, producer_id=draw(_i64), producer_epoch=draw(_i16),
                       transaction_timeout_ms=draw(_i32), state=draw(st.sampled_from(TxnState)),
                       partitions=draw(_partitions), last_update_timestamp=draw(_i64),
                       start_timestamp=draw(_i64), **kwargs)


@given(_values(0))
def test_round_trip_v0(value):
    assert decode_txn_log_value(encode_txn_log_value(value)) == value


@given(_values(1))
def test_round_trip_v1(value):
    assert decode_txn_log_value(encode_txn_log_value(value)) == value


@given(st.text(max_size=100))
def test_key_round_trip(tid):
    assert decode_txn_log_key(encode_txn_log_key(tid)).transactional_id == tid


# ---------------------------------------------------------------- coordinator partition


def _java_hash_reference(s: str) -> int:
    # independent formulation: sum of c * 31^(n-1-i) over UTF-16 units, reduced to int32
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    total = sum(u * pow(31, n - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


def test_java_hash_known_values():
    # values Java's "..".hashCode() returns
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # the classic Integer.MIN_VALUE string


def test_utils_abs_maps_min_value_to_zero():
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("polygenelubricants", 7) == 0


def test_coordinator_partition_examples():
    assert coordinator_partition("hello") == 99162322 % 50
    h = java_string_hash("my-transactional-id")
    assert coordinator_partition("my-transactional-id", 50) == abs(h) % 50


@given(st.text(max_size=40), st.integers(1, 200))
def test_hash_matches_reference(s, n):
    assert java_string_hash(s) == _java_hash_reference(s)
    assert 0 <= coordinator_partition(s, n) < n


def test_v1_topic_bad_utf8_and_overlong_length():
    raw = v1_bytes(1, 1, 1, 1, [("ab", [1])], 1, 1)
    # partitions count @17 (1 byte), topic compact length @18, topic bytes @19..20
    bad = bytearray(raw)
    bad[20] = 0xFF
    with pytest.raises(DecodeError) as exc:
        decode_txn_log_value(bytes(bad))
    assert type(exc.value) is DecodeError and exc.value.position == 20
    # a compact length of 0x8000 (varint 0x81 0x80 0x02) exceeds Kafka's 32767 string limit
    overlong = raw[:18] + b"\x81\x80\x02" + raw[19:]
    with pytest.raises(BadLength) as exc2:
        decode_txn_log_value(overlong)
    assert exc2.value.position == 18
