"""The repair journal: what a repair is about to do, written and fsynced before the first write.

Layout (JSON lines, UTF-8):

* line 1 - the journal object::

      {"format": "kafkatx-repair-journal", "version": 1, "created_ms": ..., "description": ...,
       "log_dirs": ["/real/path/of/logdir", ...],      # symlinks resolved
       "backup_dir": "NAME.d",                          # next to the journal, never in a log dir
       "operations": [
         {"index": 0, "op": "append"|"create"|"replace"|"move",
          "log_dir": 0, "path": "topic-0/00000000000000000000.log",   # relative to its log dir
          "before": {"size", "sha256", "uid", "gid", "mode"} | null,   # null: file absent
          "after":  {"size", "sha256", "uid", "gid", "mode"} | null,
          "append": {"offset", "length", "sha256"} | null,            # the byte range appended
          "backup": "0001-name" | null,                               # file name in backup_dir
          "temp": "topic-0/.name.kafkatx-tmp" | null,                 # temp file used for create/replace
          "like": "topic-0/....log" | null}, ...],
       "locks_created": [0, ...],                     # only when some: dirs whose .lock the repair created
       "checksum": "<sha256 of the canonical serialisation of everything above>"}

* following lines - status events appended (and fsynced) as the repair goes:
  ``{"status": "applied", "at_ms": ...}``, ``{"status": "undone", "at_ms": ...}``.

The checksum covers line 1 only and is computed over ``json.dumps(obj, sort_keys=True,
separators=(",", ":"), ensure_ascii=True)`` of the object without its ``checksum`` key, so
any edit to what undo will act on (paths, sizes, hashes) is detected. Status lines carry no
authority: undo decides from the files' actual state, never from a status line.

Where the journal lives: ``--journal FILE``, or by default a timestamped
``kafkatx-repair-<UTC time>.journal`` in the current directory (``-2``, ``-3``, ... when an earlier
run's journal has that name) - unless the current
directory is inside a log dir, in which case it goes next to the first log dir (its
parent). A journal is never written inside a log dir: Kafka scans log dirs and would
meet stray files (and a retention/cleanup pass or a `kafka-storage format` could delete
the only copy of the undo information).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from kafkatx.errors import ReadFailed, RepairError
from kafkatx.repair.fsutil import check_relative, fsync_dir, is_within, open_nofollow
from kafkatx.storage import fdio
from kafkatx.storage.fdio import write_all

FORMAT = "kafkatx-repair-journal"
VERSION = 1
MAX_JOURNAL_BYTES = 64 << 20  # a journal describes file operations, not data; 64 MiB is far beyond any plan
OP_KINDS = ("append", "create", "replace", "move")
_HEX = set("0123456789abcdef")


class StateRecord(Struct, frozen=True, kw_only=True):
    size: int
    sha256: str
    uid: int
    gid: int
    mode: int


class AppendRange(Struct, frozen=True, kw_only=True):
    offset: int
    length: int
    sha256: str


class JournalOp(Struct, frozen=True, kw_only=True):
    index: int
    op: str
    log_dir: int
    path: str
    before: StateRecord | None
    after: StateRecord | None
    append: AppendRange | None = None
    backup: str | None = None
    temp: str | None = None
    like: str | None = None


class Journal(Struct, frozen=True, kw_only=True):
    created_ms: int
    description: str
    log_dirs: tuple[str, ...]
    backup_dir: str
    operations: tuple[JournalOp, ...]
    version: int = VERSION
    # log dirs (indexes into log_dirs) that had no .lock before the repair created one: undo removes it
    locks_created: tuple[int, ...] = ()


class JournalStatus(Struct, frozen=True, kw_only=True):
    status: str
    at_ms: int


def backup_dir_for(journal_path: Path) -> Path:
    """``JOURNAL.d/`` next to the journal: where replaced/moved files are kept."""
    return journal_path.with_name(journal_path.name + ".d")


def default_journal_path(log_dirs: list[Path], now_ms: int, cwd: Path | None = None) -> Path:
    """Timestamped journal path in ``cwd``, or beside the first log dir when ``cwd`` is inside a log dir."""
    cwd = Path(os.path.realpath(cwd or Path.cwd()))
    real_dirs = [Path(os.path.realpath(d)) for d in log_dirs]
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ms / 1000)) + f"{now_ms % 1000:03d}Z"
    name = f"kafkatx-repair-{stamp}.journal"
    base = cwd
    if any(is_within(cwd, d) for d in real_dirs):
        base = real_dirs[0].parent
        if any(is_within(base, d) for d in real_dirs):
            raise RepairError(f"{base}: is inside a log dir; pass --journal FILE outside every log dir")
    # An earlier run's journal (the same --now, or the same millisecond) is kept, never collided with:
    # the next free name -2, -3, ... (the printed `--execute` runs again after an undo).
    path, n = base / name, 1
    while path.exists() or backup_dir_for(path).exists():
        n += 1
        path = base / f"kafkatx-repair-{stamp}-{n}.journal"
    return path


def check_journal_location(journal_path: Path, log_dirs: list[Path]) -> None:
    parent = Path(os.path.realpath(journal_path.parent))
    for d in log_dirs:
        if is_within(parent, Path(os.path.realpath(d))):
            raise RepairError(f"{journal_path}: journal must not be inside log dir {d}; choose a path outside it")


# -- serialisation ------------------------------------------------------------------------------------------


def _to_obj(journal: Journal) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": journal.version,
        "created_ms": journal.created_ms,
        "description": journal.description,
        "log_dirs": list(journal.log_dirs),
        "backup_dir": journal.backup_dir,
        "operations": [msgspec.to_builtins(op) for op in journal.operations],
        # only when there are some: a journal without them reads (and checks) as before
        **({"locks_created": list(journal.locks_created)} if journal.locks_created else {}),
    }


def canonical_checksum(obj: dict[str, Any]) -> str:
    body = {k: v for k, v in obj.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def serialise(journal: Journal) -> bytes:
    obj = _to_obj(journal)
    obj["checksum"] = canonical_checksum(obj)
    return (json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n").encode("ascii")


def write_journal(path: Path, journal: Journal) -> None:
    """Write the journal (before any repair write): to a temp name, fsynced, then linked into place.

    The link is exclusive (an existing journal is never overwritten) and atomic: a full disk or
    any other write error leaves no journal at all - only a complete one ever appears under
    ``path`` - so the error names the file and a retry with the same ``--journal`` works.
    """
    data = serialise(journal)
    if os.path.lexists(path):
        raise RepairError(f"{path}: a journal already exists there; choose another --journal")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise RepairError(f"{path}: a journal already exists there; choose another --journal") from None
    except OSError as err:
        raise RepairError(f"{path}: cannot write the repair journal ({err.strerror or err}); nothing was changed "
                          "and no partial journal was left") from err
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    fsync_dir(path.parent)


def append_status(path: Path, status: str, at_ms: int) -> None:
    """Append a status line (fsynced). A torn line (full disk, crash) is ignored by readers."""
    line = (json.dumps({"status": status, "at_ms": at_ms}, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND)
    try:
        write_all(fd, line)
        os.fsync(fd)
    except OSError as err:
        raise RepairError(f"{path}: cannot append the {status!r} status to the journal ({err.strerror or err})") \
            from err
    finally:
        os.close(fd)


# -- parsing (strict: a journal drives deletes and truncates) --------------------------------------------------


class _Bad(Exception):
    pass


def _int(obj: dict[str, Any], key: str, *, minimum: int = 0) -> int:
    v = obj.get(key)
    if type(v) is not int or v < minimum:
        raise _Bad(f"{key!r} must be an integer >= {minimum}")
    return v


def _str(obj: dict[str, Any], key: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str):
        raise _Bad(f"{key!r} must be a string")
    return v


def _sha(obj: dict[str, Any], key: str) -> str:
    v = _str(obj, key)
    if len(v) != 64 or not set(v) <= _HEX:
        raise _Bad(f"{key!r} must be a lowercase sha256 hex digest")
    return v


def _opt_str(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    if v is not None and not isinstance(v, str):
        raise _Bad(f"{key!r} must be a string or null")
    return v


def _state(obj: Any, what: str) -> StateRecord | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise _Bad(f"{what} must be an object or null")
    return StateRecord(size=_int(obj, "size"), sha256=_sha(obj, "sha256"), uid=_int(obj, "uid"),
                       gid=_int(obj, "gid"), mode=_int(obj, "mode"))


def _plain_name(v: str | None, what: str) -> None:
    if v is not None and (not v or "/" in v or v in (".", "..") or "\x00" in v):
        raise _Bad(f"{what} {v!r} must be a plain file name")


def _op(obj: Any, i: int, n_dirs: int) -> JournalOp:
    if not isinstance(obj, dict):
        raise _Bad(f"operation {i} must be an object")
    kind = _str(obj, "op")
    if kind not in OP_KINDS:
        raise _Bad(f"operation {i}: unknown op {kind!r}")
    if _int(obj, "index") != i:
        raise _Bad(f"operation {i}: index out of order")
    log_dir = _int(obj, "log_dir")
    if log_dir >= n_dirs:
        raise _Bad(f"operation {i}: log_dir {log_dir} is not one of the {n_dirs} log dirs")
    path = _str(obj, "path")
    try:
        check_relative(path, where=f"operation {i}")
    except RepairError as err:
        raise _Bad(str(err)) from None
    for key in ("temp", "like"):
        v = _opt_str(obj, key)
        if v is not None:
            try:
                check_relative(v, where=f"operation {i} {key}")
            except RepairError as err:
                raise _Bad(str(err)) from None
    backup = _opt_str(obj, "backup")
    _plain_name(backup, f"operation {i}: backup")
    before = _state(obj.get("before"), f"operation {i}: before")
    after = _state(obj.get("after"), f"operation {i}: after")
    rng = obj.get("append")
    append = None
    if rng is not None:
        if not isinstance(rng, dict):
            raise _Bad(f"operation {i}: append must be an object")
        append = AppendRange(offset=_int(rng, "offset"), length=_int(rng, "length"), sha256=_sha(rng, "sha256"))
    need = {
        "append": before is not None and after is not None and append is not None
        and append.offset == before.size and after.size == before.size + append.length,
        "create": before is None and after is not None,
        "replace": before is not None and after is not None and backup is not None,
        "move": before is not None and after is None and backup is not None,
    }[kind]
    if not need:
        raise _Bad(f"operation {i}: fields do not describe a consistent {kind}")
    return JournalOp(index=i, op=kind, log_dir=log_dir, path=path, before=before, after=after, append=append,
                     backup=backup, temp=obj.get("temp"), like=obj.get("like"))


def read_journal(path: Path) -> tuple[Journal, list[JournalStatus]]:
    """Parse and verify a journal; :class:`RepairError` naming the file for anything wrong."""
    fd = open_nofollow(path)
    try:
        size = fdio.fstat(fd, path).st_size
        if size > MAX_JOURNAL_BYTES:
            raise RepairError(f"{path}: {size} bytes is larger than any journal kafkatx writes ({MAX_JOURNAL_BYTES})")
        raw = fdio.pread(fd, size, 0, path)
        if len(raw) < size:  # cut under the read: no journal to judge
            raise ReadFailed(f"could not read {path}: file shrank while being read ({size} bytes at open, "
                             f"{len(raw)} read)", path=path, reason="file shrank while being read")
    finally:
        os.close(fd)
    lines = raw.split(b"\n")
    try:
        obj = json.loads(lines[0])
    except (ValueError, UnicodeDecodeError) as err:
        raise RepairError(f"{path}: line 1: not a kafkatx journal (invalid JSON: {err})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise RepairError(f"{path}: line 1: not a kafkatx repair journal")
    if obj.get("version") != VERSION:
        raise RepairError(f"{path}: line 1: journal version {obj.get('version')!r} is not supported (only {VERSION})")
    stored = obj.get("checksum")
    if stored != canonical_checksum(obj):
        raise RepairError(f"{path}: journal checksum mismatch: it was modified after it was written; refusing to use it")
    try:
        log_dirs = obj.get("log_dirs")
        if not isinstance(log_dirs, list) or not log_dirs or not all(
                isinstance(d, str) and d.startswith("/") and ".." not in d.split("/") for d in log_dirs):
            raise _Bad("'log_dirs' must be a non-empty list of absolute paths")
        backup_dir = _str(obj, "backup_dir")
        _plain_name(backup_dir, "backup_dir")
        ops_obj = obj.get("operations")
        if not isinstance(ops_obj, list):
            raise _Bad("'operations' must be a list")
        ops = tuple(_op(o, i, len(log_dirs)) for i, o in enumerate(ops_obj))
        created = obj.get("locks_created", [])
        if not isinstance(created, list) or not all(type(i) is int and 0 <= i < len(log_dirs) for i in created):
            raise _Bad("'locks_created' must be a list of log dir indexes")
        journal = Journal(created_ms=_int(obj, "created_ms"), description=_str(obj, "description"),
                          log_dirs=tuple(log_dirs), backup_dir=backup_dir, operations=ops,
                          locks_created=tuple(sorted(set(created))))
    except _Bad as err:
        raise RepairError(f"{path}: line 1: {err}") from None
    statuses: list[JournalStatus] = []
    for line in lines[1:]:
        if not line.strip():
            continue
        try:
            st = json.loads(line)
            statuses.append(JournalStatus(status=str(st["status"]), at_ms=int(st["at_ms"])))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            # A torn status line (crash while appending it) is harmless: undo never trusts statuses.
            continue
    return journal, statuses
