"""stderr notes: wrapped at word boundaries to the terminal, and each said once.

Before, a note ran past the terminal's edge (which broke ``'expi|red-job'`` mid-word), and on the
two-broker fixture the replica choice for ``__transaction_state-2`` was said twice. Piped, a note stays
one line (scripts grep them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pty_run import kafkatx_on_a_pty

REPO = Path(__file__).resolve().parents[2]
NOW = "1700007200000"


def _stderr_on_a_terminal(args: list[str], columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(REPO)}
    return kafkatx_on_a_pty(args, env, stream="stderr").replace("\r\n", "\n")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_notes_wrap_to_the_terminal_between_words():
    err = _stderr_on_a_terminal(["find-hanging", "--log-dir", "fixtures/hanging", "--now", NOW], 60)
    lines = [line for line in err.splitlines() if line]
    assert lines and all(len(line) <= 60 for line in lines), lines
    # fixtures/README.md: producer 1007's id `expired-job` was tombstoned; the note names it, whole
    assert "'expired-job'" in err
    starts = [line for line in lines if line.startswith("kafkatx: note:")]
    assert len(starts) == 1 and all(line.startswith("    ") for line in lines if not line.startswith("kafkatx:"))


def test_piped_notes_are_one_line_each_and_said_once():
    two = REPO / "fixtures" / "two-brokers"
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "find-hanging", "--log-dir", str(two / "broker-1"),
                           "--log-dir", str(two / "broker-2"), "--now", NOW, "--format", "json"],
                          capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "60"}, timeout=120)
    assert proc.returncode == 1, proc.stderr  # tb-stuck (4003) is timed-out
    lines = proc.stderr.splitlines()
    assert all(line.startswith("kafkatx: ") for line in lines), lines
    assert len(lines) == len(set(lines)), f"a note said twice: {lines}"
    # fixtures/README.md: __transaction_state-2 is on both brokers (identical): one replica-choice note
    assert sum("__transaction_state-2: 2 replicas" in line for line in lines) == 1
