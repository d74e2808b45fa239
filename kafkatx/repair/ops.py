"""The operation model a repair plan is made of, independent of what the bytes mean.

A planner (``repair/plan.py``) turns findings into these; ``apply.apply_plan`` runs them
with a journal first, and ``apply.undo_journal`` reverses them. Paths are the paths as
the planner found them (absolute or relative to the cwd) and must lie inside one of the
plan's ``log_dirs``; the ``expected_*`` fields pin the state the planner decided on, so a
file that changed between planning and applying makes the apply refuse.

Four kinds are enough for Kafka's files, because Kafka itself only ever appends to a
segment and its indexes, or writes a whole new file and renames it into place
(``Snapshots``/``CheckpointFile`` write ``.tmp`` then ``Utils.atomicMoveWithFallback``).
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct


class AppendBytes(Struct, frozen=True, kw_only=True):
    """Append ``data`` at the end of an existing file of exactly ``expected_size`` bytes."""

    path: Path
    expected_size: int
    expected_sha256: str
    data: bytes


class CreateFile(Struct, frozen=True, kw_only=True):
    """Create a new file (it must not exist) holding ``data``.

    Owner, group and mode are copied from ``like`` (a sibling such as the segment's
    ``.log``) so a broker running as ``kafka`` can open it; without ``like`` the
    containing directory's owner/group and mode 0644 are used.
    """

    path: Path
    data: bytes
    like: Path | None = None


class ReplaceFile(Struct, frozen=True, kw_only=True):
    """Replace a whole file (temp + fsync + rename); the old content goes to the journal's backup dir."""

    path: Path
    expected_sha256: str
    data: bytes


class MoveToBackup(Struct, frozen=True, kw_only=True):
    """Remove a file from the log dir, keeping it in the journal's backup dir (restorable by undo)."""

    path: Path
    expected_sha256: str


Operation = AppendBytes | CreateFile | ReplaceFile | MoveToBackup


class RepairPlan(Struct, frozen=True, kw_only=True):
    log_dirs: tuple[Path, ...]
    operations: tuple[Operation, ...]
    description: str = ""


OP_NAMES: dict[type, str] = {
    AppendBytes: "append",
    CreateFile: "create",
    ReplaceFile: "replace",
    MoveToBackup: "move",
}
