"""``__cluster_metadata`` records: the KRaft metadata log's record values and control records.

A metadata record value is ``ApiMessageAndVersion`` as ``MetadataRecordSerde``
(``AbstractApiMessageSerde.read``) frames it: an unsigned varint frame version (1), an unsigned
varint api key, an unsigned varint record version, then the message in that version. Every
metadata record is flexible from version 0 (compact strings and arrays, tagged fields). The
schemas below are Kafka 4.x's ``metadata/src/main/resources/common/metadata/*.json`` (field
names, versions, tags and defaults); the KRaft control records (``LeaderChangeMessage``,
``SnapshotHeaderRecord``, ``SnapshotFooterRecord``, ``KRaftVersionRecord``, ``VotersRecord``,
``clients/src/main/resources/common/message/``) are decoded from a control batch's record
value by :func:`decode_control_record`.

Decoded records are ``MetadataRecord(type, version, data)``; ``data`` holds the fields the
way Kafka's generated ``JsonConverter`` writes them (camelCase names, uuids as
``Uuid.toString`` base64, every non-tagged field of the version, a tagged field only when it
differs from its default), so :func:`metadata_json` prints what ``kafka-dump-log.sh
--cluster-metadata-decoder`` prints after ``payload:`` (``MetadataShell``'s
``MetadataRecordSerde`` + ``JsonConverter``). An unknown api key is a
:class:`~kafkatx.errors.UnknownVersion`; a truncated value a :class:`~kafkatx.errors.Truncated`.

A record version newer than the schemas here (a newer Kafka: RegisterBrokerRecord v4 of Kafka 4.3 adds
the tagged ``CordonedLogDirs``) is read as far as the newest known version's fields go: every metadata
record is flexible, and Kafka adds fields to them as tagged fields, which a reader that does not know a
tag skips (``ByteBufferAccessor`` + the generated ``read``'s ``_unknownTaggedFields``). The record says
so (``read_as``). Only when the bytes do not frame that way (the newer version added or changed a
non-tagged field) is it an :class:`~kafkatx.errors.UnknownVersion`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import Struct

from kafkatx.errors import DecodeError, UnknownVersion
from kafkatx.format._primitives import Buffer, Reader, reading
from kafkatx.format.coordinator_schema import NO_TAG, Field, read_struct, uuid_text

# A field: its JSON name, type (int8 int16 int32 int64 uint16 bool float64 uuid string bytes, "[]T"
# arrays of those, or ("[]", fields) / ("{}", fields) for struct arrays / structs), first version, tag,
# default for a tagged field, nullable from version: read by kafkatx.format.coordinator_schema's reader.


def f(name: str, typ: Any, since: int = 0, *, tag: int | None = None, default: Any = None,
      nullable: int | None = None) -> Field:
    return Field(name, typ, since, tag=NO_TAG if tag is None else tag, default=default, nullable_from=nullable)


_ENDPOINT = [f("name", "string"), f("host", "string"), f("port", "uint16"), f("securityProtocol", "int16")]
_FEATURE = [f("name", "string"), f("minSupportedVersion", "int16"), f("maxSupportedVersion", "int16")]

# api key -> (record type as kafka-dump-log.sh prints it, highest known version, fields)
SCHEMAS: dict[int, tuple[str, int, list[Field]]] = {
    0: ("REGISTER_BROKER_RECORD", 3, [
        f("brokerId", "int32"), f("isMigratingZkBroker", "bool", 2), f("incarnationId", "uuid"),
        f("brokerEpoch", "int64"), f("endPoints", ("[]", _ENDPOINT)), f("features", ("[]", _FEATURE)),
        f("rack", "string", nullable=0), f("fenced", "bool"), f("inControlledShutdown", "bool", 1),
        f("logDirs", "[]uuid", 3, tag=0, default=[])]),
    1: ("UNREGISTER_BROKER_RECORD", 0, [f("brokerId", "int32"), f("brokerEpoch", "int64")]),
    2: ("TOPIC_RECORD", 0, [f("name", "string"), f("topicId", "uuid")]),
    3: ("PARTITION_RECORD", 2, [
        f("partitionId", "int32"), f("topicId", "uuid"), f("replicas", "[]int32"), f("isr", "[]int32"),
        f("removingReplicas", "[]int32"), f("addingReplicas", "[]int32"), f("leader", "int32"),
        f("leaderRecoveryState", "int8", tag=0, default=0), f("leaderEpoch", "int32"),
        f("partitionEpoch", "int32"), f("directories", "[]uuid", 1),
        f("eligibleLeaderReplicas", "[]int32", 2, tag=1, default=None, nullable=2),
        f("lastKnownElr", "[]int32", 2, tag=2, default=None, nullable=2)]),
    4: ("CONFIG_RECORD", 0, [f("resourceType", "int8"), f("resourceName", "string"), f("name", "string"),
                             f("value", "string", nullable=0)]),
    5: ("PARTITION_CHANGE_RECORD", 2, [
        f("partitionId", "int32"), f("topicId", "uuid"),
        f("isr", "[]int32", tag=0, default=None, nullable=0), f("leader", "int32", tag=1, default=-2),
        f("replicas", "[]int32", tag=2, default=None, nullable=0),
        f("removingReplicas", "[]int32", tag=3, default=None, nullable=0),
        f("addingReplicas", "[]int32", tag=4, default=None, nullable=0),
        f("leaderRecoveryState", "int8", tag=5, default=-1),
        f("directories", "[]uuid", 1, tag=8, default=None, nullable=1),
        f("eligibleLeaderReplicas", "[]int32", 2, tag=6, default=None, nullable=2),
        f("lastKnownElr", "[]int32", 2, tag=7, default=None, nullable=2)]),
    6: ("ACCESS_CONTROL_ENTRY_RECORD", 0, [
        f("id", "uuid"), f("resourceType", "int8"), f("resourceName", "string"), f("patternType", "int8"),
        f("principal", "string"), f("host", "string"), f("operation", "int8"), f("permissionType", "int8")]),
    7: ("FENCE_BROKER_RECORD", 0, [f("id", "int32"), f("epoch", "int64")]),
    8: ("UNFENCE_BROKER_RECORD", 0, [f("id", "int32"), f("epoch", "int64")]),
    9: ("REMOVE_TOPIC_RECORD", 0, [f("topicId", "uuid")]),
    10: ("DELEGATION_TOKEN_RECORD", 0, [
        f("owner", "string"), f("requester", "string"), f("renewers", "[]string"), f("issueTimestamp", "int64"),
        f("maxTimestamp", "int64"), f("expirationTimestamp", "int64"), f("tokenId", "string")]),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", 0, [
        f("name", "string"), f("mechanism", "int8"), f("salt", "bytes"), f("storedKey", "bytes"),
        f("serverKey", "bytes"), f("iterations", "int32")]),
    12: ("FEATURE_LEVEL_RECORD", 0, [f("name", "string"), f("featureLevel", "int16")]),
    13: ("REMOVE_DELEGATION_TOKEN_RECORD", 0, [f("tokenId", "string")]),
    14: ("CLIENT_QUOTA_RECORD", 0, [
        f("entity", ("[]", [f("entityType", "string"), f("entityName", "string", nullable=0)])),
        f("key", "string"), f("value", "float64"), f("remove", "bool")]),
    15: ("PRODUCER_IDS_RECORD", 0, [f("brokerId", "int32"), f("brokerEpoch", "int64"),
                                    f("nextProducerId", "int64")]),
    16: ("REMOVE_FEATURE_LEVEL_RECORD", 0, [f("name", "string")]),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", 2, [
        f("brokerId", "int32"), f("brokerEpoch", "int64"), f("fenced", "int8", tag=0, default=0),
        f("inControlledShutdown", "int8", 1, tag=1, default=0), f("logDirs", "[]uuid", 2, tag=2, default=[])]),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 0, [f("id", "uuid")]),
    20: ("NO_OP_RECORD", 0, []),
    21: ("ZK_MIGRATION_STATE_RECORD", 0, [f("zkMigrationState", "int8")]),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", 0, [f("name", "string"), f("mechanism", "int8")]),
    23: ("BEGIN_TRANSACTION_RECORD", 0, [f("name", "string", tag=0, default=None, nullable=0)]),
    24: ("END_TRANSACTION_RECORD", 0, []),
    25: ("ABORT_TRANSACTION_RECORD", 0, [f("reason", "string", tag=0, default=None, nullable=0)]),
    27: ("REGISTER_CONTROLLER_RECORD", 0, [
        f("controllerId", "int32"), f("incarnationId", "uuid"), f("zkMigrationReady", "bool"),
        f("endPoints", ("[]", _ENDPOINT)), f("features", ("[]", _FEATURE))]),
    28: ("CLEAR_ELR_RECORD", 0, [f("topicName", "string")]),
    29: ("UNREGISTER_CONTROLLER_RECORD", 0, [f("controllerId", "int32")]),
}

# KRaft control record types (ControlRecordType) and their schemas (all flexible 0+).
_VOTER_ENDPOINT = [f("name", "string"), f("host", "string"), f("port", "uint16")]
CONTROL_SCHEMAS: dict[int, tuple[str, int, list[Field]]] = {
    2: ("LEADER_CHANGE", 0, [f("version", "int16"), f("leaderId", "int32"),
                             f("voters", ("[]", [f("voterId", "int32")])),
                             f("grantingVoters", ("[]", [f("voterId", "int32")]))]),
    3: ("SNAPSHOT_HEADER", 0, [f("version", "int16"), f("lastContainedLogTimestamp", "int64")]),
    4: ("SNAPSHOT_FOOTER", 0, [f("version", "int16")]),
    5: ("KRAFT_VERSION", 0, [f("version", "int16"), f("kRaftVersion", "int16")]),
    6: ("KRAFT_VOTERS", 0, [f("version", "int16"), f("voters", ("[]", [
        f("voterId", "int32"), f("voterDirectoryId", "uuid"), f("endpoints", ("[]", _VOTER_ENDPOINT)),
        f("kRaftVersionFeature", ("{}", [f("minSupportedVersion", "int16"), f("maxSupportedVersion", "int16")]))]))]),
}

class MetadataRecord(Struct, frozen=True):
    """One decoded record: ``type`` as kafka-dump-log.sh names it, the record version, the fields."""

    type: str
    version: int
    data: dict[str, Any]
    api_key: int = -1
    read_as: int | None = None  # a newer version than known, read with this (the newest known) version's fields


def decode_metadata_record(value: Buffer) -> MetadataRecord:
    """One ``__cluster_metadata`` record value (``MetadataRecordSerde``)."""
    with reading(value, "metadata record") as r:
        frame = r.uvarint("frame version")
        if frame != 1:
            raise UnknownVersion(f"metadata record: unsupported frame version {frame}", position=0)
        api_key = r.uvarint("api key")
        version = r.uvarint("record version")
        schema = SCHEMAS.get(api_key)
        if schema is None:
            raise UnknownVersion(f"metadata record: unknown api key {api_key}", position=1)
        name, highest, fields = schema
        if version > highest:
            return _newer_record(r, api_key, name, version, highest, fields)
        data = read_struct(r, fields, version, True, name)
        if r.remaining:
            raise DecodeError(f"metadata record: {name}: {r.remaining} bytes after the record", position=r.pos)
        return MetadataRecord(type=name, version=version, data=data, api_key=api_key)


def _newer_record(r: Reader, api_key: int, name: str, version: int, highest: int,
                  fields: Sequence[Field]) -> MetadataRecord:
    """A record of a version newer than ``highest``, read with ``highest``'s fields (unknown tags skipped);
    UnknownVersion when it does not frame so."""
    start = r.pos
    try:
        data = read_struct(r, fields, highest, True, name)
    except DecodeError as err:
        raise UnknownVersion(f"metadata record: {name} version {version} is newer than {highest} and does not "
                             f"read with version {highest}'s fields ({err})", position=start) from err
    if r.remaining:
        raise UnknownVersion(f"metadata record: {name} version {version} is newer than {highest} and has "
                             f"{r.remaining} bytes after version {highest}'s fields (a field kafkatx does not know)",
                             position=r.pos)
    return MetadataRecord(type=name, version=version, data=data, api_key=api_key, read_as=highest)


def decode_control_record(control_type: int, value: Buffer) -> MetadataRecord | None:
    """A KRaft control record (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters); None for
    another control type (transaction markers are not KRaft records)."""
    schema = CONTROL_SCHEMAS.get(control_type)
    if schema is None:
        return None
    name, highest, fields = schema
    with reading(value, name.lower()) as r:
        version = r.i16("version")
        if version > highest:
            raise UnknownVersion(f"{name}: version {version} is newer than {highest}", position=0)
        r.pos -= 2  # the version is the record's first field
        data = read_struct(r, fields, version, True, name)
        return MetadataRecord(type=name, version=version, data=data, api_key=control_type)


def metadata_json(rec: MetadataRecord) -> str:
    """What kafka-dump-log.sh prints after ``payload:`` (``{"type":..,"version":..,"data":{..}}``)."""
    import json  # here: the json module loads on JSON output only (tests/cli/test_lazy_commands.py)

    return json.dumps({"type": rec.type, "version": rec.version, "data": rec.data}, separators=(",", ":"),
                      ensure_ascii=False)


__all__ = ["CONTROL_SCHEMAS", "SCHEMAS", "MetadataRecord", "decode_control_record", "decode_metadata_record",
           "metadata_json", "uuid_text"]
