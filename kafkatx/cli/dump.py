"""``dump-segment``, ``dump-index``, ``dump-snapshot``, ``dump-txnindex``: kafka-dump-log.sh, in Python.

Text output follows ``kafka-dump-log.sh`` line for line (see
:mod:`kafkatx.render.kafka_dump`); json/jsonl/yaml/table carry cli.md's keys.

Findings (exit 1): a batch whose CRC does not match (unless ``--no-verify-crc``),
bytes at the end of a ``.log`` that do not form a batch, records that do not
decode inside an intact batch, a producer snapshot with a bad CRC, and index
entries that ``dump-index --verify`` cannot match with the log. Each finding is
one stderr line naming the file and the byte position.

Trailing bytes: text mode prints Kafka's ``Found N invalid bytes at the end of
FILE`` line; json/jsonl/yaml/table append a final object
``{"file", "trailing_bytes", "position", "error"}`` after the batches.
``--max-bytes`` stops reading there, and (like Kafka) a batch cut by that limit
is not a finding.
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.errors import DecodeError, MissingFile, Truncated, UsageError
from kafkatx.format.offset_index import OffsetIndexEntry, read_offset_index
from kafkatx.format.producer_snapshot import read_producer_snapshot
from kafkatx.format.record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    crc_valid,
    iter_batches,
    iter_records,
    read_batch_header,
    read_control_record,
)
from kafkatx.format.time_index import TimeIndexEntry, read_time_index
from kafkatx.format.txn_index import read_txn_index
from kafkatx.log.partition import parse_partition_dir_name, seek_position
from kafkatx.log.segment import (
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
from kafkatx.log.segment import read_window as segment_read_window
from kafkatx.render import emit, to_plain
from kafkatx.render import kafka_dump as kd

CHECKPOINT_SUFFIX = ".checkpoint"  # a KRaft snapshot of __cluster_metadata: record batches, like a .log
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, SNAPSHOT_SUFFIX, TXNINDEX_SUFFIX, CHECKPOINT_SUFFIX)
TXN_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"


class DecoderChoice(enum.StrEnum):
    auto = "auto"
    none = "none"
    transaction_log = "transaction-log"
    offsets = "offsets"
    cluster_metadata = "cluster-metadata"  # __cluster_metadata records (issue 27: kafkatx.format.cluster_metadata)


@dataclass(slots=True)
class _State:
    """What the run found, for the exit code."""

    findings: int = 0

    def finding(self, message: str) -> None:
        self.findings += 1
        typer.echo(f"kafkatx: {message}", err=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class _LogOptions:
    deep: bool
    print_data: bool
    verify_crc: bool
    decoder: DecoderChoice
    start_offset: int | None
    end_offset: int | None
    max_bytes: int | None
    encoding: opt.PayloadEncoding
    text: bool
    fmt: opt.OutputFormat
    kafka_strings: bool = False  # --files: payloads as kafka-dump-log.sh's StringDecoder prints them
    read_window: int | None = None  # --read-window: bytes of a segment held at most on the pread path


def _suffix(path: Path) -> str:
    name = path.name
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 else ""


def _check_files(files: list[Path], allowed: tuple[str, ...], command: str) -> None:
    """Usage errors (exit 2) and missing files (exit 3) before any output."""
    for path in files:
        if _suffix(path) not in allowed:
            raise UsageError(f"{path}: {command} reads {', '.join(allowed)} files, not {_suffix(path) or 'this file'}")
    for path in files:
        if not path.exists():
            raise MissingFile(f"{path}: no such file")
        if not path.is_file():
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
    return DecoderChoice.none


Decoded = tuple[dict[str, Any] | None, str | None, str | None]  # (json "decoded", text key, text payload)


@functools.cache
def _record_decoders() -> tuple[ModuleType, ModuleType]:
    """``kafkatx.format.txn_log`` and ``kafkatx.format.consumer_offsets``, imported on the first record
    decoded (like verify below, they load only for the dumps that use them: start-up time)."""
    from kafkatx.format import consumer_offsets, txn_log

    return txn_log, consumer_offsets


def _decode_record(choice: DecoderChoice, record: Any, encode: Callable[[bytes], Any]) -> Decoded:
    """Decode one record's key/value with the transaction-log or offsets decoder.

    A record that does not decode is shown the way Kafka's parsers show it
    ("Error at offset N, skipping. ...") and is not a finding: the batch is intact.
    """
    if choice is DecoderChoice.cluster_metadata:
        return _decode_metadata(record)
    if record.key is None:
        msg = f"Error at offset {record.offset}, skipping. record has no key"
        return {"error": "record has no key"}, msg, None
    txn_log, offsets = _record_decoders()
    try:
        if choice is DecoderChoice.transaction_log:
            tkey = txn_log.decode_txn_log_key(record.key)
            tvalue = txn_log.decode_txn_log_value(record.value)
            return ({"key": to_plain(tkey, encode_bytes=encode), "value": to_plain(tvalue, encode_bytes=encode)},
                    kd.txn_log_key_text(tkey), kd.txn_log_value_text(tvalue))
        okey = offsets.decode_offsets_key(record.key)
        ovalue = offsets.decode_offsets_value(okey, record.value)
        return ({"key": to_plain(okey, encode_bytes=encode), "value": to_plain(ovalue, encode_bytes=encode)},
                kd.offsets_key_text(okey, encode), kd.offsets_value_text(ovalue, encode))
    except DecodeError as err:
        return ({"error": str(err)}, f"Error at offset {record.offset}, skipping. {err}", None)


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


# ------------------------------------------------------------------ .log


_CODEC_NAMES = {c.value: c.name.lower() for c in Compression}


def _batch_dict(header: BatchHeader, valid: bool | None, control: Any) -> dict[str, Any]:
    base = header.base_offset
    v2 = header.magic >= 2
    attributes = header.attributes
    bts, mts = header.base_timestamp, header.max_timestamp
    return {
        "base_offset": base,
        "last_offset": base + header.last_offset_delta,
        "count": header.records_count,
        "position": header.position,
        "size": header.batch_length + LOG_OVERHEAD,
        "magic": header.magic,
        "crc": header.crc,
        "crc_valid": valid,
        "compression": _CODEC_NAMES.get(attributes & 0x07) or header.compression.name.lower(),
        "partition_leader_epoch": header.partition_leader_epoch,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "last_sequence": header.last_sequence,
        "is_transactional": v2 and bool(attributes & 0x10),
        "is_control": v2 and bool(attributes & 0x20),
        "control_type": control.type_name if control is not None else None,
        "coordinator_epoch": control.coordinator_epoch if control is not None else None,
        "base_timestamp_ms": bts if bts >= 0 else None,
        "max_timestamp_ms": mts if mts >= 0 else None,
    }


def _cut_by_limit(buf: Any, position: int, end: int) -> bool:
    """True when the bytes at ``position`` are a batch that merely runs past ``end`` (--max-bytes)."""
    try:
        header = read_batch_header(buf, position)
    except DecodeError:
        return False
    return position + header.size > end


def _log_rows(path: Path, o: _LogOptions, state: _State) -> Iterator[Any]:
    base = offset_from_file_name(path.name)
    snapshot = _suffix(path) == CHECKPOINT_SUFFIX
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
        return opt.encode_payload(data, o.encoding)

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
        fast = o.fmt in (opt.OutputFormat.text, opt.OutputFormat.jsonl) and not decoded
        pos = start  # end of the last good batch: where trailing bytes begin
        batches: Iterator[BatchHeader] | None = None  # the slow way's framing, from pos
        while pos < end:
            lim = end
            if win is not None:  # the bytes from pos (the batch at pos whole) are read; slow way: one batch
                lim = min(end, win.prepare(pos, win.window))
                batches = None
            if fast:
                done = kd.render_batches(buf, pos, lim, fmt=o.fmt.value, deep=o.deep,
                                         print_data=o.print_data, verify_crc=o.verify_crc,
                                         base64=o.encoding is opt.PayloadEncoding.base64,
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
                    yield {"file": str(path), "trailing_bytes": count, "position": pos, "error": detail}
                break
            pos = header.position + header.size
            if o.start_offset is not None and header.last_offset < o.start_offset:
                continue
            if o.end_offset is not None and header.base_offset > o.end_offset:
                break
            yield from _batch_rows(path, buf, header, o, choice, encode, state)


def _batch_rows(path: Path, buf: Any, header: BatchHeader, o: _LogOptions, choice: DecoderChoice,
                encode: Callable[[bytes], Any], state: _State) -> Iterator[Any]:
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
            records = list(iter_records(buf, header))
        except DecodeError as err:
            state.finding(f"{err.at(path)} (records of batch {header.base_offset}..{header.last_offset})")
    if o.text:
        yield kd.batch_line(header, valid)
        for record in records:
            key_text = payload_text = None
            if o.print_data and not header.is_control:
                if choice is DecoderChoice.none and o.kafka_strings:
                    key_text, payload_text = kd.java_string(record.key), kd.java_string(record.value)
                elif choice is DecoderChoice.none:
                    key_text = opt.encode_payload(record.key, o.encoding)
                    payload_text = opt.encode_payload(record.value, o.encoding)
                else:
                    _, key_text, payload_text = _decode_record(choice, record, encode)
            yield kd.record_line(header, record, control=control, key_text=key_text, payload_text=payload_text)
        return
    row = _batch_dict(header, valid, control)
    if o.deep:
        enc = o.encoding
        payload = opt.encode_payload
        decode = choice is not DecoderChoice.none and not header.is_control
        out = []
        for record in records:
            ts = record.timestamp
            # encode_payload's answer for the common case (printable UTF-8) without the call
            key, value = record.key, record.value
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
            rec: dict[str, Any] = {
                "offset": record.offset,
                "timestamp_ms": ts if ts >= 0 else None,
                "key": key_text,
                "value": value_text,
                "headers": [{"key": k, "value": payload(v, enc)} for k, v in record.headers] if record.headers else [],
            }
            if decode:
                rec["decoded"] = _decode_record(choice, record, encode)[0]
            out.append(rec)
        row["records"] = out
    yield row


# ------------------------------------------------------------------ indexes


def _index_base(path: Path) -> int:
    base = offset_from_file_name(path.name)
    if base is None:
        raise UsageError(f"{path}: index file names start with the segment's 20-digit base offset")
    return base


@dataclass(frozen=True, slots=True)
class _IndexKind:
    """What differs between ``.index`` and ``.timeindex`` when dumping them (the walk is shared)."""

    read: Callable[[Any, int], list[Any]]
    entry_size: int
    line: Callable[[Any], str]  # kafka-dump-log.sh's text line
    row: Callable[[Any], dict[str, Any]]  # the JSON/YAML row


def _index_rows(path: Path, kind: _IndexKind, *, verify: bool, text: bool, state: _State) -> Iterator[Any]:
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
        from kafkatx.txn.verify import verify_index_file

        # The rules `verify` applies to every segment (kafkatx.txn.verify.SegmentIndexCheck).
        for p in sorted(verify_index_file(path, base), key=lambda p: p.file == str(path)):  # the .log's note first
            if p.file != str(path):  # the .log beside it has bytes that are no batch: said, not an entry's finding
                typer.echo(f"kafkatx: note: {p.file}: byte {p.position}: {p.message}", err=True)
                continue
            if p.severity == "info":  # a preallocated index: what the file is, not a finding (exit 0)
                typer.echo(f"kafkatx: note: {p.message}", err=True)
                continue
            state.finding(f"{path}: byte {p.position}: {p.message}")
            if p.position is not None:
                problems.setdefault(p.position // kind.entry_size, []).append(p.message)
    for i, entry in enumerate(entries):
        if text:
            yield kind.line(entry)
        else:
            row = kind.row(entry)
            if verify:
                row["problem"] = "; ".join(problems[i]) if i in problems else None
            yield row


@dataclass(slots=True)
class _KafkaIndexChecks:
    """kafka-dump-log.sh's index walk (``--files``, ``--verify-index-only``, ``--index-sanity-check``):
    the per-file results whose findings Kafka prints on stderr after the last file."""

    verify_only: bool
    sanity: bool
    offset_dumps: list[tuple[str, Any]]
    time_dumps: list[tuple[str, Any]]
    log_gaps: list[tuple[str, Any]]

    def rows(self, path: Path, offset_index: bool, state: _State) -> Iterator[str]:
        """``DumpLogSegments.dumpIndex`` / ``dumpTimeIndex`` for one file, line by line."""
        from kafkatx.log import index_dump

        yield kd.dumping_line(path)
        try:
            if offset_index:
                if path.stat().st_size < 8:  # index.entries == 0
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
    def _sanity(path: Path, problem: str | None, state: _State) -> Iterator[str]:
        if problem is None:
            yield kd.sanity_passed_line(path)
        else:  # Kafka's tool stops with this CorruptIndexException
            state.finding(f"{path}: byte 0: index sanity check fails: {problem}")

    def log_checked(self, path: Path, max_bytes: int | None) -> None:
        """``dumpLog``'s deep iteration: remember the gaps between the records' offsets."""
        from kafkatx.log import index_dump

        self.log_gaps.append((str(path.absolute()), index_dump.non_consecutive_offsets(path, max_bytes)))

    def report(self) -> None:
        lines = kd.index_check_lines(self.offset_dumps, self.time_dumps) + kd.non_consecutive_lines(self.log_gaps)
        for line in lines:
            typer.echo(line, err=True)


_OFFSET_INDEX = _IndexKind(read=read_offset_index, entry_size=8, line=kd.offset_index_line,
                           row=lambda e: {"offset": e.offset, "position": e.position})
_TIME_INDEX = _IndexKind(read=read_time_index, entry_size=12, line=kd.time_index_line,
                         row=lambda e: {"timestamp_ms": e.timestamp, "offset": e.offset})


# ------------------------------------------------------------------ snapshot, txnindex


def _snapshot_rows(path: Path, *, text: bool, single: bool, state: _State, kafka: bool = False) -> Iterator[Any]:
    with map_file(path) as buf:
        try:
            snap = read_producer_snapshot(buf)
        except DecodeError as err:
            raise err.at(path) from err
    if not snap.crc_valid:
        state.finding(f"{path}: byte 2: producer snapshot CRC {snap.crc} does not match its contents")
    if text and kafka and not snap.crc_valid:
        # dumpProducerIdSnapshot: readSnapshot's CorruptSnapshotException, its message on stderr, no entry
        yield kd.dumping_line(path)
        typer.echo(kd.corrupt_snapshot_line(snap.crc, snap.computed_crc), err=True)
        return
    if text:
        yield kd.dumping_line(path)
        for entry in snap.entries:
            yield kd.snapshot_entry_line(entry)
        return
    rows = [{
        "producer_id": e.producer_id,
        "producer_epoch": e.producer_epoch,
        "last_sequence": e.last_sequence,
        "last_offset": e.last_offset,
        "offset_delta": e.offset_delta,
        "timestamp_ms": _ms(e.timestamp),
        "coordinator_epoch": e.coordinator_epoch,
        "current_txn_first_offset": _neg_null(e.current_txn_first_offset),
    } for e in snap.entries]
    if single:
        # dump-snapshot in table form: the producers, with version and CRC in the title
        yield from rows
        return
    yield {"version": snap.version, "crc": snap.crc, "crc_valid": snap.crc_valid, "entries": rows}


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
            yield {"version": txn.version, "producer_id": txn.producer_id, "first_offset": txn.first_offset,
                   "last_offset": txn.last_offset, "last_stable_offset": txn.last_stable_offset}


def _finish(state: _State) -> None:
    if state.findings:
        raise typer.Exit(opt.EXIT_FOUND)


# ------------------------------------------------------------------ commands

FilesArg = Annotated[list[Path] | None, typer.Argument(metavar="FILE", help="Files to dump (.log, .index, "
                                                       ".timeindex, .snapshot, .txnindex, .checkpoint).", dir_okay=False,
                                                       readable=False, show_default=False)]
FileArg = Annotated[Path, typer.Argument(metavar="FILE", dir_okay=False, readable=False, show_default=False)]
KAFKA_PANEL = "kafka-dump-log.sh's flags"


def _kafka_files(value: str) -> list[Path]:
    """``--files a,b``: kafka-dump-log.sh's comma-separated list."""
    names = value.split(",")
    if any(not n.strip() for n in names):
        raise UsageError(f"--files {value!r}: an empty file name in the comma-separated list")
    return [Path(n.strip()) for n in names]


@app.command("dump-segment")
def dump_segment(
    files: FilesArg = None,
    kafka_files: Annotated[str | None, typer.Option("--files", metavar="FILE,...", rich_help_panel=KAFKA_PANEL,
                           help="Comma-separated files, as kafka-dump-log.sh takes them; also its defaults: "
                           "no decoder unless asked, --print-data-log payloads as UTF-8 text (like Kafka's "
                           "StringDecoder), index entries checked against the .log as Kafka's tool does.")] = None,
    deep_iteration: Annotated[bool, typer.Option("--deep-iteration", help="Print every record, not only "
                                                 "batch headers.")] = False,
    print_data: Annotated[bool, typer.Option("--print-data", "--print-data-log", help="Print record keys and "
                                             "values (implies --deep-iteration).")] = False,
    verify_crc: Annotated[bool, typer.Option("--verify-crc/--no-verify-crc", help="Check every batch's CRC; "
                                             "a mismatch is a finding (exit 1).")] = True,
    decoder: Annotated[DecoderChoice | None, typer.Option("--decoder", case_sensitive=False, help="Decode records "
                       "as __transaction_state, __consumer_offsets or __cluster_metadata entries; auto (the default "
                       "without --files) "
                       "picks by the partition folder name. An explicit decoder implies --print-data.",
                       show_default=False)] = None,
    transaction_log_decoder: Annotated[bool, typer.Option("--transaction-log-decoder", rich_help_panel=KAFKA_PANEL,
                                       help="Same as --decoder transaction-log.")] = False,
    offsets_decoder: Annotated[bool, typer.Option("--offsets-decoder", rich_help_panel=KAFKA_PANEL,
                               help="Same as --decoder offsets.")] = False,
    cluster_metadata_decoder: Annotated[bool, typer.Option("--cluster-metadata-decoder", rich_help_panel=KAFKA_PANEL,
                                        help="Same as --decoder cluster-metadata.")] = False,
    verify_index_only: Annotated[bool, typer.Option("--verify-index-only", rich_help_panel=KAFKA_PANEL,
                                 help="Index files: check every entry against the .log as kafka-dump-log.sh does, "
                                 "printing only what does not match (text only).")] = False,
    index_sanity_check: Annotated[bool, typer.Option("--index-sanity-check", rich_help_panel=KAFKA_PANEL,
                                  help="Index files: only Kafka's index sanity check (the one the broker runs to "
                                  "decide whether to rebuild an index); a failure is a finding (text only).")] = False,
    start_offset: Annotated[int | None, typer.Option("--start-offset", min=0, help="Skip batches that end "
                            "before this offset (seeks with the .index when there is one).")] = None,
    end_offset: Annotated[int | None, typer.Option("--end-offset", min=0, help="Stop after the batch that "
                          "holds this offset.")] = None,
    max_bytes: Annotated[int | None, typer.Option("--max-bytes", min=1, help="Read at most this many bytes "
                         "of each .log.")] = None,
    payload_encoding: opt.PayloadEncodingOpt = opt.PayloadEncoding.hex,
    read_window: Annotated[int, typer.Option(
        "--read-window", metavar="BYTES", min=1 << 16,
        help="When a running broker holds the log dir (segments read with pread, not mapped), hold at most "
             "BYTES of a .log at a time (a larger batch is read whole). Default 64 MiB.")] = 64 << 20,
    fmt: opt.FormatOpt = opt.OutputFormat.text,
) -> None:
    """Decode .log segments like kafka-dump-log.sh (other segment files go to their decoders)."""
    kafka = kafka_files is not None
    if kafka and files:
        raise UsageError("give the files either as arguments or with --files, not both")
    paths = _kafka_files(kafka_files) if kafka_files is not None else list(files or [])
    if not paths:
        raise UsageError("no file to dump: give FILE... or --files FILE,...")
    if start_offset is not None and end_offset is not None and end_offset < start_offset:
        raise UsageError("--end-offset is before --start-offset")
    decoder = _decoder_choice(decoder, transaction_log_decoder, offsets_decoder, kafka, cluster_metadata_decoder)
    text = fmt is opt.OutputFormat.text
    if (verify_index_only or index_sanity_check) and not text:
        raise UsageError("--verify-index-only and --index-sanity-check print kafka-dump-log.sh's text; "
                         "for JSON use dump-index --verify")
    _check_files(paths, SUFFIXES, "dump-segment")
    explicit = decoder in (DecoderChoice.transaction_log, DecoderChoice.offsets, DecoderChoice.cluster_metadata)
    print_data = print_data or explicit
    o = _LogOptions(deep=deep_iteration or print_data, print_data=print_data, verify_crc=verify_crc,
                    decoder=decoder, start_offset=start_offset, end_offset=end_offset, max_bytes=max_bytes,
                    encoding=payload_encoding, text=text, fmt=fmt, kafka_strings=kafka, read_window=read_window)
    state = _State()
    checks = (_KafkaIndexChecks(verify_only=verify_index_only, sanity=index_sanity_check, offset_dumps=[],
                                time_dumps=[], log_gaps=[])
              if text and (kafka or verify_index_only or index_sanity_check) else None)

    def rows() -> Iterator[Any]:
        for path in paths:
            suffix = _suffix(path)
            if suffix in (LOG_SUFFIX, CHECKPOINT_SUFFIX):
                yield from _log_rows(path, o, state)
                if checks is not None and kafka and o.deep:
                    checks.log_checked(path, max_bytes)
            elif suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX) and checks is not None:
                yield from checks.rows(path, suffix == INDEX_SUFFIX, state)
            elif suffix == INDEX_SUFFIX:
                yield from _index_rows(path, _OFFSET_INDEX, verify=False, text=text, state=state)
            elif suffix == TIMEINDEX_SUFFIX:
                yield from _index_rows(path, _TIME_INDEX, verify=False, text=text, state=state)
            elif suffix == SNAPSHOT_SUFFIX:
                yield from _snapshot_rows(path, text=text, single=False, state=state, kafka=kafka)
            else:
                yield from _txnindex_rows(path, text=text)

    # .log rows are built as plain dicts (_batch_dict, _record_dict): no to_plain copy per row
    with segment_read_window(read_window):  # also the --files --deep-iteration gap check's windows
        emit(rows(), fmt.value, plain=all(_suffix(p) in (LOG_SUFFIX, CHECKPOINT_SUFFIX) for p in paths))
    if checks is not None:
        checks.report()
    _finish(state)


def _decoder_choice(decoder: DecoderChoice | None, transaction_log: bool, offsets: bool,
                    kafka: bool, cluster_metadata: bool = False) -> DecoderChoice:
    """--decoder and kafka-dump-log.sh's --transaction-log-decoder / --offsets-decoder: one choice.
    Without any, auto; with --files none (kafka-dump-log.sh never picks a decoder by itself)."""
    asked = {c for c, on in ((DecoderChoice.transaction_log, transaction_log), (DecoderChoice.offsets, offsets),
                             (DecoderChoice.cluster_metadata, cluster_metadata)) if on}
    if decoder is not None:
        asked.add(decoder)
    if len(asked) > 1:
        names = " and ".join(sorted(c.value for c in asked))
        raise UsageError(f"two record decoders asked for ({names}); give one")
    if asked:
        return asked.pop()
    return DecoderChoice.none if kafka else DecoderChoice.auto


@app.command("dump-index")
def dump_index(
    file: FileArg,
    verify: Annotated[bool, typer.Option("--verify", help="Check every entry against the .log beside "
                                         "the index; a bad entry is a finding (exit 1).")] = False,
    read_window: Annotated[int, typer.Option(
        "--read-window", metavar="BYTES", min=1 << 16,
        help="With --verify, when a running broker holds the log dir (the .log read with pread, not mapped): "
             "hold at most BYTES of the .log at a time (a larger batch is read whole). Default 64 MiB.")] = 64 << 20,
    fmt: opt.FormatOpt = opt.OutputFormat.text,
) -> None:
    """Print an offset index (.index) or time index (.timeindex)."""
    _check_files([file], (INDEX_SUFFIX, TIMEINDEX_SUFFIX), "dump-index")
    state = _State()
    text = fmt is opt.OutputFormat.text
    kind = _OFFSET_INDEX if _suffix(file) == INDEX_SUFFIX else _TIME_INDEX
    with segment_read_window(read_window):  # the .log beside the index (--verify)
        rows = list(_index_rows(file, kind, verify=verify, text=text, state=state))
    emit(rows, fmt.value)
    _finish(state)


@app.command("dump-snapshot")
def dump_snapshot(file: FileArg, fmt: opt.FormatOpt = opt.OutputFormat.text) -> None:
    """Print a producer-state snapshot (<offset>.snapshot); a bad CRC is a finding (exit 1)."""
    _check_files([file], (SNAPSHOT_SUFFIX,), "dump-snapshot")
    state = _State()
    if fmt is opt.OutputFormat.table:
        with map_file(file) as buf:
            try:
                snap = read_producer_snapshot(buf)
            except DecodeError as err:
                raise err.at(file) from err
        rows = list(_snapshot_rows(file, text=False, single=True, state=state))
        emit(rows, "table", title=f"{file}: version {snap.version} crc_valid {str(snap.crc_valid).lower()}")
    elif fmt is opt.OutputFormat.jsonl:
        emit(list(_snapshot_rows(file, text=False, single=False, state=state)), "jsonl")
    else:
        rows = list(_snapshot_rows(file, text=fmt is opt.OutputFormat.text, single=False, state=state))
        if fmt is opt.OutputFormat.text:
            emit(rows, "text")
        else:
            emit(rows[0], fmt.value)  # one object: version, crc, crc_valid, entries
    _finish(state)


@app.command("dump-txnindex")
def dump_txnindex(file: FileArg, fmt: opt.FormatOpt = opt.OutputFormat.text) -> None:
    """Print an aborted-transaction index (.txnindex)."""
    _check_files([file], (TXNINDEX_SUFFIX,), "dump-txnindex")
    emit(list(_txnindex_rows(file, text=fmt is opt.OutputFormat.text)), fmt.value)
