"""kafka-dump-log.sh's text for internal topics and producer snapshots (kafkatx.render.kafka_dump).

Expected strings are reasoned from Kafka 3.8's source: ``DumpLogSegments.OffsetsMessageParser`` with the
generated ``*JsonConverter``s and ``ConsumerProtocol{Subscription,Assignment}`` schemas,
``TransactionLog.formatRecordKeyAndValue`` over ``TransactionMetadata.topicPartitions`` (a Scala 2.13
``mutable.HashSet``), and ``dumpProducerIdSnapshot``. The partition orders below are the ones a real Kafka
3.8.0 broker's dump printed (3.8.0/dump-log in the real-broker data).
"""

from __future__ import annotations

import struct

import pytest

from kafkatx.format.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_consumer_assignment,
    decode_consumer_subscription,
)
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.render import kafka_dump as kd


def _s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _b(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def _i32s(values: list[int]) -> bytes:
    return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)


def _subscription_v3() -> bytes:
    """ConsumerProtocolSubscription v3: topics [payments], userData null, ownedPartitions [],
    generationId -1, rackId null."""
    return (struct.pack(">h", 3) + struct.pack(">i", 1) + _s("payments") + _b(None) + struct.pack(">i", 0)
            + struct.pack(">i", -1) + _s(None))


def _assignment_v3() -> bytes:
    """ConsumerProtocolAssignment v3: assignedPartitions [payments: 0, 1], userData null."""
    return struct.pack(">h", 3) + struct.pack(">i", 1) + _s("payments") + _i32s([0, 1]) + _b(None)


def test_consumer_protocol_decoders_read_the_schemas():
    sub = decode_consumer_subscription(_subscription_v3())
    assert (sub.version, sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id, sub.rack_id) == \
        (3, ("payments",), None, (), -1, None)
    v0 = decode_consumer_subscription(struct.pack(">h", 0) + struct.pack(">i", 2) + _s("a") + _s("b") + _b(b"u"))
    assert (v0.topics, v0.user_data) == (("a", "b"), b"u")
    asg = decode_consumer_assignment(_assignment_v3())
    assert (asg.version, asg.assigned_partitions, asg.user_data) == (3, (("payments", (0, 1)),), None)


def test_offset_commit_records_print_as_the_json_converters_do():
    key = OffsetCommitKey(version=1, group="cg-eos", topic="payments", partition=0)
    assert kd.offsets_key_text(key) == '{"type":"1","data":{"group":"cg-eos","topic":"payments","partition":0}}'
    v3 = OffsetCommitValue(version=3, offset=20, leader_epoch=-1, metadata="", commit_timestamp=1795567068833)
    assert kd.offsets_value_text(v3) == \
        '{"version":"3","data":{"offset":20,"leaderEpoch":-1,"metadata":"","commitTimestamp":1795567068833}}'
    # v1 is the only version with expireTimestamp, and has no leaderEpoch
    v1 = OffsetCommitValue(version=1, offset=5, metadata="m", commit_timestamp=10, expire_timestamp=99)
    assert kd.offsets_value_text(v1) == \
        '{"version":"1","data":{"offset":5,"metadata":"m","commitTimestamp":10,"expireTimestamp":99}}'
    assert kd.offsets_value_text(None) == "<DELETE>"


def _member(subscription: bytes, assignment: bytes) -> MemberMetadata:
    return MemberMetadata(member_id="m-1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
                          rebalance_timeout=300000, session_timeout=45000, subscription=subscription,
                          assignment=assignment)


def test_a_consumer_groups_members_are_decoded():
    assert kd.offsets_key_text(GroupMetadataKey(version=2, group="cg-eos")) == '{"type":"2","data":{"group":"cg-eos"}}'
    value = GroupMetadataValue(version=3, protocol_type="consumer", generation=1, protocol="range", leader="m-1",
                               current_state_timestamp=7, members=(_member(_subscription_v3(), _assignment_v3()),))
    assert kd.offsets_value_text(value) == (
        '{"version":"3","data":{"protocolType":"consumer","generation":1,"protocol":"range","leader":"m-1",'
        '"currentStateTimestamp":7,"members":[{"memberId":"m-1","groupInstanceId":null,"clientId":"c",'
        '"clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,'
        '"subscription":{"topics":["payments"],"userData":null,"ownedPartitions":[],"generationId":-1,'
        '"rackId":null},"assignment":{"assignedPartitions":[{"topic":"payments","partitions":[0,1]}],'
        '"userData":null}}]}}')


def test_other_protocols_and_undecodable_bytes_stay_base64():
    """prepareGroupMetadataValue decodes only protocol type "consumer"; bytes that do not decode keep
    their original (base64) form. v0 has no currentStateTimestamp, groupInstanceId, rebalanceTimeout."""
    value = GroupMetadataValue(version=0, protocol_type="connect", generation=2, protocol=None, leader=None,
                               current_state_timestamp=-1,
                               members=(MemberMetadata(member_id="m", group_instance_id=None, client_id="c",
                                                       client_host="h", rebalance_timeout=10, session_timeout=10,
                                                       subscription=b"\x00\x01", assignment=b"\xff"),))
    assert kd.offsets_value_text(value) == (
        '{"version":"0","data":{"protocolType":"connect","generation":2,"protocol":null,"leader":null,'
        '"members":[{"memberId":"m","clientId":"c","clientHost":"h","sessionTimeout":10,'
        '"subscription":"AAE=","assignment":"/w=="}]}}')
    broken = GroupMetadataValue(version=3, protocol_type="consumer", generation=1, protocol="range", leader="m-1",
                                current_state_timestamp=7, members=(_member(b"\x00\x03\x00", b"\x00\x09"),))
    text = kd.offsets_value_text(broken)
    assert '"subscription":"AAMA","assignment":"AAk="' in text


@pytest.mark.parametrize(("partitions", "kafka_printed"), [
    ((("payments", (0, 1)), ("orders", (0, 1, 2))),
     [("payments", 0), ("payments", 1), ("orders", 0), ("orders", 1), ("orders", 2)]),
    ((("orders", (0, 1, 2)), ("payments", (0, 1))),  # the same set: the table's order, whatever went in first
     [("payments", 0), ("payments", 1), ("orders", 0), ("orders", 1), ("orders", 2)]),
    ((("__consumer_offsets", (22,)), ("orders", (0,))), [("orders", 0), ("__consumer_offsets", 22)]),
    ((("orders", (0,)), ("payments", (0,))), [("payments", 0), ("orders", 0)]),
])
def test_transaction_partitions_in_the_hash_sets_order(partitions, kafka_printed):
    assert kd.scala_hash_set_order(partitions) == kafka_printed


def test_hash_set_order_by_hand():
    """TopicPartition("a", p).hashCode = 31 * (31 + p) + "a".hashCode (97) = 1058 + 31p; improved
    (h ^ h >>> 16) it is unchanged (< 65536). 16 buckets: p=0 -> 1058 & 15 = 2, p=1 -> 1089 & 15 = 1,
    p=2 -> 1120 & 15 = 0: iteration is bucket 0, 1, 2, so partitions 2, 1, 0."""
    assert kd.scala_hash_set_order([("a", (0, 1, 2))]) == [("a", 2), ("a", 1), ("a", 0)]


def _entry(**kw) -> ProducerSnapshotEntry:
    base = dict(producer_id=5, producer_epoch=1, last_sequence=-1, last_offset=-1, offset_delta=0,
                timestamp=1795567084181, coordinator_epoch=0, current_txn_first_offset=-1)
    return ProducerSnapshotEntry(**{**base, **kw})


def test_a_snapshot_entry_without_batch_metadata_ends_after_its_timestamp():
    """readSnapshot gives batch metadata only when the stored last offset is >= 0; the line keeps
    the space print() left after lastTimestamp."""
    assert kd.snapshot_entry_line(_entry()) == (
        "producerId: 5 producerEpoch: 1 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1795567084181 ")
    line = kd.snapshot_entry_line(_entry(last_sequence=9, last_offset=40, offset_delta=4, current_txn_first_offset=36))
    assert line == ("producerId: 5 producerEpoch: 1 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong[36] "
                    "lastTimestamp: 1795567084181 firstSequence: 5 lastSequence: 9 lastOffset: 40 offsetDelta: 4 "
                    "timestamp: 1795567084181")


def test_first_sequence_is_batch_metadatas_wrapping_decrement():
    """BatchMetadata.firstSeq = DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta), which wraps
    below 0: (2, 4) -> Integer.MAX_VALUE - (4 - 2) + 1 = 2147483646; (-1, 0) -> 2147483647."""
    assert "firstSequence: 2147483646 lastSequence: 2 " in kd.snapshot_entry_line(
        _entry(last_sequence=2, last_offset=40, offset_delta=4))
    assert "firstSequence: 2147483647 lastSequence: -1 " in kd.snapshot_entry_line(_entry(last_offset=40))
