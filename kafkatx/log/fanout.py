"""A log dir's partitions checked by several processes: the same answer, in the same order, sooner.

The per-partition work of ``verify`` at 10,000 partitions is ~60 µs of Python each (issue 25) and the
partitions are independent, so the list is cut into contiguous runs: the first is done here, each other
one in a child made with ``os.fork`` (it inherits the listing, nothing is sent to it). A child sends its
results back as one msgpack message (msgspec, typed: no pickle) through a pipe and ends with
``os._exit`` (no atexit handler, no buffer of this process flushed twice).

The answer never depends on the fan-out: results come back in the items' order, and a run whose child
failed (an exception, a signal, a message that does not decode) is done again here, so an error raises
here exactly as with one process. Ctrl-C kills and reaps the children.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")
R = TypeVar("R")

# Below this many items the default stays in one process: a fork (~2 ms for a 50 MB process) and the
# message cost more than half the work of a few hundred partitions.
FANOUT_MIN = 1000
# The default never starts more processes than this, however many CPUs there are: the per-partition
# work is short and reading the folders is shared by them all.
MAX_JOBS = 8


def jobs_for(count: int, jobs: int | None, *, at_least: int = FANOUT_MIN) -> int:
    """How many processes do ``count`` items: ``jobs`` as asked (capped at ``count``; 1 or 0: this
    process only); None: ``KAFKATX_JOBS`` when set to a number, else one per CPU this process may run on
    (at most ``MAX_JOBS``), from ``at_least`` items up (below: 1). Always 1 where there is no ``os.fork``."""
    if not hasattr(os, "fork") or count < 2:
        return 1
    if jobs is None:
        if count < at_least:
            return 1
        asked = os.environ.get("KAFKATX_JOBS", "")
        if asked.isdigit():
            jobs = int(asked)
        else:
            try:
                cpus = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):  # pragma: no cover - not Linux
                cpus = os.cpu_count() or 1
            jobs = min(cpus, MAX_JOBS)
    return max(1, min(jobs, count))


def runs(count: int, jobs: int) -> list[range]:
    """``range(count)`` cut into ``jobs`` contiguous runs of near-equal length, in order."""
    jobs = max(1, min(jobs, count))
    size, extra = divmod(count, jobs)
    out, start = [], 0
    for i in range(jobs):
        end = start + size + (1 if i < extra else 0)
        out.append(range(start, end))
        start = end
    return out


def fan_out(each: Callable[[T], R], items: Sequence[T], result: Any, *, jobs: int,
            done: Callable[[T], None] | None = None) -> list[R]:
    """``[each(x) for x in items]`` over ``jobs`` processes (see :func:`jobs_for`), in order.

    ``result``: the type of one ``each`` result, as msgspec decodes it (a Struct, ``list[Struct]``...).
    ``done``: called here for each item once its result is here (a progress bar), in order."""
    cuts = runs(len(items), jobs)
    if len(cuts) <= 1:
        return _serial(each, items, done)
    children: list[tuple[int, int, range]] = []  # (pid, read end, run)
    try:
        for run in cuts[1:]:
            children.append(_start(each, items, run))
        out = _serial(each, [items[i] for i in cuts[0]], done)
        decoder = msgspec.msgpack.Decoder(list[result])
        while children:
            pid, fd, run = children[0]
            message = _read_all(fd)  # an error or Ctrl-C here: the finally kills and reaps it
            children.pop(0)
            got = _collect(pid, fd, message, decoder, len(run))
            part = [items[i] for i in run]
            if got is None:  # the child failed: its run again, here (the same answer, or the same error)
                got = _serial(each, part, None)
            out.extend(got)
            if done is not None:
                for item in part:
                    done(item)
        return out
    finally:
        for pid, fd, _run in children:  # those not collected (leaving early: an error, Ctrl-C)
            _reap(pid, fd)


def _serial(each: Callable[[T], R], items: Sequence[T], done: Callable[[T], None] | None) -> list[R]:
    out = []
    for item in items:
        out.append(each(item))
        if done is not None:
            done(item)
    return out


def _start(each: Callable[[T], R], items: Sequence[T], run: range) -> tuple[int, int, range]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its run, one message, gone
        code = 1
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it at once; the parent says so
            data = msgspec.msgpack.encode([each(items[i]) for i in run])
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        except BaseException:  # noqa: BLE001 - any failure: the parent does the run again
            pass
        finally:
            os._exit(code)
    os.close(w)
    return pid, r, run


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _collect(pid: int, fd: int, message: bytes, decoder: msgspec.msgpack.Decoder[Any],
             count: int) -> list[Any] | None:
    """The child's results (its pipe closed and itself reaped), or None when it did not end well or sent
    anything but ``count`` results."""
    os.close(fd)
    _pid, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    try:
        got = decoder.decode(message)
    except msgspec.DecodeError:
        return None
    return got if len(got) == count else None


def _reap(pid: int, fd: int) -> None:
    """A child not collected (this process is leaving early: an error, Ctrl-C): killed and waited for."""
    os.close(fd)
    os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still this child's
    os.waitpid(pid, 0)
