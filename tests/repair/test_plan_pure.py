"""The repair planner is pure: ``plan_repair`` makes the plan
from what ``analyse_abort_hanging`` read and opens, stats, lists or maps no file itself.

Each case analyses a copy of a fixture, then forbids every way of touching a file (``open``,
``os.open``/``stat``/``lstat``/``scandir``/``listdir``/``pread``, ``mmap``) and plans: the plan must be
the one ``plan_abort_hanging`` (analysis and plan in one go) makes of the same files, operation for
operation, with the expected size and sha256 of each append equal to the bytes on disk.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import mmap
import os
import shutil
from pathlib import Path

import pytest

from kafkatx.repair.analysis import analyse_abort_hanging
from kafkatx.repair.ops import AppendBytes, MoveToBackup, ReplaceFile
from kafkatx.repair.plan import plan_abort_hanging, plan_repair

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000  # fixtures/README.md: T0 + 2 h


def _forbid_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    touched: list[str] = []

    def refuse(name: str):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            touched.append(f"{name}{args[:1]}")
            raise AssertionError(f"the planner touched a file: {name}{args[:1]}")
        return call

    for mod, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "lstat"),
                      (os, "scandir"), (os, "listdir"), (os, "pread"), (os, "preadv"), (mmap, "mmap")):
        monkeypatch.setattr(mod, name, refuse(f"{mod.__name__}.{name}"))
    return touched


@pytest.mark.parametrize(("fixture", "options"), [
    ("hanging", {"all_": True}),
    ("ghost", {"all_": True, "ghost_strategy": "drop-snapshots"}),
    ("ghost", {"all_": True, "ghost_strategy": "marker"}),
])
def test_plan_repair_reads_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixture: str,
                                   options: dict[str, object]) -> None:
    ld = tmp_path / fixture
    shutil.copytree(REPO / "fixtures" / fixture, ld)
    whole = plan_abort_hanging([ld], now=NOW, **options)  # type: ignore[arg-type]
    strategy = str(options.get("ghost_strategy", "marker"))
    analysis = analyse_abort_hanging([ld], now=NOW, **options)  # type: ignore[arg-type]
    with monkeypatch.context() as m:
        touched = _forbid_files(m)
        planned = plan_repair(analysis, now=NOW, ghost_strategy=strategy)
    assert touched == []
    assert planned.rows == whole.rows and planned.rows
    assert planned.plan.operations == whole.plan.operations and planned.plan.operations
    assert planned.notices == whole.notices and planned.touched == whole.touched
    # every first expectation of a file is its state on disk (the bytes the analysis read); later
    # appends to the same file chain on the earlier ones
    seen: set[Path] = set()
    for op in planned.plan.operations:
        if op.path in seen:
            continue
        seen.add(op.path)
        if isinstance(op, AppendBytes | MoveToBackup | ReplaceFile):
            data = Path(op.path).read_bytes()
        if isinstance(op, AppendBytes):
            assert (op.expected_size, op.expected_sha256) == (len(data), hashlib.sha256(data).hexdigest()), op.path
        elif isinstance(op, MoveToBackup | ReplaceFile):
            assert op.expected_sha256 == hashlib.sha256(data).hexdigest(), op.path
    # planning twice from one analysis gives one plan (the analysis is not consumed)
    again = plan_repair(analysis, now=NOW, ghost_strategy=strategy)
    assert again.plan.operations == planned.plan.operations and again.notices == planned.notices


def test_what_the_analysis_could_not_read_refuses_the_plan_where_it_is_needed(tmp_path: Path) -> None:
    """The analysis keeps an error met reading a file the plan appends after (a torn active segment, an
    unreadable index) in place of what it read: the plan refuses every row with it, naming the file and
    byte, and plans nothing (as the planner did when it read the file itself)."""
    from kafkatx.errors import DecodeError

    ld = tmp_path / "hanging"
    shutil.copytree(REPO / "fixtures" / "hanging", ld)
    analysis = analyse_abort_hanging([ld], now=NOW, all_=True)
    tp = next(tp for tp in sorted(analysis.tails) if tp[0] != "__transaction_state")
    seg = analysis.parts[tp].segments[-1].log_path
    analysis.tails[tp] = DecodeError(f"{tp[0]}-{tp[1]}: 7 bytes after the last batch; refusing to append after "
                                     "them", path=seg, position=1234)
    planned = plan_repair(analysis, now=NOW)
    assert planned.rows and all(r.action.startswith("refused:") for r in planned.rows)
    assert all(f"{seg}: byte 1234: " in r.action for r in planned.rows)
    assert planned.plan.operations == ()
