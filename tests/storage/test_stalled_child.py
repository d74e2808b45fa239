"""No stopped child hangs a command. A ``--jobs`` child (``log.fanout``) or the second writer of
``list-txn --format json`` (``render.formats``) that says nothing for ``KAFKATX_CHILD_SILENCE`` seconds
(stopped with SIGSTOP here; a stalled disk or a hung NFS mount looks the same) is killed and its work done
by the parent: the answer of one process, byte for byte, and one line on stderr. Before, the parent waited
on the child's pipe with no bound (a stopped child: forever)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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


def _json_rows(n: int) -> list[tuple]:
    return [(f"tx-{i:07d}", "Ongoing" if i % 3 else "CompleteCommit", i, i % 7, 60000, 1_700_000_000_000 + i,
             [f"orders-{i % 5}", "payments-0"]) for i in range(n)]


NAMES = ("transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "started_ms", "partitions")

JSON_WRITER = r"""
import os, signal, sys
sys.path.insert(0, {root!r})
from tests.storage.test_stalled_child import _json_rows, NAMES
from kafkatx.render import formats
stop = {stop!r}
real = formats._json_piece
def piece(rows, names, i, n):
    if i == stop and os.getpid() != {parent}:
        os.kill(os.getpid(), signal.SIGSTOP)  # the second writer stops while making its piece
    return real(rows, names, i, n)
formats._json_piece = piece
formats.emit_json_values(_json_rows({rows}), NAMES, sys.stdout, piece=1024, turns_from=1000)
"""


@pytest.mark.parametrize("stop", [1, 3, 5], ids=["first-odd-piece", "middle-piece", "last-piece"])
def test_a_stopped_second_json_writer_is_killed_and_the_document_finished_here(tmp_path: Path, stop: int) -> None:
    rows = 5 * 1024 + 100  # six pieces of 1024 rows: 0, 2, 4 the parent's, 1, 3, 5 the second writer's
    expected = tmp_path / "one.json"
    script = JSON_WRITER.format(root=str(ROOT), stop=-1, parent=0, rows=rows)
    env = {**os.environ, "KAFKATX_CHILD_SILENCE": "1", "KAFKATX_JOBS": "2"}
    with open(expected, "w") as out:
        subprocess.run([sys.executable, "-c", script.replace("turns_from=1000", "turns_from=10**9")],
                       stdout=out, check=True, cwd=ROOT, env=env)
    got = tmp_path / "two.json"
    start = time.monotonic()
    with open(got, "w") as out:
        script = JSON_WRITER.format(root=str(ROOT), stop=stop, parent="PARENT", rows=rows)
        run = subprocess.run([sys.executable, "-c", "import os\nPARENT = os.getpid()\n" + script], stdout=out,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    took = time.monotonic() - start
    assert run.returncode == 0, run.stderr
    assert took < 20
    assert got.read_bytes() == expected.read_bytes()  # byte for byte what one writer writes
    (line,) = run.stderr.splitlines()
    assert "second writer" in line and "said nothing for 1 s" in line



def test_a_piece_the_second_writer_began_is_finished_from_the_shared_offset(tmp_path: Path) -> None:
    """Stopped while writing its piece: the rest written from where the output's offset says it stopped
    (a file); where the output has no offset (a pipe), exit 4 (OutputIncomplete), never a torn document."""
    from kafkatx.errors import OutputIncomplete
    from kafkatx.render import formats

    class Began:
        began = True

    piece = ["\n,", memoryview(b'{"a":1}'), "\n]\n"]
    whole = b'\n,{"a":1}\n]\n'
    path = tmp_path / "out.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"[head]")
        passed_at = os.lseek(fd, 0, os.SEEK_CUR)
        os.write(fd, whole[:5])  # the killed writer got this far
        formats._write_rest(fd, Began(), piece, ("utf-8", "strict"), passed_at)  # type: ignore[arg-type]
    finally:
        os.close(fd)
    assert path.read_bytes() == b"[head]" + whole
    r, w = os.pipe()
    try:
        with pytest.raises(OutputIncomplete, match="without an offset"):
            formats._write_rest(w, Began(), piece, ("utf-8", "strict"), None)  # type: ignore[arg-type]
    finally:
        os.close(r)
        os.close(w)
