"""An index entry's position is a byte of the ``.log`` from 0 up: Kafka's ``FileRecords.slice`` throws
for a negative position ("Invalid position") or one past the end ("exceeds end position"), so
``DumpLogSegments.dumpIndex`` finds no batch there. Before, the dump read ``log[position]`` with
Python's negative indexing: an entry ``(last offset, -size of the last batch)`` named the last batch
counted back from the end (no mismatch, exit 0), and a position more negative than the log is long
was ``internal error: IndexError`` (exit 4)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatx.format.record_batch import iter_batches, read_batch_header

ROOT = Path(__file__).resolve().parents[2]
KAFKATX = [sys.executable, "-m", "kafkatx"]


def _partition(tmp_path: Path) -> tuple[Path, list]:
    part = tmp_path / "orders-0"
    shutil.copytree(ROOT / "fixtures" / "clean" / "orders-0", part)
    log = (part / "00000000000000000000.log").read_bytes()
    return part, list(iter_batches(log, 0, len(log)))


def _set_entry(index: Path, i: int, relative_offset: int, position: int) -> None:
    data = bytearray(index.read_bytes())
    struct.pack_into(">ii", data, 8 * i, relative_offset, position)
    index.write_bytes(bytes(data))


@pytest.mark.parametrize("which", ["back-from-the-end", "more-negative-than-the-log", "past-the-end"])
def test_an_entry_outside_the_log_is_a_finding_on_every_path(tmp_path: Path, which: str) -> None:
    part, batches = _partition(tmp_path)
    last = batches[-1]
    log_size = last.position + last.size
    position = {"back-from-the-end": -last.size, "more-negative-than-the-log": -10 * log_size,
                "past-the-end": log_size + 100}[which]
    index = part / "00000000000000000000.index"
    _set_entry(index, 1, last.last_offset, position)  # names the last batch's last offset
    # the last batch counted back from the end is what the old read found there
    if which == "back-from-the-end":
        assert read_batch_header(bytearray((part / "00000000000000000000.log").read_bytes())[position:], 0)\
            .last_offset == last.last_offset
    # every path that checks entries against the log (a plain listing of the entries checks nothing)
    for args in (["dump-segment", "--files", str(index)], ["dump-index", "--verify", str(index)], ["verify", "--log-dir", str(tmp_path)]):
        got = subprocess.run([*KAFKATX, *args], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "COLUMNS": "400"})  # verify's table: the message on one line
        assert got.returncode == 1, (args, got.returncode, got.stderr)  # a finding; never exit 0, never 4
        assert "internal error" not in got.stderr
        said = got.stdout + got.stderr  # verify's table is on stdout, the dumps' findings on stderr
        assert f"position {position}" in said, (args, said)


def test_a_negative_position_is_never_a_batch() -> None:
    from kafkatx.errors import DecodeError

    log = (ROOT / "fixtures" / "clean" / "orders-0" / "00000000000000000000.log").read_bytes()
    last = list(iter_batches(log, 0, len(log)))[-1]
    with pytest.raises(DecodeError, match="invalid position"):
        read_batch_header(log, -last.size)
