"""No stopped child hangs a command. A ``--jobs`` child (``storage.fanout``) that says nothing for
``KAFKATX_CHILD_SILENCE`` seconds (stopped with SIGSTOP here; a stalled disk or a hung NFS mount looks the
same) is killed and its work done by the parent: the answer of one process, byte for byte, and one line on
stderr. Before, the parent waited
on the child's pipe with no bound (a stopped child: forever)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from kafkatx.storage import fanout

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: the fan-out is one process here")


def _stop_in_child(parent: int, at: int):
    def each(n: int) -> int:
        if n == at and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGSTOP)  # the child stops itself mid-run, as `kill -STOP` does
        return n * n
    return each


@pytest.mark.parametrize("at", [0, 5, 9], ids=["first-item", "mid-run", "last-item"])
def test_a_stopped_fanout_child_is_killed_and_its_run_done_here(monkeypatch, capsys, at: int) -> None:
    monkeypatch.setenv("KAFKATX_CHILD_SILENCE", "1")
    items = list(range(12))  # runs of 3 with 4 jobs: item 0 is the parent's own, 5 and 9 children's
    seen: list[int] = []
    start = time.monotonic()
    got = fanout.fan_out(_stop_in_child(os.getpid(), at), items, int, jobs=4, done=seen.append)
    took = time.monotonic() - start
    assert got == [n * n for n in items]  # what one process answers
    assert sorted(seen) == items  # every item told done once
    err = capsys.readouterr().err
    if at == 0:  # the parent's own item: no child stopped
        assert err == ""
        return
    assert took < 10
    (line,) = err.splitlines()
    assert line.startswith("kafkatx: a --jobs process (pid ") and "said nothing for 1 s" in line
    pid = int(line.split("pid ")[1].split(")")[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped: no process, no zombie


def test_a_child_that_works_slowly_but_ticks_is_not_killed(monkeypatch, capsys) -> None:
    monkeypatch.setenv("KAFKATX_CHILD_SILENCE", "1")

    def each(n: int) -> int:
        time.sleep(0.3)  # a tick every 0.3 s: never 1 s silent, though the run takes 0.9 s
        return n

    assert fanout.fan_out(each, list(range(6)), int, jobs=2) == list(range(6))
    assert capsys.readouterr().err == ""
