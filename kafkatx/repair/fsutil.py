"""File-system primitives for repairs: containment, symlink refusal, locks, fsync, ownership.

Everything here works on real files and raises only :class:`kafkatx.errors.RepairError`
(or :class:`LogDirLocked`) with one line naming the file. Nothing reads a whole file:
hashing streams in chunks.

Why both lock kinds: Kafka's ``LogManager`` takes ``<logdir>/.lock`` through
``org.apache.kafka.server.util.FileLock`` -> ``FileChannel.tryLock()``
(server-common/src/main/java/org/apache/kafka/server/util/FileLock.java). On Linux the
JDK implements that with ``fcntl(F_SETLK)`` (a POSIX record lock), which the kernel
keeps separate from ``flock(2)`` locks. So a repair must probe (and then hold) both:
the POSIX lock to see a running Java broker, ``flock`` for anything else (including
another kafkatx) that locks the BSD way.

POSIX record locks belong to the process and are dropped when *any* descriptor of that
file is closed by it, so a :class:`LogDirLocks` keeps exactly one descriptor per
``.lock`` open for the whole repair and nothing else in kafkatx opens ``.lock``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from msgspec import Struct

from kafkatx.errors import LogDirLocked, ReadFailed, RepairError
from kafkatx.storage import fdio
from kafkatx.storage.fdio import write_all
from kafkatx.storage.segment import note_lock_held

CHUNK = 1 << 20
LOCK_FILE = ".lock"
TEMP_SUFFIX = ".kafkatx-tmp"


class FileState(Struct, frozen=True, kw_only=True):
    """What a regular file looks like right now (``None`` is used for "absent")."""

    size: int
    sha256: str
    uid: int
    gid: int
    mode: int  # permission bits only (stat.S_IMODE)


def sha256_bytes(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _hash_fd(fd: int, start: int, length: int | None, path: Path) -> hashlib._Hash:
    h = hashlib.sha256()
    pos = start
    remaining = length
    while remaining is None or remaining > 0:
        want = CHUNK if remaining is None else min(CHUNK, remaining)
        chunk = fdio.pread(fd, want, pos, path)
        if not chunk:
            if remaining is not None:
                raise RepairError(f"{path}: file ended at byte {pos}, {remaining} bytes short of the range to check")
            break
        h.update(chunk)
        pos += len(chunk)
        if remaining is not None:
            remaining -= len(chunk)
    return h


def open_nofollow(path: Path, flags: int = os.O_RDONLY, mode: int = 0o600, *, dir_fd: int | None = None) -> int:
    """``os.open`` that refuses a symlink as the last component (O_NOFOLLOW).

    With ``dir_fd`` (from :func:`open_dir`), ``path`` is a plain name inside that directory.
    """
    if flags & os.O_ACCMODE == os.O_RDONLY and not flags & os.O_CREAT:  # a read: the I/O layer's door
        try:
            return fdio.open_read(path, flags | os.O_NOFOLLOW, dir_fd=dir_fd, name=path.name)
        except ReadFailed as err:
            if err.errno == errno.ELOOP:
                raise RepairError(f"{path}: is a symlink; repairs never follow symlinks") from err
            raise
    try:
        return os.open(path.name if dir_fd is not None else path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                       dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise RepairError(f"{path}: is a symlink; repairs never follow symlinks") from err
        raise RepairError(f"{path}: cannot open: {err.strerror}") from err


def check_single_link(fd: int, path: Path) -> None:
    """Refuse to write through ``fd`` when its file has other names (``st_nlink != 1``).

    A hard link is the same inode under a second name, possibly outside every log dir (hard
    links need no permission on the target's folder): an append, truncate or replace through
    the name inside the log dir would change the file outside too. Checked on the very
    descriptor written through, so a link made after an earlier ``stat`` is seen.
    """
    n = os.fstat(fd).st_nlink
    if n != 1:
        raise RepairError(f"{path}: has {n} hard links (another name may lie outside the log dir); repairs and "
                          "undo never write through a hard-linked file, refusing")


def check_name_single_link(path: Path, *, dir_fd: int | None = None) -> None:
    """:func:`check_single_link` on a descriptor of ``path`` opened read-only (for a rename or unlink)."""
    fd = open_nofollow(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        check_single_link(fd, path)
    finally:
        os.close(fd)


def hash_file(path: Path, start: int = 0, length: int | None = None) -> str:
    """sha256 of ``length`` bytes of ``path`` from ``start`` (to the end when ``None``), streamed."""
    fd = open_nofollow(path)
    try:
        return _hash_fd(fd, start, length, path).hexdigest()
    finally:
        os.close(fd)


def hasher_of_file(path: Path) -> hashlib._Hash:
    """A sha256 object fed with the whole file, so callers can ``copy()`` it and append more."""
    fd = open_nofollow(path)
    try:
        return _hash_fd(fd, 0, None, path)
    finally:
        os.close(fd)


def file_state(path: Path) -> FileState | None:
    """State of a regular file, ``None`` when absent. Refuses symlinks and non-regular files."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise RepairError(f"{path}: cannot stat: {err.strerror}") from err
    if stat.S_ISLNK(st.st_mode):
        raise RepairError(f"{path}: is a symlink; repairs never follow symlinks")
    if not stat.S_ISREG(st.st_mode):
        raise RepairError(f"{path}: is not a regular file")
    return FileState(size=st.st_size, sha256=hash_file(path), uid=st.st_uid, gid=st.st_gid,
                     mode=stat.S_IMODE(st.st_mode))


def fsync_dir(path: Path) -> None:
    """fsync a directory so a create/rename/unlink inside it survives a power cut."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise RepairError(f"{path}: cannot open directory to fsync: {err.strerror}") from err
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def apply_owner_mode(fd: int, *, uid: int, gid: int, mode: int) -> None:
    """Give a new file the owner/group/mode a broker expects; chown only works (and is only tried) as root."""
    if os.geteuid() == 0:
        os.fchown(fd, uid, gid)
    os.fchmod(fd, mode)


def write_new_file(path: Path, data: bytes, *, uid: int, gid: int, mode: int, dir_fd: int | None = None) -> None:
    """Create ``path`` exclusively (never follows a symlink), write, set owner/mode, fsync."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        apply_owner_mode(fd, uid=uid, gid=gid, mode=mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_file(src: Path, dst: Path, *, uid: int, gid: int, mode: int, src_dir_fd: int | None = None,
              dst_dir_fd: int | None = None) -> str:
    """Stream ``src`` into a new file ``dst`` (exclusive create), fsync it; returns the sha256 copied."""
    sfd = open_nofollow(src, dir_fd=src_dir_fd)
    try:
        dfd = open_nofollow(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dst_dir_fd)
        try:
            h = hashlib.sha256()
            pos = 0
            while True:
                chunk = fdio.pread(sfd, CHUNK, pos, src)
                if not chunk:
                    break
                h.update(chunk)
                write_all(dfd, chunk)
                pos += len(chunk)
            apply_owner_mode(dfd, uid=uid, gid=gid, mode=mode)
            os.fsync(dfd)
            return h.hexdigest()
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def remove_if_regular(path: Path, *, dir_fd: int | None = None) -> bool:
    """Unlink ``path`` when it is a regular file (never a symlink's target); True when removed."""
    name: str | Path = path.name if dir_fd is not None else path
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise RepairError(f"{path}: expected a regular file (or nothing), found something else; not removing it")
    os.unlink(name, dir_fd=dir_fd)
    return True


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(root: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of ``root/parts...``, walked one component at a time with ``O_NOFOLLOW|O_DIRECTORY``.

    Every write of a repair (and of undo) goes through such a descriptor (``openat``-style:
    ``os.open(name, ..., dir_fd=fd)``, ``os.link``/``os.rename``/``os.unlink`` with ``dir_fd``),
    so a folder swapped for a symlink at any moment after the checks - even between two
    writes - makes the walk fail (ELOOP/ENOTDIR) instead of writing outside the log dir.
    ``root`` is the log dir's real path, resolved once when the repair started; its last
    component is refused when it has become a symlink since.
    """
    where = root
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as err:
        raise _dir_error(where, err) from err
    try:
        for part in parts:
            where = where / part
            nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except OSError as err:
        os.close(fd)
        raise _dir_error(where, err) from err
    return fd


def _dir_error(where: Path, err: OSError) -> RepairError:
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return RepairError(f"{where}: is a symlink or not a directory (changed since the checks?); repairs never "
                           "follow symlinks, stopping")
    return RepairError(f"{where}: cannot open directory: {err.strerror}")


def check_trusted(path: Path, what: str, *, directory: bool = False) -> None:
    """Refuse ``path`` unless only this user or root could have written it (ssh's StrictModes rule).

    A journal's checksum is a plain sha256: anyone able to write a journal can make one that
    passes every consistency check. What undo trusts is therefore *who wrote it*: the journal,
    its folder and its backup dir must be owned by the user running undo (or root) and not
    writable by group or others (a world-writable folder is accepted only with the sticky
    bit, like /tmp, where nobody else may replace our file).
    """
    try:
        st = os.lstat(path)
    except OSError as err:
        raise RepairError(f"{path}: cannot stat {what}: {err.strerror}") from err
    if stat.S_ISLNK(st.st_mode):
        raise RepairError(f"{path}: {what} is a symlink; refusing")
    me = os.geteuid()
    sticky_dir = directory and bool(st.st_mode & stat.S_ISVTX)
    if st.st_uid not in (me, 0):
        raise RepairError(f"{path}: {what} is owned by uid {st.st_uid}, not by you (uid {me}) or root; undo trusts "
                          "only what you or root wrote, refusing")
    if st.st_mode & 0o022 and not sticky_dir:
        who = "others" if st.st_mode & 0o002 else "its group"
        raise RepairError(f"{path}: {what} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o}); anyone there "
                          "could have forged it, refusing (chmod go-w if you trust it)")


# -- containment -------------------------------------------------------------------------------------------


class LogDirRef(Struct, frozen=True, kw_only=True):
    """A log dir as given (``given``, absolute) and as it really is (``real``, symlinks resolved once)."""

    given: Path
    real: Path


def resolve_log_dir(path: str | os.PathLike[str]) -> LogDirRef:
    given = Path(os.path.abspath(os.fspath(path)))
    real = Path(os.path.realpath(given))
    if not real.is_dir():
        raise RepairError(f"{given}: log dir does not exist or is not a directory")
    return LogDirRef(given=given, real=real)


def is_within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def check_relative(rel: str, *, where: str) -> tuple[str, ...]:
    """Split a log-dir-relative path, refusing absolute paths, ``..``, ``.`` and empty components."""
    if not rel or rel.startswith("/") or "\x00" in rel:
        raise RepairError(f"{where}: path {rel!r} is not relative to its log dir")
    parts = tuple(rel.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        raise RepairError(f"{where}: path {rel!r} escapes or is not normalised within its log dir")
    return parts


def safe_join(log_dir_real: Path, parts: tuple[str, ...]) -> Path:
    """Join ``parts`` under a (real) log dir, refusing any symlink along the way.

    Every intermediate component must be a real directory; the last one may be absent or a
    regular file (the caller decides which it needs). This is what keeps a symlink planted
    inside a partition folder from redirecting a repair write outside the log dir.
    """
    cur = log_dir_real
    for i, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            if i < len(parts) - 1:
                raise RepairError(f"{cur}: directory does not exist") from None
            return cur
        if stat.S_ISLNK(st.st_mode):
            raise RepairError(f"{cur}: is a symlink; repairs never follow symlinks")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise RepairError(f"{cur}: is not a directory")
    if not is_within(Path(os.path.realpath(cur)), log_dir_real):
        raise RepairError(f"{cur}: resolves outside its log dir {log_dir_real}")
    return cur


def locate(path: str | os.PathLike[str], log_dirs: Iterable[LogDirRef]) -> tuple[int, str]:
    """Which log dir ``path`` lives in and its path relative to it (``/``-separated)."""
    raw = os.fspath(path)
    if ".." in Path(raw).parts:
        raise RepairError(f"{raw}: path contains '..'; give paths inside the log dir")
    absolute = Path(os.path.abspath(raw))
    for i, ld in enumerate(log_dirs):
        for base in (ld.given, ld.real):
            if absolute != base and is_within(absolute, base):
                rel = absolute.relative_to(base).as_posix()
                check_relative(rel, where=raw)
                return i, rel
    raise RepairError(f"{raw}: is outside every log dir of the repair")


# -- log dir locks -----------------------------------------------------------------------------------------


class LogDirLocks:
    """Hold Kafka's ``<logdir>/.lock`` (POSIX and flock) for every log dir, or refuse.

    Used as a context manager around a whole repair - from before its analysis reads the
    first byte until after its post-check - and around a whole undo, so a broker started
    mid-repair fails to lock its log dir and a second kafkatx waits or refuses instead of
    racing us. ``create``: a missing ``.lock`` is created first, as
    ``LogManager.lockLogDirs`` -> ``FileLock`` does (``FileChannel.open(CREATE, READ, WRITE)``),
    owned like the log dir (a root-owned ``.lock`` would keep a broker running as ``kafka``
    from starting); without ``create`` a missing one is left missing. ``timeout``: seconds to
    keep retrying a lock another process holds (0: refuse at once); a waiter then re-reads
    everything, since the holder may have changed the files. Log dirs are locked in order of
    their path, so two repairs of overlapping sets cannot deadlock.
    """

    def __init__(self, log_dirs: Iterable[Path], *, create: bool = False, timeout: float = 0.0,
                 poll: float = 0.05) -> None:
        self._dirs = sorted({Path(d) for d in log_dirs})
        self._fds: list[int] = []
        self._held: set[int] = set()  # fds whose locks were taken (registered with note_lock_held)
        self._paths: dict[int, Path] = {}  # fd -> the .lock it is open on
        self.created: set[Path] = set()  # log dirs whose .lock this object created (there was none)
        self._remove: set[Path] = set()  # log dirs whose .lock goes when released (remove_on_release)
        self._create = create
        self._timeout = max(0.0, timeout)
        self._poll = poll
        self.dirs = tuple(self._dirs)

    def __enter__(self) -> LogDirLocks:
        deadline = time.monotonic() + self._timeout
        try:
            for d in self._dirs:
                self._take(d / LOCK_FILE, deadline)
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def remove_on_release(self, log_dirs: Iterable[Path]) -> None:
        """Remove these log dirs' ``.lock`` when the locks are released (still held while it goes): a dir
        left as it was before a ``.lock`` was created in it (an undo, a repair that wrote nothing)."""
        self._remove.update(Path(d) for d in log_dirs)

    def keep_on_release(self, log_dirs: Iterable[Path]) -> None:
        """Undo :meth:`remove_on_release` for these log dirs (a journal now records their ``.lock``)."""
        self._remove.difference_update(Path(d) for d in log_dirs)

    def covers(self, log_dirs: Iterable[Path]) -> bool:
        return bool(self._fds) and {Path(d) for d in log_dirs} <= set(self._dirs)

    def _open(self, lock_path: Path) -> int | None:
        try:
            st = os.lstat(lock_path)
        except FileNotFoundError:
            if not self._create:
                return None
            dst = os.stat(lock_path.parent)
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as err:
                raise RepairError(f"{lock_path}: cannot create the log dir lock: {err.strerror}") from err
            if os.geteuid() == 0:
                os.fchown(fd, dst.st_uid, dst.st_gid)
            self.created.add(lock_path.parent)
            return fd
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            raise RepairError(f"{lock_path}: is not a regular file; refusing to touch this log dir")
        # O_RDWR (no O_CREAT): a POSIX write lock needs a descriptor open for writing.
        return open_nofollow(lock_path, os.O_RDWR)

    def _take(self, lock_path: Path, deadline: float) -> None:
        fd = self._open(lock_path)
        if fd is None:
            return
        self._fds.append(fd)
        self._paths[fd] = lock_path
        while True:
            kind = "flock"
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                kind = "fcntl"
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                st = os.fstat(fd)
                if not _same_file(lock_path, st):
                    # the holder removed the .lock it had created (remove_on_release) while this process
                    # waited on it: a lock on a file no longer there excludes nobody; the path again
                    self._fds.remove(fd)
                    del self._paths[fd]
                    os.close(fd)
                    self._take(lock_path, deadline)
                    return
                note_lock_held(st.st_dev, st.st_ino, True)  # readers must not probe (and so drop) it
                self._held.add(fd)
                return
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise RepairError(f"{lock_path}: cannot lock: {err.strerror}") from err
                if kind == "fcntl":
                    fcntl.flock(fd, fcntl.LOCK_UN)  # hold neither while waiting
                if time.monotonic() >= deadline:
                    waited = f" (waited {self._timeout:g} s)" if self._timeout else ""
                    raise LogDirLocked(
                        f"{lock_path}: held by another process ({kind} lock; is the broker or another repair "
                        f"running?){waited}; stop the broker before repairing or undoing, or give --lock-timeout"
                    ) from err
                time.sleep(self._poll)

    def release(self) -> None:
        while self._fds:
            fd = self._fds.pop()
            path = self._paths.pop(fd, None)
            try:
                if fd in self._held:
                    self._held.discard(fd)
                    st = os.fstat(fd)
                    note_lock_held(st.st_dev, st.st_ino, False)
                    if path is not None and path.parent in self._remove and _same_file(path, st):
                        os.unlink(path)  # while held: a waiter finds the path gone and opens it anew
                        fsync_dir(path.parent)
            except OSError:
                pass
            finally:
                try:
                    os.close(fd)  # closing drops both the flock and the POSIX lock
                except OSError:
                    pass


def _same_file(path: Path, st: os.stat_result) -> bool:
    """``path`` still names the file ``st`` is of (not removed, not replaced)."""
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def probe_lock(log_dir: Path) -> bool:
    """True when ``<log_dir>/.lock`` is held by another process right now."""
    try:
        with LogDirLocks([log_dir]):
            return False
    except LogDirLocked:
        return True


@contextmanager
def os_errors(suffix: str = "") -> Iterator[None]:
    """Turn an OSError escaping the file-system work into one RepairError line naming the file."""
    try:
        yield
    except OSError as err:
        where = err.filename if err.filename is not None else "repair"
        raise RepairError(f"{where}: {err.strerror or err}{suffix}") from err
