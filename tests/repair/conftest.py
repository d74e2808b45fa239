"""Fixtures for the repair tests: real log dirs in tmp dirs, real subprocesses for locks and crashes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from repair_fixtures import APPLY_SCRIPT, build_log_dir

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE)])
    env.pop("KAFKATX_FAULT_AT", None)
    env.update(extra)
    return env


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return build_log_dir(tmp_path)


@pytest.fixture
def run_apply() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``apply_plan(make_plan(ld), journal)`` in a fresh Python process (optionally with a fault)."""

    def run(ld: Path, journal: Path, fault: str | int | None = None) -> subprocess.CompletedProcess[str]:
        extra = {} if fault is None else {"KAFKATX_FAULT_AT": str(fault)}
        return subprocess.run([sys.executable, "-c", APPLY_SCRIPT, str(ld), str(journal)], env=subprocess_env(**extra),
                              capture_output=True, text=True, timeout=60)

    return run


LOCK_SCRIPT = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
if sys.argv[2] == "flock":
    fcntl.flock(fd, fcntl.LOCK_EX)
else:  # what the JVM's FileChannel.tryLock() does on Linux: a POSIX record lock
    fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()  # hold until the test closes our stdin
"""


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
