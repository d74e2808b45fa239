"""A log dir's partitions checked by several processes: the same answer, in the same order, sooner.

The per-partition work of ``verify`` at 10,000 partitions is ~60 µs of Python each and the
partitions are independent, so the list is cut into contiguous runs: the first is done here, each other
one in a child made with ``os.fork`` (it inherits the listing, nothing is sent to it). A child sends its
results back as one msgpack message (msgspec, typed: no pickle) through a pipe and ends with
``os._exit`` (no atexit handler, no buffer of this process flushed twice).

The answer never depends on the fan-out: results come back in the items' order, and a run whose child
failed (an exception, a signal, a message that does not decode) is done again here, so an error raises
here exactly as with one process. Ctrl-C kills and reaps the children. A child that says nothing (no tick:
one per item, no byte of its message) for ``KAFKATX_CHILD_SILENCE`` seconds (:mod:`kafkatx.storage.watchdog`;
stopped, or stuck on a stalled disk) is killed and its run done here too, one line on stderr saying so.

Not a ``concurrent.futures.ProcessPoolExecutor``: measured no faster, and a pool hears from a worker only when
its task ends (no tick per partition, no silence to watch) and breaks when one is killed; docs/internals.md
("Speed tricks, measured") has the figures.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from kafkatx.storage.fdio import kill_and_reap, write_all
from kafkatx.storage.watchdog import kill_stalled, say, silence_bound

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
    ``done``: called here once for each item, as soon as this process knows it is done (a progress bar: the
    other processes tick a byte per item on a pipe, heard between this process's own items), in each run's
    order."""
    cuts = runs(len(items), jobs)
    if len(cuts) <= 1:
        return _serial(each, items, done)
    children: list[_Child] = []

    def heard(item: T) -> None:  # this process's item done: so far the others', told too
        assert done is not None
        done(item)
        for child in children:
            child.tell(items, done)

    # the runs in order: a child's, or one this process does itself (no pipe or process to be had)
    later: list[_Child | range] = []
    try:
        for run in cuts[1:]:
            child = _start(each, items, run) if len(later) == len(children) else None
            later.append(child if child is not None else run)
            if child is not None:
                children.append(child)
        out = _serial(each, [items[i] for i in cuts[0]], heard if done is not None else None)
        decoder = msgspec.msgpack.Decoder(list[result])
        bound = silence_bound()
        for next_run in later:
            if isinstance(next_run, range):  # done here: the same answer (an error, its own, naming its file)
                out.extend(_serial(each, [items[i] for i in next_run], done))
                continue
            child = children[0]
            # an error or Ctrl-C here: the finally kills and reaps it; None: it was silent too long, killed
            message = _hear(child, items, done, bound)
            children.pop(0)
            got = None if message is None else _collect(child, message, decoder)
            part = [items[i] for i in child.run]
            if got is None:  # the child failed or stalled: its run again, here (the same answer, or the same error)
                got = _serial(each, part, None)
            out.extend(got)
            if done is not None:
                for item in part[child.told:]:  # the ticks not heard (or lost: they are best effort)
                    done(item)
        return out
    finally:
        for child in children:  # those not collected (leaving early: an error, Ctrl-C)
            _reap(child)


def _serial(each: Callable[[T], R], items: Sequence[T], done: Callable[[T], None] | None) -> list[R]:
    out = []
    for item in items:
        out.append(each(item))
        if done is not None:
            done(item)
    return out


class _Child:
    """A forked process of :func:`fan_out`: its pid, the read end of its results, of its ticks,
    its run, and how many of its items this process was told are done."""

    __slots__ = ("fd", "pid", "run", "ticks", "told")

    def __init__(self, pid: int, fd: int, ticks: int, run: range) -> None:
        self.pid, self.fd, self.ticks, self.run, self.told = pid, fd, ticks, run, 0

    def tell(self, items: Sequence[T], done: Callable[[T], None] | None) -> int:
        """The ticks it sent so far (never waiting for one), each its next item told to ``done``; how many
        (0 also at the end of the ticks: the child closed them)."""
        try:
            n = len(os.read(self.ticks, 1 << 16))
        except BlockingIOError:
            return 0
        if done is not None:
            for k in range(self.told, min(self.told + n, len(self.run))):
                done(items[self.run[k]])
        self.told = min(self.told + n, len(self.run))
        return n

    def close(self) -> None:
        os.close(self.fd)
        os.close(self.ticks)


def _hear(child: _Child, items: Sequence[T], done: Callable[[T], None] | None, bound: float) -> bytes | None:
    """The child's message, read to its end while its ticks are told to ``done``; None when it said nothing
    (no tick, no byte) for ``bound`` seconds: then it is killed and reaped, its pipes closed, and one line
    says so (the caller does its run again)."""
    chunks: list[bytes] = []
    poller = select.poll()
    poller.register(child.fd, select.POLLIN)
    poller.register(child.ticks, select.POLLIN)
    last = time.monotonic()
    while True:
        left = bound - (time.monotonic() - last)
        if left <= 0:
            child.close()
            kill_stalled(child.pid)
            say(f"a --jobs process (pid {child.pid}) said nothing for {bound:g} s (stopped, or stuck on a "
                f"read); killed, its {len(child.run)} partitions read again by the first process")
            return None
        heard = False
        for fd, event in poller.poll(left * 1000):
            if fd == child.fd:
                chunk = os.read(child.fd, 1 << 20)
                if not chunk:
                    child.tell(items, done)  # the last ticks, before the run is collected
                    return b"".join(chunks)
                chunks.append(chunk)
                heard = True
            elif child.tell(items, done):
                heard = True
            elif event & (select.POLLHUP | select.POLLERR):
                poller.unregister(child.ticks)  # the child closed its ticks (it is ending)
        if heard:
            last = time.monotonic()


# Why a process could not be started: no descriptor for its pipes (EMFILE, ENFILE: ``ulimit -n``), no process
# or memory for it (EAGAIN, ENOMEM). Its run is done in this process instead.
_NO_CHILD = frozenset((errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM))


def _start(each: Callable[[T], R], items: Sequence[T], run: range) -> _Child | None:
    """A child doing ``run``: it sends a tick per item (how the parent knows it is alive) and its results.
    None: none could be started, for a reason in ``_NO_CHILD`` (nothing left open)."""
    opened: list[int] = []
    try:
        r, w = os.pipe()
        opened += (r, w)
        tr, tw = os.pipe()
        opened += (tr, tw)
        pid = os.fork()
    except OSError as err:
        for fd in opened:
            os.close(fd)
        if err.errno in _NO_CHILD:
            return None
        raise
    if pid == 0:  # the child: its run, one message, gone
        code = 1
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it at once; the parent says so
            os.close(tr)
            os.set_blocking(tw, False)  # a tick never waits: one the pipe has no room for is lost
            out = _serial(each, [items[i] for i in run], lambda _item: _tick(tw))
            write_all(w, msgspec.msgpack.encode(out))
            code = 0
        except BaseException:  # noqa: BLE001 - any failure: the parent does the run again
            pass
        finally:
            os._exit(code)
    os.close(w)
    os.close(tw)
    os.set_blocking(tr, False)
    return _Child(pid, r, tr, run)


def _tick(fd: int) -> None:
    try:
        os.write(fd, b"\x01")
    except BlockingIOError:
        pass


def _collect(child: _Child, message: bytes, decoder: msgspec.msgpack.Decoder[Any]) -> list[Any] | None:
    """The child's results (its pipes closed and itself reaped), or None when it did not end well or sent
    anything but one result per item of its run."""
    child.close()
    _pid, status = os.waitpid(child.pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    try:
        got = decoder.decode(message)
    except msgspec.DecodeError:
        return None
    return got if len(got) == len(child.run) else None


def _reap(child: _Child) -> None:
    """A child not collected (this process is leaving early: an error, Ctrl-C): killed and waited for."""
    child.close()
    kill_and_reap(child.pid)
