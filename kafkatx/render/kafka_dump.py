"""The text layout of Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``), line by line.

Operators grep and diff this output against what the Java tool prints, so the
wording is Kafka's, taken from core/src/main/scala/kafka/tools/DumpLogSegments.scala
(3.x; tools/src/main/java/org/apache/kafka/tools/DumpLogSegments.java in 4.x):
``printBatchLevel``, the record loop of ``dumpLog``, ``dumpIndex``,
``dumpTimeIndex``, ``dumpProducerIdSnapshot``, ``dumpTxnIndex`` and the
``TransactionLog.formatRecordKeyAndValue`` / offsets message parsers.
Only wording lives here; the values come from ``kafkatx.format`` results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkatx.errors import DecodeError
from kafkatx.format import compiled, record_batch
from kafkatx.format.compression import decompress_in_place
from kafkatx.format.offset_index import OffsetIndexEntry
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.format.record_batch import decrement_sequence, increment_sequence
from kafkatx.format.time_index import TimeIndexEntry
from kafkatx.format.txn_index import AbortedTxn
from kafkatx.render.formats import Rendered, json_line, to_plain

RECORD_INDENT = "|"  # DumpLogSegments.RecordIndent


def _bool(value: bool) -> str:
    return "true" if value else "false"


def timestamp_type_name(header: Any) -> str:
    """``TimestampType.toString``: CreateTime, LogAppendTime, or NoTimestampType for magic 0."""
    if header.magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if int(header.timestamp_type) == 1 else "CreateTime"


def record_sequence(header: Any, offset: int) -> int:
    """``DefaultRecord.readFrom``'s sequence: NO_SEQUENCE (-1) when the batch's base sequence is negative
    (-1, or a crafted one below it), else ``incrementSequence(baseSequence, offsetDelta)``."""
    if header.base_sequence < 0:
        return -1
    return increment_sequence(header.base_sequence, offset - header.base_offset)


def dumping_line(path: Any) -> str:
    return f"Dumping {path}"


def log_start_line(base_offset: int) -> str:
    return f"Log starting offset: {base_offset}"


def batch_line(header: Any, crc_valid: bool | None, position: int | None = None) -> str:
    """``printBatchLevel``. ``crc_valid`` None (``--no-verify-crc``) prints ``isvalid: unchecked``."""
    pos = header.position if position is None else position
    if header.magic >= 2:
        horizon = f"OptionalLong[{header.base_timestamp}]" if header.has_delete_horizon else "OptionalLong.empty"
        head = (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.records_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                f"producerEpoch: {header.producer_epoch} partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
                f"deleteHorizonMs: {horizon}")
    else:
        head = f"offset: {header.last_offset}"
    valid = "unchecked" if crc_valid is None else _bool(crc_valid)
    return (f"{head} position: {pos} {timestamp_type_name(header)}: {header.max_timestamp} "
            f"size: {header.size} magic: {header.magic} compresscodec: {header.compression.name.lower()} "
            f"crc: {header.crc} isvalid: {valid}")


def record_line(header: Any, record: Any, *, control: Any = None, key_text: str | None = None,
                payload_text: str | None = None) -> str:
    """One ``| offset: ...`` line; ``key_text``/``payload_text`` are printed when not None (``--print-data``)."""
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    parts = [f"{RECORD_INDENT} offset: {record.offset} {timestamp_type_name(header)}: {record.timestamp} "
             f"keySize: {key_size} valueSize: {value_size}"]
    if header.magic >= 2:
        keys = ",".join(k for k, _ in record.headers)
        parts.append(f" sequence: {record_sequence(header, record.offset)} headerKeys: [{keys}]")
    if header.is_control and control is not None:
        if control.is_end_txn:
            parts.append(f" endTxnMarker: {control.type_name} coordinatorEpoch: {control.coordinator_epoch}")
        else:
            parts.append(f" controlType: {control.type_name}({control.type_id})")
    if not header.is_control:
        if key_text is not None:
            parts.append(f" key: {key_text}")
        if payload_text is not None:
            parts.append(f" payload: {payload_text}")
    return "".join(parts)


def trailing_bytes_line(count: int, file_name: str) -> str:
    return f"Found {count} invalid bytes at the end of {file_name}"


def offset_index_line(entry: OffsetIndexEntry) -> str:
    return f"offset: {entry.offset} position: {entry.position}"


def time_index_line(entry: TimeIndexEntry) -> str:
    return f"timestamp: {entry.timestamp} offset: {entry.offset}"


def _optional_long(value: int) -> str:
    return "OptionalLong.empty" if value < 0 else f"OptionalLong[{value}]"


def snapshot_entry_line(entry: ProducerSnapshotEntry) -> str:
    """``dumpProducerIdSnapshot``: the entry, then its batch metadata when it has one.

    ``ProducerStateManager.readSnapshot`` gives an entry batch metadata only when its stored last
    offset is >= 0; an entry whose last append was an epoch bump (a marker, no data batch) has none,
    and the line then ends after ``lastTimestamp: T `` (the trailing space is Kafka's).
    """
    head = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
            f"lastTimestamp: {entry.timestamp} ")
    if entry.last_offset < 0:
        return head
    first_seq = decrement_sequence(entry.last_sequence, entry.offset_delta)  # BatchMetadata.firstSeq
    return (f"{head}firstSequence: {first_seq} lastSequence: {entry.last_sequence} "
            f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}")


def java_string(data: bytes | None) -> str | None:
    """``StringDecoder.fromBytes``: ``new String(bytes, UTF_8)``, malformed bytes replaced by U+FFFD,
    control characters as they are (kafka-dump-log.sh's ``--print-data-log`` without a decoder)."""
    return None if data is None else bytes(data).decode("utf-8", "replace")


def index_empty_line(path: Any) -> str:
    return f"{path} is empty."


def sanity_passed_line(path: Any) -> str:
    return f"{path} passed sanity check."


def index_check_lines(offset_dumps: Sequence[tuple[str, Any]], time_dumps: Sequence[tuple[str, Any]]) -> list[str]:
    """What ``DumpLogSegments.main`` prints on stderr after the last file: the offset indexes'
    ``Mismatches``, then ``TimeIndexDumpErrors.printErrors`` (timestamp mismatches, out of order
    timestamps, offsets not found). ``*_dumps``: (absolute path, ``kafkatx.checks.index_dump`` result)
    in the order the files were dumped; each map prints in its Scala hash order."""
    lines: list[str] = []
    by_path = dict(offset_dumps)
    puts = [p for p, d in offset_dumps for _ in d.mismatches]
    for path in scala_hash_map_order(puts):
        lines.append(f"Mismatches in :{path}")
        lines += [f"  Index offset: {i}, log offset: {o}" for i, o in by_path[path].mismatches]
    times = dict(time_dumps)

    def each(attr: str) -> list[str]:
        return scala_hash_map_order([p for p, d in time_dumps if getattr(d, attr)])

    for path in each("mismatches"):
        lines.append(f"Found timestamp mismatch in :{path}")
        lines += [f"  Index timestamp: {i}, log timestamp: {o}" for i, o in times[path].mismatches]
    for path in each("out_of_order"):
        lines.append(f"Found out of order timestamp in :{path}")
        lines += [f"  Index timestamp: {i}, Previously indexed timestamp: {o}" for i, o in times[path].out_of_order]
    for path in each("not_found"):
        lines.append("The following indexed offsets are not found in the log.")
        lines += [f"Indexed offset: {i}, found log offset: {o}" for i, o in times[path].not_found]
    return lines


def non_consecutive_lines(log_gaps: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> list[str]:
    """``DumpLogSegments.main``'s last stderr lines: each ``.log`` whose records' offsets have gaps
    (``nonConsecutivePairsForLogFilesMap``; ``log_gaps``: (absolute path, pairs newest first))."""
    gaps = dict(log_gaps)
    lines: list[str] = []
    for path in scala_hash_map_order([p for p, pairs in log_gaps for _ in pairs]):
        lines.append(f"Non-consecutive offsets in {path}")
        lines += [f"  {first} is followed by {second}" for first, second in gaps[path]]
    return lines


def corrupt_snapshot_line(stored: int, computed: int) -> str:
    """``ProducerStateManager.readSnapshot``'s ``CorruptSnapshotException`` message (a bad CRC)."""
    return f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}"


def aborted_txn_line(txn: AbortedTxn) -> str:
    return (f"version: {txn.version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}")


def txn_log_key_text(key: Any) -> str:
    """``TransactionLog.formatRecordKeyAndValue`` key."""
    return f"transaction_metadata::transactionalId={key.transactional_id}"


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def scala_hash_set_order(partitions: Sequence[tuple[str, Sequence[int]]]) -> list[tuple[str, int]]:
    """The order Kafka 3.x prints a transaction's partitions in: ``TransactionMetadata.topicPartitions``.

    ``TransactionLog.readTxnRecordValue`` adds each topic's partitions (an immutable Set) to a Scala
    2.13 ``mutable.HashSet[TopicPartition]`` with ``addPartitions`` (``++=``), and
    ``formatRecordKeyAndValue`` prints it with ``mkString``: iteration order of that hash table.
    The table (``scala.collection.mutable.HashSet``: 16 buckets, load factor 0.75) keeps a bucket's
    nodes sorted by their improved hash (``h ^ (h >>> 16)`` of ``TopicPartition.hashCode`` =
    ``31 * (31 + partition) + topic.hashCode``), and iterates the buckets in index order. The table
    size follows ``addAll``: ``sizeHint(n)`` for each topic's set, then, for sets of up to 4
    (``Set1``..``Set4``, added one by one with ``add``), doubling when ``size + 1`` reaches the
    threshold; a set of 5 or more is an ``immutable.HashSet`` whose elements go in without that check.
    """
    from kafkatx.format.txn_log import java_string_hash

    def table_size_for(capacity: int) -> int:  # HashSet.tableSizeFor
        return min((1 << (max(capacity - 1, 4).bit_length() - 1)) * 2, 1 << 30)

    length = 16
    seen: dict[tuple[str, int], int] = {}  # element -> improved hash, in insertion order
    for topic, ids in partitions:
        group = list(dict.fromkeys((topic, p) for p in ids))  # the topic's immutable Set
        hint = table_size_for(int((len(group) + 1) / 0.75))
        if hint > length:
            length = hint
        for tp in group:
            if len(group) <= 4 and len(seen) + 1 >= int(length * 0.75):
                length *= 2
            if tp not in seen:
                seen[tp] = _improve(31 * (31 + tp[1]) + java_string_hash(tp[0]))
    return _table_order(seen, length)


def _improve(hash_code: int) -> int:
    """``scala.collection.mutable.HashSet/HashMap.improveHash``: ``h ^ (h >>> 16)`` on the int hash."""
    h = _int32(hash_code)
    return _int32(h ^ ((h & 0xFFFFFFFF) >> 16))


def _table_order(hashes: dict[Any, int], length: int) -> list[Any]:
    """Iteration order of a Scala 2.13 mutable hash table of ``length`` buckets: bucket by bucket, each
    bucket's nodes by ascending (signed) hash; equal hashes keep insertion order (a stable sort)."""
    return sorted(hashes, key=lambda k: (hashes[k] & (length - 1), hashes[k]))


def scala_hash_map_order(puts: Sequence[str]) -> list[str]:
    """Key order of a Scala 2.13 ``mutable.HashMap[String, _]`` after ``put`` of each key in ``puts``
    (repeats included: ``put`` doubles the 16-bucket table when ``size + 1`` reaches 0.75 of it, even
    for a key it holds). DumpLogSegments keeps its per-file findings in such maps."""
    from kafkatx.format.txn_log import java_string_hash

    length = 16
    seen: dict[str, int] = {}
    for key in puts:
        if len(seen) + 1 >= int(length * 0.75):
            length *= 2
        if key not in seen:
            seen[key] = _improve(java_string_hash(key))
    return _table_order(seen, length)


def txn_log_value_text(value: Any) -> str:
    """``TransactionLog.formatRecordKeyAndValue`` value; a tombstone prints ``<DELETE>``."""
    if value is None:
        return "<DELETE>"
    parts = [f"{topic}-{p}" for topic, p in scala_hash_set_order(value.partitions or ())]
    return (f"producerId:{value.producer_id},producerEpoch:{value.producer_epoch},"
            f"state={value.state.kafka_name},partitions=[{','.join(parts)}],"
            f"txnLastUpdateTimestamp={value.last_update_timestamp},txnTimeoutMs={value.transaction_timeout_ms}")


def _without_version(obj: Any, encode_bytes: Any) -> dict[str, Any]:
    plain = to_plain(obj, encode_bytes=encode_bytes)
    version = plain.pop("version", None) if isinstance(plain, dict) else None
    return {"version": version, "data": plain}


# The offsets decoder (``DumpLogSegments.OffsetsMessageParser``) prints each record as the generated
# ``*JsonConverter.write(message, version)`` does: the schema's field names in camelCase, in schema
# order, only the fields the version has; bytes as base64 (Jackson's ``BinaryNode``). A group whose
# protocol type is "consumer" has each member's subscription and assignment decoded
# (``prepareGroupMetadataValue``: ``ConsumerProtocolSubscription``/``Assignment`` JSON at the version
# the bytes carry); bytes that do not decode stay base64, as Kafka's "keep the original bytes".


def _base64(data: bytes | None) -> str | None:
    import base64

    return None if data is None else base64.b64encode(data).decode("ascii")


def _topic_partitions_json(items: Sequence[tuple[str, Sequence[int]]]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partitions": list(ids)} for topic, ids in items]


def _subscription_json(data: bytes) -> Any:
    from kafkatx.format.consumer_offsets import decode_consumer_subscription

    try:
        sub = decode_consumer_subscription(data)
    except DecodeError:
        return _base64(data)
    out: dict[str, Any] = {"topics": list(sub.topics), "userData": _base64(sub.user_data)}
    if sub.version >= 1:
        out["ownedPartitions"] = _topic_partitions_json(sub.owned_partitions)
    if sub.version >= 2:
        out["generationId"] = sub.generation_id
    if sub.version >= 3:
        out["rackId"] = sub.rack_id
    return out


def _assignment_json(data: bytes) -> Any:
    from kafkatx.format.consumer_offsets import decode_consumer_assignment

    try:
        asg = decode_consumer_assignment(data)
    except DecodeError:
        return _base64(data)
    return {"assignedPartitions": _topic_partitions_json(asg.assigned_partitions),
            "userData": _base64(asg.user_data)}


def _member_json(m: Any, version: int, consumer: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"memberId": m.member_id}
    if version >= 3:
        out["groupInstanceId"] = m.group_instance_id
    out["clientId"] = m.client_id
    out["clientHost"] = m.client_host
    if version >= 1:
        out["rebalanceTimeout"] = m.rebalance_timeout
    out["sessionTimeout"] = m.session_timeout
    out["subscription"] = _subscription_json(m.subscription) if consumer else _base64(m.subscription)
    out["assignment"] = _assignment_json(m.assignment) if consumer else _base64(m.assignment)
    return out


def unknown_type_line(record_type: int, offset: int) -> str:
    """``CoordinatorRecordMessageParser.parse`` (3.x ``OffsetsMessageParser``) on a record type its serde
    does not know (``UnknownRecordTypeException``): this line in the key's place, no payload."""
    return f"Unknown record type {record_type} at offset {offset}, skipping."


def coordinator_key_text(record_type: int, data: dict[str, Any]) -> str:
    """``CoordinatorRecordMessageParser.prepareKey``: ``{"type":"<record type>","data":{...}}``."""
    return json_line({"type": str(record_type), "data": data})


def coordinator_value_text(version: int | None, data: Any) -> str:
    """``CoordinatorRecordMessageParser.prepareValue``: ``{"version":"<value version>","data":{...}}``."""
    return json_line({"version": None if version is None else str(version), "data": data})


def offsets_key_text(key: Any, encode_bytes: Any = None) -> str:
    """``OffsetsMessageParser.prepareKey``: ``{"type":"<key version>","data":{...}}``."""
    from kafkatx.format.consumer_offsets import GroupMetadataKey, GroupRecordKey, OffsetCommitKey

    if isinstance(key, OffsetCommitKey):  # (Legacy)OffsetCommitKeyJsonConverter
        data: dict[str, Any] = {"group": key.group, "topic": key.topic, "partition": key.partition}
    elif isinstance(key, GroupMetadataKey):  # GroupMetadataKeyJsonConverter
        data = {"group": key.group}
    elif isinstance(key, GroupRecordKey):  # the record's own <Name>KeyJsonConverter
        data = key.data
    else:  # a record type kafkatx does not decode: its raw bytes
        body = _without_version(key, encode_bytes)
        return coordinator_key_text(body["version"], body["data"])
    return coordinator_key_text(key.version, data)


def offsets_value_text(value: Any, encode_bytes: Any = None) -> str:
    """``OffsetsMessageParser.prepareValue``: ``{"version":"<value version>","data":{...}}``;
    a tombstone is ``<DELETE>``."""
    from kafkatx.format.consumer_offsets import (
        CONSUMER_PROTOCOL_TYPE,
        GroupMetadataValue,
        GroupRecordValue,
        OffsetCommitValue,
    )

    if value is None:
        return "<DELETE>"
    if isinstance(value, OffsetCommitValue):
        v = value.version  # OffsetCommitValueJsonConverter
        data: dict[str, Any] = {"offset": value.offset}
        if v >= 3:
            data["leaderEpoch"] = value.leader_epoch
        data["metadata"] = value.metadata
        data["commitTimestamp"] = value.commit_timestamp
        if v == 1:
            data["expireTimestamp"] = value.expire_timestamp
    elif isinstance(value, GroupMetadataValue):  # GroupMetadataValueJsonConverter + consumer protocol
        v = value.version
        data = {"protocolType": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
                "leader": value.leader}
        if v >= 2:
            data["currentStateTimestamp"] = value.current_state_timestamp
        consumer = value.protocol_type == CONSUMER_PROTOCOL_TYPE
        data["members"] = [_member_json(m, v, consumer) for m in value.members]
    elif isinstance(value, GroupRecordValue):
        v, data = value.version, value.data
    else:  # the value of a record type kafkatx does not decode
        body = _without_version(value, encode_bytes)
        return coordinator_value_text(body["version"], body["data"])
    return coordinator_value_text(v, data)


def txn_log_key_json(key: Any) -> str:
    """Kafka 4.x (KAFKA-18207) ``TransactionLogMessageParser``: ``TransactionLogKeyJsonConverter`` as
    record type 0 (``{"type":"0","data":{"transactionalId":...}}``)."""
    return coordinator_key_text(0, {"transactionalId": key.transactional_id})


def txn_log_value_json(value: Any) -> str:
    """Kafka 4.x ``TransactionLogValueJsonConverter`` at the value's version, wrapped as
    ``{"version":"1","data":{...}}``; ``<DELETE>`` for a tombstone. Schema order; the tagged fields
    (v1+: PreviousProducerId tag 0, NextProducerId tag 1, ClientTransactionVersion tag 2) only when
    they differ from their defaults (-1, -1, 0); the status as its int8 id."""
    if value is None:
        return "<DELETE>"
    v = value.version
    data: dict[str, Any] = {"producerId": value.producer_id}
    if v >= 1 and value.previous_producer_id != -1:
        data["previousProducerId"] = value.previous_producer_id
    if v >= 1 and value.next_producer_id != -1:
        data["nextProducerId"] = value.next_producer_id
    data["producerEpoch"] = value.producer_epoch
    data["transactionTimeoutMs"] = value.transaction_timeout_ms
    data["transactionStatus"] = int(value.state)
    data["transactionPartitions"] = (None if value.partitions is None else
                                     [{"topic": t, "partitionIds": list(ids)} for t, ids in value.partitions])
    data["transactionLastUpdateTimestampMs"] = value.last_update_timestamp
    data["transactionStartTimestampMs"] = value.start_timestamp
    if v >= 1 and value.client_transaction_version != 0:
        data["clientTransactionVersion"] = value.client_transaction_version
    return coordinator_value_text(v, data)


def header_keys(headers: Sequence[tuple[str, Any]]) -> list[str]:
    return [k for k, _ in headers]


# Segment bytes per render_batches call: bounds what each call returns (text: a few times this in
# bytes; jsonl: the row objects of that many bytes of batches) and the peak memory it adds. Deep
# jsonl takes smaller chunks: its record rows (~1k per 128 KB) and their JSON then stay in the CPU
# caches between building, serialising and freeing them (~10% less CPU than 1 MB chunks, measured
# in-process on the 100 MB benchmark segment).
_RENDER_BYTES = 1024 * 1024
_DEEP_ROWS_BYTES = 128 * 1024

try:  # the compiled rendering (kafkatx/render/_dump.c); its row classes are handed over on first use
    from kafkatx.render import _dump
except ImportError:  # pragma: no cover - depends on the build
    _dump = None  # type: ignore[assignment]
_dump = compiled.bind(__name__, "_dump", _dump)  # type: ignore[assignment]

# render_batches' flags (the C side's RF_* in kafkatx/render/_dump.c; tests/format/test_shared_constants.py)
RENDER_DEEP = 1
RENDER_VERIFY = 2
RENDER_BASE64 = 4
RENDER_PRINT_DATA = 8
RENDER_RAW = 16

# The bytes of a record's key, value, header key or header value that dump-segment prints at most (the
# C side's PRINT_BOUND). A longer one is printed cut there, followed by cut_suffix (its whole length):
# a record of 250 MB of zeros costs 1 MiB of output, not 500 MB of hex (docs/cli.md, "dump-segment").
PRINT_BOUND = 1 << 20


def cut_suffix(size: int) -> str:
    """What follows a key, value or header printed cut at :data:`PRINT_BOUND` bytes."""
    return f"...[{size} bytes, the first {PRINT_BOUND} shown]"

_rows_ready: bool | None = None  # jsonl: render_setup done (True), msgspec missing (False)


def _jsonl_rows(sp: Any) -> Any:
    """:mod:`kafkatx.render.rows`, its classes handed to the compiled code once; None
    without msgspec (the per-batch path then writes jsonl with orjson)."""
    global _rows_ready
    if _rows_ready is False:
        return None
    try:
        from kafkatx.render import rows as jsonl_rows
    except ImportError:  # pragma: no cover - a declared dependency
        _rows_ready = False
        return None
    if not _rows_ready:
        try:
            sp.render_setup(jsonl_rows.BatchRow, jsonl_rows.RecordRow, jsonl_rows.HeaderRow, jsonl_rows.UNSET)
        except TypeError:  # a msgspec whose Structs are laid out otherwise: the per-batch path
            _rows_ready = False
            return None
        _rows_ready = True
    return jsonl_rows


def render_batches(buf: Any, pos: int, end: int, *, fmt: str, deep: bool, print_data: bool, verify_crc: bool,
                   base64: bool, start_offset: int | None, end_offset: int | None, raw: bool = False,
                   ) -> tuple[Rendered | None, int, bool] | None:
    """dump-segment's rows for the clean magic-2 batches from ``pos``, rendered through compiled code.

    ``(rendered or None, position reached, end_offset reached)``: the batches from ``pos`` that
    ``dump-segment`` would show without a finding (framed, CRC matching when checked, a plain
    control record, deep: records that decompress and decode), up to about 1 MB of them (128 KB
    for deep jsonl), rendered as ``fmt`` exactly as ``kafkatx.render.dump`` renders them one by one: ``text`` lines written by
    the compiled code, ``jsonl`` rows built by it as :mod:`kafkatx.render.rows` objects and
    serialised by msgspec (one call per chunk); batches before ``start_offset`` are passed over.
    The caller takes the batch at the position reached (if it is not ``end``) the slow way. None:
    no compiled code (``KAFKATX_PURE_PYTHON``, no C compiler), no msgspec, or a buffer it does
    not read; the caller renders everything itself. ``raw`` (text, ``--files``): keys and values as
    :func:`java_string` gives them; a batch with one that is not UTF-8 is left to the caller.
    """
    sp = _dump
    if sp is None or fmt not in ("jsonl", "text") or not record_batch._direct(buf):
        return None
    text = fmt == "text"
    rows_mod = None if text else _jsonl_rows(sp)
    if not text and rows_mod is None:
        return None
    flags = ((RENDER_DEEP if deep else 0) | (RENDER_VERIFY if verify_crc else 0) | (RENDER_BASE64 if base64 else 0)
             | (RENDER_PRINT_DATA if print_data else 0) | (RENDER_RAW if raw and text else 0))
    limit = _DEEP_ROWS_BYTES if deep and not text else _RENDER_BYTES
    parts: list[bytes] = []  # text
    rows: list[Any] = []  # jsonl
    total = 0
    while True:
        try:
            data, reached, stop = sp.render_batches(buf, pos, end, text, flags, start_offset, end_offset,
                                                    limit - total)
        except OverflowError:  # offsets past int64: the slow way
            return None
        if isinstance(data, bytes):
            if data:
                parts.append(data)
        else:
            rows.extend(data)
        total += reached - pos
        pos = reached
        if stop or pos >= end or not deep or total >= limit:
            break
        # deep iteration stops at every compressed batch: decompress it here, render it in C
        one = _compressed_batch(sp, buf, pos, end, text, flags, verify_crc, start_offset, end_offset)
        if one is None:
            break
        if text:
            parts.append(one[0])
        else:
            rows.append(one[0])
        total += one[1] - pos
        pos = one[1]
    if text:
        return (Rendered(fmt, b"".join(parts)) if parts else None), pos, stop
    # jsonl: the chunk's rows serialised by msgspec in one call
    return (Rendered(fmt, rows_mod.encode_lines(rows)) if rows and rows_mod else None), pos, stop


def _compressed_batch(sp: Any, buf: Any, pos: int, end: int, text: bool, flags: int, verify_crc: bool,
                      start_offset: int | None, end_offset: int | None) -> tuple[Any, int] | None:
    """The compressed data batch at ``pos`` rendered (as ``iter_records`` would decompress it):
    its text lines (bytes) or jsonl row object, and the position after it; None when the
    per-batch path must take it (not such a batch, outside the offsets, a finding to report:
    CRC, decompression, records)."""
    try:
        header = record_batch.read_batch_header(buf, pos, end)
    except DecodeError:
        return None
    codec = header.attributes & record_batch.COMPRESSION_CODEC_MASK
    if (header.magic != 2 or header.is_control or not 1 <= codec <= 4
            or (start_offset is not None and header.last_offset < start_offset)
            or (end_offset is not None and header.base_offset > end_offset)
            or (verify_crc and not record_batch.crc_valid(buf, header))):
        return None
    try:  # decompressed once, not copied: a batch of a 250 MB record costs 250 MB here
        with memoryview(buf) as mv, mv[pos + record_batch.HEADER_SIZE:pos + header.size] as body:
            data = decompress_in_place(codec, body, limit=record_batch.DEFAULT_MAX_DECOMPRESSED)
    except DecodeError:
        return None
    try:
        out = sp.render_batch(buf, pos, data, text, flags)  # None: a record over PRINT_BOUND, among others
    finally:
        data.release()
    return None if out is None else (out, pos + header.size)
