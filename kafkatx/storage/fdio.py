"""File-descriptor I/O every layer above shares, and the one door every read of a log dir goes through.

Reads: every open, stat, read (``pread``/``preadv``), map and listing of a file or folder of a log dir is
one of the functions below (the compiled readers, ``storage/_partition.c``, raise the same ``OSError`` and are
turned into the same error by their Python callers, :func:`failed`). Their contract is one: an ``OSError``
(permission denied, an I/O error, a file deleted under the reader, too many open files) becomes
:class:`kafkatx.errors.ReadFailed` naming the file, ``could not read FILE: reason`` (exit 3), and never
anything a reader could take for data: no error here is a :class:`~kafkatx.errors.DecodeError` (which the
loader takes for a torn tail, where Kafka's ``LogLoader`` recovery truncates) nor a ``MissingFile`` (an
absent optional file). A read that returns fewer bytes than the file held when it was opened is the
file changing under the reader (``segment.FileShrank``), judged by the callers that know the size.

Tests count and fail these calls (:func:`set_fault_hook`: ``tests/storage/test_io_faults.py``), as SQLite's
tests fail its VFS calls: with a hook installed the compiled readers step aside for their Python twins,
which come through here, so every call site can be failed in turn.

Writes and pipes: a whole buffer written, a pipe read to its end, a child process ended. (``os.write``
may write less than it is given; these loop until it is all done.)
"""

from __future__ import annotations

import errno as _errno
import mmap
import os
import signal
import stat as _stat
from collections.abc import Callable, Sequence

from kafkatx.errors import ReadFailed

# The fault hook (tests only): called as hook(op, path) before each call of this module that reads;
# it may raise an OSError (the call fails with it), return SHORT (this pread/preadv returns half the
# bytes it read: a short read) or CUT (the file is cut to half its size from this call on: every later
# stat, fstat and read of it sees it so until it is opened again, as a file a broker truncates under the
# reader, then rewrites). None: no fault.
SHORT = "short"
CUT = "cut"
FaultHook = Callable[[str, str], "str | None"]
_hook: FaultHook | None = None
_cut: dict[str, int] = {}  # path -> the size a CUT fault cut it to (a hook's run only)


def set_fault_hook(hook: FaultHook | None) -> FaultHook | None:
    """Install ``hook`` (None: none); returns the one installed before. With a hook the compiled partition
    readers are not used (``faults_active``), so every read comes through this module."""
    global _hook
    before, _hook = _hook, hook
    _cut.clear()
    return before


def faults_active() -> bool:
    """Whether a fault hook is installed (the compiled readers then step aside for their Python twins)."""
    return _hook is not None


def _reason(err: OSError) -> str:
    if err.errno == _errno.ENOENT:
        return "no such file (deleted while being read?)"
    return err.strerror or str(err)


def failed(path: str | os.PathLike[str], err: OSError, what: str = "read") -> ReadFailed:
    """The one error of a failed I/O call on ``path``: ``could not read PATH: reason`` (exit 3). ``what``:
    the verb (``read``, ``list``: a folder)."""
    where = os.fspath(path)
    reason = _reason(err)
    return ReadFailed(f"could not {what} {where}: {reason}", path=where, reason=reason, errno=err.errno)


def _fault(op: str, path: str | os.PathLike[str]) -> str | None:
    hook = _hook
    assert hook is not None
    where = os.fspath(path)
    got = hook(op, where)
    if got == CUT and where not in _cut:
        _cut[where] = os.stat(where).st_size // 2
    return got


def _cut_to(path: str | os.PathLike[str]) -> int | None:
    return _cut.get(os.fspath(path)) if _cut else None


def open_read(path: str | os.PathLike[str], flags: int = 0, *, dir_fd: int | None = None,
              name: str | None = None) -> int:
    """A read-only descriptor of ``path`` (``O_CLOEXEC``, plus ``flags``); with ``dir_fd``, ``name`` is opened
    in that folder (``path`` names it in the error)."""
    try:
        if _hook is not None:
            _fault("open", path)
            if _cut:
                _cut.pop(os.fspath(path), None)  # a CUT lasts while the file is read: a new open sees it whole
        if dir_fd is not None:
            return os.open(name if name is not None else path, os.O_RDONLY | os.O_CLOEXEC | flags, dir_fd=dir_fd)
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    except OSError as err:
        raise failed(path, err) from err


def _shrunk(st: os.stat_result, path: str | os.PathLike[str]) -> os.stat_result:
    cut = _cut_to(path)
    if cut is None or st.st_size <= cut:
        return st
    fields = list(st[:10])
    fields[6] = cut
    return os.stat_result(fields)


def fstat(fd: int, path: str | os.PathLike[str]) -> os.stat_result:
    """``os.fstat(fd)`` of ``path`` open on ``fd``."""
    try:
        if _hook is not None:
            _fault("fstat", path)
            return _shrunk(os.fstat(fd), path)
        return os.fstat(fd)
    except OSError as err:
        raise failed(path, err) from err


def stat(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> os.stat_result:
    """``os.stat(path)``."""
    try:
        if _hook is not None:
            _fault("stat", path)
            return _shrunk(os.stat(path, follow_symlinks=follow_symlinks), path)
        return os.stat(path, follow_symlinks=follow_symlinks)
    except OSError as err:
        raise failed(path, err) from err


def stat_or_none(path: str | os.PathLike[str]) -> os.stat_result | None:
    """``os.stat(path)``, None when nothing is there (ENOENT, ENOTDIR); any other error is ReadFailed:
    a file that cannot be asked is never an absent one."""
    try:
        if _hook is not None:
            _fault("stat", path)
            return _shrunk(os.stat(path), path)
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise failed(path, err) from err


def is_file(path: str | os.PathLike[str]) -> bool:
    """``Path.is_file`` that fails loudly: a regular file (symlinks followed), False when nothing is there;
    an error other than "not there" is ReadFailed (``Path.is_file`` answers False for EACCES on a folder
    above, EIO...)."""
    st = stat_or_none(path)
    return st is not None and _stat.S_ISREG(st.st_mode)


def is_dir(path: str | os.PathLike[str]) -> bool:
    """``Path.is_dir`` that fails loudly (see :func:`is_file`)."""
    st = stat_or_none(path)
    return st is not None and _stat.S_ISDIR(st.st_mode)


def pread(fd: int, n: int, pos: int, path: str | os.PathLike[str]) -> bytes:
    """``os.pread(fd, n, pos)`` of ``path``; fewer bytes than asked is the caller's to judge (the end of
    the file, or a file cut under the read)."""
    try:
        if _hook is not None:
            short = _fault("pread", path)
            data = os.pread(fd, n, pos)
            if (cut := _cut_to(path)) is not None:
                data = data[:max(0, cut - pos)]
            return data if short != SHORT else data[:max(1, len(data) // 2)]
        return os.pread(fd, n, pos)
    except OSError as err:
        raise failed(path, err) from err


def preadv(fd: int, buffers: Sequence[memoryview], pos: int, path: str | os.PathLike[str]) -> int:
    """``os.preadv(fd, buffers, pos)`` of ``path`` (bytes read; the caller judges a short read)."""
    try:
        if _hook is not None:
            short = _fault("preadv", path)
            got = os.preadv(fd, buffers, pos)
            if (cut := _cut_to(path)) is not None:
                got = min(got, max(0, cut - pos))
            return got if short != SHORT else max(1, got // 2) if got else 0
        return os.preadv(fd, buffers, pos)
    except OSError as err:
        raise failed(path, err) from err


def map_read(fd: int, path: str | os.PathLike[str], *, flags: int | None = None) -> mmap.mmap:
    """A read-only map of the whole file open on ``fd`` (``flags``: ``MAP_SHARED | MAP_POPULATE``-like
    flags for ``mmap.mmap(fd, 0, flags=..., prot=PROT_READ)``; None: ``access=ACCESS_READ``)."""
    try:
        if _hook is not None:
            _fault("mmap", path)
        if flags is not None:
            return mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ)
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as err:
        raise failed(path, err) from err
    except ValueError as err:  # mmap's own refusals (an empty or a special file)
        raise ReadFailed(f"could not map {os.fspath(path)}: {err}", path=os.fspath(path), reason=str(err)) from err


def list_entries(path: str | os.PathLike[str]) -> list[tuple[str, bool, bool]]:
    """``(name, is a folder, is a regular file)`` of each entry of the folder ``path`` (symlinks followed,
    as ``DirEntry.is_dir``/``is_file``), in the order it lists them. An entry gone between the listing and
    its stat is neither; any other error is ReadFailed naming the folder or the entry."""
    where = os.fspath(path)
    try:
        if _hook is not None:
            _fault("list", where)
        out = []
        with os.scandir(where) as it:
            for e in it:
                out.append((e.name, e.is_dir(), e.is_file()))
        return out
    except OSError as err:
        raise failed(err.filename if isinstance(err.filename, str) else where, err, "list") from err


def read_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` from its start (a small text file: a checkpoint,
    ``meta.properties``); more than ``limit`` tells the caller it is too large."""
    fd = open_read(path)
    try:
        chunks = []
        got = 0
        while got <= limit:
            chunk = pread(fd, limit + 1 - got, got, path)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """All of ``data`` written to ``fd`` (short writes continued)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def kill_and_reap(pid: int) -> None:
    """Child ``pid`` killed (SIGKILL) and waited for: no process and no zombie left (nothing to do when it is
    gone already)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    os.waitpid(pid, 0)
