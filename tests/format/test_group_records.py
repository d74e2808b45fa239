"""The group coordinator's newer ``__consumer_offsets`` records (types 3-24) and the share coordinator's
``__share_group_state`` records, as kafka-dump-log.sh 3.8 and 4.x print them.

The bytes are fixtures/groups' ``__consumer_offsets-0``, encoded by hand from Kafka's schemas by
fixtures/build_groups.py, whose ``scenario.json`` holds what each release's tool prints after ``key:``
and ``payload:`` (reasoned from ``OffsetsMessageParser`` / ``CoordinatorRecordMessageParser`` and the
generated JSON converters, not from kafkatx).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import UnknownVersion
from kafkatx.format.consumer_offsets import (
    GROUP_RECORDS,
    GroupRecordKey,
    GroupRecordValue,
    UnknownKey,
    decode_offsets_key,
    decode_offsets_value,
)
from kafkatx.format.share_group_state import decode_share_state_key, decode_share_state_value

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "groups"
SEGMENT = FIXTURE / "__consumer_offsets-0" / f"{0:020d}.log"
SCENARIO = ROOT / "fixtures" / "expected" / "groups" / "scenario.json"

pytestmark = pytest.mark.skipif(not SEGMENT.is_file(), reason="fixtures/groups not built")


def _printed(args: list[str]) -> list[list[str | None]]:
    r = CliRunner().invoke(app, ["dump-segment", "--files", str(SEGMENT), "--offsets-decoder", *args])
    assert r.exit_code == 0, r.output
    out: list[list[str | None]] = []
    for line in r.stdout.splitlines():
        if line.startswith("| offset:") and " key: " in line:
            after = line.split(" key: ", 1)[1]
            key, _, payload = after.partition(" payload: ")
            out.append([key, payload if _ else None])
    return out


@pytest.mark.parametrize("version,expected", [("4.2", "4.x"), ("4.1", "4.x"), ("4.0", "4.x"), ("3.8", "3.8"),
                                              (None, "4.x")])
def test_every_group_record_type_prints_as_kafka_dump_log(version, expected):
    want = json.loads(SCENARIO.read_text())["offsets_dump"][expected]
    got = _printed([] if version is None else ["--kafka-version", version])
    # offsets 0-24 are the decoder's records (25- are the transactional commits and their marker)
    assert got[:len(want)] == want


def test_every_type_decodes_and_the_json_output_carries_it():
    r = CliRunner().invoke(app, ["dump-segment", str(SEGMENT), "--decoder", "offsets", "--format", "jsonl"])
    assert r.exit_code == 0, r.output
    records = [rec for line in r.stdout.splitlines() for rec in json.loads(line).get("records", [])]
    want = json.loads(SCENARIO.read_text())["offsets_dump"]["4.x"]
    # type 24 (unknown to kafka-dump-log.sh 4.0-4.2) is still decoded in kafkatx's own JSON
    decoded = records[21]["decoded"]
    assert decoded["key"] == {"version": 24, "name": "StreamsGroupTargetAssignmentResolvedTopicIds",
                              "data": {"groupId": "app"}}
    assert decoded["value"]["data"]["resolvedTopicIdsBySubtopology"][0]["topicIds"] == ["AQIDBAUGBwgJCgsMDQ4PEA"]
    for i in range(21):  # types 3-23: the JSON data is what Kafka's converters print
        assert json.loads(want[i][0])["data"] == records[i]["decoded"]["key"]["data"]
        assert json.loads(want[i][1])["data"] == records[i]["decoded"]["value"]["data"]


def test_schema_table_covers_types_3_to_24():
    assert sorted(GROUP_RECORDS) == list(range(3, 25))
    raw = b"\x00\x03\x00\x02cg"
    key = decode_offsets_key(raw)
    assert key == GroupRecordKey(version=3, name="ConsumerGroupMetadata", data={"groupId": "cg"})
    assert decode_offsets_value(key, b"\x00\x00\x00\x00\x00\x07\x00") == GroupRecordValue(version=0,
                                                                                             data={"epoch": 7})
    assert decode_offsets_value(key, None) is None
    assert isinstance(decode_offsets_key(b"\x00\x19\x00\x02cg"), UnknownKey)


def test_a_value_version_kafka_does_not_know_is_an_error_line():
    key = decode_offsets_key(b"\x00\x03\x00\x02cg")
    with pytest.raises(UnknownVersion, match="Can't read version 1 of ConsumerGroupMetadataValue"):
        decode_offsets_value(key, b"\x00\x01\x00\x00\x00\x07\x00")


def test_unknown_tags_are_skipped_and_an_absent_tagged_struct_is_not_printed():
    # ConsumerGroupMemberMetadataValue without its tag 0 but with an unknown tag 5
    key = decode_offsets_key(b"\x00\x05\x00\x02cg\x00\x02m1")
    body = (b"\x00\x00" + b"\x00" + b"\x00" + b"\x03c1" + b"\x02h" + b"\x01" + b"\x00" + struct.pack(">i", 5)
            + b"\x00" + b"\x01" + b"\x05\x02zz")
    value = decode_offsets_value(key, body)
    assert value is not None and "classicMemberMetadata" not in value.data
    assert value.data["rebalanceTimeoutMs"] == 5 and value.data["subscribedTopicNames"] == []


def test_share_group_state_records():
    topic_id = bytes(range(1, 17))
    key_raw = b"\x00\x00" + b"\x00\x02sg" + topic_id + struct.pack(">i", 3)
    key = decode_share_state_key(key_raw)
    assert key.name == "ShareSnapshot" and key.data == {"groupId": "sg", "topicId": "AQIDBAUGBwgJCgsMDQ4PEA",
                                                        "partition": 3}
    batch = struct.pack(">qqbh", 10, 19, 2, 1) + b"\x00"
    value_raw = (b"\x00\x00" + struct.pack(">Hiiq", 1, 4, 5, 10) + b"\x02" + batch + b"\x00")
    value = decode_share_state_value(key, value_raw)
    assert value is not None and value.data == {
        "snapshotEpoch": 1, "stateEpoch": 4, "leaderEpoch": 5, "startOffset": 10,
        "stateBatches": [{"firstOffset": 10, "lastOffset": 19, "deliveryState": 2, "deliveryCount": 1}]}


def test_share_group_state_decoder_flag(tmp_path):
    """``--share-group-state-decoder`` and auto-detection of a ``__share_group_state-N`` folder: Kafka 4.x's
    ``ShareGroupStateMessageParser`` lines, ``<DELETE>`` and the unknown-type line."""
    from kafkatx.format.record_batch import Record, build_batch

    topic_id = bytes(range(1, 17))
    key = b"\x00\x01" + b"\x00\x02sg" + topic_id + struct.pack(">i", 0)  # ShareUpdate
    value = b"\x00\x00" + struct.pack(">Hiq", 1, 5, 10) + b"\x01" + b"\x00"  # no state batches
    folder = tmp_path / "__share_group_state-3"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(b"".join([
        build_batch([Record(offset=0, timestamp=1, key=key, value=value)]),
        build_batch([Record(offset=1, timestamp=2, key=key, value=None)], base_offset=1),
        build_batch([Record(offset=2, timestamp=3, key=b"\x00\x07\x00\x00", value=b"\x00")], base_offset=2),
    ]))
    want = [('{"type":"1","data":{"groupId":"sg","topicId":"AQIDBAUGBwgJCgsMDQ4PEA","partition":0}}',
             '{"version":"0","data":{"snapshotEpoch":1,"leaderEpoch":5,"startOffset":10,"stateBatches":[]}}'),
            ('{"type":"1","data":{"groupId":"sg","topicId":"AQIDBAUGBwgJCgsMDQ4PEA","partition":0}}', "<DELETE>"),
            ("Unknown record type 7 at offset 2, skipping.", None)]
    for args in (["--files", str(log), "--share-group-state-decoder"], [str(log), "--print-data"]):
        r = CliRunner().invoke(app, ["dump-segment", *args])
        assert r.exit_code == 0, r.output
        got = []
        for line in r.stdout.splitlines():
            if " key: " in line:
                k, sep, p = line.split(" key: ", 1)[1].partition(" payload: ")
                got.append((k, p if sep else None))
        assert got == want
