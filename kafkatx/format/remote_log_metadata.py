"""``__remote_log_metadata`` records: what tiered storage (KIP-405) copied, and where it stands.

Kafka's default remote log metadata manager (``TopicBasedRemoteLogMetadataManager``) keeps, per
tiered partition, an event log in the internal topic ``__remote_log_metadata`` (50 partitions by
default). Each record has no key; its value is ``ApiMessageAndVersion`` as ``RemoteLogMetadataSerde``
frames it (``BytesApiMessageSerde`` over ``AbstractApiMessageSerde``): an unsigned varint frame version
(1), an unsigned varint api key, an unsigned varint version, then the message, flexible from version 0
(compact strings, tagged fields). The messages are
``storage/src/main/resources/message/*.json``:

* 0 ``RemoteLogSegmentMetadataRecord``: a segment upload begins (``COPY_SEGMENT_STARTED``) with its
  offset range, size, leader epochs, the topic id and partition;
* 1 ``RemoteLogSegmentMetadataUpdateRecord``: the segment's state moves on
  (``COPY_SEGMENT_FINISHED``, ``DELETE_SEGMENT_STARTED``, ``DELETE_SEGMENT_FINISHED``);
* 2 ``RemotePartitionDeleteMetadataRecord``: the whole partition's remote data is being deleted
  (``DELETE_PARTITION_MARKED``/``STARTED``/``FINISHED``);
* 3 ``RemoteLogSegmentMetadataSnapshotRecord``: a segment as a metadata snapshot keeps it.

:func:`remote_metadata_text` prints a record as ``kafka-dump-log.sh --remote-log-metadata-decoder``
(``DumpLogSegments.RemoteMetadataLogMessageParser``: ``RemoteLogMetadataSerde.deserialize(..).toString``)
prints it. Pure.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from msgspec import Struct

from kafkatx.format._primitives import Buffer
from kafkatx.format.cluster_metadata import Field, decode_framed, f

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"  # TopicBasedRemoteLogMetadataManagerConfig

# RemoteLogSegmentState.id() -> name
SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED", 2: "DELETE_SEGMENT_STARTED",
                  3: "DELETE_SEGMENT_FINISHED"}
# RemotePartitionDeleteState.id() -> name
PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED", 2: "DELETE_PARTITION_FINISHED"}

_TOPIC_ID_PARTITION = [f("name", "string"), f("id", "uuid"), f("partition", "int32")]
_SEGMENT_ID = [f("topicIdPartition", ("{}", _TOPIC_ID_PARTITION)), f("id", "uuid")]
_LEADER_EPOCH = [f("leaderEpoch", "int32"), f("offset", "int64")]

# api key -> (message name, highest known version, fields)
SCHEMAS: dict[int, tuple[str, int, list[Field]]] = {
    0: ("RemoteLogSegmentMetadataRecord", 0, [
        f("remoteLogSegmentId", ("{}", _SEGMENT_ID)), f("startOffset", "int64"), f("endOffset", "int64"),
        f("brokerId", "int32"), f("maxTimestampMs", "int64"), f("eventTimestampMs", "int64"),
        f("segmentLeaderEpochs", ("[]", _LEADER_EPOCH)), f("segmentSizeInBytes", "int32"),
        f("customMetadata", "bytes", nullable=0), f("remoteLogSegmentState", "int8")]),
    1: ("RemoteLogSegmentMetadataUpdateRecord", 0, [
        f("remoteLogSegmentId", ("{}", _SEGMENT_ID)), f("brokerId", "int32"), f("eventTimestampMs", "int64"),
        f("customMetadata", "bytes", nullable=0), f("remoteLogSegmentState", "int8")]),
    2: ("RemotePartitionDeleteMetadataRecord", 0, [
        f("topicIdPartition", ("{}", _TOPIC_ID_PARTITION)), f("brokerId", "int32"), f("eventTimestampMs", "int64"),
        f("remotePartitionDeleteState", "int8")]),
    3: ("RemoteLogSegmentMetadataSnapshotRecord", 0, [
        f("segmentId", "uuid"), f("startOffset", "int64"), f("endOffset", "int64"), f("brokerId", "int32"),
        f("maxTimestampMs", "int64"), f("eventTimestampMs", "int64"),
        f("segmentLeaderEpochs", ("[]", _LEADER_EPOCH)), f("segmentSizeInBytes", "int32"),
        f("customMetadata", "bytes", nullable=0), f("remoteLogSegmentState", "int8")]),
}


class RemoteLogMetadataRecord(Struct, frozen=True):
    """One decoded record: the message name, its api key and version, the fields (camelCase)."""

    type: str
    api_key: int
    version: int
    data: dict[str, Any]

    @property
    def state(self) -> str | None:
        """The segment (or partition delete) state's name; None for an id Kafka does not know."""
        if self.api_key == 2:
            return PARTITION_DELETE_STATES.get(self.data["remotePartitionDeleteState"])
        return SEGMENT_STATES.get(self.data["remoteLogSegmentState"])

    @property
    def topic_partition(self) -> tuple[str, int] | None:
        """(topic, partition) the record is about (None for a snapshot record, which names only its segment)."""
        tip = (self.data["topicIdPartition"] if self.api_key == 2 else
               self.data["remoteLogSegmentId"]["topicIdPartition"] if self.api_key in (0, 1) else None)
        return None if tip is None else (tip["name"], tip["partition"])

    @property
    def segment_id(self) -> str | None:
        if self.api_key in (0, 1):
            return str(self.data["remoteLogSegmentId"]["id"])
        return str(self.data["segmentId"]) if self.api_key == 3 else None


def decode_remote_log_metadata(value: Buffer) -> RemoteLogMetadataRecord:
    """One ``__remote_log_metadata`` record value (``RemoteLogMetadataSerde.deserialize``)."""
    name, api_key, version, data, _read_as = decode_framed(value, SCHEMAS, "remote log metadata record")
    return RemoteLogMetadataRecord(type=name, api_key=api_key, version=version, data=data)


# ---------------------------------------------------------------- toString, as kafka-dump-log.sh prints it


def _tip_text(tip: Mapping[str, Any]) -> str:
    """``TopicIdPartition.toString``: ``<topic id>:<topic>-<partition>``."""
    return f"{tip['id']}:{tip['name']}-{tip['partition']}"


def _segment_id_text(sid: Mapping[str, Any]) -> str:
    """``RemoteLogSegmentId.toString``."""
    return f"RemoteLogSegmentId{{topicIdPartition={_tip_text(sid['topicIdPartition'])}, id={sid['id']}}}"


def _custom_text(b64: str | None) -> str:
    """``Optional<CustomMetadata>.toString``: ``Optional.empty`` or ``Optional[CustomMetadata{N bytes}]``."""
    if b64 is None:
        return "Optional.empty"
    return f"Optional[CustomMetadata{{{len(base64.b64decode(b64))} bytes}}]"


def _epochs_text(entries: list[dict[str, Any]]) -> str:
    """The leader epochs as the ``TreeMap`` of ``RemoteLogSegmentMetadata`` prints them (``{0=0, 1=30}``);
    a repeated epoch keeps its last offset (``HashMap.put`` in the transform)."""
    epochs: dict[int, int] = {}
    for e in entries:
        epochs[e["leaderEpoch"]] = e["offset"]
    return "{" + ", ".join(f"{k}={epochs[k]}" for k in sorted(epochs)) + "}"


def _invalid(rec: RemoteLogMetadataRecord) -> str | None:
    """The exception message of the constructor that refuses ``rec`` (``RemoteLogSegmentMetadata``,
    ``RemoteLogSegmentMetadataUpdate``, ``RemotePartitionDeleteMetadata``, ``RemoteLogSegmentMetadataSnapshot``),
    or None."""
    d = rec.data
    if rec.state is None:
        return "state can not be null"
    if rec.api_key in (0, 3):
        if d["startOffset"] < 0:
            return (f"Unexpected start offset = {d['startOffset']}. StartOffset for a remote segment cannot be "
                    f"negative")
        if d["endOffset"] < d["startOffset"]:
            return (f"Unexpected end offset = {d['endOffset']}. EndOffset for a remote segment cannot be less than "
                    f"startOffset = {d['startOffset']}")
        if not d["segmentLeaderEpochs"]:
            return "segmentLeaderEpochs can not be null or empty"
    return None


def remote_metadata_text(rec: RemoteLogMetadataRecord) -> str:
    """``RemoteLogMetadataSerde.deserialize(value).toString()``: the text after ``payload:``.

    Raises ValueError with the message Kafka's constructor throws for a record it refuses
    (``kafka-dump-log.sh`` then prints ``Error at offset N, skipping. <message>``)."""
    why = _invalid(rec)
    if why is not None:
        raise ValueError(why)
    d = rec.data
    if rec.api_key == 0:
        return ("RemoteLogSegmentMetadata{"
                f"remoteLogSegmentId={_segment_id_text(d['remoteLogSegmentId'])}, startOffset={d['startOffset']}, "
                f"endOffset={d['endOffset']}, brokerId={d['brokerId']}, maxTimestampMs={d['maxTimestampMs']}, "
                f"eventTimestampMs={d['eventTimestampMs']}, segmentLeaderEpochs={_epochs_text(d['segmentLeaderEpochs'])}, "
                f"segmentSizeInBytes={d['segmentSizeInBytes']}, customMetadata={_custom_text(d['customMetadata'])}, "
                f"state={rec.state}}}")
    if rec.api_key == 1:
        return ("RemoteLogSegmentMetadataUpdate{"
                f"remoteLogSegmentId={_segment_id_text(d['remoteLogSegmentId'])}, "
                f"customMetadata={_custom_text(d['customMetadata'])}, state={rec.state}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    if rec.api_key == 2:
        return ("RemotePartitionDeleteMetadata{"
                f"topicPartition={_tip_text(d['topicIdPartition'])}, state={rec.state}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    return ("RemoteLogSegmentMetadataSnapshot{"
            f"segmentId={d['segmentId']}, startOffset={d['startOffset']}, endOffset={d['endOffset']}, "
            f"maxTimestampMs={d['maxTimestampMs']}, segmentLeaderEpochs={_epochs_text(d['segmentLeaderEpochs'])}, "
            f"segmentSizeInBytes={d['segmentSizeInBytes']}, customMetadata={_custom_text(d['customMetadata'])}, "
            f"state={rec.state}}}")


__all__ = ["PARTITION_DELETE_STATES", "REMOTE_LOG_METADATA_TOPIC", "SCHEMAS", "SEGMENT_STATES",
           "RemoteLogMetadataRecord", "decode_remote_log_metadata", "remote_metadata_text"]
