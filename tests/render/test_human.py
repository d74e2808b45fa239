"""The pieces of human output (kafkatx.render.human) and its promises as a user meets them:
times and ages, width fitting by column priority, colour only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pty_run import kafkatx_on_a_pty
from rich.console import Console

from kafkatx.render.human import (
    Column,
    Rows,
    Severity,
    ago,
    cut_path,
    duration,
    output_console,
    size,
    table,
    utc,
    when,
)
from kafkatx.render.printing import plain_lines, shell_lines

REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# 2023-11-14 22:30:00 UTC, worked out by hand: 1700000000 s is 2023-11-14 22:13:20Z, plus 16 min 40 s
T = 1_700_001_000_000


def test_durations_in_the_two_largest_units():
    assert duration(None) == "-"
    assert duration(850) == "850ms"
    assert duration(42_000) == "42s"
    assert duration(320_000) == "5m20s"
    assert duration(60_000) == "1m"
    assert duration(6_600_000) == "1h50m"
    assert duration(3_600_000) == "1h"
    assert duration(183_600_000) == "2d3h"
    assert duration(-90_000) == "-1m30s"


def test_times_are_utc_with_their_age_against_the_given_now():
    assert utc(T) == "2023-11-14 22:30Z"
    assert utc(T, seconds=True) == "2023-11-14 22:30:00Z"
    now = T + 6_600_000
    assert when(T, now) == "2023-11-14 22:30Z (1h50m ago)"
    assert ago(T, T + 400) == "just now"
    assert ago(T + 300_000, T) == "in 5m"
    assert when(None, now) == "-"
    assert size(512) == "512 B" and size(1536) == "1.5 KiB" and size(20 * 2**20) == "20.0 MiB"


def _rows() -> Rows:
    data = Rows([Column("name", "name", 0, shrink=True), Column("n", "n", 0, justify="right"),
                 Column("wide", "wide", 1), Column("narrow", "nar", 2), Column("note", "note", 0, fill=True)])
    for i in range(3):
        data.add({"name": f"topic-with-a-long-name-{i}", "n": i, "wide": "w" * 30, "narrow": "x",
                  "note": "a message that is rather long " * 3}, Severity.WARNING)
    return data


def _render(renderable, width: int) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return plain_lines(out.getvalue()).splitlines()


def test_table_drops_the_least_important_columns_first_and_keeps_rows_on_one_line():
    wide = _render(table(_rows(), 200, boxed=True, ascii_only=True), 200)
    assert wide[0].split() == ["name", "n", "wide", "nar", "note"]
    assert len(wide) == 2 + 3  # header, rule, one line per row
    narrow = _render(table(_rows(), 60, boxed=True, ascii_only=True), 60)
    # "wide" (priority 1) does not fit at 60 columns; the narrower, less important "nar" (2) still does
    assert narrow[0].split() == ["name", "n", "nar", "note"]
    assert len(narrow) == 5 and all(len(line) <= 60 for line in narrow)
    assert narrow[2].startswith("topic-with-a-long-name-0")  # names are not cut while the fill column can give
    assert narrow[2].endswith("~")  # the message is cut, visibly
    tiny = _render(table(_rows(), 40, boxed=False), 40)
    assert tiny[0].split() == ["name", "n", "note"] and all(len(line) <= 40 for line in tiny)


def test_shell_commands_are_continued_not_wrapped():
    cmd = "kafkatx abort-hanging --log-dir /very/long/path/to/kafka/logs --transactional-id some-id --now 1"
    lines = shell_lines(cmd, 50, indent="  ")
    assert all(len(line) <= 50 for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1])
    # pasted, the continuations join into the original command
    assert " ".join(line.rstrip("\\").strip() for line in lines) == cmd
    assert any("--log-dir /very/long/path/to/kafka/logs" in line for line in lines)  # a flag keeps its value


def test_console_width_from_columns_and_no_colour_when_piped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "93")
    monkeypatch.delenv("NO_COLOR", raising=False)
    console = output_console(io.StringIO())
    assert console.width == 93 and console.color_system is None
    monkeypatch.delenv("COLUMNS")
    assert output_console(io.StringIO()).width == 80  # piped without COLUMNS: what an 80-column pager shows


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run kafkatx with stdout on a pseudo-terminal; what it wrote there."""
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update(env)
    return kafkatx_on_a_pty(args, full_env)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_colour_on_a_terminal_and_never_with_no_color():
    args = ["find-hanging", "--log-dir", "fixtures/hanging", "--now", "1700007200000"]
    coloured = _on_a_terminal(args, {"COLUMNS": "100", "TERM": "xterm-256color"})
    assert ANSI.search(coloured), "no colour on a terminal"
    assert "orders-1" in coloured
    plain = _on_a_terminal(args, {"COLUMNS": "100", "TERM": "xterm-256color", "NO_COLOR": "1"})
    assert not ANSI.search(plain) and "orders-1" in plain


def test_piped_lag_at_80_columns_fits_in_80_bytes():
    """The before-stop hook: COLUMNS=80 kafkatx lag ... --format table | awk 'length > 80' prints nothing
    (mawk counts bytes: piped output is ASCII)."""
    env = dict(os.environ, COLUMNS="80")
    env.pop("NO_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "lag", "--log-dir", "fixtures/hanging", "--format",
                           "table"], cwd=REPO, env=env, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines)
    assert b"\x1b" not in proc.stdout
    assert lines[0].split() == [b"partition", b"start", b"LSO", b"HW", b"end", b"lag", b"open", b"oldest",
                                b"open"]


@pytest.mark.parametrize(("path", "width", "expected"), [
    # fits: untouched
    ("orders-0/00000000000000000109.log@434", 40, "orders-0/00000000000000000109.log@434"),
    # the zero padding of the file name goes first; partition, offset and position stay
    ("orders-0/00000000000000000109.log@434", 30, "orders-0/\u2026000000000109.log@434"),
    ("events-0/00000000000000000000.log@0", 20, "events-0/\u20260000.log@0"),
    # all of the padding gone (an all-zero name keeps one 0), then the start is cut
    ("__transaction_state-0/00000000000000000109.timeindex@0", 24, "\u2026tate-0/\u2026109.timeindex@0"),
    ("events-0/00000000000000000000.log@434", 12, "\u2026/\u20260.log@434"),
    # no Kafka file name: the start is cut, as before
    ("torn-tail/replication-offset-checkpoint", 20, "\u2026n-offset-checkpoint"),
    ("x" * 10, 1, "\u2026"),
])
def test_a_cut_path_keeps_the_partition_before_the_zero_padding(path, width, expected):
    cut = cut_path(path, width)
    assert cut == expected
    assert len(cut) <= width
