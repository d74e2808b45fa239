"""``__consumer_offsets`` records: committed offsets and classic group metadata.

Kafka schemas (Kafka 4: ``group-coordinator/src/main/resources/common/message/``,
3.x: ``core/src/main/resources/common/message/``). Keys and values start with an
int16 version; the key version says which record type follows
(``GroupCoordinatorRecordSerde`` / 3.x ``GroupMetadataManager.readMessageKey``)::

    key version 0 or 1 -> OffsetCommitKey (data schema v0; 0 and 1 are the same bytes)
        group      string
        topic      string
        partition  int32
    key version 2 -> GroupMetadataKey
        group      string
    key version 3-24 -> the newer group coordinator records (KIP-848 consumer groups 3-8 and 16,
        KIP-932 share groups 9-15, KIP-1071 streams groups 17-24): GroupRecordKey /
        GroupRecordValue, read by the schema table GROUP_RECORDS below
    any other key version -> UnknownKey (Kafka: ``UnknownRecordTypeException``)

    OffsetCommitValue, versions 0-4 (4 is flexible):
        offset           int64
        leaderEpoch      int32   v3+ (default -1)
        metadata         string  (compact in v4)
        commitTimestamp  int64
        expireTimestamp  int64   v1 only (default -1)
        (v4: tagged fields)

    GroupMetadataValue, versions 0-4 (4 is flexible):
        protocolType           string
        generation             int32
        protocol               nullable string
        leader                 nullable string
        currentStateTimestamp  int64   v2+ (default -1)
        members                []MemberMetadata
          memberId          string
          groupInstanceId   nullable string  v3+ (default null)
          clientId          string
          clientHost        string
          rebalanceTimeout  int32  v1+
          sessionTimeout    int32
          subscription      bytes
          assignment        bytes
          (v4: tagged fields)
        (v4: tagged fields)

A null value is a tombstone (offset deleted / group removed). Transactional
offset commits are written in transactional batches and only become visible
when the COMMIT marker lands, like any other partition.

``rebalance_timeout`` for a v0 member is reported as the session timeout: v0
had no such field and ``GroupMetadataManager.readGroupMessageValue`` used the
session timeout in its place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import Struct

from kafkatx.errors import UnknownVersion
from kafkatx.format._primitives import Buffer, Reader, Writer, reading
from kafkatx.format.coordinator_schema import Schema, f, key_schema, read_message, read_value

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSIONS = range(0, 5)
GROUP_METADATA_VALUE_VERSIONS = range(0, 5)
FLEXIBLE_FROM = 4  # both values


class OffsetCommitKey(Struct, frozen=True, kw_only=True):
    version: int  # 0 or 1
    group: str
    topic: str
    partition: int


class GroupMetadataKey(Struct, frozen=True, kw_only=True):
    version: int  # 2
    group: str


class GroupRecordKey(Struct, frozen=True, kw_only=True):
    """The key of a record of type 3-24 (GROUP_RECORDS): its fields as the JSON converter writes them."""

    version: int  # the record type
    name: str  # the schema's name without "Key", e.g. ConsumerGroupMemberMetadata
    data: dict[str, Any]

    @property
    def group(self) -> str:
        return str(self.data.get("groupId", ""))


class GroupRecordValue(Struct, frozen=True, kw_only=True):
    """The value of a record of type 3-24, at the version it carries."""

    version: int
    data: dict[str, Any]


class UnknownKey(Struct, frozen=True, kw_only=True):
    version: int
    raw: bytes  # the whole key, version included


class OffsetCommitValue(Struct, frozen=True, kw_only=True):
    version: int
    offset: int
    leader_epoch: int = -1
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    unknown_tags: tuple[tuple[int, bytes], ...] = ()


class MemberMetadata(Struct, frozen=True, kw_only=True):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(Struct, frozen=True, kw_only=True):
    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]
    unknown_tags: tuple[tuple[int, bytes], ...] = ()


class UnknownValue(Struct, frozen=True, kw_only=True):
    """Value of a record whose key type kafkatx does not decode."""

    raw: bytes


OffsetsKey = OffsetCommitKey | GroupMetadataKey | GroupRecordKey | UnknownKey
OffsetsValue = OffsetCommitValue | GroupMetadataValue | GroupRecordValue | UnknownValue


# --------------------------------------------------------------------------------
# the group coordinator's newer records: one schema each
# --------------------------------------------------------------------------------
#
# group-coordinator/src/main/resources/common/message/<Name>{Key,Value}.json ("apiKey" = record
# type): types 3-15 as on apache/kafka 4.0 trunk; 16 (ConsumerGroupRegularExpression, KIP-848 regex
# subscriptions) and the streams groups 17-23 (KIP-1071) as read in tmw090906/kafka @ dfb178a1
# (apache/kafka trunk of 2024-12-27, what 4.0 shipped); 24 (StreamsGroupTargetAssignmentResolvedTopicIds,
# KAFKA-20171) in apache/kafka @ 14440d21. Every key is version 0, not flexible; every value
# "validVersions": "0", "flexibleVersions": "0+".

_TOPIC_PARTITIONS = ("[]", [f("topicId", "uuid"), f("partitions", "[]int32")])
_TOPIC_METADATA = ("[]", [f("topicId", "uuid"), f("topicName", "string"), f("numPartitions", "int32"),
                          f("partitionMetadata", ("[]", [f("partition", "int32"), f("racks", "[]string")]))])
_TASK_IDS = ("[]", [f("subtopologyId", "string"), f("partitions", "[]int32")])
_STREAMS_TOPIC_INFO = ("[]", [f("name", "string"), f("partitions", "int32"), f("replicationFactor", "int16"),
                              f("topicConfigs", ("[]", [f("key", "string"), f("value", "string")]))])
_GROUP = f("groupId", "string")
_MEMBER = f("memberId", "string")


def _record(name: str, key: Sequence[Any], value: Sequence[Any]) -> tuple[Schema, Schema]:
    return key_schema(f"{name}Key", *key), Schema(f"{name}Value", value)


GROUP_RECORDS: dict[int, tuple[Schema, Schema]] = {
    3: _record("ConsumerGroupMetadata", [_GROUP], [f("epoch", "int32")]),
    4: _record("ConsumerGroupPartitionMetadata", [_GROUP], [f("topics", _TOPIC_METADATA)]),
    5: _record("ConsumerGroupMemberMetadata", [_GROUP, _MEMBER], [
        f("instanceId", "string", nullable=0), f("rackId", "string", nullable=0), f("clientId", "string"),
        f("clientHost", "string"), f("subscribedTopicNames", "[]string"),
        f("subscribedTopicRegex", "string", nullable=0), f("rebalanceTimeoutMs", "int32"),
        f("serverAssignor", "string", nullable=0),
        f("classicMemberMetadata", ("{}", [
            f("sessionTimeoutMs", "int32"),
            f("supportedProtocols", ("[]", [f("name", "string"), f("metadata", "bytes")]))]),
          tag=0, default=None, nullable=0)]),
    6: _record("ConsumerGroupTargetAssignmentMetadata", [_GROUP], [f("assignmentEpoch", "int32")]),
    7: _record("ConsumerGroupTargetAssignmentMember", [_GROUP, _MEMBER], [f("topicPartitions", _TOPIC_PARTITIONS)]),
    8: _record("ConsumerGroupCurrentMemberAssignment", [_GROUP, _MEMBER], [
        f("memberEpoch", "int32"), f("previousMemberEpoch", "int32"), f("state", "int8"),
        f("assignedPartitions", _TOPIC_PARTITIONS), f("partitionsPendingRevocation", _TOPIC_PARTITIONS)]),
    9: _record("ShareGroupPartitionMetadata", [_GROUP], [f("topics", _TOPIC_METADATA)]),
    10: _record("ShareGroupMemberMetadata", [_GROUP, _MEMBER], [
        f("rackId", "string", nullable=0), f("clientId", "string"), f("clientHost", "string"),
        f("subscribedTopicNames", "[]string")]),
    11: _record("ShareGroupMetadata", [_GROUP], [f("epoch", "int32")]),
    12: _record("ShareGroupTargetAssignmentMetadata", [_GROUP], [f("assignmentEpoch", "int32")]),
    13: _record("ShareGroupTargetAssignmentMember", [_GROUP, _MEMBER], [f("topicPartitions", _TOPIC_PARTITIONS)]),
    14: _record("ShareGroupCurrentMemberAssignment", [_GROUP, _MEMBER], [
        f("memberEpoch", "int32"), f("previousMemberEpoch", "int32"), f("state", "int8"),
        f("assignedPartitions", _TOPIC_PARTITIONS)]),
    15: _record("ShareGroupStatePartitionMetadata", [_GROUP], [
        f("initializedTopics", ("[]", [f("topicId", "uuid"), f("topicName", "string"), f("partitions", "[]int32")])),
        f("deletingTopics", ("[]", [f("topicId", "uuid"), f("topicName", "string")]))]),
    16: _record("ConsumerGroupRegularExpression", [_GROUP, f("regularExpression", "string")], [
        f("topics", "[]string"), f("version", "int64"), f("timestamp", "int64")]),
    17: _record("StreamsGroupMetadata", [_GROUP], [f("epoch", "int32")]),
    18: _record("StreamsGroupPartitionMetadata", [_GROUP], [f("topics", _TOPIC_METADATA)]),
    19: _record("StreamsGroupMemberMetadata", [_GROUP, _MEMBER], [
        f("instanceId", "string", nullable=0), f("rackId", "string", nullable=0), f("clientId", "string"),
        f("clientHost", "string"), f("rebalanceTimeoutMs", "int32"), f("topologyEpoch", "int32"),
        f("processId", "string"),
        f("userEndpoint", ("{}", [f("host", "string"), f("port", "uint16")]), nullable=0),
        f("clientTags", ("[]", [f("key", "string"), f("value", "string")]))]),
    20: _record("StreamsGroupTargetAssignmentMetadata", [_GROUP], [f("assignmentEpoch", "int32")]),
    21: _record("StreamsGroupTargetAssignmentMember", [_GROUP, _MEMBER], [
        f("activeTasks", _TASK_IDS), f("standbyTasks", _TASK_IDS), f("warmupTasks", _TASK_IDS)]),
    22: _record("StreamsGroupCurrentMemberAssignment", [_GROUP, _MEMBER], [
        f("memberEpoch", "int32"), f("previousMemberEpoch", "int32"), f("state", "int8"),
        f("activeTasks", _TASK_IDS), f("standbyTasks", _TASK_IDS), f("warmupTasks", _TASK_IDS),
        f("activeTasksPendingRevocation", _TASK_IDS), f("standbyTasksPendingRevocation", _TASK_IDS),
        f("warmupTasksPendingRevocation", _TASK_IDS)]),
    23: _record("StreamsGroupTopology", [_GROUP], [
        f("epoch", "int32"),
        f("subtopologies", ("[]", [
            f("subtopologyId", "string"), f("sourceTopics", "[]string"), f("sourceTopicRegex", "[]string"),
            f("stateChangelogTopics", _STREAMS_TOPIC_INFO), f("repartitionSinkTopics", "[]string"),
            f("repartitionSourceTopics", _STREAMS_TOPIC_INFO),
            f("copartitionGroups", ("[]", [f("sourceTopics", "[]int16"), f("sourceTopicRegex", "[]int16"),
                                           f("repartitionSourceTopics", "[]int16")]))]))]),
    24: _record("StreamsGroupTargetAssignmentResolvedTopicIds", [_GROUP], [
        f("assignmentEpoch", "int32"),
        f("resolvedTopicIdsBySubtopology", ("[]", [f("subtopologyId", "string"), f("topicIds", "[]uuid")]))]),
}

# The record types each kafka-dump-log.sh knows (GroupCoordinatorRecordSerde of that release): 3.8's
# OffsetsMessageParser stops at ConsumerGroupCurrentMemberAssignment (8); 4.0-4.2 know 0-23.
KNOWN_TYPES_3X = range(0, 9)
KNOWN_TYPES_4X = range(0, 24)


# --------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------


def decode_offsets_key(data: Buffer) -> OffsetsKey:
    """Decode a ``__consumer_offsets`` key; key types kafkatx does not know become UnknownKey."""
    with reading(data, "offsets key") as r:
        return _decode_key(r)


def _decode_key(r: Reader) -> OffsetsKey:
    version = r.i16("key version")
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        group = r.string("group")
        topic = r.string("topic")
        partition = r.i32("partition")
        r.expect_end()
        assert group is not None and topic is not None
        return OffsetCommitKey(version=version, group=group, topic=topic, partition=partition)
    if version == GROUP_METADATA_KEY_VERSION:
        group = r.string("group")
        r.expect_end()
        assert group is not None
        return GroupMetadataKey(version=version, group=group)
    schemas = GROUP_RECORDS.get(version)
    if schemas is not None:
        data = read_message(r, schemas[0], 0)
        r.expect_end()
        return GroupRecordKey(version=version, name=schemas[0].name[:-3], data=data)
    if version < 0:
        raise UnknownVersion(f"offsets key: invalid key version {version}", position=0)
    return UnknownKey(version=version, raw=bytes(r.buf))


def _str(r: Reader, field: str, flexible: bool, nullable: bool = False) -> str | None:
    return r.compact_string(field, nullable=nullable) if flexible else r.string(field, nullable=nullable)


def _unknown_tags(r: Reader, flexible: bool) -> tuple[tuple[int, bytes], ...]:
    # neither value defines any tagged field: every tag is unknown and kept raw
    if not flexible:
        return ()
    return tuple((tag, raw) for tag, _, raw in r.tagged_fields())


def _decode_offset_commit_value(r: Reader, version: int) -> OffsetCommitValue:
    flexible = version >= FLEXIBLE_FROM
    offset = r.i64("offset")
    leader_epoch = r.i32("leader epoch") if version >= 3 else -1
    metadata = _str(r, "metadata", flexible)
    commit_ts = r.i64("commit timestamp")
    expire_ts = r.i64("expire timestamp") if version == 1 else -1
    tags = _unknown_tags(r, flexible)
    assert metadata is not None
    return OffsetCommitValue(version=version, offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                             commit_timestamp=commit_ts, expire_timestamp=expire_ts, unknown_tags=tags)


def _decode_member(r: Reader, version: int) -> MemberMetadata:
    flexible = version >= FLEXIBLE_FROM
    member_id = _str(r, "member id", flexible)
    instance = _str(r, "group instance id", flexible, nullable=True) if version >= 3 else None
    client_id = _str(r, "client id", flexible)
    client_host = _str(r, "client host", flexible)
    rebalance = r.i32("rebalance timeout") if version >= 1 else None
    session = r.i32("session timeout")
    if flexible:
        sub = r.compact_bytes("subscription")
        asg = r.compact_bytes("assignment")
        r.tagged_fields("member tagged fields")  # none defined; skipped
    else:
        sub = r.bytes_("subscription")
        asg = r.bytes_("assignment")
    assert member_id is not None and client_id is not None and client_host is not None
    assert sub is not None and asg is not None
    return MemberMetadata(member_id=member_id, group_instance_id=instance, client_id=client_id,
                          client_host=client_host,
                          rebalance_timeout=session if rebalance is None else rebalance,
                          session_timeout=session, subscription=sub, assignment=asg)


def _decode_group_metadata_value(r: Reader, version: int) -> GroupMetadataValue:
    flexible = version >= FLEXIBLE_FROM
    protocol_type = _str(r, "protocol type", flexible)
    generation = r.i32("generation")
    protocol = _str(r, "protocol", flexible, nullable=True)
    leader = _str(r, "leader", flexible, nullable=True)
    state_ts = r.i64("current state timestamp") if version >= 2 else -1
    # smallest member: v0 3 strings (2 each) + session (4) + 2 bytes (4 each) = 18;
    # flexible: 3 compact strings + nullable + 2 ints + 2 compact bytes + tags = 1+1+1+1+8+1+1+1
    members = r.array(lambda rr: _decode_member(rr, version), "members", 15 if flexible else 18,
                      flexible=flexible)
    tags = _unknown_tags(r, flexible)
    assert protocol_type is not None and members is not None
    return GroupMetadataValue(version=version, protocol_type=protocol_type, generation=generation,
                              protocol=protocol, leader=leader, current_state_timestamp=state_ts,
                              members=tuple(members), unknown_tags=tags)


def decode_offsets_value(key: OffsetsKey, data: Buffer | None) -> OffsetsValue | None:
    """Decode the value of a record whose key decoded to ``key``; ``None`` is a tombstone."""
    if data is None:
        return None
    if isinstance(key, UnknownKey):
        return UnknownValue(raw=bytes(data))
    if isinstance(key, GroupRecordKey):
        version, fields = read_value(data, GROUP_RECORDS[key.version][1])
        return GroupRecordValue(version=version, data=fields)
    if isinstance(key, OffsetCommitKey):
        what, versions = "offset commit value", OFFSET_COMMIT_VALUE_VERSIONS
    else:
        what, versions = "group metadata value", GROUP_METADATA_VALUE_VERSIONS
    with reading(data, what) as r:
        version = r.i16("value version")
        if version not in versions:
            raise UnknownVersion(f"{what}: unknown value version {version}", position=0)
        value: OffsetsValue
        if isinstance(key, OffsetCommitKey):
            value = _decode_offset_commit_value(r, version)
        else:
            value = _decode_group_metadata_value(r, version)
        r.expect_end()
        return value


# --------------------------------------------------------------------------------
# the consumer protocol inside a classic group's member metadata
# --------------------------------------------------------------------------------
#
# A member of a group whose protocol type is "consumer" carries, as opaque bytes, a
# ``ConsumerProtocolSubscription`` and a ``ConsumerProtocolAssignment`` (clients'
# ``common/message/ConsumerProtocol{Subscription,Assignment}.json``, versions 0-3, none flexible),
# each prefixed by its int16 version (``ConsumerProtocol.serializeSubscription``)::
#
#     ConsumerProtocolSubscription
#         topics           []string
#         userData         nullable bytes
#         ownedPartitions  [](topic string, partitions []int32)   v1+
#         generationId     int32 (default -1)                     v2+
#         rackId           nullable string (default null)         v3+
#     ConsumerProtocolAssignment
#         assignedPartitions  [](topic string, partitions []int32)
#         userData            nullable bytes
#
# Like the generated readers, bytes after the last field are not read.

CONSUMER_PROTOCOL_VERSIONS = range(0, 4)
CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


class ConsumerSubscription(Struct, frozen=True, kw_only=True):
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


class ConsumerAssignment(Struct, frozen=True, kw_only=True):
    version: int
    assigned_partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None


def _topic_partitions(r: Reader) -> tuple[str, tuple[int, ...]]:
    topic = r.string("topic")
    ids = r.array(lambda rr: rr.i32("partition"), "partitions", 4, flexible=False)
    assert topic is not None and ids is not None
    return topic, tuple(ids)


def _consumer_protocol_version(r: Reader, what: str) -> int:
    version = r.i16(f"{what} version")
    if version not in CONSUMER_PROTOCOL_VERSIONS:
        raise UnknownVersion(f"{what}: unknown version {version}", position=0)
    return version


def decode_consumer_subscription(data: Buffer) -> ConsumerSubscription:
    """A member's subscription bytes (``ConsumerProtocolSubscription``, version-prefixed)."""
    with reading(data, "consumer subscription") as r:
        version = _consumer_protocol_version(r, "consumer subscription")
        topics = r.array(lambda rr: rr.string("topic"), "topics", 2, flexible=False)
        user_data = r.bytes_("user data", nullable=True)
        owned = r.array(_topic_partitions, "owned partitions", 6, flexible=False) if version >= 1 else []
        generation = r.i32("generation id") if version >= 2 else -1
        rack = r.string("rack id", nullable=True) if version >= 3 else None
        assert topics is not None and owned is not None
        return ConsumerSubscription(version=version, topics=tuple(t for t in topics if t is not None),
                                    user_data=user_data, owned_partitions=tuple(owned),
                                    generation_id=generation, rack_id=rack)


def decode_consumer_assignment(data: Buffer) -> ConsumerAssignment:
    """A member's assignment bytes (``ConsumerProtocolAssignment``, version-prefixed)."""
    with reading(data, "consumer assignment") as r:
        version = _consumer_protocol_version(r, "consumer assignment")
        assigned = r.array(_topic_partitions, "assigned partitions", 6, flexible=False)
        user_data = r.bytes_("user data", nullable=True)
        assert assigned is not None
        return ConsumerAssignment(version=version, assigned_partitions=tuple(assigned), user_data=user_data)


# --------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    if key.version not in OFFSET_COMMIT_KEY_VERSIONS:
        raise ValueError(f"offset commit keys are version 0 or 1, not {key.version}")
    w = Writer()
    w.i16(key.version)
    w.string(key.group, flexible=False, field="group")
    w.string(key.topic, flexible=False, field="topic")
    w.i32(key.partition, "partition")
    return w.getvalue()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group, flexible=False, field="group")
    return w.getvalue()


def _check_default(version: int, field: str, value: object, default: object, present: bool) -> None:
    # Kafka's generated writers refuse a non-default value for a field the version lacks
    if not present and value != default:
        raise ValueError(f"version {version} cannot carry a non-default {field} ({value!r})")


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Byte-exact with Kafka's generated ``OffsetCommitValue.write`` at ``value.version``."""
    v = value.version
    if v not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise ValueError(f"cannot encode offset commit value version {v}")
    flexible = v >= FLEXIBLE_FROM
    _check_default(v, "leader_epoch", value.leader_epoch, -1, v >= 3)
    _check_default(v, "expire_timestamp", value.expire_timestamp, -1, v == 1)
    _check_default(v, "unknown_tags", value.unknown_tags, (), flexible)
    w = Writer()
    w.i16(v)
    w.i64(value.offset, "offset")
    if v >= 3:
        w.i32(value.leader_epoch, "leader_epoch")
    w.string(value.metadata, flexible=flexible, field="metadata")
    w.i64(value.commit_timestamp, "commit_timestamp")
    if v == 1:
        w.i64(value.expire_timestamp, "expire_timestamp")
    if flexible:
        w.tagged_fields(value.unknown_tags)
    return w.getvalue()


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Byte-exact with Kafka's generated ``GroupMetadataValue.write`` at ``value.version``."""
    v = value.version
    if v not in GROUP_METADATA_VALUE_VERSIONS:
        raise ValueError(f"cannot encode group metadata value version {v}")
    flexible = v >= FLEXIBLE_FROM
    _check_default(v, "current_state_timestamp", value.current_state_timestamp, -1, v >= 2)
    _check_default(v, "unknown_tags", value.unknown_tags, (), flexible)
    w = Writer()
    w.i16(v)
    w.string(value.protocol_type, flexible=flexible, field="protocol_type")
    w.i32(value.generation, "generation")
    w.string(value.protocol, flexible=flexible, field="protocol")
    w.string(value.leader, flexible=flexible, field="leader")
    if v >= 2:
        w.i64(value.current_state_timestamp, "current_state_timestamp")
    w.array_count(len(value.members), flexible=flexible)
    for m in value.members:
        _check_default(v, "group_instance_id", m.group_instance_id, None, v >= 3)
        w.string(m.member_id, flexible=flexible, field="member_id")
        if v >= 3:
            w.string(m.group_instance_id, flexible=flexible, field="group_instance_id")
        w.string(m.client_id, flexible=flexible, field="client_id")
        w.string(m.client_host, flexible=flexible, field="client_host")
        if v >= 1:
            w.i32(m.rebalance_timeout, "rebalance_timeout")
        elif m.rebalance_timeout != m.session_timeout:
            raise ValueError("version 0 members have no rebalance_timeout (decoded as the session timeout)")
        w.i32(m.session_timeout, "session_timeout")
        w.bytes_(m.subscription, flexible=flexible)
        w.bytes_(m.assignment, flexible=flexible)
        if flexible:
            w.tagged_fields(())
    if flexible:
        w.tagged_fields(value.unknown_tags)
    return w.getvalue()


__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerAssignment",
    "ConsumerSubscription",
    "GROUP_RECORDS",
    "KNOWN_TYPES_3X",
    "KNOWN_TYPES_4X",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecordKey",
    "GroupRecordValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "UnknownKey",
    "UnknownValue",
    "decode_consumer_assignment",
    "decode_consumer_subscription",
    "decode_offsets_key",
    "decode_offsets_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]
