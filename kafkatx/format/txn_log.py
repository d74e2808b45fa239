"""``__transaction_state`` records: the transaction coordinator's log.

Kafka schemas (Kafka 4: ``transaction-coordinator/src/main/resources/common/message/``,
3.x: ``core/src/main/resources/common/message/``; written by
``TransactionLog.keyToBytes`` / ``valueToBytes``). Every key and value starts
with an int16 schema version, followed by the generated message at that version::

    key:   version int16 (0)
           TransactionalId          string            (int16 length, UTF-8)

    value: version int16 (0 or 1; 1 is flexible, KIP-915)
           ProducerId               int64
           ProducerEpoch            int16
           TransactionTimeoutMs     int32
           TransactionStatus        int8              (TxnState below)
           TransactionPartitions    nullable []       v0: int32 count, -1 = null
                                                      v1: uvarint count+1, 0 = null
             Topic                  string            v0: int16 len; v1: uvarint len+1
             PartitionIds           []int32           v0: int32 count; v1: uvarint count+1
             (v1: tagged fields)
           TransactionLastUpdateTimestampMs  int64
           TransactionStartTimestampMs       int64
           (v1: tagged fields)
             tag 0 PreviousProducerId       int64  default -1
             tag 1 NextProducerId           int64  default -1
             tag 2 ClientTransactionVersion int16  default 0
             tag 3 NextProducerEpoch        int16  default -1  (newer Kafka, KIP-939)

A null value is a tombstone: the transactional id expired
(``TransactionStateManager`` writes it when removing the id).

Tagged fields are only written when they differ from their default, in
ascending tag order; unknown tags (from a newer broker) are kept raw in
``unknown_tags`` and written back in tag order, which is how Kafka's
``RawTaggedFieldWriter`` interleaves them. Unknown tags inside a partitions
element are skipped (the tuple model has nowhere to keep them).
Bytes left over after the value are an error (:class:`DecodeError`): Kafka's
serializer never writes them.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

from msgspec import Struct

from kafkatx.errors import DecodeError, UnknownVersion
from kafkatx.format import compiled
from kafkatx.format._primitives import Buffer, Reader, Writer, decode_fixed_tag, reading

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")

try:  # the compiled decoder of the usual records (kafkatx/format/_txn_log.c)
    from kafkatx.format import _txn_log
except ImportError:  # pragma: no cover - depends on the build
    _txn_log = None  # type: ignore[assignment]
_txn_log = compiled.bind(__name__, "_txn_log", _txn_log)  # type: ignore[assignment]

KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_NEXT_PRODUCER_EPOCH = 3


class TxnState(IntEnum):
    """``TransactionState`` ids as stored in TransactionStatus (``TransactionState.java``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's state name: ``PrepareCommit`` etc."""
        return _KAFKA_NAMES[self]


# Kafka's spelling of each state, made once (list-txn names 200,000 states).
_KAFKA_NAMES: dict[TxnState, str] = {s: "".join(part.capitalize() for part in s.name.split("_")) for s in TxnState}


class TxnLogKey(Struct, frozen=True, kw_only=True):
    version: int
    transactional_id: str


class TxnLogValue(Struct, frozen=True, kw_only=True):
    version: int
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp: int
    start_timestamp: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1
    unknown_tags: tuple[tuple[int, bytes], ...] = ()


# --------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------


def decode_txn_log_key(data: Buffer) -> TxnLogKey:
    with reading(data, "transaction log key") as r:
        return _decode_key(r)


def _decode_key(r: Reader) -> TxnLogKey:
    version = r.i16("key version")
    if version != KEY_VERSION:
        raise UnknownVersion(f"transaction log key: unknown key version {version}", position=0)
    tid = r.string("transactional id")
    assert tid is not None
    r.expect_end()
    return TxnLogKey(version=version, transactional_id=tid)


def _read_partition(r: Reader, flexible: bool) -> tuple[str, tuple[int, ...]]:
    if flexible:
        topic = r.compact_string("topic")
        count = r.compact_array_count("partition ids", 4)
    else:
        topic = r.string("topic")
        count = r.array_count("partition ids", 4)
    assert topic is not None and count is not None
    ids = tuple(r.i32("partition id") for _ in range(count))
    if flexible:
        r.tagged_fields("partition tagged fields")  # nothing known here: skipped
    return topic, ids


def decode_txn_log_value(data: Buffer | None) -> TxnLogValue | None:
    """Decode a value; ``None`` (a tombstone) decodes to ``None``."""
    if data is None:
        return None
    with reading(data, "transaction log value") as r:
        return _decode_value(r)


def _decode_value(r: Reader) -> TxnLogValue:
    what = r.what
    version = r.i16("value version")
    if version not in VALUE_VERSIONS:
        raise UnknownVersion(f"{what}: unknown value version {version}", position=0)
    flexible = version >= 1
    producer_id = r.i64("producer id")
    producer_epoch = r.i16("producer epoch")
    timeout = r.i32("transaction timeout")
    state_at = r.pos
    status = r.i8("transaction status")
    try:
        state = TxnState(status)
    except ValueError as err:
        raise DecodeError(f"{what}: unknown transaction state {status}", position=state_at) from err
    # min element size: v0 topic len 2 + count 4; v1 1 + 1 + 1
    parts = r.array(lambda rr: _read_partition(rr, flexible), "transaction partitions",
                    3 if flexible else 6, flexible=flexible, nullable=True)
    last_update = r.i64("last update timestamp")
    start = r.i64("start timestamp")
    extra: dict[str, int] = {}
    unknown: list[tuple[int, bytes]] = []
    if flexible:
        for tag, at, raw in r.tagged_fields():
            if tag == TAG_PREVIOUS_PRODUCER_ID:
                extra["previous_producer_id"] = decode_fixed_tag(raw, _I64, tag, what, at)
            elif tag == TAG_NEXT_PRODUCER_ID:
                extra["next_producer_id"] = decode_fixed_tag(raw, _I64, tag, what, at)
            elif tag == TAG_CLIENT_TRANSACTION_VERSION:
                extra["client_transaction_version"] = decode_fixed_tag(raw, _I16, tag, what, at)
            elif tag == TAG_NEXT_PRODUCER_EPOCH and len(raw) == _I16.size:
                # Not in Kafka's TransactionLogValue.json (tags 0-2); formats.md names it. Any
                # other shape of tag 3 is kept raw like every unknown tag.
                extra["next_producer_epoch"] = decode_fixed_tag(raw, _I16, tag, what, at)
            else:
                unknown.append((tag, raw))
    r.expect_end()
    return TxnLogValue(
        version=version,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout,
        state=state,
        partitions=None if parts is None else tuple(parts),
        last_update_timestamp=last_update,
        start_timestamp=start,
        unknown_tags=tuple(unknown),
        **extra,
    )


# The value as a plain tuple (the coordinator replay's per-record form: no object per record):
# (version, producer_id, producer_epoch, transaction_timeout_ms, state (int), partitions,
#  last_update_timestamp, start_timestamp, previous_producer_id, next_producer_id,
#  client_transaction_version, next_producer_epoch). Unknown tags are not carried.
TxnLogFields = tuple[int, int, int, int, int, "tuple[tuple[str, tuple[int, ...]], ...] | None", int, int, int, int,
                     int, int]
# Positions in that tuple (Final: a checker reads f[F_STATE] as the int it is).
F_PRODUCER_ID: Final = 1
F_PRODUCER_EPOCH: Final = 2
F_TIMEOUT_MS: Final = 3
F_STATE: Final = 4
F_PARTITIONS: Final = 5
F_LAST_UPDATE_TIMESTAMP: Final = 6
F_START_TIMESTAMP: Final = 7
F_PREVIOUS_PRODUCER_ID: Final = 8
F_NEXT_PRODUCER_ID: Final = 9
F_CLIENT_TRANSACTION_VERSION: Final = 10
F_NEXT_PRODUCER_EPOCH: Final = 11


def value_fields(value: TxnLogValue) -> TxnLogFields:
    return (value.version, value.producer_id, value.producer_epoch, value.transaction_timeout_ms, int(value.state),
            value.partitions, value.last_update_timestamp, value.start_timestamp, value.previous_producer_id,
            value.next_producer_id, value.client_transaction_version, value.next_producer_epoch)


def decode_txn_log_fields(key: Buffer, value: Buffer | None) -> tuple[str, TxnLogFields | None]:
    """``(transactional id, value_fields(decode_txn_log_value(value)) or None)``.

    The compiled ``_txn_log.txn_log_decode`` (kafkatx/format/_txn_log.c) decodes the usual records; whatever it leaves
    (``None``: bad bytes, unknown tags) goes through the Python decoders above, which raise the
    :class:`DecodeError` with its position. ``KAFKATX_PURE_PYTHON=1``: Python only.
    """
    sp = _txn_log
    if sp is not None:
        got = sp.txn_log_decode(key, value)
        if got is not None:
            return got
    tid = decode_txn_log_key(key).transactional_id
    v = decode_txn_log_value(value)
    return tid, None if v is None else value_fields(v)


# --------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------


def encode_txn_log_key(transactional_id: str) -> bytes:
    w = Writer()
    w.i16(KEY_VERSION)
    w.string(transactional_id, flexible=False, field="transactional id")
    return w.getvalue()


def encode_txn_log_value(value: TxnLogValue) -> bytes:
    """Byte-exact with Kafka's generated ``TransactionLogValue.write`` at ``value.version``."""
    if value.version not in VALUE_VERSIONS:
        raise ValueError(f"cannot encode transaction log value version {value.version}")
    flexible = value.version >= 1
    tags: list[tuple[int, bytes]] = []
    if value.previous_producer_id != -1:
        tags.append((TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tags.append((TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
    if value.next_producer_epoch != -1:
        tags.append((TAG_NEXT_PRODUCER_EPOCH, _I16.pack(value.next_producer_epoch)))
    known = {t for t, _ in tags}
    for tag, raw in value.unknown_tags:
        if tag in known:
            raise ValueError(f"unknown_tags holds known tag {tag}")
        tags.append((tag, raw))
    if tags and not flexible:
        # Kafka: "Attempted to write a non-default ... at version 0"
        raise ValueError("version 0 transaction log values cannot carry tagged fields")

    w = Writer()
    w.i16(value.version)
    w.i64(value.producer_id, "producer_id")
    w.i16(value.producer_epoch, "producer_epoch")
    w.i32(value.transaction_timeout_ms, "transaction_timeout_ms")
    w.i8(int(value.state), "state")
    if value.partitions is None:
        w.array_count(None, flexible=flexible)
    else:
        w.array_count(len(value.partitions), flexible=flexible)
        for topic, ids in value.partitions:
            w.string(topic, flexible=flexible, field="topic")
            w.array_count(len(ids), flexible=flexible)
            for pid in ids:
                w.i32(pid, "partition id")
            if flexible:
                w.tagged_fields(())
    w.i64(value.last_update_timestamp, "last_update_timestamp")
    w.i64(value.start_timestamp, "start_timestamp")
    if flexible:
        w.tagged_fields(tags)
    return w.getvalue()


# --------------------------------------------------------------------------------
# partitioning
# --------------------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32 wrap."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(transactional_id: str, partitions: int = 50) -> int:
    """The ``__transaction_state`` partition of an id (``TransactionStateManager.partitionFor``).

    ``Utils.abs`` maps Integer.MIN_VALUE to 0 (Math.abs would keep it negative).
    """
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, got {partitions}")
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
