"""Run a :class:`~kafkatx.repair.ops.RepairPlan` safely, and undo it from its journal.

Apply, in order:

1. resolve the log dirs, place every path inside one (no ``..``, no symlink anywhere
   below the log dir, ``O_NOFOLLOW`` on every open);
2. take Kafka's ``<logdir>/.lock`` of every log dir (POSIX and flock; refuse with
   :class:`LogDirLocked` when a broker holds it) and keep it until the end, so a broker
   started mid-repair fails to start instead of racing us;
3. check every file is still what the plan saw (size + sha256);
4. write and fsync the journal (and its directory) - before the first byte changes;
5. run the operations, each through a descriptor of its folder walked from the log dir
   root with ``O_NOFOLLOW|O_DIRECTORY`` (``openat``-style, so a folder swapped for a
   symlink after step 3 fails closed): appends with ``O_APPEND``, new files as temp + fsync + link
   (no-clobber) + fsync dir with the sibling's owner/group/mode, replaced/moved files
   copied to the backup dir and fsynced before the original is touched;
6. append ``applied`` to the journal, re-read every written range and compare sha256,
   then run the planner's ``post_check``.

A crash anywhere leaves the log dirs either untouched, fully repaired, or in a state
``undo_journal`` recognises operation by operation and reverses. The fault-injection
tests kill the process at every step of this sequence through ``apply_plan``'s ``on_step``
argument, called with each step name of :func:`plan_steps` once that step is durable; the
library itself reads no test hook from the environment.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path

from msgspec import Struct

from kafkatx.errors import KafkaTxError, RepairError
from kafkatx.repair.fsutil import (
    LOCK_FILE,
    TEMP_SUFFIX,
    FileState,
    LogDirLocks,
    LogDirRef,
    check_name_single_link,
    check_relative,
    check_single_link,
    check_trusted,
    copy_file,
    file_state,
    fsync_dir,
    hash_file,
    hasher_of_file,
    is_within,
    locate,
    open_dir,
    open_nofollow,
    remove_if_regular,
    resolve_log_dir,
    safe_join,
    write_new_file,
)
from kafkatx.repair.journal import (
    AppendRange,
    Journal,
    JournalOp,
    StateRecord,
    append_status,
    backup_dir_for,
    check_journal_location,
    default_journal_path,
    read_journal,
    serialise,
    write_journal,
)
from kafkatx.repair.ops import (
    OP_NAMES,
    AppendBytes,
    CreateFile,
    MoveToBackup,
    Operation,
    RepairPlan,
    ReplaceFile,
)
from kafkatx.storage.fdio import write_all
from kafkatx.storage.log_dir import looks_like_log_dir
from kafkatx.storage.partition import parse_partition_dir_name

DEFAULT_NEW_FILE_MODE = 0o644

_OP_STEPS = {
    "append": ("appended",),
    "create": ("temp-written", "linked", "done"),
    "replace": ("backup-written", "temp-written", "renamed"),
    "move": ("backup-written", "removed"),
}


class ApplyRow(Struct, frozen=True, kw_only=True):
    """One operation as performed: ``offset``/``length`` are the byte range appended (appends only)."""

    index: int
    op: str
    path: str
    offset: int | None
    length: int | None
    sha256: str | None  # of the bytes appended, or of the whole new file; None for a move
    backup: str | None


class ApplyResult(Struct, frozen=True, kw_only=True):
    journal_path: Path
    backup_dir: Path
    operations: tuple[ApplyRow, ...]
    problems: tuple[str, ...] = ()  # what the planner's post_check reported (empty: all good)


class UndoRow(Struct, frozen=True, kw_only=True):
    index: int
    op: str
    path: str
    action: str  # truncate | delete | restore | nothing
    size_before_undo: int | None  # None: file absent
    size_after_undo: int | None
    sha256: str | None  # the file's sha256 after undo (its "before" value); None when absent
    verified: bool | None  # None for a dry run


class UndoResult(Struct, frozen=True, kw_only=True):
    journal_path: Path
    dry_run: bool
    rows: tuple[UndoRow, ...]
    temps_removed: tuple[str, ...] = ()


def plan_steps(plan: RepairPlan) -> list[str]:
    """The crash points of ``apply_plan`` for this plan, in order: the names its ``on_step`` is called with."""
    steps = ["journal-written"]
    for i, op in enumerate(plan.operations):
        kind = OP_NAMES[type(op)]
        steps.extend(f"op{i}:{kind}:{s}" for s in _OP_STEPS[kind])
    steps.append("applied")
    return steps


StepHook = Callable[[str], None]  # apply_plan's on_step: called with each plan_steps name, in order


def _no_step(name: str) -> None:
    """``on_step``'s default: nothing."""


# -- apply --------------------------------------------------------------------------------------------------


class _Virtual(Struct):
    """A file's state as the plan's operations evolve it (so several ops may touch one file)."""

    exists: bool
    size: int = 0
    hasher: hashlib._Hash | None = None
    uid: int = 0
    gid: int = 0
    mode: int = 0

    @property
    def sha256(self) -> str:
        assert self.hasher is not None
        return self.hasher.hexdigest()

    def record(self) -> StateRecord | None:
        if not self.exists:
            return None
        return StateRecord(size=self.size, sha256=self.sha256, uid=self.uid, gid=self.gid, mode=self.mode)


class _Prepared(Struct):
    op: Operation
    jop: JournalOp
    target: Path
    root: Path = Path("/")  # the log dir's real path; writes walk from it with O_NOFOLLOW dir fds
    parts: tuple[str, ...] = ()  # target relative to root
    temp: Path | None = None
    backup: Path | None = None
    owner: tuple[int, int, int] = (0, 0, 0)  # uid, gid, mode for new/backup files
    row: ApplyRow | None = None  # set once the operation ran


def _read_virtual(path: Path) -> _Virtual:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _Virtual(exists=False)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise RepairError(f"{path}: is not a regular file (symlinks are refused)")
    if st.st_nlink != 1:  # refused before the first change; checked again on the descriptor written through
        raise RepairError(f"{path}: has {st.st_nlink} hard links (another name may lie outside the log dir); "
                          "repairs never write through a hard-linked file, refusing")
    return _Virtual(exists=True, size=st.st_size, hasher=hasher_of_file(path), uid=st.st_uid, gid=st.st_gid,
                    mode=stat.S_IMODE(st.st_mode))


def _resolve_log_dirs(paths: tuple[Path, ...] | list[Path]) -> list[LogDirRef]:
    if not paths:
        raise RepairError("repair plan names no log dir")
    refs = [resolve_log_dir(p) for p in paths]
    for i, a in enumerate(refs):
        for b in refs[i + 1:]:
            if is_within(a.real, b.real) or is_within(b.real, a.real):
                raise RepairError(f"{a.given}: overlaps log dir {b.given}; give each log dir once")
    return refs


def _changed(path: Path, what: str, expected: str, found: str) -> RepairError:
    return RepairError(f"{path}: changed since the plan was made ({what}: expected {expected}, found {found}); "
                       "re-run the plan")


def _prepare(plan: RepairPlan, refs: list[LogDirRef], journal_path: Path, backup_dir: Path,
             ) -> list[_Prepared]:
    tag = hashlib.sha256(journal_path.name.encode()).hexdigest()[:8]
    states: dict[Path, _Virtual] = {}
    prepared: list[_Prepared] = []
    for i, op in enumerate(plan.operations):
        kind = OP_NAMES.get(type(op))
        if kind is None:
            raise RepairError(f"operation {i}: unknown operation type {type(op).__name__}")
        ld, rel = locate(op.path, refs)
        if rel == LOCK_FILE:
            # Opening and closing .lock here would silently drop our own POSIX lock on it.
            raise RepairError(f"{op.path}: a repair never touches the broker's lock file")
        parts = check_relative(rel, where=str(op.path))
        target = safe_join(refs[ld].real, parts)
        if target not in states:
            states[target] = _read_virtual(target)
        v = states[target]
        before = v.record()
        temp_rel = backup_name = like_rel = None
        append = None
        p = _Prepared(op=op, jop=None, target=target, root=refs[ld].real, parts=parts)  # type: ignore[arg-type]
        if isinstance(op, AppendBytes):
            if not v.exists:
                raise RepairError(f"{op.path}: file to append to does not exist")
            if not op.data:
                raise RepairError(f"{op.path}: operation {i} appends no bytes")
            if v.size != op.expected_size:
                raise _changed(op.path, "size", f"{op.expected_size} bytes", f"{v.size} bytes")
            if v.sha256 != op.expected_sha256:
                raise _changed(op.path, "sha256", op.expected_sha256, v.sha256)
            append = AppendRange(offset=v.size, length=len(op.data), sha256=hashlib.sha256(op.data).hexdigest())
            assert v.hasher is not None
            v.hasher = v.hasher.copy()
            v.hasher.update(op.data)
            v.size += len(op.data)
        elif isinstance(op, CreateFile):
            if v.exists:
                raise RepairError(f"{op.path}: file to create already exists")
            if op.like is not None:
                lld, lrel = locate(op.like, refs)
                like_path = safe_join(refs[lld].real, check_relative(lrel, where=str(op.like)))
                lv = file_state(like_path)
                if lv is None:
                    raise RepairError(f"{op.like}: sibling to copy owner/mode from does not exist")
                like_rel = lrel if lld == ld else None
                owner = (lv.uid, lv.gid, lv.mode)
            else:
                dst = os.stat(target.parent)
                owner = (dst.st_uid, dst.st_gid, DEFAULT_NEW_FILE_MODE)
            p.owner = owner
            temp_rel = _temp_rel(rel, tag)
            v.exists, v.size = True, len(op.data)
            v.hasher = hashlib.sha256(op.data)
            v.uid, v.gid, v.mode = owner
        elif isinstance(op, ReplaceFile | MoveToBackup):
            if not v.exists:
                raise RepairError(f"{op.path}: file to {kind} does not exist")
            if v.sha256 != op.expected_sha256:
                raise _changed(op.path, "sha256", op.expected_sha256, v.sha256)
            p.owner = (v.uid, v.gid, v.mode)
            backup_name = f"{i:04d}-{target.name}"
            p.backup = backup_dir / backup_name
            if isinstance(op, ReplaceFile):
                temp_rel = _temp_rel(rel, tag)
                v.size = len(op.data)
                v.hasher = hashlib.sha256(op.data)
            else:
                states[target] = v = _Virtual(exists=False)
        if temp_rel is not None:
            p.temp = safe_join(refs[ld].real, check_relative(temp_rel, where=str(op.path)))
            if os.path.lexists(p.temp):
                raise RepairError(f"{p.temp}: temporary file already exists; remove it or undo the repair that left it")
        p.jop = JournalOp(index=i, op=kind, log_dir=ld, path=rel, before=before, after=v.record(), append=append,
                          backup=backup_name, temp=temp_rel, like=like_rel)
        prepared.append(p)
    return prepared


def _temp_rel(rel: str, tag: str) -> str:
    head, _, name = rel.rpartition("/")
    # A dot-prefixed name with a suffix Kafka's LogLoader does not know is ignored by the
    # broker, and the per-journal tag keeps two repairs' temps apart.
    temp = f".{name}.{tag}{TEMP_SUFFIX}"
    return f"{head}/{temp}" if head else temp


def _run_op(p: _Prepared, step: StepHook) -> ApplyRow:
    # Every write goes through a descriptor of the target's folder, opened from the log dir
    # root with O_NOFOLLOW (open_dir): a folder swapped for a symlink after the checks fails here.
    dfd = open_dir(p.root, p.parts[:-1])
    try:
        return _run_op_in(p, step, dfd)
    finally:
        os.close(dfd)


def _run_op_in(p: _Prepared, step: StepHook, dfd: int) -> ApplyRow:
    op, jop, target = p.op, p.jop, p.target
    name = target.name
    i, kind = jop.index, jop.op
    uid, gid, mode = p.owner
    if isinstance(op, AppendBytes):
        assert jop.append is not None
        fd = open_nofollow(target, os.O_WRONLY | os.O_APPEND, dir_fd=dfd)
        try:
            check_single_link(fd, target)
            size = os.fstat(fd).st_size
            if size != jop.append.offset:
                raise RepairError(f"{target}: size changed to {size} while repairing (expected {jop.append.offset})")
            write_all(fd, op.data)
            os.fsync(fd)
        finally:
            os.close(fd)
        step(f"op{i}:{kind}:appended")
        return ApplyRow(index=i, op=kind, path=str(target), offset=jop.append.offset, length=jop.append.length,
                        sha256=jop.append.sha256, backup=None)
    if isinstance(op, CreateFile):
        assert p.temp is not None
        write_new_file(p.temp, op.data, uid=uid, gid=gid, mode=mode, dir_fd=dfd)
        os.fsync(dfd)
        step(f"op{i}:{kind}:temp-written")
        # link(2) fails with EEXIST instead of clobbering, unlike rename(2).
        os.link(p.temp.name, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        os.fsync(dfd)
        step(f"op{i}:{kind}:linked")
        os.unlink(p.temp.name, dir_fd=dfd)
        os.fsync(dfd)
        step(f"op{i}:{kind}:done")
        return ApplyRow(index=i, op=kind, path=str(target), offset=None, length=len(op.data),
                        sha256=hashlib.sha256(op.data).hexdigest(), backup=None)
    assert p.backup is not None and jop.before is not None
    check_name_single_link(target, dir_fd=dfd)
    copied = copy_file(target, p.backup, uid=uid, gid=gid, mode=mode, src_dir_fd=dfd)
    fsync_dir(p.backup.parent)
    if copied != jop.before.sha256:
        raise RepairError(f"{target}: changed while being backed up (sha256 {copied}, expected {jop.before.sha256})")
    step(f"op{i}:{kind}:backup-written")
    if isinstance(op, ReplaceFile):
        assert p.temp is not None
        write_new_file(p.temp, op.data, uid=uid, gid=gid, mode=mode, dir_fd=dfd)
        step(f"op{i}:{kind}:temp-written")
        os.rename(p.temp.name, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
        step(f"op{i}:{kind}:renamed")
        return ApplyRow(index=i, op=kind, path=str(target), offset=None, length=len(op.data),
                        sha256=hashlib.sha256(op.data).hexdigest(), backup=str(p.backup))
    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise RepairError(f"{target}: is no longer a regular file; not removing it")
    os.unlink(name, dir_fd=dfd)
    os.fsync(dfd)
    step(f"op{i}:{kind}:removed")
    return ApplyRow(index=i, op=kind, path=str(target), offset=None, length=None, sha256=None,
                    backup=str(p.backup))


@contextmanager
def _os_errors(suffix: str = "") -> Iterator[None]:
    """Turn an OSError escaping the file-system work into one RepairError line naming the file."""
    try:
        yield
    except OSError as err:
        where = err.filename if err.filename is not None else "repair"
        raise RepairError(f"{where}: {err.strerror or err}{suffix}") from err


def _verify_applied(prepared: list[_Prepared]) -> list[str]:
    """Re-read what was written and compare sha256 (appended ranges; whole new files)."""
    problems = []
    for p in prepared:
        jop = p.jop
        if jop.op == "append":
            assert jop.append is not None
            got = hash_file(p.target, jop.append.offset, jop.append.length)
            if got != jop.append.sha256:
                problems.append(f"{p.target}: bytes {jop.append.offset}..{jop.append.offset + jop.append.length} "
                                f"read back with sha256 {got}, wrote {jop.append.sha256}")
    finals: dict[Path, StateRecord | None] = {p.target: p.jop.after for p in prepared}
    for target, want in finals.items():
        if want is None:
            if os.path.lexists(target):
                problems.append(f"{target}: still present after being moved to the backup dir")
        elif any(p.target == target and p.jop.op != "append" for p in prepared):
            got_state = file_state(target)
            if got_state is None or got_state.sha256 != want.sha256:
                problems.append(f"{target}: content after repair does not match what was written")
    return problems


def apply_plan(plan: RepairPlan, journal_path: Path | None = None, *, now: int,
               post_check: Callable[[], list[str]] | None = None, locks: LogDirLocks | None = None,
               lock_timeout: float = 0.0, free_space: Callable[[Path], int] | None = None,
               on_step: StepHook | None = None) -> ApplyResult:
    """Apply ``plan`` (journal first); ``now`` is epoch ms for the journal and its default name.

    ``locks``: the log dir locks the caller already holds (taken before the analysis the plan
    comes from, so nothing changed in between; see ``repair.offline.execute_abort_hanging``);
    without them they are taken here (waiting up to ``lock_timeout`` seconds). ``free_space``:
    bytes free on the filesystem holding a path (default ``statvfs``; a test hook). ``on_step``
    (a test hook): called with each name of :func:`plan_steps` right after that step is durable;
    the fault-injection tests pass one that SIGKILLs the process there.

    Raises :class:`LogDirLocked` when a broker holds a log dir, :class:`RepairError` when a
    file changed since the plan, is hard-linked, the journal and backups do not fit, a path is
    unsafe, or a write fails (the message then says to run ``kafkatx undo`` with the journal).
    ``post_check`` problems are returned, not raised.
    """
    refs = _resolve_log_dirs(plan.log_dirs)
    if journal_path is None:
        journal_path = default_journal_path([r.real for r in refs], now)
    journal_path = Path(os.path.abspath(journal_path))
    check_journal_location(journal_path, [r.real for r in refs])
    # undo will trust the journal only where nobody else could have replaced it: refuse such a
    # place now rather than leave a journal undo refuses.
    for folder in (journal_path.parent, *journal_path.parent.parents):
        check_trusted(folder, "a folder above the journal", directory=True)
    if os.path.lexists(journal_path):
        raise RepairError(f"{journal_path}: journal already exists; choose a new --journal path")
    backup_dir = backup_dir_for(journal_path)
    if os.path.lexists(backup_dir):
        raise RepairError(f"{backup_dir}: backup dir already exists; choose a new --journal path")
    undo_hint = f"; the repair may be partially applied: run `kafkatx undo {journal_path}`"
    reals = [r.real for r in refs]
    if locks is not None and not locks.covers(reals):
        raise RepairError(f"{reals[0]}: the repair's log dir locks were not held by the caller")
    lock = locks if locks is not None else LogDirLocks(reals, create=True, timeout=lock_timeout)
    held = nullcontext(locks) if locks is not None else lock
    with _os_errors(), held:
        prepared = _prepare(plan, refs, journal_path, backup_dir)
        journal = Journal(created_ms=now, description=plan.description, log_dirs=tuple(str(r.real) for r in refs),
                          backup_dir=backup_dir.name, operations=tuple(p.jop for p in prepared),
                          locks_created=tuple(i for i, r in enumerate(reals) if r in lock.created))
        _check_space(prepared, journal, journal_path, free_space or _statvfs_free)
        write_journal(journal_path, journal)
        lock.keep_on_release(reals[i] for i in journal.locks_created)  # the journal says it: undo removes it
        try:
            with _os_errors(undo_hint):
                _apply_prepared(prepared, journal_path, backup_dir, on_step or _no_step, now)
        except RepairError as err:
            # A step failed (a read or write error): the journal undoes what was done, under the locks held
            # (the .lock the repair created goes with them), so the dir is as it was; where that fails too,
            # the error says to run undo
            if not _rolled_back(journal_path, lock, now):
                raise
            raise RepairError(f"{err.args[0].split('; the repair')[0]}; nothing was changed: the steps done were "
                              f"undone (journal {journal_path})") from err
        problems = _verify_applied(prepared)
        if problems:
            raise RepairError(f"{problems[0]}; run `kafkatx undo {journal_path}`")
        extra = list(post_check()) if post_check is not None else []
    return ApplyResult(journal_path=journal_path, backup_dir=backup_dir,
                       operations=tuple(p.row for p in prepared if p.row is not None), problems=tuple(extra))


def _rolled_back(journal_path: Path, locks: LogDirLocks, now: int) -> bool:
    """Undo a failed repair from its journal under the locks the repair holds; whether that worked."""
    try:
        undo_journal(journal_path, now=now, locks=locks)
    except (KafkaTxError, OSError):
        return False
    return True


def _statvfs_free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _check_space(prepared: list[_Prepared], journal: Journal, journal_path: Path,
                 free_space: Callable[[Path], int]) -> None:
    """Refuse before the first change when the journal, the backups and the new bytes do not fit.

    Needs, per filesystem (``st_dev``): the journal (its temp copy, then the link) and every backup
    on the journal's; every appended byte and every new file's temp on its log dir's (a replaced
    file's old and new content coexist until the rename).
    """
    need: dict[int, list[object]] = {}

    def add(where: Path, n: int) -> None:
        dev = os.stat(where if where.exists() else where.parent).st_dev
        entry = need.setdefault(dev, [where, 0])
        entry[1] = int(entry[1]) + n  # type: ignore[call-overload]

    add(journal_path, len(serialise(journal)) + 4096)  # + the status lines appended later
    for p in prepared:
        jop = p.jop
        if p.backup is not None and jop.before is not None:
            add(journal_path, jop.before.size)
        if jop.append is not None:
            add(p.target.parent, jop.append.length)
        elif jop.op in ("create", "replace") and jop.after is not None:
            add(p.target.parent, jop.after.size)
    for where, n in need.values():
        assert isinstance(where, Path) and isinstance(n, int)
        free = free_space(where if where.exists() else where.parent)
        if n > free:
            raise RepairError(f"{where}: No space left for the repair: its filesystem has {free} bytes free, the "
                              f"repair needs {n} (journal, backups and new bytes), {n - free} bytes short; nothing "
                              "was changed")


def _apply_prepared(prepared: list[_Prepared], journal_path: Path, backup_dir: Path, step: StepHook,
                    now: int) -> None:
    if any(p.backup is not None for p in prepared):
        os.mkdir(backup_dir, 0o700)
        fsync_dir(journal_path.parent)
    step("journal-written")
    for p in prepared:
        try:
            p.row = _run_op(p, step)
        except KafkaTxError as err:
            raise RepairError(f"{err}; the repair is partially applied: run `kafkatx undo {journal_path}`") from err
        except OSError as err:
            raise RepairError(f"{p.target}: {p.jop.op} failed: {err.strerror}; the repair is partially applied: "
                              f"run `kafkatx undo {journal_path}`") from err
    append_status(journal_path, "applied", now)
    step("applied")


# -- undo ---------------------------------------------------------------------------------------------------


class _UState(Struct):
    exists: bool
    size: int = 0
    sha256: str = ""
    real: bool = True  # still the file on disk (not a state predicted by an earlier undo step)

    def matches(self, rec: StateRecord | None) -> bool:
        if rec is None:
            return not self.exists
        return self.exists and self.size == rec.size and self.sha256 == rec.sha256


def _ustate(fs: FileState | None) -> _UState:
    if fs is None:
        return _UState(exists=False)
    return _UState(exists=True, size=fs.size, sha256=fs.sha256)


class _UndoAction(Struct):
    jop: JournalOp
    target: Path
    action: str
    size_from: int | None
    backup: Path | None = None


def _undo_refuse(target: Path, why: str) -> RepairError:
    return RepairError(f"{target}: {why}; refusing to undo (nothing was changed)")


def _partial_append(target: Path, s: _UState, jop: JournalOp) -> bool:
    """The file on disk holds ``jop``'s "before" bytes plus part of its appended range (a torn append)."""
    before, after = jop.before, jop.after
    return (jop.op == "append" and s.real and s.exists and before is not None and after is not None
            and before.size < s.size < after.size and hash_file(target, 0, before.size) == before.sha256)


def _own_temp_link(target: Path, journal: Journal, jop: JournalOp, links: int) -> bool:
    """The second name of ``target`` is the temp its own create left (a crash between link and unlink)."""
    if links != 2:
        return False
    for o in journal.operations:
        if o.path == jop.path and o.op == "create" and o.temp is not None:
            temp = target.parent / o.temp.rpartition("/")[2]
            try:
                a, b = os.lstat(temp), os.lstat(target)
            except FileNotFoundError:
                continue
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                return True
    return False


def _plan_undo(journal: Journal, targets: list[Path], backup_dir: Path) -> list[_UndoAction]:
    states: dict[Path, _UState] = {}
    actions: list[_UndoAction] = []
    pairs = list(zip(journal.operations, targets, strict=True))
    for j, (jop, target) in reversed(list(enumerate(pairs))):
        if target not in states:
            states[target] = _ustate(file_state(target))
            if states[target].exists and (links := os.lstat(target).st_nlink) != 1 and not _own_temp_link(
                    target, journal, jop, links):
                # checked again on the descriptor each undo write goes through (_run_undo)
                raise _undo_refuse(target, f"has {links} hard links (another name may lie outside the log dir); "
                                           "undo never writes through a hard-linked file")
        s = states[target]
        before, after = jop.before, jop.after
        size_from = s.size if s.exists else None
        action = "nothing"
        backup = backup_dir / jop.backup if jop.backup else None
        # When several operations touch one file, a crash may have stopped before this one:
        # the file then sits at the state an earlier operation started from.
        earlier = [o for o, t in pairs[:j] if t == target]
        if not s.matches(after) and any(s.matches(o.before) or _partial_append(target, s, o) for o in earlier):
            action = "nothing"
        elif jop.op == "append":
            assert before is not None and after is not None
            if not s.exists:
                raise _undo_refuse(target, "was deleted after the repair (segment deleted by retention?)")
            if s.matches(after):
                action = "truncate"
            elif s.matches(before):
                action = "nothing"
            elif _partial_append(target, s, jop):
                action = "truncate"  # crash in the middle of the append: the original bytes are intact
            elif s.real and s.size > after.size and hash_file(target, 0, after.size) == after.sha256:
                raise _undo_refuse(target, f"grew by {s.size - after.size} bytes after the repair (the broker "
                                           f"appended to it: {s.size} bytes now, the repair left {after.size})")
            else:
                raise _undo_refuse(target, f"changed since the repair ({s.size} bytes sha256 {s.sha256}; the repair "
                                           f"left {after.size} bytes sha256 {after.sha256})")
        elif jop.op == "create":
            if s.matches(after):
                action = "delete"
            elif s.exists:
                raise _undo_refuse(target, "was modified after the repair created it")
        elif jop.op in ("replace", "move"):
            assert before is not None and backup is not None
            if s.matches(before):
                action = "nothing"
            elif (jop.op == "replace" and s.matches(after)) or (jop.op == "move" and not s.exists):
                action = "restore"
                bs = file_state(backup)
                if bs is None or bs.sha256 != before.sha256:
                    raise _undo_refuse(target, f"its backup {backup} is missing or does not match the journal")
            else:
                raise _undo_refuse(target, "changed since the repair")
        actions.append(_UndoAction(jop=jop, target=target, action=action, size_from=size_from, backup=backup))
        if action != "nothing":
            states[target] = _UState(exists=before is not None, size=before.size if before else 0,
                                     sha256=before.sha256 if before else "", real=False)
    return actions


def _undo_temp(target: Path) -> Path:
    return target.with_name(f".{target.name}.undo{TEMP_SUFFIX}")


def _stage_restore(backup: Path, target: Path, rec: StateRecord, dfd: int) -> None:
    """The backup copied beside its target under the undo's temp name, its sha256 checked (nothing renamed)."""
    tmp = _undo_temp(target)
    remove_if_regular(tmp, dir_fd=dfd)
    copied = copy_file(backup, tmp, uid=rec.uid, gid=rec.gid, mode=rec.mode, dst_dir_fd=dfd)
    if copied != rec.sha256:
        os.unlink(tmp.name, dir_fd=dfd)
        raise RepairError(f"{backup}: backup changed while restoring it (sha256 {copied}, expected {rec.sha256})")


def _stage_restores(actions: list[_UndoAction], where: Mapping[Path, tuple[Path, tuple[str, ...]]]) -> None:
    """Every backup the undo restores copied beside its target first: a backup that cannot be read (or
    changed) fails the undo before it changes anything (the temps it made removed again)."""
    staged: list[tuple[Path, Path, tuple[str, ...]]] = []
    try:
        for a in actions:
            if a.action == "restore":
                assert a.jop.before is not None and a.backup is not None
                root, parts = where[a.target]
                dfd = open_dir(root, parts[:-1])
                try:
                    staged.append((_undo_temp(a.target), root, parts))
                    _stage_restore(a.backup, a.target, a.jop.before, dfd)
                finally:
                    os.close(dfd)
    except BaseException:
        for tmp, root, parts in staged:
            dfd = open_dir(root, parts[:-1])
            try:
                remove_if_regular(tmp, dir_fd=dfd)
            finally:
                os.close(dfd)
        raise


def _restore(target: Path, dfd: int) -> None:
    """The staged copy of the backup (:func:`_stage_restores`) renamed over its target."""
    os.rename(_undo_temp(target).name, target.name, src_dir_fd=dfd, dst_dir_fd=dfd)
    os.fsync(dfd)


def _run_undo(a: _UndoAction, root: Path, parts: tuple[str, ...]) -> None:
    """Reverse one operation, every write through an O_NOFOLLOW descriptor walk from the log dir root."""
    before = a.jop.before
    if a.action == "nothing":
        return
    dfd = open_dir(root, parts[:-1])
    try:
        if a.action == "truncate":
            assert before is not None
            fd = open_nofollow(a.target, os.O_WRONLY, dir_fd=dfd)
            try:
                check_single_link(fd, a.target)
                os.ftruncate(fd, before.size)
                os.fsync(fd)
            finally:
                os.close(fd)
        elif a.action == "delete":
            # unlink removes a name and never changes what another name holds (and a create
            # interrupted after its link leaves our own temp as the second name): no check here
            st = os.stat(a.target.name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise RepairError(f"{a.target}: is no longer a regular file; not deleting it")
            os.unlink(a.target.name, dir_fd=dfd)
            os.fsync(dfd)
        elif a.action == "restore":
            _restore(a.target, dfd)
    finally:
        os.close(dfd)


_SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")
_LOG_DIR_FILES = {"replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                  ".kafka_cleanshutdown"}


def repair_target_refusal(parts: tuple[str, ...]) -> str | None:
    """Why a log-dir-relative path is no file a kafkatx repair writes, moves or replaces (None: it is one).

    Repairs touch segment files (``.log``, ``.index``, ``.timeindex``, ``.txnindex``), producer
    snapshots and their own temp files inside ``topic-N`` partition folders, and the log dir's
    checkpoint files and ``.kafka_cleanshutdown``.
    """
    if len(parts) == 1:
        return None if parts[0] in _LOG_DIR_FILES else "is not a checkpoint file or .kafka_cleanshutdown"
    if len(parts) == 2:
        folder, name = parts
        if parse_partition_dir_name(folder) is None:
            return "is not inside a topic-N partition folder"
        if _SEGMENT_FILE.match(name) or (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
            return None
        return "is not a segment, index, snapshot or kafkatx temp file"
    return "is not a file of a log dir or of a partition folder"


def undo_journal(journal_path: Path, *, dry_run: bool = False, now: int | None = None,
                 lock_timeout: float = 0.0, locks: LogDirLocks | None = None) -> UndoResult:
    """Reverse the repair a journal describes; afterwards every file has its "before" sha256.

    Works on a fully or partially applied repair (each operation's effect is detected from
    the file's size/sha256) and is idempotent. Refuses - touching nothing - on a journal (or
    its folder or backup dir) that someone other than this user or root could have written,
    a bad journal checksum, a dir that is no Kafka log dir, a file name no repair writes,
    paths outside the journal's log dirs, symlinks, files whose current content is not what
    the repair left (or a crash mid-repair explains), or a held log dir lock
    (:class:`LogDirLocked`; waited for up to ``lock_timeout`` seconds), or a target with more
    than one hard link. Every write walks O_NOFOLLOW directory descriptors from the log dir
    root, so a symlink swapped in after these checks fails closed too.
    """
    journal_path = Path(os.path.abspath(journal_path))
    # Who wrote the journal is what undo trusts (its checksum proves only that it is whole):
    # see check_trusted and SECURITY.md.
    check_trusted(journal_path, "journal")
    for folder in (journal_path.parent, *journal_path.parent.parents):
        # Every folder up to / : whoever can rename one of them can swap the journal.
        check_trusted(folder, "a folder above the journal", directory=True)
    journal, _ = read_journal(journal_path)
    refs: list[Path] = []
    for d in journal.log_dirs:
        p = Path(d)
        if not p.is_dir():
            raise RepairError(f"{journal_path}: log dir {d} named by the journal does not exist")
        if Path(os.path.realpath(p)) != p:
            raise RepairError(f"{journal_path}: log dir {d} now resolves elsewhere (a symlink); refusing")
        refs.append(p)
    check_journal_location(journal_path, refs)
    backup_dir = journal_path.parent / journal.backup_dir
    if os.path.lexists(backup_dir):
        if os.path.islink(backup_dir) or not backup_dir.is_dir():
            raise RepairError(f"{backup_dir}: backup dir is not a directory (symlinks are refused)")
        check_trusted(backup_dir, "backup dir", directory=True)
    for p in refs:
        # A journal's checksum proves nothing about who wrote it (anyone can recompute a sha256):
        # undo only acts where a repair of ours could have acted.
        if not looks_like_log_dir(p):
            raise RepairError(f"{journal_path}: {p} is not a Kafka log dir (no meta.properties, checkpoint files or "
                              "topic-N folders); undo acts only inside log dirs, refusing")
    targets: list[Path] = []
    temps: list[tuple[Path, Path, tuple[str, ...]]] = []
    where: dict[Path, tuple[Path, tuple[str, ...]]] = {}
    for jop in journal.operations:
        root = refs[jop.log_dir]
        parts = check_relative(jop.path, where=str(journal_path))
        why = repair_target_refusal(parts)
        if why is not None:
            raise RepairError(f"{journal_path}: operation {jop.index}: {jop.path!r} {why}; a kafkatx repair never "
                              "writes it, refusing")
        targets.append(safe_join(root, parts))
        where[targets[-1]] = (root, parts)
        if jop.temp is not None:
            temp_parts = check_relative(jop.temp, where=str(journal_path))
            temp = safe_join(root, temp_parts)
            if temp.parent != targets[-1].parent or not temp.name.endswith(TEMP_SUFFIX):
                raise RepairError(f"{journal_path}: operation {jop.index}: temp path {jop.temp!r} is not a kafkatx temp "
                                  "file beside its target")
            temps.append((temp, root, temp_parts))
    # The locks are taken before the files are examined (_plan_undo) and held to the end; a second
    # undo or repair waits up to lock_timeout seconds and then examines the files afresh.
    if locks is not None and not locks.covers(list(refs)):
        raise RepairError(f"{journal_path}: the undo's log dir locks were not held by the caller")
    held = nullcontext(locks) if locks is not None else LogDirLocks([] if dry_run else refs, create=True,
                                                                    timeout=lock_timeout)
    with _os_errors(), held as taken:
        if locks is None:
            # a .lock this undo had to create goes when it ends, refused or not: it was not there before
            taken.remove_on_release(taken.created)
        actions = _plan_undo(journal, targets, backup_dir)
        removed: list[str] = []
        rows: list[UndoRow] = []
        if not dry_run:
            try:
                _stage_restores(actions, where)
            except OSError as err:
                raise RepairError(f"{err.filename or journal_path}: undo could not stage a backup: {err.strerror}; "
                                  "nothing was changed") from err
            for a in actions:
                try:
                    _run_undo(a, *where[a.target])
                except OSError as err:
                    raise RepairError(f"{a.target}: undo {a.action} failed: {err.strerror}; fix the cause and run "
                                      "undo again (it resumes where it stopped)") from err
            for t, root, parts in temps:
                dfd = open_dir(root, parts[:-1])
                try:
                    if remove_if_regular(t, dir_fd=dfd):
                        os.fsync(dfd)
                        removed.append(str(t))
                finally:
                    os.close(dfd)
        else:
            removed = [str(t) for t, _, _ in temps if os.path.lexists(t)]
        # The earliest operation on a file holds its state before the whole repair.
        originals: dict[Path, StateRecord | None] = {}
        for jop, target in zip(journal.operations, targets, strict=True):
            originals.setdefault(target, jop.before)
        verified: dict[Path, bool] = {}
        if not dry_run:
            for target, rec in originals.items():
                verified[target] = _ustate(file_state(target)).matches(rec)
        for a in actions:
            rec = a.jop.before
            rows.append(UndoRow(index=a.jop.index, op=a.jop.op, path=str(a.target), action=a.action,
                                size_before_undo=a.size_from, size_after_undo=rec.size if rec else None,
                                sha256=rec.sha256 if rec else None,
                                verified=None if dry_run else verified[a.target]))
        if not dry_run:
            bad = [t for t, ok in verified.items() if not ok]
            if bad:
                raise RepairError(f"{bad[0]}: after undo the file does not match its state before the repair")
            append_status(journal_path, "undone", now if now is not None else time.time_ns() // 1_000_000)
            # the .lock the repair created (there was none before it) goes too: the dir as it was
            taken.remove_on_release(refs[i] for i in journal.locks_created)
    return UndoResult(journal_path=journal_path, dry_run=dry_run, rows=tuple(rows), temps_removed=tuple(removed))
