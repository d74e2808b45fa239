"""kafka-dump-log.sh's flags on dump-segment: docs/cli.md's table, and what each flag does.

The expected lines are kafka-dump-log.sh's (Kafka 3.8 ``DumpLogSegments``): its ``dumpIndex`` /
``dumpTimeIndex`` checks, ``OffsetIndex``/``TimeIndex.sanityCheck`` and ``StringDecoder``, reasoned from
that source for the small segment ``write_partition`` builds (tests/cli/conftest.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main

from kafkatx.cli.main import app
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.record_batch import Record, build_batch
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index

REPO = Path(__file__).resolve().parents[2]
CLI_MD = REPO / "docs" / "cli.md"
HEADING = "### kafka-dump-log.sh's flags in kafkatx"
# what the brief asks dump-segment to take, besides --cluster-metadata-decoder
REQUIRED = {"--files", "--print-data-log", "--deep-iteration", "--transaction-log-decoder", "--offsets-decoder",
            "--verify-index-only", "--index-sanity-check", "--max-bytes"}


def _table() -> list[tuple[list[str], str]]:
    """(kafka-dump-log.sh flags, kafkatx cell) for each row of cli.md's table."""
    text = CLI_MD.read_text()
    assert HEADING in text, f"docs/cli.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`--"):
            continue
        rows.append((re.findall(r"`(--[a-z][a-z-]*)", cells[0]), cells[1]))
    return rows


def _dump_segment_flags() -> set[str]:
    command = typer.main.get_command(app).commands["dump-segment"]  # type: ignore[attr-defined]
    flags: set[str] = set()
    for param in command.params:
        flags.update(getattr(param, "opts", []))
        flags.update(getattr(param, "secondary_opts", []))
    return flags


def test_the_table_maps_every_flag_the_brief_names():
    kafka_flags = {flag for flags, _ in _table() for flag in flags}
    assert REQUIRED <= kafka_flags, f"cli.md's table lacks {sorted(REQUIRED - kafka_flags)}"


@pytest.mark.parametrize(("kafka_flags", "kafkatx"), _table(), ids=lambda v: v if isinstance(v, str) else ",".join(v))
def test_each_row_names_flags_dump_segment_takes(kafka_flags, kafkatx):
    flags = _dump_segment_flags()
    if kafkatx.startswith("not supported"):
        accepted = [f for f in kafka_flags if f in flags]
        assert not accepted, f"cli.md says {kafka_flags} are not supported, but dump-segment takes {accepted}"
        return
    assert kafkatx.startswith("`dump-segment "), kafkatx
    named = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", kafkatx)
    assert named, kafkatx
    missing = [f for f in named + kafka_flags if f not in flags]
    assert not missing, f"cli.md maps {kafka_flags} to {kafkatx}; dump-segment lacks {missing}"


# ------------------------------------------------------------------ what the flags do


def test_files_takes_a_comma_separated_list(invoke, segment):
    both = invoke("dump-segment", "--files", f"{segment.txnindex},{segment.snapshot}")
    assert both.exit_code == 0, both.stderr
    assert [line for line in both.stdout.splitlines() if line.startswith("Dumping ")] == [
        f"Dumping {segment.txnindex}", f"Dumping {segment.snapshot}"]


@pytest.mark.parametrize("args", [
    ["--files", "a.log,,b.log"],  # an empty name
    ["X.log", "--files", "Y.log"],  # both forms
    [],  # no file at all
    ["--files", "F.log", "--transaction-log-decoder", "--offsets-decoder"],
    ["--files", "F.log", "--decoder", "offsets", "--transaction-log-decoder"],
    ["--files", "F.index", "--verify-index-only", "--format", "json"],
])
def test_what_cannot_be_meant_is_refused_with_one_line(invoke, args):
    r = invoke("dump-segment", *args)
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_kafka_flag_aliases_equal_kafkatx_flags(invoke, txn_state_segment):
    kafka = invoke("dump-segment", "--files", str(txn_state_segment), "--transaction-log-decoder")
    own = invoke("dump-segment", str(txn_state_segment), "--decoder", "transaction-log")
    assert kafka.stdout == own.stdout and '{"transactionalId":"tx-a"}' in kafka.stdout
    a = invoke("dump-segment", str(txn_state_segment), "--print-data-log", "--decoder", "none")
    b = invoke("dump-segment", str(txn_state_segment), "--print-data", "--decoder", "none")
    assert a.stdout == b.stdout and " key: " in a.stdout


def test_files_prints_payloads_as_kafkas_string_decoder(invoke, segment):
    """Records 4 and 5 carry the value b"\\x00\\xffbin": StringDecoder makes it NUL, U+FFFD, "bin"
    (kafkatx's own form prints such bytes as hex); no key (null) prints no ``key:``."""
    kafka = invoke("dump-segment", "--files", str(segment.log), "--print-data-log")
    own = invoke("dump-segment", str(segment.log), "--print-data")
    line = next(x for x in kafka.stdout.splitlines() if x.startswith("| offset: 4 "))
    assert line.endswith(" headerKeys: [] payload: \x00\ufffdbin")
    assert "payload: 00ff62696e" in own.stdout
    # the other lines are kafkatx's own layout, which already is Kafka's
    assert [x for x in kafka.stdout.splitlines() if "\ufffd" not in x] == \
        [x for x in own.stdout.splitlines() if "00ff62696e" not in x]


def test_files_does_not_pick_a_decoder_by_the_folder_name(invoke, txn_state_segment):
    assert txn_state_segment.parent.name.startswith("__transaction_state-")
    kafka = invoke("dump-segment", "--files", str(txn_state_segment), "--print-data-log")
    assert "transaction_metadata::" not in kafka.stdout and " key: \x00\x00\x00\x04tx-a" in kafka.stdout


def _write_log(folder: Path, base: int = 100) -> tuple[Path, list[int]]:
    """Three batches: offsets 100-101 (timestamps 5000, 5007), 102 (5003), 103-105 (5010..5012)."""
    folder.mkdir(parents=True)
    batches = [
        build_batch([Record(offset=100, timestamp=5000, key=None, value=b"a"),
                     Record(offset=101, timestamp=5007, key=None, value=b"b")]),
        build_batch([Record(offset=102, timestamp=5003, key=None, value=b"c")]),
        build_batch([Record(offset=103 + i, timestamp=5010 + i, key=None, value=b"d") for i in range(3)]),
    ]
    positions, pos = [], 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    log = folder / f"{base:020d}.log"
    log.write_bytes(b"".join(batches))
    return log, positions


def test_index_checks_print_kafkas_lines_on_stderr(invoke, tmp_path):
    """dumpIndex: the batch at an entry's position must end at the entry's offset (101 at the first
    batch: yes; 104 at the third, which ends at 105: no); the walk stops at the first entry after the first
    whose offset is the base offset (a zero-filled tail). dumpTimeIndex: 5007 at 101 is right; 5011 at 104
    is no batch's last offset (found 105); 5000 at 105 is the wrong timestamp (5012) and comes after 5011."""
    log, pos = _write_log(tmp_path / "t-0")
    index = log.with_suffix(".index")
    index.write_bytes(encode_offset_index([OffsetIndexEntry(offset=101, position=pos[0]),
                                           OffsetIndexEntry(offset=104, position=pos[2])], 100) + bytes(80))
    timeindex = log.with_suffix(".timeindex")
    timeindex.write_bytes(encode_time_index([TimeIndexEntry(timestamp=5007, offset=101),
                                             TimeIndexEntry(timestamp=5011, offset=104),
                                             TimeIndexEntry(timestamp=5000, offset=105)], 100) + bytes(24))
    r = invoke("dump-segment", "--files", f"{index},{timeindex}")
    assert r.exit_code == 0, r.stderr  # Kafka's lines are information, not findings
    assert r.stdout.splitlines() == [
        f"Dumping {index}", f"offset: 101 position: {pos[0]}", f"offset: 104 position: {pos[2]}",
        f"Dumping {timeindex}", "timestamp: 5007 offset: 101", "timestamp: 5011 offset: 104",
        "timestamp: 5000 offset: 105"]
    assert r.stderr.splitlines() == [
        f"Mismatches in :{index.absolute()}", "  Index offset: 104, log offset: 105",
        f"Found timestamp mismatch in :{timeindex.absolute()}", "  Index timestamp: 5000, log timestamp: 5012",
        f"Found out of order timestamp in :{timeindex.absolute()}",
        "  Index timestamp: 5000, Previously indexed timestamp: 5011",
        "The following indexed offsets are not found in the log.", "Indexed offset: 104, found log offset: 105"]
    only = invoke("dump-segment", "--files", f"{index},{timeindex}", "--verify-index-only")
    assert only.stdout.splitlines() == [f"Dumping {index}", f"Dumping {timeindex}"]
    assert only.stderr == r.stderr


def test_index_sanity_check(invoke, tmp_path):
    """OffsetIndex.sanityCheck: the last entry's offset must not be below the base offset, the size a
    multiple of 8; TimeIndex.sanityCheck: the last timestamp not below the first. A zero-filled tail
    (relative offset 0 = the base offset) passes the offset index's check."""
    log, pos = _write_log(tmp_path / "t-0")
    index = log.with_suffix(".index")
    index.write_bytes(encode_offset_index([OffsetIndexEntry(offset=101, position=pos[0])], 100) + bytes(16))
    timeindex = log.with_suffix(".timeindex")
    timeindex.write_bytes(encode_time_index([TimeIndexEntry(timestamp=5007, offset=101)], 100) + bytes(12))
    ok = invoke("dump-segment", "--files", str(index), "--index-sanity-check")
    assert (ok.exit_code, ok.stdout) == (0, f"Dumping {index}\n{index} passed sanity check.\n")
    bad = invoke("dump-segment", "--files", str(timeindex), "--index-sanity-check")
    assert bad.exit_code == 1 and bad.stdout == f"Dumping {timeindex}\n"
    assert bad.stderr.strip() == (
        f"kafkatx: {timeindex}: byte 0: index sanity check fails: Corrupt time index found, time index file "
        f"({timeindex.absolute()}) has non-zero size but the last timestamp is 0 which is less than the first "
        "timestamp 5007")
    index.write_bytes(index.read_bytes() + b"\x00\x00\x00")
    odd = invoke("dump-segment", "--index-sanity-check", str(index))
    assert odd.exit_code == 1
    assert f"Index file {index.absolute()} is corrupt, found 27 bytes which is neither positive nor a " \
           "multiple of 8." in odd.stderr


def test_an_index_entry_pointing_past_the_log_is_a_finding(invoke, tmp_path):
    """dumpIndex reads the batch at each entry's position; with none there Kafka's tool stops with an
    exception. kafkatx says where, in one line, and exits 1."""
    log, pos = _write_log(tmp_path / "t-0")
    index = log.with_suffix(".index")
    index.write_bytes(encode_offset_index([OffsetIndexEntry(offset=101, position=pos[0]),
                                           OffsetIndexEntry(offset=104, position=log.stat().st_size + 100)], 100))
    r = invoke("dump-segment", "--files", str(index))
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [f"Dumping {index}", f"offset: 101 position: {pos[0]}"]
    assert r.stderr.splitlines() == [f"kafkatx: {index}: byte 8: no whole batch at position "
                                     f"{log.stat().st_size + 100} of the log (index entry for offset 104)"]


def test_deep_iteration_reports_gaps_between_offsets(invoke, tmp_path):
    """dumpLog's deep iteration: a record whose offset is not the previous one + 1 (compaction leaves
    such gaps, inside a batch and between batches) is listed after the last file, newest first."""
    folder = tmp_path / "t-0"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(b"".join([
        build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"a"), Record(offset=1, timestamp=1, key=b"k",
                                                                                 value=b"b")]),
        build_batch([Record(offset=3, timestamp=2, key=b"k", value=b"c"), Record(offset=6, timestamp=2, key=b"k",
                                                                                 value=b"d")]),
        build_batch([Record(offset=7, timestamp=3, key=b"k", value=b"e")]),
        build_batch([Record(offset=9, timestamp=3, key=b"k", value=b"f")], base_offset=8),
    ]))
    deep = invoke("dump-segment", "--files", str(log), "--deep-iteration")
    assert deep.exit_code == 0
    assert deep.stderr.splitlines() == [f"Non-consecutive offsets in {log.absolute()}", "  7 is followed by 9",
                                        "  3 is followed by 6", "  1 is followed by 3"]
    shallow = invoke("dump-segment", "--files", str(log))
    assert shallow.stderr == ""  # only deep iteration looks at records


def test_max_bytes_with_files_prints_no_trailing_bytes_line(invoke, segment):
    """dumpLog prints "Found N invalid bytes" only when --max-bytes is not given; kafkatx still says
    on stderr that the bytes are no batch (a finding: exit 1)."""
    with segment.log.open("ab") as fh:
        fh.write(b"\x00" * 30)
    size = segment.log.stat().st_size
    plain = invoke("dump-segment", "--files", str(segment.log))
    assert plain.exit_code == 1 and plain.stdout.splitlines()[-1] == f"Found 30 invalid bytes at the end of {segment.log.name}"
    limited = invoke("dump-segment", "--files", str(segment.log), "--max-bytes", str(size))
    assert limited.exit_code == 1 and "invalid bytes" not in limited.stdout
    assert "30 trailing bytes do not form a batch" in limited.stderr


def test_a_snapshot_with_a_bad_crc_prints_kafkas_message_and_no_entry(invoke, segment):
    """dumpProducerIdSnapshot catches readSnapshot's CorruptSnapshotException and prints its message;
    the CRC-32C covers the bytes from offset 6 (after version and crc)."""
    import crc32c

    raw = bytearray(segment.snapshot.read_bytes())
    raw[-1] ^= 0xFF
    segment.snapshot.write_bytes(bytes(raw))
    stored = int.from_bytes(raw[2:6], "big")
    r = invoke("dump-segment", "--files", str(segment.snapshot))
    assert r.exit_code == 1
    assert r.stdout == f"Dumping {segment.snapshot}\n"
    assert (f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
            f"Computed crc: {crc32c.crc32c(bytes(raw[6:]))}") in r.stderr.splitlines()
