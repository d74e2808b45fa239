"""File-descriptor I/O every layer above shares: a whole buffer written, a pipe read to its end, a child
process ended. (``os.write`` may write less than it is given; these loop until it is all done.)"""

from __future__ import annotations

import os
import signal


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """All of ``data`` written to ``fd`` (short writes continued)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_all(fd: int) -> bytes:
    """Everything ``fd`` gives until its end (a pipe: until every write end is closed)."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def kill_and_reap(pid: int) -> None:
    """Child ``pid`` killed (SIGKILL) and waited for: no process and no zombie left (nothing to do when it is
    gone already)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    os.waitpid(pid, 0)
