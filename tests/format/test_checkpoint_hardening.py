"""Checkpoint parsing never leaks ValueError: huge numbers, junk fields and wrong counts are
DecodeErrors naming the line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkatx.errors import BadLength, DecodeError
from kafkatx.format.checkpoint import read_leader_epoch_checkpoint, read_offset_checkpoint

HUGE = "9" * 5000  # past CPython's int() digit limit (4300): int() itself raises ValueError


@pytest.mark.parametrize("text, line", [
    (f"0\n1\norders 0 {HUGE}\n", 3),
    (f"0\n1\norders {HUGE} 5\n", 3),
    (f"0\n{HUGE}\norders 0 5\n", 2),
    (f"{HUGE}\n1\norders 0 5\n", 1),
    ("0\n1\norders 0 12x\n", 3),
    ("0\n1\norders zero 5\n", 3),
    ("0\n1\norders 0 5 extra\n", 3),
    ("0\n1\n\n", 3),
], ids=["huge-offset", "huge-partition", "huge-count", "huge-version", "junk-offset", "word-partition",
        "four-fields", "empty-line"])
def test_offset_checkpoint_bad_numbers_are_decode_errors_naming_the_line(text: str, line: int) -> None:
    with pytest.raises(DecodeError) as exc:
        read_offset_checkpoint(text)
    assert f"line {line}" in str(exc.value)
    assert exc.value.position == len("\n".join(text.split("\n")[:line - 1]).encode()) + (line > 1)


def test_leading_zeros_are_java_parse_long() -> None:
    # Long.parseLong accepts any number of leading zeros: the value, not the text length, is bounded.
    assert read_offset_checkpoint("0\n1\norders 0 " + "0" * 5000 + "42\n") == {("orders", 0): 42}
    assert read_leader_epoch_checkpoint("0\n1\n" + "0" * 5000 + "7 9\n") == [(7, 9)]


@pytest.mark.parametrize("text", [f"0\n1\n{HUGE} 0\n", f"0\n1\n3 -{HUGE}\n", "0\n1\n3\n"],
                         ids=["huge-epoch", "huge-negative-offset", "one-field"])
def test_leader_epoch_checkpoint_bad_lines(text: str) -> None:
    with pytest.raises(DecodeError, match="line 3"):
        read_leader_epoch_checkpoint(text)


def test_wrong_count_names_the_count_line() -> None:
    with pytest.raises(BadLength, match="line 2"):
        read_offset_checkpoint("0\n2\norders 0 1\n")


def test_cli_on_a_log_dir_with_a_huge_checkpoint_number(tmp_path: Path) -> None:
    """Through the real console entry (this was "internal error: ValueError" with exit 3 before):
    verify reports the checkpoint as a problem naming file, byte and line; lag goes on with a note."""
    import json
    import shutil
    src = Path(__file__).resolve().parents[2] / "fixtures" / "hanging"
    ld = tmp_path / "hanging"
    shutil.copytree(src, ld)
    ckpt = ld / "replication-offset-checkpoint"
    lines = ckpt.read_text().splitlines()
    topic, part, _ = lines[2].split()
    lines[2] = f"{topic} {part} {HUGE}"
    ckpt.write_text("\n".join(lines) + "\n")
    verify = subprocess.run([sys.executable, "-m", "kafkatx", "verify", "--log-dir", str(ld), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    assert verify.returncode == 1, verify.stderr
    rows = [r for r in json.loads(verify.stdout) if r["check"] == "checkpoint"]
    assert len(rows) == 1 and rows[0]["file"] == str(ckpt)
    assert rows[0]["position"] == len(f"{lines[0]}\n{lines[1]}\n".encode()) and "line 3" in rows[0]["message"]
    assert len(rows[0]["message"]) < 400  # the 5,000 digits are not pasted into the message
    lag = subprocess.run([sys.executable, "-m", "kafkatx", "lag", "--log-dir", str(ld), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    assert lag.returncode == 0, lag.stderr
    assert f"{ckpt}: byte " in lag.stderr and "line 3" in lag.stderr
    for proc in (verify, lag):
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
