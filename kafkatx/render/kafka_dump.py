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
from kafkatx.format import record_batch
from kafkatx.format.compression import decompress
from kafkatx.format.offset_index import OffsetIndexEntry
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.format.time_index import TimeIndexEntry
from kafkatx.format.txn_index import AbortedTxn
from kafkatx.render.formats import Rendered, json_line, to_plain

INT_MAX = 2**31 - 1
RECORD_INDENT = "|"  # DumpLogSegments.RecordIndent


def _bool(value: bool) -> str:
    return "true" if value else "false"


def timestamp_type_name(header: Any) -> str:
    """``TimestampType.toString``: CreateTime, LogAppendTime, or NoTimestampType for magic 0."""
    if header.magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if int(header.timestamp_type) == 1 else "CreateTime"


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap from Integer.MAX_VALUE to 0."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence`` (the inverse wrap)."""
    if sequence < decrement:
        return INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


def record_sequence(header: Any, offset: int) -> int:
    """``DefaultRecord.sequence``: -1 without a base sequence, else base + offset delta (wrapping)."""
    if header.base_sequence == -1:
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
    """``dumpProducerIdSnapshot``: the entry, then its (single) batch metadata."""
    first_seq = decrement_sequence(entry.last_sequence, entry.offset_delta) if entry.last_sequence >= 0 else -1
    return (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
            f"lastTimestamp: {entry.timestamp} "
            f"firstSequence: {first_seq} lastSequence: {entry.last_sequence} "
            f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}")


def aborted_txn_line(txn: AbortedTxn) -> str:
    return (f"version: {txn.version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}")


def txn_log_key_text(key: Any) -> str:
    """``TransactionLog.formatRecordKeyAndValue`` key."""
    return f"transaction_metadata::transactionalId={key.transactional_id}"


def txn_log_value_text(value: Any) -> str:
    """``TransactionLog.formatRecordKeyAndValue`` value; a tombstone prints ``<DELETE>``."""
    if value is None:
        return "<DELETE>"
    parts = sorted(f"{topic}-{p}" for topic, ps in (value.partitions or ()) for p in ps)
    return (f"producerId:{value.producer_id},producerEpoch:{value.producer_epoch},"
            f"state={value.state.kafka_name},partitions=[{','.join(parts)}],"
            f"txnLastUpdateTimestamp={value.last_update_timestamp},txnTimeoutMs={value.transaction_timeout_ms}")


def _without_version(obj: Any, encode_bytes: Any) -> dict[str, Any]:
    plain = to_plain(obj, encode_bytes=encode_bytes)
    version = plain.pop("version", None) if isinstance(plain, dict) else None
    return {"version": version, "data": plain}


def offsets_key_text(key: Any, encode_bytes: Any = None) -> str:
    """Like Kafka 3.x's ``OffsetsMessageParser``: ``{"type":"<key version>","data":{...}}`` (snake_case names)."""
    body = _without_version(key, encode_bytes)
    return json_line({"type": str(body["version"]), "data": body["data"]})


def offsets_value_text(value: Any, encode_bytes: Any = None) -> str:
    if value is None:
        return "<DELETE>"
    body = _without_version(value, encode_bytes)
    version = body["version"]
    return json_line({"version": None if version is None else str(version), "data": body["data"]})


def header_keys(headers: Sequence[tuple[str, Any]]) -> list[str]:
    return [k for k, _ in headers]


# Segment bytes per render_batches call: bounds what each call returns (text: a few times this in
# bytes; jsonl: the row objects of that many bytes of batches) and the peak memory it adds. Deep
# jsonl takes smaller chunks: its record rows (~1k per 128 KB) and their JSON then stay in the CPU
# caches between building, serialising and freeing them (~10% less CPU than 1 MB chunks, measured
# in-process on the 100 MB benchmark segment).
_RENDER_BYTES = 1024 * 1024
_DEEP_ROWS_BYTES = 128 * 1024

_rows_ready: bool | None = None  # jsonl: render_setup done (True), msgspec missing (False)


def _jsonl_rows(sp: Any) -> Any:
    """:mod:`kafkatx.render.jsonl_rows`, its classes handed to the compiled code once; None
    without msgspec (the per-batch path then writes jsonl with orjson)."""
    global _rows_ready
    if _rows_ready is False:
        return None
    try:
        from kafkatx.render import jsonl_rows
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
                   base64: bool, start_offset: int | None, end_offset: int | None,
                   ) -> tuple[Rendered | None, int, bool] | None:
    """dump-segment's rows for the clean magic-2 batches from ``pos``, rendered through compiled code.

    ``(rendered or None, position reached, end_offset reached)``: the batches from ``pos`` that
    ``dump-segment`` would show without a finding (framed, CRC matching when checked, a plain
    control record, deep: records that decompress and decode), up to about 1 MB of them (128 KB
    for deep jsonl), rendered as ``fmt`` exactly as ``kafkatx.cli.dump`` renders them one by one: ``text`` lines written by
    the compiled code, ``jsonl`` rows built by it as :mod:`kafkatx.render.jsonl_rows` objects and
    serialised by msgspec (one call per chunk); batches before ``start_offset`` are passed over.
    The caller takes the batch at the position reached (if it is not ``end``) the slow way. None:
    no compiled code (``KAFKATX_PURE_PYTHON``, no C compiler), no msgspec, or a buffer it does
    not read; the caller renders everything itself.
    """
    sp = record_batch._speedups
    if sp is None or fmt not in ("jsonl", "text") or not record_batch._direct(buf):
        return None
    text = fmt == "text"
    rows_mod = None if text else _jsonl_rows(sp)
    if not text and rows_mod is None:
        return None
    flags = (1 if deep else 0) | (2 if verify_crc else 0) | (4 if base64 else 0) | (8 if print_data else 0)
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
    codec = header.attributes & 0x07
    if (header.magic != 2 or header.is_control or not 1 <= codec <= 4
            or (start_offset is not None and header.last_offset < start_offset)
            or (end_offset is not None and header.base_offset > end_offset)
            or (verify_crc and not record_batch.crc_valid(buf, header))):
        return None
    try:
        with memoryview(buf) as mv, mv[pos + record_batch.HEADER_SIZE:pos + header.size] as body:
            data = decompress(codec, body, limit=record_batch.DEFAULT_MAX_DECOMPRESSED)
    except DecodeError:
        return None
    out = sp.render_batch(buf, pos, data, text, flags)
    return None if out is None else (out, pos + header.size)
