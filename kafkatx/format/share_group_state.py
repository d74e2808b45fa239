"""``__share_group_state`` records: the share coordinator's state of each share-partition (KIP-932).

``ShareCoordinatorRecordSerde`` (share-coordinator/src/main/resources/common/message/): the key's
int16 record type, then the key and the value at its version, like every coordinator record
(:mod:`kafkatx.format.coordinator_schema`). Schemas as read in tmw090906/kafka @ dfb178a1 (apache/kafka
trunk of 2024-12-27); the record types are the ``apiKey`` 4.0 gives them::

    0 ShareSnapshot   key: GroupId string, TopicId uuid, Partition int32
                      value (flexible): SnapshotEpoch uint16, StateEpoch int32, LeaderEpoch int32,
                      StartOffset int64, StateBatches [](FirstOffset int64, LastOffset int64,
                      DeliveryState int8, DeliveryCount int16)
    1 ShareUpdate     key: as ShareSnapshot
                      value (flexible): SnapshotEpoch uint16, LeaderEpoch int32, StartOffset int64,
                      StateBatches as above
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from kafkatx.errors import UnknownVersion
from kafkatx.format._primitives import Buffer, reading
from kafkatx.format.coordinator_schema import Schema, f, key_schema, read_message, read_value

_KEY = (f("groupId", "string"), f("topicId", "uuid"), f("partition", "int32"))
_BATCHES = f("stateBatches", ("[]", [f("firstOffset", "int64"), f("lastOffset", "int64"),
                                     f("deliveryState", "int8"), f("deliveryCount", "int16")]))

SHARE_RECORDS: dict[int, tuple[Schema, Schema]] = {
    0: (key_schema("ShareSnapshotKey", *_KEY), Schema("ShareSnapshotValue", [
        f("snapshotEpoch", "uint16"), f("stateEpoch", "int32"), f("leaderEpoch", "int32"),
        f("startOffset", "int64"), _BATCHES])),
    1: (key_schema("ShareUpdateKey", *_KEY), Schema("ShareUpdateValue", [
        f("snapshotEpoch", "uint16"), f("leaderEpoch", "int32"), f("startOffset", "int64"), _BATCHES])),
}


class ShareStateKey(Struct, frozen=True, kw_only=True):
    version: int  # the record type
    name: str
    data: dict[str, Any]


class ShareStateValue(Struct, frozen=True, kw_only=True):
    version: int
    data: dict[str, Any]


class UnknownRecordType(UnknownVersion):
    """A key whose record type the serde does not know (``Deserializer.UnknownRecordTypeException``)."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"unknown record type {record_type}", position=0)
        self.record_type = record_type


def decode_share_state_key(data: Buffer) -> ShareStateKey:
    with reading(data, "share group state key") as r:
        record_type = r.i16("record type")
        schemas = SHARE_RECORDS.get(record_type)
        if schemas is None:
            raise UnknownRecordType(record_type)
        fields = read_message(r, schemas[0], 0)
        r.expect_end()
        return ShareStateKey(version=record_type, name=schemas[0].name[:-3], data=fields)


def decode_share_state_value(key: ShareStateKey, data: Buffer | None) -> ShareStateValue | None:
    """``None``: a tombstone."""
    if data is None:
        return None
    version, fields = read_value(data, SHARE_RECORDS[key.version][1])
    return ShareStateValue(version=version, data=fields)


__all__ = ["SHARE_RECORDS", "ShareStateKey", "ShareStateValue", "UnknownRecordType", "decode_share_state_key",
           "decode_share_state_value"]
