"""``kafkatx undo JOURNAL``: reverse a repair (:func:`kafkatx.repair.apply.apply_plan`) from its journal.

Under the log dirs' locks, each file the journal names is matched against the states it recorded before and
after each operation (size + sha256), so a repair that crashed half-way is undone operation by operation and
running undo twice is harmless; anything the repair does not explain refuses before a byte changes
(:func:`undo_journal` lists the refusals). Appends are truncated away, created files deleted, replaced and
moved files restored from the backup dir, each write through ``O_NOFOLLOW`` folder descriptors walked from
the log dir root; afterwards every file must hash to its state before the repair, else the journal is not
marked ``undone``. ``apply_plan`` rolls a failed apply back through :func:`undo_journal` too.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

from msgspec import Struct

from kafkatx.errors import RepairError
from kafkatx.repair.fsutil import (
    TEMP_SUFFIX,
    FileState,
    LogDirLocks,
    check_relative,
    check_single_link,
    check_trusted,
    copy_file,
    file_state,
    hash_file,
    open_dir,
    open_nofollow,
    os_errors,
    remove_if_regular,
    safe_join,
)
from kafkatx.repair.journal import (
    Journal,
    JournalOp,
    StateRecord,
    append_status,
    check_journal_location,
    read_journal,
)
from kafkatx.storage.log_dir import looks_like_log_dir
from kafkatx.storage.partition import parse_partition_dir_name


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


def _trusted_journal(journal_path: Path) -> tuple[Journal, list[Path], Path]:
    """The journal at ``journal_path`` (absolute), its log dirs and its backup dir, once undo may trust them:
    written by this user or root, whole, naming existing Kafka log dirs that are no symlinks, and kept outside
    them (:func:`undo_journal` lists the refusals)."""
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
    return journal, refs, backup_dir


def _undo_targets(journal: Journal, journal_path: Path, refs: list[Path],
                  ) -> tuple[list[Path], list[tuple[Path, Path, tuple[str, ...]]], dict[Path, tuple[Path, tuple[str, ...]]]]:
    """Each operation's file (and its temp file, if any) inside its log dir, refused where it is no file a
    kafkatx repair writes; with each target's log dir root and path parts."""
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
    return targets, temps, where


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
    journal, refs, backup_dir = _trusted_journal(journal_path)
    targets, temps, where = _undo_targets(journal, journal_path, refs)
    # The locks are taken before the files are examined (_plan_undo) and held to the end; a second
    # undo or repair waits up to lock_timeout seconds and then examines the files afresh.
    if locks is not None and not locks.covers(list(refs)):
        raise RepairError(f"{journal_path}: the undo's log dir locks were not held by the caller")
    held = nullcontext(locks) if locks is not None else LogDirLocks([] if dry_run else refs, create=True,
                                                                    timeout=lock_timeout)
    with os_errors(), held as taken:
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
