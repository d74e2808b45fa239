"""How long a forked helper process may stay silent before it is taken for stalled.

The fan-out of ``verify``/``lag``/``find-hanging --jobs`` (:mod:`kafkatx.storage.fanout`) hears from each
child as it works (a tick per partition done). A child that says nothing for longer than the bound -
stopped (SIGSTOP, a debugger), or stuck in a read of a stalled disk or a hung NFS mount - is killed,
and its work is done by the parent: the same answer as one process, one line on stderr. The bound is
``KAFKATX_CHILD_SILENCE`` seconds (default 120: far above the longest silence of a working child,
one partition's reads)."""

from __future__ import annotations

import os
import signal
import sys
import time

SILENCE_ENV = "KAFKATX_CHILD_SILENCE"
DEFAULT_SILENCE = 120.0


def silence_bound() -> float:
    """Seconds a child may stay silent: ``KAFKATX_CHILD_SILENCE`` when it is a positive number, else 120."""
    try:
        value = float(os.environ.get(SILENCE_ENV, ""))
    except ValueError:
        return DEFAULT_SILENCE
    return value if value > 0 else DEFAULT_SILENCE


def state(pid: int) -> str | None:
    """The process state letter of ``pid`` (``/proc/PID/stat``: R running, S sleeping, D in an
    uninterruptible wait, T/t stopped); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    close = stat.rfind(b")")
    return stat[close + 2:close + 3].decode() if close >= 0 else None


def kill_stalled(pid: int, *, wait: float = 2.0) -> None:
    """SIGKILL ``pid`` and reap it; a process in an uninterruptible wait (a hung disk) dies only when the
    wait ends, so it is waited for ``wait`` seconds at most, then left for the system to reap."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def say(line: str) -> None:
    """One line on stderr (the parent's; the command goes on)."""
    try:
        sys.stderr.write(f"kafkatx: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
