"""A closed standard output (``kafkatx lag --log-dir DIR >&-``) is what a full disk is: the answer cannot
be written, exit 3 with one line on stderr. Before: Python's ``sys.stdout`` is None then, and the first
write was ``internal error: AttributeError: 'NoneType' object has no attribute 'write'``, exit 4."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANGING = str(ROOT / "fixtures" / "hanging")
SEGMENT = str(ROOT / "fixtures" / "hanging" / "orders-0" / "00000000000000000000.log")

COMMANDS = {
    "lag": ["lag", "--log-dir", HANGING],
    "lag-json": ["lag", "--log-dir", HANGING, "--format", "json"],
    "list-txn": ["list-txn", "--log-dir", HANGING],
    "list-txn-json": ["list-txn", "--log-dir", HANGING, "--format", "json"],
    "find-hanging": ["find-hanging", "--log-dir", HANGING, "--now", "1700007200000"],
    "timeline": ["timeline", "--log-dir", HANGING],
    "dump-segment": ["dump-segment", "--deep-iteration", SEGMENT],
    "dump-segment-jsonl": ["dump-segment", "--format", "jsonl", SEGMENT],
}


def _run(args: list[str], stdout: int | None) -> subprocess.CompletedProcess[str]:
    def close_stdout() -> None:
        os.close(1)

    return subprocess.run([sys.executable, "-m", "kafkatx", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=ROOT, preexec_fn=close_stdout if stdout is None else None)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_closed_stdout_is_exit_3_with_one_line_as_a_full_disk_is(name: str) -> None:
    closed = _run(COMMANDS[name], None)
    assert closed.returncode == 3, closed.stderr
    lines = [x for x in closed.stderr.splitlines() if not x.startswith("kafkatx: note:")]
    assert lines == ["kafkatx: standard output is closed: the answer cannot be written"]
    with open("/dev/full", "w") as full:
        disk = _run(COMMANDS[name], full.fileno())
    assert disk.returncode == 3, disk.stderr  # the same exit for the same loss
    assert "internal error" not in disk.stderr


def test_no_file_the_command_opens_takes_the_closed_descriptor(tmp_path: Path) -> None:
    """Descriptor 1 is held on /dev/null: nothing meant for stdout can land in a file the command opens."""
    probe = ("import os, sys\nfrom kafkatx.cli import main as m\nm._guard_closed_stdout()\n"
             f"fd = os.open({str(tmp_path / 'f')!r}, os.O_WRONLY | os.O_CREAT)\nprint(fd, file=sys.stderr)\n")
    got = subprocess.run([sys.executable, "-c", probe], stdout=None, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT, preexec_fn=lambda: os.close(1))
    assert got.returncode == 0, got.stderr
    assert int(got.stderr.split()[-1]) != 1
