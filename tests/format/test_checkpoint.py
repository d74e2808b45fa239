"""Checkpoint text files (CheckpointFile.java, OffsetCheckpointFile, LeaderEpochCheckpointFile)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatx.errors import BadLength, DecodeError, UnknownVersion
from kafkatx.format.checkpoint import (
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
)


def test_offset_checkpoint_as_kafka_writes_it():
    text = "0\n3\n__transaction_state 7 120\norders 0 42\norders 1 0\n"
    assert read_offset_checkpoint(text) == {
        ("__transaction_state", 7): 120,
        ("orders", 0): 42,
        ("orders", 1): 0,
    }


def test_leader_epoch_checkpoint():
    assert read_leader_epoch_checkpoint("0\n2\n0 0\n3 1500\n") == [(0, 0), (3, 1500)]


@pytest.mark.parametrize("text", ["", "0\n", "0"])
def test_empty_or_version_only_is_empty(text):
    # CheckpointReadBuffer.read returns an empty list when the count line is missing
    assert read_offset_checkpoint(text) == {}
    assert read_leader_epoch_checkpoint(text) == []


def test_zero_entries():
    assert read_offset_checkpoint("0\n0\n") == {}


def test_crlf_and_tabs_and_no_final_newline():
    assert read_offset_checkpoint("0\r\n1\r\nt\t3  9") == {("t", 3): 9}


def test_unknown_version():
    with pytest.raises(UnknownVersion) as exc:
        read_offset_checkpoint("1\n0\n")
    assert exc.value.position == 0


def test_count_mismatch_points_at_count_line():
    with pytest.raises(BadLength) as exc:
        read_offset_checkpoint("0\n3\nt 0 1\n")
    assert exc.value.position == 2
    with pytest.raises(BadLength):
        read_leader_epoch_checkpoint("0\n0\n1 5\n")


@pytest.mark.parametrize(
    "bad_line",
    ["t 0", "t 0 1 2", " t 0 1", "t x 1", "t 0 1.5", "t 0 1_0", "t 2147483648 1",
     "t 0 9223372036854775808", ""],
)
def test_malformed_offset_lines_report_the_line_byte_position(bad_line):
    # the first entry line starts after "0\n2\nété 0 1\n": "é" is two UTF-8 bytes each
    text = f"0\n2\nété 0 1\n{bad_line}\n"
    with pytest.raises(DecodeError) as exc:
        read_offset_checkpoint(text)
    assert type(exc.value) is DecodeError
    assert exc.value.position == len("0\n2\nété 0 1\n".encode())


def test_malformed_count_and_version_lines():
    with pytest.raises(DecodeError) as exc:
        read_offset_checkpoint("0\nthree\n")
    assert exc.value.position == 2
    with pytest.raises(DecodeError) as exc2:
        read_offset_checkpoint(" 0\n0\n")
    assert exc2.value.position == 0


def test_java_signs_are_accepted():
    assert read_leader_epoch_checkpoint("+0\n1\n-1 +5\n") == [(-1, 5)]


def test_duplicate_partitions_last_wins():
    assert read_offset_checkpoint("0\n2\nt 0 1\nt 0 5\n") == {("t", 0): 5}


def test_encoders_emit_kafka_layout():
    assert encode_offset_checkpoint({("b", 1): 5, ("a", 0): 7}) == "0\n2\na 0 7\nb 1 5\n"
    assert encode_leader_epoch_checkpoint([(0, 0), (2, 10)]) == "0\n2\n0 0\n2 10\n"
    with pytest.raises(ValueError):
        encode_offset_checkpoint({("a b", 0): 1})


_topic = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=20)


@given(st.dictionaries(st.tuples(_topic, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1),
                       max_size=20))
def test_offset_checkpoint_round_trip(d):
    assert read_offset_checkpoint(encode_offset_checkpoint(d)) == d


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=20))
def test_leader_epoch_round_trip(entries):
    assert read_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries)) == entries


# The one-pass reader of plain files against the line-by-line reader that states the rules:
# wherever it answers, it answers the same; everything else (errors included) is the line reader's.
_plain_line = st.tuples(st.text(alphabet="ab._-\x1c\xa0\u2028 \t\x0b\f\r", min_size=0, max_size=4),
                        st.sampled_from(["0", "7", "+3", "-1", "0005", "2147483647", "2147483648", "x", "",
                                         "9" * 19, "9" * 20]),
                        st.sampled_from(["0", "-9223372036854775808", "9223372036854775807",
                                         "9223372036854775808", "+42", "00000000000000000001", "1 ", "1\r"]))


@given(st.sampled_from(["0", "1", "+0", "00"]), st.sampled_from(["0", "1", "2", "3", "-1"]),
       st.lists(_plain_line, max_size=3), st.sampled_from(["\n", "\r\n", "\n\n", ""]))
def test_plain_checkpoint_reader_is_the_line_reader(version, count, lines, end):
    from kafkatx.format.checkpoint import _offset_lines, _plain_offset_entries

    text = f"{version}\n{count}\n" + "\n".join(" ".join(fields) for fields in lines) + (end if lines else "")
    plain = _plain_offset_entries(text, 0)
    try:
        expected: object = _offset_lines(text, 0)
    except DecodeError as err:
        expected = (type(err), str(err), err.position)
        assert plain is None  # an error is the line reader's to name
        with pytest.raises(type(err)) as info:
            read_offset_checkpoint(text)
        assert (str(info.value), info.value.position) == (str(err), err.position)
        return
    assert read_offset_checkpoint(text) == expected
    assert plain is None or plain == expected


def test_plain_checkpoint_reader_takes_the_broker_layout():
    from kafkatx.format.checkpoint import _plain_offset_entries

    text = "0\n3\n__transaction_state 7 120\norders 0 42\norders 0 5\n"
    assert _plain_offset_entries(text, 0) == {("__transaction_state", 7): 120, ("orders", 0): 5}
    assert _plain_offset_entries(text.replace("\n", "\r\n"), 0) is None
    assert _plain_offset_entries("0\n2\na 1 2\n", 0) is None  # the count is wrong: the line reader says so
