"""kafka-dump-log.sh, in Python: the rows ``dump-segment``, ``dump-index``, ``dump-snapshot`` and
``dump-txnindex`` print (the commands in :mod:`kafkatx.cli.dump` parse, call :func:`dump_files` or
one of the ``dump_*`` functions here, and render).

Rows: text output is lines (``kafka-dump-log.sh``'s, line for line, see :mod:`kafkatx.render.kafka_dump`)
and :class:`~kafkatx.render.formats.Rendered` chunks; json/jsonl/yaml/table output is the row objects of
:mod:`kafkatx.render.rows` (cli.md's keys; :func:`kafkatx.render.rows.as_plain` makes their dicts).

Findings (exit 1 for the command): a batch whose CRC does not match (unless ``verify_crc`` is off),
bytes at the end of a ``.log`` that do not form a batch, records that do not decode inside an intact
batch, a producer snapshot with a bad CRC, and index entries that ``dump_index(verify=True)`` cannot
match with the log. Each finding is one line naming the file and the byte position, said through
:class:`Notices` when it is found (so it lands on stderr beside the row it belongs to) and counted.

Trailing bytes: text mode gives Kafka's ``Found N invalid bytes at the end of FILE`` line;
json/jsonl/yaml/table a final :class:`~kafkatx.render.rows.TrailingBytesRow` after the batches.
``max_bytes`` stops reading there, and (like Kafka) a batch cut by that limit is not a finding.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from msgspec import Struct

from kafkatx.errors import DecodeError, MissingFile, Truncated, UsageError
from kafkatx.format.offset_index import OffsetIndexEntry, read_offset_index
from kafkatx.format.producer_snapshot import read_producer_snapshot
from kafkatx.format.record_batch import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    crc_valid,
    iter_batches,
    read_batch_header,
    read_control_record,
    records_in_place,
)
from kafkatx.format.time_index import TimeIndexEntry, read_time_index
from kafkatx.format.txn_index import read_txn_index
from kafkatx.render import kafka_dump as kd
from kafkatx.render.formats import to_plain
from kafkatx.render.payload import PayloadEncoding, encode_payload
from kafkatx.storage import fdio
from kafkatx.storage.partition import parse_partition_dir_name, seek_position
from kafkatx.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIMEINDEX_SUFFIX,
    TXNINDEX_SUFFIX,
    Segment,
    map_file,
    offset_from_file_name,
    open_windowed,
    was_cut,
)
from kafkatx.storage.segment import read_window as segment_read_window

__all__ = [
    "CHECKPOINT_SUFFIX", "KAFKA_VERSIONS", "NEWEST_KAFKA", "SUFFIXES", "DecoderChoice", "DumpOptions", "KafkaIndexChecks", "Notices", "check_files",
    "dump_files", "dump_index", "dump_segment", "dump_snapshot", "dump_txnindex", "read_snapshot", "suffix",
]

CHECKPOINT_SUFFIX = ".checkpoint"  # a KRaft snapshot of __cluster_metadata: record batches, like a .log
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, SNAPSHOT_SUFFIX, TXNINDEX_SUFFIX, CHECKPOINT_SUFFIX)
TXN_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"


class DecoderChoice(enum.StrEnum):
    auto = "auto"
    none = "none"
    transaction_log = "transaction-log"
    offsets = "offsets"
    cluster_metadata = "cluster-metadata"  # __cluster_metadata records (kafkatx.format.cluster_metadata)
    share_group_state = "share-group-state"  # __share_group_state records (kafkatx.format.share_group_state)
    remote_log_metadata = "remote-log-metadata"  # __remote_log_metadata records (kafkatx.format.remote_log_metadata)


# kafka-dump-log.sh releases whose output dump-segment reproduces (--kafka-version): 3.8 prints the
# transaction log as TransactionLog.formatRecordKeyAndValue's text and knows group record types 0-8;
# 4.0 on (KAFKA-18207) prints every coordinator record as CoordinatorRecordMessageParser's JSON.
KAFKA_VERSIONS = ("3.8", "4.0", "4.1", "4.2")
NEWEST_KAFKA = KAFKA_VERSIONS[-1]
SHARE_STATE_TOPIC = "__share_group_state"


class Notices(Struct):
    """What a dump says besides its rows: findings (counted, for the exit code) and notes, each one
    line handed to ``say`` as it is found (the CLI writes them to stderr)."""

    say: Callable[[str], None]
    findings: int = 0

    def finding(self, message: str) -> None:
        self.findings += 1
        self.say(f"kafkatx: {message}")


class DumpOptions(Struct, frozen=True, kw_only=True):
    """How ``.log`` / ``.checkpoint`` files are dumped (the flags of ``dump-segment``)."""

    fmt: str = "text"  # text, table, json, jsonl, yaml: text gives lines, the others row objects
    deep: bool = False  # --deep-iteration: the records too
    print_data: bool = False  # --print-data: keys and values (implies deep)
    verify_crc: bool = True
    decoder: DecoderChoice = DecoderChoice.auto
    start_offset: int | None = None
    end_offset: int | None = None
    max_bytes: int | None = None
    encoding: PayloadEncoding | str = PayloadEncoding.hex
    kafka_strings: bool = False  # --files: payloads as kafka-dump-log.sh's StringDecoder prints them
    read_window: int | None = None  # --read-window: bytes of a segment held at most on the pread path
    kafka_version: str = NEWEST_KAFKA  # --kafka-version: whose kafka-dump-log.sh text the decoders print
    # kafka-dump-log.sh's index walk (--files, --verify-index-only, --index-sanity-check): text only
    verify_index_only: bool = False
    index_sanity_check: bool = False

    @property
    def text(self) -> bool:
        return self.fmt == "text"


def suffix(path: Path) -> str:
    name = path.name
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 else ""


def check_files(files: list[Path], allowed: tuple[str, ...], command: str) -> None:
    """Usage errors (exit 2) and missing files (exit 3) before any output."""
    for path in files:
        if suffix(path) not in allowed:
            raise UsageError(f"{path}: {command} reads {', '.join(allowed)} files, not {suffix(path) or 'this file'}")
    for path in files:
        st = fdio.stat_or_none(path)
        if st is None:
            raise MissingFile(f"{path}: no such file")
        if not stat.S_ISREG(st.st_mode):
            raise MissingFile(f"{path}: not a regular file")
        if not os.access(path, os.R_OK):  # exit 3 like any unreadable input (Click's own check said 2)
            raise MissingFile(f"{path}: cannot read: permission denied")


def _ms(value: int) -> int | None:
    # Kafka's NO_TIMESTAMP is -1: absent, so null in JSON.
    return None if value < 0 else value


def _neg_null(value: int) -> int | None:
    return None if value < 0 else value


# ------------------------------------------------------------------ record decoders


def _auto_decoder(path: Path) -> DecoderChoice:
    parsed = parse_partition_dir_name(path.resolve().parent.name)
    if parsed is not None and parsed[0] == TXN_TOPIC:
        return DecoderChoice.transaction_log
    if parsed is not None and parsed[0] == OFFSETS_TOPIC:
        return DecoderChoice.offsets
    if parsed is not None and parsed[0] == "__cluster_metadata":
        return DecoderChoice.cluster_metadata
    if parsed is not None and parsed[0] == SHARE_STATE_TOPIC:
        return DecoderChoice.share_group_state
    if parsed is not None and parsed[0] == "__remote_log_metadata":
        return DecoderChoice.remote_log_metadata
    return DecoderChoice.none


Decoded = tuple[dict[str, Any] | None, str | None, str | None]  # (json "decoded", text key, text payload)


@functools.cache
def _record_decoders() -> tuple[ModuleType, ModuleType]:
    """``kafkatx.format.txn_log`` and ``kafkatx.format.consumer_offsets``, imported on the first record
    decoded (like verify below, they load only for the dumps that use them: start-up time)."""
    from kafkatx.format import consumer_offsets, txn_log

    return txn_log, consumer_offsets


def _decode_record(choice: DecoderChoice, record: Any, encode: Callable[[bytes], Any],
                   kafka_version: str = NEWEST_KAFKA) -> Decoded:
    """Decode one record's key/value with the transaction-log, offsets or share-group-state decoder,
    the text as ``kafka_version``'s kafka-dump-log.sh prints it.

    A record that does not decode is shown the way Kafka's parsers show it
    ("Error at offset N, skipping. ...", "Unknown record type N at offset X, skipping.") and is not
    a finding: the batch is intact.
    """
    if any(x is not None and len(x) > kd.PRINT_BOUND for x in (record.key, record.value)):
        msg = f"a key or value of more than {kd.PRINT_BOUND} bytes is not decoded"
        return {"error": msg}, f"Error at offset {record.offset}, skipping. {msg}", None
    if type(record.key) is memoryview or type(record.value) is memoryview:  # read in place: records_in_place
        record = dataclasses.replace(record, key=_bytes(record.key), value=_bytes(record.value))
    if choice is DecoderChoice.cluster_metadata:
        return _decode_metadata(record)
    if choice is DecoderChoice.remote_log_metadata:
        return _decode_remote_metadata(record)
    if record.key is None:
        msg = f"Error at offset {record.offset}, skipping. record has no key"
        return {"error": "record has no key"}, msg, None
    modern = kafka_version != "3.8"
    txn_log, offsets = _record_decoders()
    try:
        if choice is DecoderChoice.share_group_state:
            return _decode_share_state(record, encode)
        if choice is DecoderChoice.transaction_log:
            if modern and len(record.key) >= 2 and int.from_bytes(record.key[:2], "big", signed=True) != 0:
                # TransactionCoordinatorRecordSerde knows record type 0 only (TransactionLogKey)
                record_type = int.from_bytes(record.key[:2], "big", signed=True)
                return ({"error": f"unknown record type {record_type}"},
                        kd.unknown_type_line(record_type, record.offset), None)
            tkey = txn_log.decode_txn_log_key(record.key)
            tvalue = txn_log.decode_txn_log_value(record.value)
            plain = {"key": to_plain(tkey, encode_bytes=encode), "value": to_plain(tvalue, encode_bytes=encode)}
            if modern:
                return plain, kd.txn_log_key_json(tkey), kd.txn_log_value_json(tvalue)
            return plain, kd.txn_log_key_text(tkey), kd.txn_log_value_text(tvalue)
        okey = offsets.decode_offsets_key(record.key)
        ovalue = offsets.decode_offsets_value(okey, record.value)
        plain = {"key": to_plain(okey, encode_bytes=encode), "value": to_plain(ovalue, encode_bytes=encode)}
        known = offsets.KNOWN_TYPES_4X if modern else offsets.KNOWN_TYPES_3X
        if okey.version not in known:  # GroupCoordinatorRecordSerde of that release: UnknownRecordTypeException
            return plain, kd.unknown_type_line(okey.version, record.offset), None
        return plain, kd.offsets_key_text(okey, encode), kd.offsets_value_text(ovalue, encode)
    except DecodeError as err:
        return ({"error": str(err)}, f"Error at offset {record.offset}, skipping. {err}", None)


def _decode_share_state(record: Any, encode: Callable[[bytes], Any]) -> Decoded:
    """``ShareGroupStateMessageParser`` (4.x ``--share-group-state-decoder``)."""
    from kafkatx.format.share_group_state import (
        UnknownRecordType,
        decode_share_state_key,
        decode_share_state_value,
    )

    try:
        key = decode_share_state_key(record.key)
    except UnknownRecordType as err:
        return ({"error": str(err)}, kd.unknown_type_line(err.record_type, record.offset), None)
    value = decode_share_state_value(key, record.value)
    plain = {"key": to_plain(key, encode_bytes=encode), "value": to_plain(value, encode_bytes=encode)}
    return (plain, kd.coordinator_key_text(key.version, key.data),
            "<DELETE>" if value is None else kd.coordinator_value_text(value.version, value.data))


def _decode_metadata(record: Any) -> Decoded:
    """A ``__cluster_metadata`` record value as kafka-dump-log.sh's ``ClusterMetadataLogMessageParser``
    prints it (no key; ``payload: {"type":..,"version":..,"data":{..}}``), or its error line."""
    from kafkatx.format.cluster_metadata import decode_metadata_record, metadata_json

    if record.value is None:
        return {"error": "record has no value"}, None, f"Error at {record.offset}, skipping. record has no value"
    try:
        rec = decode_metadata_record(record.value)
    except DecodeError as err:
        return {"error": str(err)}, None, f"Error at {record.offset}, skipping. {err}"
    return {"type": rec.type, "version": rec.version, "data": rec.data}, None, metadata_json(rec)


def _decode_remote_metadata(record: Any) -> Decoded:
    """A ``__remote_log_metadata`` record value as kafka-dump-log.sh's ``RemoteMetadataLogMessageParser``
    prints it (no key; ``payload: RemoteLogSegmentMetadata{..}``, the ``toString`` of what
    ``RemoteLogMetadataSerde.deserialize`` returns), or its ``Error at offset N, skipping. ..`` line."""
    from kafkatx.format.remote_log_metadata import decode_remote_log_metadata, remote_metadata_text

    if record.value is None:
        return ({"error": "record has no value"}, None,
                f"Error at offset {record.offset}, skipping. record has no value")
    try:
        rec = decode_remote_log_metadata(record.value)
        text = remote_metadata_text(rec)
    except (DecodeError, ValueError) as err:
        return {"error": str(err)}, None, f"Error at offset {record.offset}, skipping. {err}"
    return {"type": rec.type, "version": rec.version, "state": rec.state, "data": rec.data}, None, text


# ------------------------------------------------------------------ .log


_CODEC_NAMES = {c.value: c.name.lower() for c in Compression}


@functools.cache
def _rows() -> ModuleType:
    """:mod:`kafkatx.render.rows`, imported by the outputs that build row objects (text does not:
    msgspec costs start-up time)."""
    from kafkatx.render import rows

    return rows


def _batch_row(header: BatchHeader, valid: bool | None, control: Any, records: Any = None) -> Any:
    """The :class:`~kafkatx.render.rows.BatchRow` of a batch (``records``: its record rows, deep only)."""
    bts, mts = header.base_timestamp, header.max_timestamp
    codec = header.attributes & COMPRESSION_CODEC_MASK
    rows = _rows()
    # positional, in BatchRow's field order (base_offset .. max_timestamp_ms, records)
    return rows.BatchRow(
        header.base_offset, header.base_offset + header.last_offset_delta, header.records_count, header.position,
        header.batch_length + LOG_OVERHEAD, header.magic, header.crc, valid,
        _CODEC_NAMES.get(codec) or header.compression.name.lower(), header.partition_leader_epoch,
        header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence,
        header.is_transactional, header.is_control,
        control.type_name if control is not None else None,
        control.coordinator_epoch if control is not None else None,
        bts if bts >= 0 else None, mts if mts >= 0 else None,
        rows.UNSET if records is None else records,
    )


def _cut_by_limit(buf: Any, position: int, end: int) -> bool:
    """True when the bytes at ``position`` are a batch that merely runs past ``end`` (--max-bytes)."""
    try:
        header = read_batch_header(buf, position)
    except DecodeError:
        return False
    return position + header.size > end


def _log_rows(path: Path, o: DumpOptions, state: Notices) -> Iterator[Any]:
    base = offset_from_file_name(path.name)
    snapshot = suffix(path) == CHECKPOINT_SUFFIX
    if o.text:
        yield kd.dumping_line(path)
        if snapshot:
            # DumpLogSegments.dumpLog: "Snapshot end offset: N, epoch: E" (Snapshots.parse of the name)
            end_epoch = path.name[: -len(CHECKPOINT_SUFFIX)].split("-")
            if len(end_epoch) == 2 and all(x.isdigit() for x in end_epoch):
                yield f"Snapshot end offset: {int(end_epoch[0])}, epoch: {int(end_epoch[1])}"
            base = None
        elif base is not None:
            yield kd.log_start_line(base)
    elif snapshot:
        base = None
    choice = _auto_decoder(path) if o.decoder is DecoderChoice.auto else o.decoder

    def encode(data: bytes) -> str | None:
        return encode_payload(data, o.encoding)

    # forward only: on the pread path (a live broker) in --read-window windows (log.segment.WindowedSnapshot)
    with open_windowed(path, window=o.read_window) as (buf, win):
        size = len(buf)
        end = size if o.max_bytes is None else min(size, o.max_bytes)
        start = 0
        if o.start_offset is not None and base is not None:
            start = min(seek_position(Segment.from_log_path(path), o.start_offset, size), end)
        # Compiled rendering of the clean batches (same bytes) for text and jsonl, unless records go
        # through a decoder; whatever it stops at takes the loop below, one batch, then back to it.
        decoded = choice is not DecoderChoice.none and (o.print_data if o.text else o.deep)
        fast = o.fmt in ("text", "jsonl") and not decoded
        pos = start  # end of the last good batch: where trailing bytes begin
        batches: Iterator[BatchHeader] | None = None  # the slow way's framing, from pos
        while pos < end:
            lim = end
            if win is not None:  # the bytes from pos (the batch at pos whole) are read; slow way: one batch
                lim = min(end, win.prepare(pos, win.window))
                batches = None
            if fast:
                done = kd.render_batches(buf, pos, lim, fmt=o.fmt, deep=o.deep,
                                         print_data=o.print_data, verify_crc=o.verify_crc,
                                         base64=o.encoding == PayloadEncoding.base64,
                                         start_offset=o.start_offset, end_offset=o.end_offset,
                                         raw=o.kafka_strings and o.print_data)
                if done is None:
                    fast = False
                else:
                    rendered, reached, stop = done
                    if rendered is not None:
                        yield rendered
                    if stop or reached >= end:
                        break
                    if reached > pos:
                        pos = reached
                        batches = None
                        continue
            if batches is None:
                # windowed: the batch at pos is read whole (or, framed wrong, its header): framed against the
                # segment's end it gives what the mapped read gives
                batches = iter_batches(buf, pos, end)
            try:
                header = next(batches)
            except StopIteration:
                break
            except DecodeError as err:
                if was_cut(buf):
                    break  # zeros where the file was truncated under the map: map_file raises FileShrank
                if o.max_bytes is not None and _cut_by_limit(buf, pos, end):
                    break
                if pos == 0 and not isinstance(err, Truncated):
                    # Not one batch from the first byte on, and no torn write either (that keeps a valid
                    # header): not a Kafka log segment at all. Input unreadable (exit 3), not a finding.
                    raise DecodeError(f"not a Kafka log segment: {err.message}", path=path,
                                      position=err.position if err.position is not None else 0) from None
                count = max(end - pos, 0)
                where = f" at byte {err.position}" if err.position is not None and err.position != pos else ""
                detail = f"{err.message}{where}"
                state.finding(f"{path}: byte {pos}: {count} trailing bytes do not form a batch ({detail})")
                if o.text and not (o.kafka_strings and o.max_bytes is not None):
                    # DumpLogSegments prints this line only without --max-bytes (the finding is said above)
                    yield kd.trailing_bytes_line(count, path.name)
                elif not o.text:
                    yield _rows().TrailingBytesRow(file=str(path), trailing_bytes=count, position=pos, error=detail)
                break
            pos = header.position + header.size
            if o.start_offset is not None and header.last_offset < o.start_offset:
                continue
            if o.end_offset is not None and header.base_offset > o.end_offset:
                break
            yield from _batch_rows(path, buf, header, o, choice, encode, state)


def _batch_rows(path: Path, buf: Any, header: BatchHeader, o: DumpOptions, choice: DecoderChoice,
                encode: Callable[[bytes], Any], state: Notices) -> Iterator[Any]:
    valid: bool | None = None
    if o.verify_crc:
        valid = crc_valid(buf, header)
        if not valid:
            state.finding(f"{path}: byte {header.position}: batch {header.base_offset}..{header.last_offset} "
                          f"fails its CRC check (stored crc {header.crc})")
    control = None
    if header.is_control and header.magic >= 2:
        try:
            control = read_control_record(buf, header)
        except DecodeError as err:
            state.finding(str(err.at(path)))
    records: list[Any] = []
    if o.deep:
        try:
            records = list(records_in_place(buf, header))
        except DecodeError as err:
            state.finding(f"{err.at(path)} (records of batch {header.base_offset}..{header.last_offset})")
    if o.text:
        yield kd.batch_line(header, valid)
        for record in records:
            key_text = payload_text = None
            if o.print_data and not header.is_control:
                if choice is DecoderChoice.none and o.kafka_strings:
                    key_text, payload_text = _shown(record.key, kd.java_string), _shown(record.value, kd.java_string)
                elif choice is DecoderChoice.none:
                    key_text = _shown(record.key, encode)
                    payload_text = _shown(record.value, encode)
                else:
                    _, key_text, payload_text = _decode_record(choice, record, encode, o.kafka_version)
            yield kd.record_line(header, _header_keys_shown(record), control=control, key_text=key_text,
                                 payload_text=payload_text)
        records.clear()  # the keys and values are views of the batch's records: gone before the next batch
        return
    if not o.deep:
        yield _batch_row(header, valid, control)
        return
    rows = _rows()
    enc = o.encoding
    payload = encode_payload
    decode = choice is not DecoderChoice.none and not header.is_control
    header_row, record_row, decoded_row = rows.HeaderRow, rows.RecordRow, rows.DecodedRecordRow
    out = []
    bound = kd.PRINT_BOUND
    for record in records:
        ts = record.timestamp
        # encode_payload's answer for the common case (printable UTF-8) without the call
        key, value = record.key, record.value
        if (key is not None and len(key) > bound) or (value is not None and len(value) > bound):
            key_text, value_text = _shown(key, encode), _shown(value, encode)
        else:
            if type(key) is memoryview or type(value) is memoryview:
                key, value = _bytes(key), _bytes(value)
            try:
                key_text = key.decode() if key is not None else None
            except UnicodeDecodeError:
                key_text = payload(key, enc)
            else:
                if key_text is not None and not key_text.isprintable():
                    key_text = payload(key, enc)
            try:
                value_text = value.decode() if value is not None else None
            except UnicodeDecodeError:
                value_text = payload(value, enc)
            else:
                if value_text is not None and not value_text.isprintable():
                    value_text = payload(value, enc)
        headers = tuple(header_row(_cut_str(k), _shown(v, encode)) for k, v in record.headers) if record.headers else ()
        timestamp_ms = ts if ts >= 0 else None
        if decode:
            out.append(decoded_row(record.offset, timestamp_ms, key_text, value_text, headers,
                                   _decode_record(choice, record, encode, o.kafka_version)[0]))
        else:
            out.append(record_row(record.offset, timestamp_ms, key_text, value_text, headers))
    records.clear()  # the keys and values are views of the batch's records: gone before the next batch
    yield _batch_row(header, valid, control, tuple(out))


def _bytes(data: Any) -> Any:
    return None if data is None else bytes(data)


def _shown(data: Any, encode: Callable[[bytes], Any]) -> Any:
    """A key, value or header value as printed by ``encode``: whole, or cut at ``PRINT_BOUND`` bytes
    and followed by its length (:func:`kafka_dump.cut_suffix`)."""
    if data is None:
        return None
    if len(data) <= kd.PRINT_BOUND:
        return encode(bytes(data))
    return encode(bytes(data[:kd.PRINT_BOUND])) + kd.cut_suffix(len(data))


def _cut_str(key: str) -> str:
    """A header key as printed: cut at ``PRINT_BOUND`` characters like a value."""
    return key if len(key) <= kd.PRINT_BOUND else key[:kd.PRINT_BOUND] + kd.cut_suffix(len(key.encode()))


def _header_keys_shown(record: Any) -> Any:
    """``record`` for :func:`kafka_dump.record_line`: its header keys cut (its sizes are its own)."""
    if not any(len(k) > kd.PRINT_BOUND for k, _ in record.headers):
        return record
    return dataclasses.replace(record, headers=tuple((_cut_str(k), v) for k, v in record.headers))


# ------------------------------------------------------------------ indexes


def _index_base(path: Path) -> int:
    base = offset_from_file_name(path.name)
    if base is None:
        raise UsageError(f"{path}: index file names start with the segment's 20-digit base offset")
    return base


class _IndexKind(Struct, frozen=True):
    """What differs between ``.index`` and ``.timeindex`` when dumping them (the walk is shared)."""

    read: Callable[[Any, int], list[Any]]
    entry_size: int
    line: Callable[[Any], str]  # kafka-dump-log.sh's text line
    row: Callable[[Any, Any], Any]  # the row object: (entry, problem or UNSET)


def _index_rows(path: Path, kind: _IndexKind, *, verify: bool, text: bool, state: Notices) -> Iterator[Any]:
    base = _index_base(path)
    with map_file(path) as ibuf:
        try:
            entries = kind.read(ibuf, base)
        except DecodeError as err:
            raise err.at(path) from err
    if text:
        yield kd.dumping_line(path)
        if not entries:
            yield f"{path} is empty."
    problems: dict[int, list[str]] = {}
    if verify and entries:
        from kafkatx.checks.indexes import verify_index_file

        # The rules `verify` applies to every segment (kafkatx.checks.verify.SegmentIndexCheck).
        for p in sorted(verify_index_file(path, base), key=lambda p: p.file == str(path)):  # the .log's note first
            if p.file != str(path):  # the .log beside it has bytes that are no batch: said, not an entry's finding
                state.say(f"kafkatx: note: {p.file}: byte {p.position}: {p.message}")
                continue
            if p.severity == "info":  # a preallocated index: what the file is, not a finding (exit 0)
                state.say(f"kafkatx: note: {p.message}")
                continue
            state.finding(f"{path}: byte {p.position}: {p.message}")
            if p.position is not None:
                problems.setdefault(p.position // kind.entry_size, []).append(p.message)
    for i, entry in enumerate(entries):
        if text:
            yield kind.line(entry)
        elif verify:
            yield kind.row(entry, "; ".join(problems[i]) if i in problems else None)
        else:
            yield kind.row(entry, _rows().UNSET)


class KafkaIndexChecks(Struct):
    """kafka-dump-log.sh's index walk (``--files``, ``--verify-index-only``, ``--index-sanity-check``):
    the per-file results whose findings Kafka prints on stderr after the last file."""

    verify_only: bool
    sanity: bool
    offset_dumps: list[tuple[str, Any]]
    time_dumps: list[tuple[str, Any]]
    log_gaps: list[tuple[str, Any]]

    def rows(self, path: Path, offset_index: bool, state: Notices) -> Iterator[str]:
        """``DumpLogSegments.dumpIndex`` / ``dumpTimeIndex`` for one file, line by line."""
        from kafkatx.checks import index_dump

        yield kd.dumping_line(path)
        try:
            if offset_index:
                if fdio.stat(path).st_size < 8:  # index.entries == 0
                    yield kd.index_empty_line(path)
                    return
                if self.sanity:
                    yield from self._sanity(path, index_dump.offset_index_sanity(path), state)
                    return
                dump: Any = index_dump.dump_offset_index(path)
                self.offset_dumps.append((str(path.absolute()), dump))
                if dump.error is not None:
                    state.finding(f"{path}: byte {len(dump.entries) * 8}: {dump.error}")
            else:
                if self.sanity:
                    yield from self._sanity(path, index_dump.time_index_sanity(path), state)
                    return
                dump = index_dump.dump_time_index(path)
                self.time_dumps.append((str(path.absolute()), dump))
        except DecodeError as err:
            raise err.at(path) from err
        if not self.verify_only:
            if offset_index:
                yield from (kd.offset_index_line(OffsetIndexEntry(offset=o, position=p)) for o, p in dump.entries)
            else:
                yield from (kd.time_index_line(TimeIndexEntry(timestamp=t, offset=o)) for t, o in dump.entries)

    @staticmethod
    def _sanity(path: Path, problem: str | None, state: Notices) -> Iterator[str]:
        if problem is None:
            yield kd.sanity_passed_line(path)
        else:  # Kafka's tool stops with this CorruptIndexException
            state.finding(f"{path}: byte 0: index sanity check fails: {problem}")

    def log_checked(self, path: Path, max_bytes: int | None) -> None:
        """``dumpLog``'s deep iteration: remember the gaps between the records' offsets."""
        from kafkatx.checks import index_dump

        self.log_gaps.append((str(path.absolute()), index_dump.non_consecutive_offsets(path, max_bytes)))

    def report(self) -> list[str]:
        """kafka-dump-log.sh's last stderr lines: what the index walk and the deep iteration found."""
        return kd.index_check_lines(self.offset_dumps, self.time_dumps) + kd.non_consecutive_lines(self.log_gaps)


_OFFSET_INDEX = _IndexKind(read=read_offset_index, entry_size=8, line=kd.offset_index_line,
                           row=lambda e, problem: _rows().OffsetIndexRow(e.offset, e.position, problem))
_TIME_INDEX = _IndexKind(read=read_time_index, entry_size=12, line=kd.time_index_line,
                         row=lambda e, problem: _rows().TimeIndexRow(e.timestamp, e.offset, problem))


# ------------------------------------------------------------------ snapshot, txnindex


def _snapshot_rows(path: Path, *, text: bool, single: bool, state: Notices, kafka: bool = False) -> Iterator[Any]:
    snap = read_snapshot(path)
    if not snap.crc_valid:
        state.finding(f"{path}: byte 2: producer snapshot CRC {snap.crc} does not match its contents")
    if text and kafka and not snap.crc_valid:
        # dumpProducerIdSnapshot: readSnapshot's CorruptSnapshotException, its message on stderr, no entry
        yield kd.dumping_line(path)
        state.say(kd.corrupt_snapshot_line(snap.crc, snap.computed_crc))
        return
    if text:
        yield kd.dumping_line(path)
        for entry in snap.entries:
            yield kd.snapshot_entry_line(entry)
        return
    model = _rows()
    rows = tuple(model.SnapshotEntryRow(
        producer_id=e.producer_id,
        producer_epoch=e.producer_epoch,
        last_sequence=e.last_sequence,
        last_offset=e.last_offset,
        offset_delta=e.offset_delta,
        timestamp_ms=_ms(e.timestamp),
        coordinator_epoch=e.coordinator_epoch,
        current_txn_first_offset=_neg_null(e.current_txn_first_offset),
    ) for e in snap.entries)
    if single:
        # dump-snapshot in table form: the producers, with version and CRC in the title
        yield from rows
        return
    yield model.SnapshotRow(version=snap.version, crc=snap.crc, crc_valid=snap.crc_valid, entries=rows)


def _txnindex_rows(path: Path, *, text: bool) -> Iterator[Any]:
    with map_file(path) as buf:
        try:
            txns = read_txn_index(buf)
        except DecodeError as err:
            raise err.at(path) from err
    if text:
        yield kd.dumping_line(path)
    for txn in txns:
        if text:
            yield kd.aborted_txn_line(txn)
        else:
            yield _rows().TxnIndexRow(version=txn.version, producer_id=txn.producer_id, first_offset=txn.first_offset,
                                      last_offset=txn.last_offset, last_stable_offset=txn.last_stable_offset)


# ------------------------------------------------------------------ the library calls


@contextmanager
def dump_files(paths: Iterable[Path], options: DumpOptions, notices: Notices) -> Iterator[Iterator[Any]]:
    """``dump-segment``: the rows of each file in turn (``.log``/``.checkpoint`` by :func:`dump_segment`,
    the other kinds by their ``dump_*``), read under ``options.read_window``. With
    ``options.kafka_strings`` (``--files``) or the index-walk flags, in text, indexes are walked as
    kafka-dump-log.sh does and its closing lines are said when the block ends."""
    paths = list(paths)
    o = options
    checks = (KafkaIndexChecks(verify_only=o.verify_index_only, sanity=o.index_sanity_check, offset_dumps=[],
                               time_dumps=[], log_gaps=[])
              if o.text and (o.kafka_strings or o.verify_index_only or o.index_sanity_check) else None)

    def rows() -> Iterator[Any]:
        for path in paths:
            kind = suffix(path)
            if kind in (LOG_SUFFIX, CHECKPOINT_SUFFIX):
                yield from _log_rows(path, o, notices)
                if checks is not None and o.kafka_strings and o.deep:
                    checks.log_checked(path, o.max_bytes)
            elif kind in (INDEX_SUFFIX, TIMEINDEX_SUFFIX) and checks is not None:
                yield from checks.rows(path, kind == INDEX_SUFFIX, notices)
            elif kind in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
                yield from dump_index(path, fmt=o.fmt, notices=notices)
            elif kind == SNAPSHOT_SUFFIX:
                yield from _snapshot_rows(path, text=o.text, single=False, state=notices, kafka=o.kafka_strings)
            else:
                yield from dump_txnindex(path, fmt=o.fmt)

    with segment_read_window(o.read_window):  # also the --files --deep-iteration gap check's windows
        yield rows()
    if checks is not None:
        for line in checks.report():
            notices.say(line)


def dump_segment(path: Path, options: DumpOptions, notices: Notices) -> Iterator[Any]:
    """The rows of one ``.log`` (or ``.checkpoint``): text lines and rendered chunks, or
    :class:`~kafkatx.render.rows.BatchRow` objects (and a final
    :class:`~kafkatx.render.rows.TrailingBytesRow`); findings go to ``notices``."""
    return _log_rows(path, options, notices)


def dump_index(path: Path, *, fmt: str = "text", verify: bool = False, notices: Notices,
               read_window: int | None = None) -> Iterator[Any]:
    """A ``.index`` / ``.timeindex``: text lines, or :class:`~kafkatx.render.rows.OffsetIndexRow` /
    :class:`~kafkatx.render.rows.TimeIndexRow` objects (``verify``: with ``problem``, each bad entry a
    finding; the ``.log`` beside it read in ``read_window`` windows on the pread path)."""
    kind = _OFFSET_INDEX if suffix(path) == INDEX_SUFFIX else _TIME_INDEX
    with segment_read_window(read_window):
        yield from _index_rows(path, kind, verify=verify, text=fmt == "text", state=notices)


def read_snapshot(path: Path) -> Any:
    """A ``.snapshot`` read whole (``ProducerSnapshot``); a decode error names the file."""
    with map_file(path) as buf:
        try:
            return read_producer_snapshot(buf)
        except DecodeError as err:
            raise err.at(path) from err


def dump_snapshot(path: Path, *, fmt: str = "text", notices: Notices, producers_only: bool = False,
                  kafka: bool = False) -> Iterator[Any]:
    """A ``.snapshot``: text lines, one :class:`~kafkatx.render.rows.SnapshotRow`, or
    (``producers_only``) its :class:`~kafkatx.render.rows.SnapshotEntryRow` objects; a bad CRC is a finding."""
    return _snapshot_rows(path, text=fmt == "text", single=producers_only, state=notices, kafka=kafka)


def dump_txnindex(path: Path, *, fmt: str = "text") -> Iterator[Any]:
    """A ``.txnindex``: text lines or :class:`~kafkatx.render.rows.TxnIndexRow` objects."""
    return _txnindex_rows(path, text=fmt == "text")
