"""One log segment: ``<base offset>.log`` and the index files named after it.

Kafka names every file of a segment by the segment's base offset, zero-padded
to 20 digits (``LogFileUtils.filenamePrefixFromOffset`` in
storage/src/main/java/org/apache/kafka/storage/internals/log/LogFileUtils.java):
``00000000000000000042.log`` holds the batches, ``.index`` maps offsets to byte
positions, ``.timeindex`` timestamps to offsets and the optional ``.txnindex``
the aborted transactions whose ABORT marker lies in this segment (Kafka only
creates the file once the first entry is written).

Segments can be gigabytes: :meth:`Segment.open` maps the file read-only and
every reader works on slices of that map, never on a copy.

A map is only safe while nobody shrinks the file: a running broker truncates
segments (follower truncation, recovery) and touching a mapped page past the
new end kills the process with SIGBUS, which Python cannot catch. Every map
:func:`map_file` makes is therefore registered with the compiled guard
``kafkatx.storage._mapguard`` (kafkatx/storage/_mapguard.c): its SIGBUS handler maps a
zero page over a faulting page of a registered range, flags the range and
lets the read go on; after the read :func:`map_file` sees the flag (or a
smaller size) and raises :class:`FileShrank` ("changed size while being
read", exit 3) instead of returning what the zeros decoded to. Without the
compiled guard (no C compiler) nothing is mapped unless ``KAFKATX_READ=mmap``
asks for it: files are read with pread as below. And when the
log dir's ``.lock`` is held by another process (a running broker, asked of the
kernel on the ``.lock`` itself, so a broker in another PID namespace counts) - or when
``KAFKATX_READ=pread`` asks for it - :func:`map_file` reads the file with
bounded ``os.pread`` windows into private anonymous memory instead (a snapshot:
nothing the broker does afterwards can fault it), and a file that shrinks
while it is read (a short read, or a smaller size afterwards) is one
:class:`FileShrank` error (exit 3) naming the file and the byte position.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import stat
import struct
import sys
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PosixPath
from typing import TypeVar, TypeVarTuple

from kafkatx.errors import DecodeError, MissingFile, ReadFailed
from kafkatx.format._primitives import Buffer as Buffer  # the one buffer type, re-exported
from kafkatx.format.record_batch import BatchHeader
from kafkatx.format.record_batch import iter_batches as _iter_batches
from kafkatx.storage import fdio

try:  # the SIGBUS guard for mappings (kafkatx/storage/_mapguard.c); absent: read with pread, never map
    import kafkatx.storage._mapguard as _mapguard
except ImportError:  # pragma: no cover - built without a C compiler
    _mapguard = None  # type: ignore[assignment]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"

# Kafka always writes 20 digits; accept only that so ".log.deleted", ".cleaned" and
# ".swap" leftovers of the cleaner and of segment deletion are not taken for segments.
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

READ_MODE_ENV = "KAFKATX_READ"  # "mmap" | "pread" | unset (decide from the log dir's .lock)
PREAD_WINDOW = 8 << 20  # bytes per os.pread on the live-broker path
LOCK_FILE = ".lock"
LOG_OVERHEAD_BYTES = 12  # record_batch.LOG_OVERHEAD: base offset + batch length
MAX_BATCH_BYTES = 64 << 20  # record_batch.MAX_BATCH_SIZE


class FileShrank(ReadFailed):
    """A file got shorter while kafkatx was reading it (a live broker truncated it): exit 3.

    Not a :class:`DecodeError`: readers treat a DecodeError in a segment as a torn tail
    (where Kafka's recovery would truncate), and an incomplete snapshot of the file is no
    such tail. A failed read (:class:`ReadFailed`, ``storage/fdio.py``'s one error): the file as
    opened is gone; the message names the file and the byte where it now ends.
    """

    def __init__(self, message: str, *, path: Path, position: int) -> None:
        super().__init__(f"{path}: byte {position}: {message}", path=path, reason=message)
        self.position = position


# .lock files this process holds itself (kafkatx.repair.fsutil.LogDirLocks registers them): their
# (st_dev, st_ino). Nobody else can hold them, and probing one would open and close a second
# descriptor of it, which silently drops this process's own POSIX lock on it.
_HELD_BY_US: set[tuple[int, int]] = set()

# struct flock (Linux, LP64): short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = struct.Struct("@hhqqi4x")
_F_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)


def note_lock_held(dev: int, ino: int, held: bool) -> None:
    """Record that this process took (``held``) or released its lock on the ``.lock`` file (dev, ino)."""
    if held:
        _HELD_BY_US.add((dev, ino))
    else:
        _HELD_BY_US.discard((dev, ino))


def lock_is_held(lock_path: Path) -> bool | None:
    """Whether another process holds ``lock_path`` (POSIX or flock), asking the kernel; None: cannot tell.

    The kernel answers for the lock on the file itself, whichever PID namespace (container) the
    holder lives in - unlike ``/proc/locks``, which lists only the locks of the reader's namespace.
    POSIX record locks (what the JVM's ``FileChannel.tryLock`` takes for Kafka's ``FileLock``):
    ``F_OFD_GETLK`` (``F_GETLK`` where absent) asks whether a write lock on the whole file would
    conflict, taking nothing. flock locks (another kafkatx): a non-blocking shared ``flock`` on a
    separate descriptor, released at once if it was granted. The descriptor is closed afterwards,
    which would drop a POSIX lock this process holds on the file, so a ``.lock`` this process holds
    (:func:`note_lock_held`) is answered without opening it.
    """
    try:
        st = fdio.stat(lock_path)  # stat, not open: closing any descriptor of it drops our own POSIX lock
    except ReadFailed:
        return None
    if (st.st_dev, st.st_ino) in _HELD_BY_US:
        return False
    try:
        fd = fdio.open_read(lock_path, os.O_NOFOLLOW | os.O_NONBLOCK)
    except ReadFailed:
        return None
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            got = fcntl.fcntl(fd, _F_OFD_GETLK if _F_OFD_GETLK is not None else fcntl.F_GETLK, query)
        except OSError:
            got = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        if _FLOCK.unpack(got)[0] != fcntl.F_UNLCK:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                return True
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return None
    finally:
        os.close(fd)


def broker_holds_lock(path: Path) -> bool:
    """True when the ``.lock`` of the log dir holding ``path`` is locked by another process.

    ``path`` is a file of a partition folder (``<logdir>/<topic-N>/<file>``) or of the log dir
    itself. Unknown (the kernel cannot be asked) counts as held: the safe answer.
    """
    for d in (path.parent, path.parent.parent):
        lock = d / LOCK_FILE
        if not os.path.lexists(lock):
            continue
        held = lock_is_held(lock)
        return True if held is None else held
    return False


def as_path(path: Path | str) -> Path:
    """``path`` as a :class:`Path` (itself when it is one: no re-parse per file at 10,000 partitions)."""
    return path if isinstance(path, Path) else Path(path)


# Python 3.12's _make_child_relpath sets the child's string; 3.11's leaves it to be joined on first use
_CHILD_NEEDS_STR = sys.version_info < (3, 12)
# The classes child_path makes children of itself on Python 3.11 (pathlib's own, whose _make_child_relpath
# and _from_parsed_parts it restates; a subclass may override them: it goes through its own method)
_CHILD_CLASSES = (PosixPath,) if sys.version_info[:2] == (3, 11) and os.sep == "/" else ()
_SEP = "/"
_new = object.__new__


def child_path(folder: Path, name: str) -> Path:
    """``folder / name`` for a plain file name (no separator): the child made without parsing ``name``
    again (pathlib's own ``_make_child_relpath``, what ``Path.iterdir`` uses) where it exists."""
    if _CHILD_NEEDS_STR and folder.__class__ in _CHILD_CLASSES:
        # Python 3.11's _make_child_relpath (``_from_parsed_parts(drv, root, parts + [name])``) inlined for
        # its own Path classes, the string set as below: ~0.3 us a path, not ~0.8 (four paths per partition)
        made: Path = _new(folder.__class__)
        made._drv = folder._drv  # type: ignore[attr-defined]
        made._root = folder._root  # type: ignore[attr-defined]
        made._parts = folder._parts + [name]  # type: ignore[attr-defined]
        base = getattr(folder, "_str", None) or str(folder)  # its string once made (str() is a Python call)
        made._str = (name if base == "." else base + name if base.endswith(_SEP)  # type: ignore[attr-defined]
                     else base + _SEP + name)
        return made
    make = getattr(folder, "_make_child_relpath", None)
    if make is None:
        return folder / name
    child: Path = make(name)
    if _CHILD_NEEDS_STR:
        # Python 3.11's child has no string yet: every open (os.fspath) and str() would join its parts
        # again (~2 us, 50,000 files at 10,000 partitions). Its string is the folder's plus the name,
        # as Python 3.12's _make_child_relpath sets it: sep between, none after a root, none after ".".
        base = str(folder)
        sep = folder._flavour.sep  # type: ignore[attr-defined]
        child._str = (name if base == "." else base + name if base.endswith(sep)  # type: ignore[attr-defined]
                      else base + sep + name)
    return child


# Files up to this size are read whole with one pread into bytes when no read mode is forced: a copy
# of a few pages costs less than the map, its guard and the log dir's lock probe, and a copy is the
# snapshot the pread path takes anyway (nothing a live broker does afterwards can fault it). At 10,000
# partitions most files (indexes, snapshots, small segments) are this small.
SMALL_FILE_BYTES = 64 << 10


def _open_read(path: Path) -> int:
    """A read-only descriptor of ``path``; :class:`ReadFailed` (one line naming it) when it cannot be opened."""
    return fdio.open_read(path)


def _read_small(fd: int, path: Path, size: int) -> bytes | None:
    """The whole of a small file (``size`` bytes at open) as bytes; None when it is not small or a read
    mode is forced (``KAFKATX_READ``) or there is no compiled guard (then everything goes by pread).

    The answers stay those of the path the file would have taken: a file shorter after the block than
    before it is :class:`FileShrank` as on the map path, unless a live broker holds the log dir (the
    pread path's snapshot: asked only then)."""
    if _mapguard is None or os.environ.get(READ_MODE_ENV):
        return None
    return _pread_small(fd, path, size)


def _pread_small(fd: int, path: Path, size: int) -> bytes | None:
    """The ``size`` bytes of a small file in one pread (None: not small); fewer than that is FileShrank."""
    if size > SMALL_FILE_BYTES:
        return None
    data = fdio.pread(fd, size, 0, path)
    if len(data) < size:
        raise FileShrank(f"file shrank while being read: {size} bytes at open, it now ends at byte {len(data)} "
                         "(a live broker truncated it; read again)", path=path, position=len(data))
    return data


def _after_small_read(fd: int, path: Path, size: int) -> None:
    """After a small file was read whole: shorter now than at open is what the map path says
    (:func:`_changed_size`), unless a live broker holds the log dir (the pread path's snapshot)."""
    _small_read_size_holds(path, size, fdio.fstat(fd, path).st_size)


def _small_read_size_holds(path: Path, size: int, after: int) -> None:
    """:func:`_after_small_read`'s judgement of a read of ``size`` bytes after which the file has ``after``."""
    if after < size and not _use_pread(path):
        raise _changed_size(path, size, after)


def small_reads() -> bool:
    """Whether :func:`read_small_file` reads at all (a compiled guard, no read mode forced): asked once
    by a caller that reads a partition's files (an environment lookup costs about a microsecond)."""
    return _mapguard is not None and not os.environ.get(READ_MODE_ENV)


def _file_size(fd: int, path: Path) -> int:
    """The size of the file open on ``fd``; a directory is :class:`MissingFile` (what the readers say)."""
    st = fdio.fstat(fd, path)
    if stat.S_ISDIR(st.st_mode):
        raise MissingFile(f"{path}: is a directory, not a file")
    return st.st_size


def read_small_file(path: Path, *, allowed: bool | None = None, got: tuple[bytes, int] | None = None) -> bytes | None:
    """The bytes :func:`map_file` (and :func:`open_windowed`) would hand out for ``path`` when it is
    small (``SMALL_FILE_BYTES``, no read mode forced, a compiled guard), with the same errors; None
    when it is not small: the caller then takes :func:`map_file`. No context manager, no generator:
    the per-file cost of the loader's reads at 10,000 partitions (snapshot, index, log tail).
    ``allowed``: :func:`small_reads` as the caller asked it (None: asked here). ``got``: this file as
    ``partition.read_small_files`` read it already (``SMALL_FILE_BYTES``, when reads are allowed), judged
    as this function judges its own read (a file shorter after the read than it read is FileShrank)."""
    if got is not None:
        read, after = got
        if not read or after <= len(read):
            if read:
                _small_read_size_holds(path, len(read), after)
            return read
        # more bytes after the read than it got: a short read (or the file grew since): read it here
    if not (small_reads() if allowed is None else allowed):
        return None
    fd = fdio.open_read(path)
    try:
        # No fstat before the read: one pread of one byte more than a small file may hold says the
        # size (more than SMALL_FILE_BYTES: not small, the caller maps it). Only a file that reads
        # whole needs the size check after the read (an empty one has nothing that could be cut).
        try:
            data = fdio.pread(fd, SMALL_FILE_BYTES + 1, 0, path)
        except ReadFailed as err:
            if err.errno != errno.EISDIR:
                raise
            raise MissingFile(f"{path}: is a directory, not a file") from err
        size = len(data)
        if size > SMALL_FILE_BYTES:
            # Not small: the caller maps it (or, a live broker holding the log dir, reads it with pread)
            # and takes its size then. A file cut below what this read saw already is the shrink either
            # path would have met had it taken the size first (this read kept no bytes: no snapshot).
            if (after := fdio.fstat(fd, path).st_size) < size:
                raise FileShrank(f"file shrank while being read: more than {SMALL_FILE_BYTES} bytes when first "
                                 f"read, it now ends at byte {after} (a live broker truncated it; read again)",
                                 path=path, position=after)
            return None
        if size:
            after = fdio.fstat(fd, path).st_size
            if after > size:  # a short read, or bytes appended since: read on to the end (rare)
                data = _read_on(fd, path, data)
                if len(data) > SMALL_FILE_BYTES:
                    return None  # grew past small: the caller maps it and takes its size then
                after = fdio.fstat(fd, path).st_size
            _small_read_size_holds(path, len(data), after)
        return data
    finally:
        os.close(fd)


def _read_on(fd: int, path: Path, data: bytes) -> bytes:
    """``data`` (the file's first bytes) and what ``fd`` holds after them, up to ``SMALL_FILE_BYTES + 1``
    bytes in all: preads until the end of the file (a pread that returns nothing)."""
    chunks = [data]
    got = len(data)
    while got <= SMALL_FILE_BYTES:
        chunk = fdio.pread(fd, SMALL_FILE_BYTES + 1 - got, got, path)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_whole(path: Path, read: Callable[[Buffer, *Ts], T], *args: *Ts, keep: dict[str, bytes] | None = None,
               allowed: bool | None = None, got: tuple[bytes, int] | None = None) -> T:
    """``read(bytes, *args)`` over the whole of ``path``: a small file read with one call
    (:func:`read_small_file`; its bytes also put in ``keep`` under the path's string when given), a larger one mapped
    (:func:`map_file`); the same bytes and errors either way. ``allowed``, ``got``: as
    :func:`read_small_file` takes them. (``args``: no ``partial`` per file at 10,000 partitions.)"""
    data = read_small_file(path, allowed=allowed, got=got)
    if data is not None:
        if keep is not None:
            keep[str(path)] = data
        return read(data, *args)
    with map_file(path) as buf:
        return read(buf, *args)


def _use_pread(path: Path) -> bool:
    mode = os.environ.get(READ_MODE_ENV, "")
    if mode == "pread":
        return True
    if mode == "mmap":
        return False
    if _mapguard is None:
        return True  # an unguarded map could kill the process: read with pread
    return broker_holds_lock(path)


def _guard(mm: mmap.mmap) -> int:
    """The guard slot of a fresh mapping (``kafkatx.storage._mapguard``); -1: unguarded (registry full, or
    no compiled guard when ``KAFKATX_READ=mmap`` forced the map)."""
    if _mapguard is None:
        return -1
    slot: int = _mapguard.register(mm)
    return slot


_GUARDED: dict[int, int] = {}  # id() of a guarded map that map_file holds open -> its guard slot


def was_cut(buf: Buffer) -> bool:
    """Whether a read of ``buf`` (a :func:`map_file` buffer, still open) touched a page past the end of
    a file truncated under the map: what it read there were zeros, not the file. Streaming readers ask
    before they report such bytes as damage; :func:`map_file` raises :class:`FileShrank` on exit anyway."""
    slot = _GUARDED.get(id(buf))
    return slot is not None and _mapguard is not None and bool(_mapguard.was_cut(slot))


def _changed_size(path: Path, size: int, after: int) -> FileShrank:
    return FileShrank(f"file changed size while being read: {size} bytes when mapped, {after} bytes now "
                      "(truncated under the mapping, e.g. by a live broker; read again)", path=path, position=after)


def read_snapshot(fd: int, path: Path, size: int) -> mmap.mmap:
    """``size`` bytes of ``fd`` read with bounded preads into private anonymous memory.

    Raises :class:`FileShrank` at the first byte that is no longer there, or when the file is
    shorter after the read than before it.
    """
    mm = mmap.mmap(-1, size)
    try:
        pos = 0
        while pos < size:
            chunk = fdio.pread(fd, min(PREAD_WINDOW, size - pos), pos, path)
            if not chunk:
                raise FileShrank(f"file shrank while being read: {size} bytes at open, it now ends at byte {pos} "
                                 "(a live broker truncated it; read again)", path=path, position=pos)
            mm[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
        after = fdio.fstat(fd, path).st_size
        if after < size:
            raise FileShrank(f"file shrank while being read: {size} bytes at open, {after} bytes after "
                             "(a live broker truncated it; read again)", path=path, position=after)
    except BaseException:
        mm.close()
        raise
    return mm


DEFAULT_READ_WINDOW = 64 << 20  # --read-window: bytes of a segment a windowed pread read holds at most
# The window of the readers that take none explicitly (lag, find-hanging, dump-segment: --read-window)
_READ_WINDOW: ContextVar[int] = ContextVar("kafkatx_read_window", default=DEFAULT_READ_WINDOW)


@contextmanager
def read_window(window: int | None) -> Iterator[None]:
    """Within the block, windowed pread reads (:func:`open_windowed` without ``window``) hold at most
    ``window`` bytes of a segment (None: the default, :data:`DEFAULT_READ_WINDOW`)."""
    token = _READ_WINDOW.set(DEFAULT_READ_WINDOW if window is None else window)
    try:
        yield
    finally:
        _READ_WINDOW.reset(token)


def current_read_window() -> int:
    """The window :func:`read_window` set for this context (the default outside any)."""
    return _READ_WINDOW.get()


class WindowedSnapshot:
    """A segment read with bounded preads window by window, for readers that go forward only.

    The buffer (:attr:`buf`) is a private anonymous map of the file's size - positions stay the
    file's positions, so the decoders and the compiled fold read it as they read a mapping - but
    the kernel backs only the pages :meth:`prepare` has read into and not yet released: peak
    private memory is about one window plus the chunk being read, whatever the segment's size
    (a batch larger than the window is read whole: Kafka's batches are at most 64 MiB here).
    Reads go straight into the map (``preadv``, no copy); a short read is :class:`FileShrank`.
    Bytes below the position last prepared are released: the reader must not go back.
    """

    def __init__(self, fd: int, path: Path, size: int, window: int) -> None:
        self.fd, self.path, self.size, self.window = fd, path, size, window
        self.piece = max(mmap.PAGESIZE, min(window, PREAD_WINDOW))
        self.buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._view = memoryview(self.buf)
        self.loaded = 0  # [0, loaded) has been read
        self.released = 0  # [0, released) has been handed back to the kernel

    def _load(self, upto: int) -> None:
        upto = min(upto, self.size)
        while self.loaded < upto:
            n = min(self.piece, self.size - self.loaded)
            got = fdio.preadv(self.fd, [self._view[self.loaded:self.loaded + n]], self.loaded, self.path)
            if got <= 0:
                raise FileShrank(f"file shrank while being read: {self.size} bytes at open, it now ends at byte "
                                 f"{self.loaded} (a live broker truncated it; read again)", path=self.path,
                                 position=self.loaded)
            self.loaded += got

    def prepare(self, pos: int, ahead: int) -> int:
        """Make ``[pos, pos + ahead)`` and the whole batch starting at ``pos`` readable; release what lies
        before ``pos``. Returns the end of what is readable (the ``end`` a fold may go to)."""
        page = pos - pos % mmap.PAGESIZE
        if page > self.released:
            self.buf.madvise(mmap.MADV_DONTNEED, self.released, page - self.released)
            self.released = page
        if page > self.loaded:
            self.loaded = page  # a reader that starts further on (an index seek): the bytes before stay unread
        self._load(pos + LOG_OVERHEAD_BYTES)
        need = pos + ahead
        if pos + LOG_OVERHEAD_BYTES <= self.size:
            length = int.from_bytes(self.buf[pos + 8:pos + LOG_OVERHEAD_BYTES], "big", signed=True)
            if 0 < length <= MAX_BATCH_BYTES:
                need = max(need, pos + LOG_OVERHEAD_BYTES + length)
        self._load(need)
        return self.loaded

    def rewind(self) -> None:
        """Release everything read so far; the next :meth:`prepare` may start anywhere, again."""
        self.buf.madvise(mmap.MADV_DONTNEED, 0, self.size)
        self.loaded = self.released = 0

    def close(self) -> None:
        self._view.release()
        try:
            self.buf.close()
        except BufferError:
            pass  # a memoryview into it is still alive: released with its last reference


@contextmanager
def open_windowed(path: Path, *, window: int | None = None,
                  populate: bool = False) -> Iterator[tuple[Buffer, WindowedSnapshot | None]]:
    """``(buffer, window)``: a :class:`WindowedSnapshot` where :func:`map_file` would read a snapshot with
    pread (a live broker holds the log dir, or ``KAFKATX_READ=pread``), else ``map_file``'s buffer and None.

    For forward-only readers that call ``window.prepare(pos, ahead)`` before reading at ``pos``
    (``SegmentFold(window=...)``); everything else keeps :func:`map_file`'s whole snapshot.
    """
    path = as_path(path)
    if window is None:
        window = _READ_WINDOW.get()
    if _mapguard is not None and not os.environ.get(READ_MODE_ENV):
        fd = _open_read(path)
        try:
            size = _file_size(fd, path)
            small = _read_small(fd, path, size)
            if small is not None:
                yield small, None
                _after_small_read(fd, path, size)
                return
        finally:
            os.close(fd)
    if not _use_pread(path):
        with map_file(path, populate=populate) as buf:
            yield buf, None
        return
    fd = _open_read(path)
    try:
        size = fdio.fstat(fd, path).st_size
        if size == 0:
            yield b"", None
            return
        win = WindowedSnapshot(fd, path, size, window)
        try:
            try:
                yield win.buf, win
            except DecodeError as err:
                # bytes that stop forming batches in a file cut under the read are no torn tail
                if (after := fdio.fstat(fd, path).st_size) < size:
                    raise _changed_size(path, size, after) from err
                raise
            after = fdio.fstat(fd, path).st_size
            if after < size:  # shorter after the read than before it: what was read may be gone
                raise FileShrank(f"file shrank while being read: {size} bytes at open, {after} bytes after "
                                 "(a live broker truncated it; read again)", path=path, position=after)
        finally:
            win.close()
    finally:
        os.close(fd)


def iter_batches_windowed(buf: Buffer, win: WindowedSnapshot | None, start: int = 0, *,
                          verify_crc: bool = False, last_only: bool = False,
                          end: int | None = None) -> Iterator[BatchHeader]:
    """``record_batch.iter_batches(buf, start, end, verify_crc=..., last_only=...)`` over an
    :func:`open_windowed` buffer: the same batches and the same error, reading ``win``'s windows
    forward (None: the whole buffer at once). A batch that runs past the bytes read so far is read
    whole before it is framed again, so only an error inside what the file holds is raised."""
    size = len(buf) if end is None else min(end, len(buf))
    if win is None:  # record_batch's own iterator, not one more generator around it
        return _iter_batches(buf, start, size, verify_crc=verify_crc, last_only=last_only)
    return _iter_windows(buf, win, start, size, verify_crc, last_only)


def _iter_windows(buf: Buffer, win: WindowedSnapshot, start: int, size: int, verify_crc: bool,
                  last_only: bool) -> Iterator[BatchHeader]:
    pos = start
    while pos < size:
        lim = min(size, win.prepare(pos, win.window))
        nxt = pos
        try:
            for header in _iter_batches(buf, pos, lim, verify_crc=verify_crc, last_only=last_only):
                nxt = header.position + header.size
                yield header
        except DecodeError as err:
            if lim >= size or nxt == pos or err.position is None or err.position < nxt:
                raise  # inside what was read whole, or no progress: the file's own bytes
            # else: the batch at nxt runs past this window (prepare reads it whole)
        if lim >= size:
            return
        if nxt == pos:
            return  # pragma: no cover - prepare reads the batch at pos whole, so one was framed
        pos = nxt


def offset_from_file_name(name: str) -> int | None:
    """The base offset a Kafka file name starts with (``00000000000000000042.index`` -> 42), else None."""
    stem = name.split(".", 1)[0]
    if len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


# MAP_POPULATE where the OS has it (Linux): map_file(populate=True)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


@contextmanager
def map_file(path: Path, *, populate: bool = False) -> Iterator[Buffer]:
    """Map ``path`` read-only; an empty file gives ``b""`` (mmap refuses length 0).

    Raises :class:`ReadFailed` for a file that cannot be opened or read (``storage/fdio.py``), and
    :class:`FileShrank` for one cut under the read. The map is closed on
    exit; if a caller still holds a memoryview into it, closing is left to the
    garbage collector instead of failing. When a running broker holds the log dir (see
    the module doc) the buffer is a pread snapshot instead of a file mapping: the same
    bytes, immune to SIGBUS. ``populate``: the caller reads every byte (``verify`` checks
    every CRC), so the pages are mapped in one call up front instead of fault by fault.
    """
    path = as_path(path)
    fd = _open_read(path)  # closed below, after the map
    try:
        size = _file_size(fd, path)
        if size == 0:
            yield b""
            return
        small = _read_small(fd, path, size)
        if small is not None:
            yield small
            _after_small_read(fd, path, size)
            return
        slot = -1
        try:
            if _use_pread(path):
                mm = read_snapshot(fd, path, size)
            else:
                mm = fdio.map_read(fd, path, flags=mmap.MAP_SHARED | _POPULATE if populate and _POPULATE else None)
                if (mapped := len(mm)) < size:  # cut between the size and the map: it holds less than the file did
                    mm.close()
                    raise _changed_size(path, size, mapped)
                slot = _guard(mm)
                if slot >= 0:
                    _GUARDED[id(mm)] = slot
                if slot < 0 and _mapguard is not None:  # the guard's registry is full: no unguarded map
                    mm.close()
                    mm = read_snapshot(fd, path, size)
        except OSError as err:  # pragma: no cover - fdio's calls raise ReadFailed; mmap's own bookkeeping
            raise fdio.failed(path, err) from err
        try:
            try:
                yield mm
            except Exception as err:
                # the zeros a cut page reads as are no torn tail: the file changed under the read
                if slot >= 0 and _mapguard.was_cut(slot):
                    raise _changed_size(path, size, fdio.fstat(fd, path).st_size) from err
                if isinstance(err, DecodeError) and (after := fdio.fstat(fd, path).st_size) < size:
                    raise _changed_size(path, size, after) from err  # cut under the read: no torn tail
                raise
            if slot >= 0:
                after = fdio.fstat(fd, path).st_size
                if _mapguard.was_cut(slot) or after < size:
                    raise _changed_size(path, size, after)
        finally:
            if slot >= 0:
                _GUARDED.pop(id(mm), None)
                _mapguard.unregister(slot)
            try:
                mm.close()
            except BufferError:
                # A memoryview slice still points into the map (a caller kept a record
                # body); the map is released with the last reference instead.
                pass
    finally:
        os.close(fd)


class Segment:
    """The files of one segment. Paths of absent optional files are None.

    A frozen record of five fields (``base_offset``, ``log_path``, ``index_path``, ``timeindex_path``,
    ``txnindex_path``): equal, hashed and shown by them, as a frozen ``msgspec.Struct`` would be. A
    segment made from its folder's listing (:meth:`listed`) makes its ``.log`` and ``.index`` paths
    at once (every reader asks for them, the loader ten times a partition: plain attributes) and the
    ``.timeindex`` and ``.txnindex`` paths on first use: at 10,000 partitions most of them are never
    asked for, and a ``Path`` costs about half a microsecond. Once made, a path is the same object at
    every use."""

    __slots__ = ("base_offset", "log_path", "index_path", "_folder", "_stem", "_paths")

    base_offset: int
    log_path: Path
    index_path: Path | None
    _folder: Path | None
    _stem: str
    _paths: list[Path | str | None]  # .timeindex, .txnindex: the path, None (absent), or the suffix (present, not made)

    def __init__(self, *, base_offset: int, log_path: Path, index_path: Path | None = None,
                 timeindex_path: Path | None = None, txnindex_path: Path | None = None) -> None:
        init = object.__setattr__
        init(self, "base_offset", base_offset)
        init(self, "log_path", log_path)
        init(self, "index_path", index_path)
        init(self, "_folder", None)
        init(self, "_stem", "")
        init(self, "_paths", [timeindex_path, txnindex_path])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"immutable type: {type(self).__name__!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"immutable type: {type(self).__name__!r}")

    def _path(self, i: int) -> Path | None:
        p = self._paths[i]
        if p.__class__ is str:
            assert self._folder is not None
            p = self._paths[i] = child_path(self._folder, self._stem + p)
        return p  # type: ignore[return-value]

    @property
    def timeindex_path(self) -> Path | None:
        return self._path(0)

    @property
    def txnindex_path(self) -> Path | None:
        return self._path(1)

    def _fields(self) -> tuple[int, Path, Path | None, Path | None, Path | None]:
        return (self.base_offset, self.log_path, self.index_path, self.timeindex_path, self.txnindex_path)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        base, log, index, timeindex, txnindex = self._fields()
        return (f"{type(self).__name__}(base_offset={base!r}, log_path={log!r}, index_path={index!r}, "
                f"timeindex_path={timeindex!r}, txnindex_path={txnindex!r})")

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return _segment, self._fields()

    @classmethod
    def from_log_path(cls, log_path: Path, *, files: Container[str] | None = None) -> Segment:
        """The segment whose ``.log`` is ``log_path``, with the sibling index files that exist.

        ``files``: the names of the regular files in its folder, when the caller listed it
        already (``Partition``: one listing per folder instead of a stat per sibling)."""
        log_path = as_path(log_path)
        name = log_path.name
        base = offset_from_file_name(name)
        if base is None:
            raise MissingFile(f"{log_path}: not a segment file name (expected 20 digits + .log)")
        stem = name[:20]
        folder = log_path.parent

        def sibling(suffix: str) -> Path | None:
            if files is not None:
                return child_path(folder, stem + suffix) if stem + suffix in files else None
            p = child_path(folder, stem + suffix)
            return p if fdio.is_file(p) else None

        return cls(base_offset=base, log_path=log_path, index_path=sibling(INDEX_SUFFIX),
                   timeindex_path=sibling(TIMEINDEX_SUFFIX), txnindex_path=sibling(TXNINDEX_SUFFIX))

    @classmethod
    def listed(cls, folder: Path, base_offset: int, stem: str, index: bool, timeindex: bool,
               txnindex: bool) -> Segment:
        """The segment ``partition.classify_listing`` found in ``folder``: base offset, 20-digit prefix and
        which index files the listing holds; the ``.log`` and ``.index`` paths made now, the others on
        first use (``Partition``, once per segment at 10,000 partitions)."""
        seg = _new(cls)
        init = object.__setattr__
        init(seg, "base_offset", base_offset)
        init(seg, "log_path", child_path(folder, stem + LOG_SUFFIX))
        init(seg, "index_path", child_path(folder, stem + INDEX_SUFFIX) if index else None)
        init(seg, "_folder", folder)
        init(seg, "_stem", stem)
        init(seg, "_paths", [TIMEINDEX_SUFFIX if timeindex else None, TXNINDEX_SUFFIX if txnindex else None])
        return seg

    @property
    def size(self) -> int:
        """Current size of the ``.log`` file in bytes."""
        return fdio.stat(self.log_path).st_size

    @contextmanager
    def open(self, *, populate: bool = False) -> Iterator[Buffer]:
        """Map the ``.log`` read-only (``b""`` when empty); ``populate``: see :func:`map_file`."""
        with map_file(self.log_path, populate=populate) as buf:
            yield buf

    def iter_batches(self, buf: Buffer, start: int = 0, end: int | None = None, *,
                     last_only: bool = False) -> Iterator[BatchHeader]:
        """Batch headers of this segment's buffer from byte ``start``; errors name the ``.log``.
        ``last_only``: see ``record_batch.iter_batches`` (for callers that keep only the last)."""
        try:
            yield from _iter_batches(buf, start, end, last_only=last_only)
        except DecodeError as err:
            raise err.at(self.log_path) from err


def _segment(base_offset: int, log_path: Path, index_path: Path | None, timeindex_path: Path | None,
             txnindex_path: Path | None) -> Segment:
    """A pickled :class:`Segment` made again (its ``__reduce__``)."""
    return Segment(base_offset=base_offset, log_path=log_path, index_path=index_path, timeindex_path=timeindex_path,
                   txnindex_path=txnindex_path)
