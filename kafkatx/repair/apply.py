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
import stat
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from msgspec import Struct

from kafkatx.errors import KafkaTxError, RepairError
from kafkatx.repair.fsutil import (
    LOCK_FILE,
    TEMP_SUFFIX,
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
    os_errors,
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
from kafkatx.repair.undo import undo_journal
from kafkatx.storage.fdio import write_all

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
    with os_errors(), held:
        prepared = _prepare(plan, refs, journal_path, backup_dir)
        journal = Journal(created_ms=now, description=plan.description, log_dirs=tuple(str(r.real) for r in refs),
                          backup_dir=backup_dir.name, operations=tuple(p.jop for p in prepared),
                          locks_created=tuple(i for i, r in enumerate(reals) if r in lock.created))
        _check_space(prepared, journal, journal_path, free_space or _statvfs_free)
        write_journal(journal_path, journal)
        lock.keep_on_release(reals[i] for i in journal.locks_created)  # the journal says it: undo removes it
        try:
            with os_errors(undo_hint):
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






























