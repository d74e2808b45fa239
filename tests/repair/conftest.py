"""Fixtures for the repair tests: real log dirs in tmp dirs, real subprocesses for locks and crashes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from repair_fixtures import FAULT_LAUNCHER, LOCK_SCRIPT, build_log_dir, subprocess_env


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return build_log_dir(tmp_path)


@pytest.fixture
def run_apply() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``apply_plan(make_plan(ld), journal)`` in a fresh Python process, killed with SIGKILL right
    after the step ``fault`` (a ``plan_steps`` name or index; None: no fault) by fault_launcher.py."""

    def run(ld: Path, journal: Path, fault: str | int | None = None) -> subprocess.CompletedProcess[str]:
        step = "-" if fault is None else str(fault)
        return subprocess.run([sys.executable, str(FAULT_LAUNCHER), step, "apply", str(ld), str(journal)],
                              env=subprocess_env(), capture_output=True, text=True, timeout=60)

    return run


@pytest.fixture
def hold_lock() -> Iterator[Callable[[Path, str], subprocess.Popen[str]]]:
    """Start a process that holds ``path`` locked (``flock`` or ``posix``) until the test ends."""
    procs: list[subprocess.Popen[str]] = []

    def start(path: Path, kind: str = "flock") -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", LOCK_SCRIPT, str(path), kind], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=subprocess_env())
        procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        return proc

    yield start
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
