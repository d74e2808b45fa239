"""``dump-segment``, ``dump-index``, ``dump-snapshot``, ``dump-txnindex``: kafka-dump-log.sh, in Python.

The commands parse their flags, call the library (:mod:`kafkatx.render.dump`, which owns the reading and
the rows: :mod:`kafkatx.render.rows`) and render. Text output follows ``kafka-dump-log.sh`` line for line;
json/jsonl/yaml/table carry cli.md's keys. Findings (a CRC mismatch, trailing bytes that are no batch,
records that do not decode, a snapshot's bad CRC, a bad index entry) are one stderr line each naming
the file and the byte position, and exit 1.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.errors import UsageError
from kafkatx.render import dump as library
from kafkatx.render import emit
from kafkatx.render.dump import (
    KAFKA_VERSIONS,
    NEWEST_KAFKA,
    SUFFIXES,
    DecoderChoice,
    DumpOptions,
    Notices,
    check_files,
)
from kafkatx.storage.segment import INDEX_SUFFIX, SNAPSHOT_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX

KafkaVersion = enum.Enum("KafkaVersion", {v.replace(".", "_"): v for v in KAFKA_VERSIONS}, type=str)  # type: ignore[misc]
NEWEST = KafkaVersion(NEWEST_KAFKA)  # --kafka-version's default


def _notices() -> Notices:
    return Notices(say=lambda line: typer.echo(line, err=True))


def _plain(rows: Iterable[Any]) -> Iterator[Any]:  # the row objects as cli.md's dicts (kafkatx.render.rows, imported on first use)
    from kafkatx.render.rows import as_plain

    return as_plain(rows)


def _finish(notices: Notices) -> None:
    if notices.findings:
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
    decoder: Annotated[DecoderChoice | None, typer.Option("--decoder", case_sensitive=False, metavar="NAME",
                       help="Decode records as __transaction_state, __consumer_offsets, __cluster_metadata, "
                       "__share_group_state or __remote_log_metadata entries: transaction-log, offsets, "
                       "cluster-metadata, share-group-state, remote-log-metadata; none; auto (the default without "
                       "--files) picks by the partition folder name. An explicit decoder implies --print-data.",
                       show_default=False)] = None,
    transaction_log_decoder: Annotated[bool, typer.Option("--transaction-log-decoder", rich_help_panel=KAFKA_PANEL,
                                       help="Same as --decoder transaction-log.")] = False,
    offsets_decoder: Annotated[bool, typer.Option("--offsets-decoder", rich_help_panel=KAFKA_PANEL,
                               help="Same as --decoder offsets.")] = False,
    cluster_metadata_decoder: Annotated[bool, typer.Option("--cluster-metadata-decoder", rich_help_panel=KAFKA_PANEL,
                                        help="Same as --decoder cluster-metadata.")] = False,
    share_group_state_decoder: Annotated[bool, typer.Option("--share-group-state-decoder",
                                         rich_help_panel=KAFKA_PANEL,
                                         help="Same as --decoder share-group-state (__share_group_state "
                                         "records, Kafka 4.x).")] = False,
    kafka_version: Annotated[KafkaVersion, typer.Option(
        "--kafka-version", case_sensitive=False, rich_help_panel=KAFKA_PANEL,
        help="Print decoded records as this kafka-dump-log.sh release does: 3.8 prints the transaction log "
             "as text and knows group record types 0-8; 4.0 and later print every coordinator record as "
             "JSON and know types 0-23.")] = NEWEST,
    remote_log_metadata_decoder: Annotated[bool, typer.Option("--remote-log-metadata-decoder",
                                           rich_help_panel=KAFKA_PANEL,
                                           help="Same as --decoder remote-log-metadata.")] = False,
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
    decoder = _decoder_choice(decoder, transaction_log_decoder, offsets_decoder, kafka, cluster_metadata_decoder,
                              share_group_state_decoder, remote_log_metadata_decoder)
    text = fmt is opt.OutputFormat.text
    if (verify_index_only or index_sanity_check) and not text:
        raise UsageError("--verify-index-only and --index-sanity-check print kafka-dump-log.sh's text; "
                         "for JSON use dump-index --verify")
    check_files(paths, SUFFIXES, "dump-segment")
    explicit = decoder in (DecoderChoice.transaction_log, DecoderChoice.offsets, DecoderChoice.cluster_metadata,
                           DecoderChoice.share_group_state, DecoderChoice.remote_log_metadata)
    print_data = print_data or explicit
    o = DumpOptions(fmt=fmt.value, deep=deep_iteration or print_data, print_data=print_data, verify_crc=verify_crc,
                    decoder=decoder, start_offset=start_offset, end_offset=end_offset, max_bytes=max_bytes,
                    encoding=payload_encoding, kafka_strings=kafka, read_window=read_window,
                    verify_index_only=verify_index_only, index_sanity_check=index_sanity_check,
                    kafka_version=kafka_version.value)
    notices = _notices()
    with library.dump_files(paths, o, notices) as rows:
        # the row objects become plain dicts here (as_plain): emit need not copy them again
        emit(rows if text else _plain(rows), fmt.value, plain=True)
    _finish(notices)


def _decoder_choice(decoder: DecoderChoice | None, transaction_log: bool, offsets: bool,
                    kafka: bool, cluster_metadata: bool = False, share_group_state: bool = False,
                    remote_log_metadata: bool = False) -> DecoderChoice:
    """--decoder and kafka-dump-log.sh's --transaction-log-decoder / --offsets-decoder: one choice.
    Without any, auto; with --files none (kafka-dump-log.sh never picks a decoder by itself)."""
    asked = {c for c, on in ((DecoderChoice.transaction_log, transaction_log), (DecoderChoice.offsets, offsets),
                             (DecoderChoice.cluster_metadata, cluster_metadata),
                             (DecoderChoice.share_group_state, share_group_state),
                             (DecoderChoice.remote_log_metadata, remote_log_metadata)) if on}
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
    check_files([file], (INDEX_SUFFIX, TIMEINDEX_SUFFIX), "dump-index")
    notices = _notices()
    rows = list(library.dump_index(file, fmt=fmt.value, verify=verify, notices=notices, read_window=read_window))
    emit(rows if fmt is opt.OutputFormat.text else list(_plain(rows)), fmt.value)
    _finish(notices)


@app.command("dump-snapshot")
def dump_snapshot(file: FileArg, fmt: opt.FormatOpt = opt.OutputFormat.text) -> None:
    """Print a producer-state snapshot (<offset>.snapshot); a bad CRC is a finding (exit 1)."""
    check_files([file], (SNAPSHOT_SUFFIX,), "dump-snapshot")
    notices = _notices()
    if fmt is opt.OutputFormat.text:
        emit(list(library.dump_snapshot(file, notices=notices)), "text")
    elif fmt is opt.OutputFormat.table:
        snap = library.read_snapshot(file)
        rows = list(_plain(library.dump_snapshot(file, fmt="table", producers_only=True, notices=notices)))
        emit(rows, "table", title=f"{file}: version {snap.version} crc_valid {str(snap.crc_valid).lower()}")
    elif fmt is opt.OutputFormat.jsonl:
        emit(list(_plain(library.dump_snapshot(file, fmt="jsonl", notices=notices))), "jsonl")
    else:
        (whole,) = _plain(library.dump_snapshot(file, fmt=fmt.value, notices=notices))
        emit(whole, fmt.value)  # one object: version, crc, crc_valid, entries
    _finish(notices)


@app.command("dump-txnindex")
def dump_txnindex(file: FileArg, fmt: opt.FormatOpt = opt.OutputFormat.text) -> None:
    """Print an aborted-transaction index (.txnindex)."""
    check_files([file], (TXNINDEX_SUFFIX,), "dump-txnindex")
    rows = list(library.dump_txnindex(file, fmt=fmt.value))
    emit(rows if fmt is opt.OutputFormat.text else list(_plain(rows)), fmt.value)
