"""Control records: the one record of a control batch (attributes bit 5).

Key (``ControlRecordType.java``, schema ``ControlRecordTypeSchema``):
    version i16 (0)
    type    i16   0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3 SNAPSHOT_HEADER,
                  4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS
Value of ABORT/COMMIT (``EndTransactionMarker.java``):
    version           i16 (0)
    coordinator_epoch i32

Kafka reads a key whose version is newer than it knows anyway (it logs and
parses the type), because the type field is fixed at bytes 2-3 forever; we do
the same, and keep unknown type ids as numbers. Values of other control types
(KRaft's LeaderChangeMessage, SnapshotHeaderRecord, ...) are not needed for
transactions and are left undecoded.

https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/ControlRecordType.java
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/EndTransactionMarker.java
"""

from __future__ import annotations

import struct
from enum import IntEnum

from msgspec import Struct

from kafkatx.errors import BadLength, Truncated, UnknownVersion

__all__ = [
    "ControlType", "ControlRecord", "decode_control_key", "decode_end_txn_marker",
    "encode_control_key", "encode_end_txn_marker",
]

# key: version i16, type i16
_KEY = struct.Struct(">hh")
# EndTransactionMarker value: version i16, coordinatorEpoch i32
_END_TXN = struct.Struct(">hi")


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(Struct, frozen=True, kw_only=True):
    version: int
    type_id: int
    coordinator_epoch: int | None   # ABORT/COMMIT only

    @property
    def type_name(self) -> str:
        try:
            return ControlType(self.type_id).name
        except ValueError:
            return str(self.type_id)

    @property
    def is_end_txn(self) -> bool:
        return self.type_id in (ControlType.ABORT, ControlType.COMMIT)


def decode_control_key(key: bytes | bytearray | memoryview | None) -> tuple[int, int]:
    """``(version, type_id)`` of a control record key. Positions are relative to the key."""
    if key is None:
        raise BadLength("control record has a null key", position=0)
    if len(key) < _KEY.size:
        raise Truncated(f"control record key has {len(key)} bytes, needs {_KEY.size}", position=0)
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        # ControlRecordType.parseTypeId rejects negative versions.
        raise UnknownVersion(f"control record key version {version} is negative", position=0)
    return version, type_id


def decode_end_txn_marker(value: bytes | bytearray | memoryview | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of an ABORT/COMMIT marker value."""
    if value is None:
        raise BadLength("end transaction marker has a null value", position=0)
    if len(value) < _END_TXN.size:
        raise Truncated(f"end transaction marker value has {len(value)} bytes, needs {_END_TXN.size}",
                        position=0)
    version, epoch = _END_TXN.unpack_from(value, 0)
    if version < 0:
        raise UnknownVersion(f"end transaction marker version {version} is negative", position=0)
    return version, epoch


def encode_control_key(control_type: ControlType | int, version: int = 0) -> bytes:
    return _KEY.pack(version, int(control_type))


def encode_end_txn_marker(coordinator_epoch: int, version: int = 0) -> bytes:
    return _END_TXN.pack(version, coordinator_epoch)
