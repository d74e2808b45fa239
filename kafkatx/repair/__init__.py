"""Repairs: plan (pure) then apply with a journal first, and undo from that journal.

``ops`` holds the operation model, ``journal`` the on-disk journal, ``apply`` the safe apply, ``undo``
the undo from a journal, ``fsutil`` the file-system primitives (locks, containment, fsync, ownership).
"""

from kafkatx.repair.apply import ApplyResult, ApplyRow, apply_plan, plan_steps
from kafkatx.repair.journal import backup_dir_for, default_journal_path, read_journal
from kafkatx.repair.ops import AppendBytes, CreateFile, MoveToBackup, Operation, RepairPlan, ReplaceFile
from kafkatx.repair.undo import UndoResult, UndoRow, undo_journal

__all__ = [
    "AppendBytes",
    "ApplyResult",
    "ApplyRow",
    "CreateFile",
    "MoveToBackup",
    "Operation",
    "RepairPlan",
    "ReplaceFile",
    "UndoResult",
    "UndoRow",
    "apply_plan",
    "backup_dir_for",
    "default_journal_path",
    "plan_steps",
    "read_journal",
    "undo_journal",
]
