"""A running broker is seen from another PID namespace, and the read survives it.

``/proc/locks`` lists only the locks of the reader's PID namespace, so kafkatx in a debug container
(here ``unshare --pid --fork --mount-proc``) beside a running broker took the log dir for a stopped
one, mapped the segment, and died of SIGBUS (exit 135) when the broker truncated it. The kernel
answers ``F_OFD_GETLK`` on the ``.lock`` file itself whatever namespace the holder is in; the reader
then reads with bounded preads and a truncation during the read is one line and exit 3.

The "broker" is a process of the test's namespace holding the POSIX lock on ``.lock`` (what the
JVM's ``FileChannel.tryLock`` takes). The truncation is placed deterministically by the reader's
launcher script: it wraps ``os.pread``, ``os.preadv`` and ``mmap.mmap`` so the segment is cut to 1,000 bytes right
after the first window is read (pread) or right after the file is mapped (mmap) - whichever read
path kafkatx chose.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from log_builders import big_segment_log_dir

ROOT = Path(__file__).resolve().parents[2]

LAUNCHER = textwrap.dedent("""
    import mmap, os, sys
    seg = sys.argv[1]
    real_pread, real_preadv, real_mmap = os.pread, os.preadv, mmap.mmap
    state = {"cut": False}

    def cut():
        if not state["cut"]:
            state["cut"] = True
            os.truncate(seg, 1000)  # the broker truncates the segment (follower truncation)

    def pread(fd, n, pos):
        got = real_pread(fd, n, pos)
        if os.path.samestat(os.fstat(fd), os.stat(seg)):
            cut()
        return got

    def preadv(fd, buffers, pos):
        got = real_preadv(fd, buffers, pos)
        if os.path.samestat(os.fstat(fd), os.stat(seg)):
            cut()
        return got

    class Map(real_mmap):
        def __new__(cls, fileno, *a, **k):
            m = real_mmap.__new__(cls, fileno, *a, **k)
            if fileno != -1 and os.path.samestat(os.fstat(fileno), os.stat(seg)):
                cut()
            return m

    os.pread, os.preadv = pread, preadv
    mmap.mmap = Map
    sys.argv = ["kafkatx", *sys.argv[2:]]
    from kafkatx.cli.main import main
    sys.exit(main())
""")


def _unshare_works() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    got = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True)
    if got.returncode != 0:
        return f"unshare --pid is not permitted here: {got.stderr.strip()}"
    return None


@pytest.fixture
def big_log_dir(tmp_path: Path) -> tuple[Path, Path]:
    return big_segment_log_dir(tmp_path)


def test_reader_in_another_pid_namespace_survives_a_truncation(big_log_dir: tuple[Path, Path]) -> None:
    why = _unshare_works()
    if why is not None:
        pytest.skip(why)
    ld, seg = big_log_dir
    fd = os.open(ld / ".lock", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the running broker, in the test's namespace
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("KAFKATX_READ", None)
        got = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", LAUNCHER, str(seg),
                              "verify", "--log-dir", str(ld)], capture_output=True, text=True, env=env, timeout=120)
    finally:
        os.close(fd)
    assert got.returncode == 3, (got.returncode, got.stderr[-2000:])  # before: 135 (SIGBUS)
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1, got.stderr
    assert str(seg) in lines[0] and "shrank while being read" in lines[0]
