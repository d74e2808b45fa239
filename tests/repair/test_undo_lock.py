"""``undo`` leaves the log dir exactly as it was before the repair, Kafka's ``.lock`` included.

A repair takes ``<logdir>/.lock`` as ``LogManager.lockLogDirs`` does, creating it when absent (FileLock
opens it with CREATE). Before, the ``.lock`` the repair created stayed after ``undo`` (``diff -r``:
``Only in clean: .lock``), and an undo refused after its lock was taken created one while saying it
changed nothing. Now the journal records the dirs whose ``.lock`` the repair created
(``locks_created``) and undo removes it; a ``.lock`` that was there before stays; a ``.lock`` an undo
or a repair that wrote nothing had to create goes when it ends."""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

import pytest
from repair_fixtures import SEG, make_plan
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import RepairError
from kafkatx.repair import apply_plan, undo_journal

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000  # fixtures/README.md: T0 + 2 h


def _listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def _same_tree(a: Path, b: Path) -> bool:
    """``diff -r a b`` finds nothing: the same names, the same bytes."""
    def walk(cmp: filecmp.dircmp[str]) -> bool:
        if cmp.left_only or cmp.right_only or cmp.funny_files:
            return False
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        return not mismatch and not errors and all(walk(sub) for sub in cmp.subdirs.values())
    return walk(filecmp.dircmp(a, b))


def test_undo_removes_the_lock_the_repair_created(log_dir: Path, tmp_path: Path) -> None:
    (log_dir / ".lock").unlink()
    before = _listing(log_dir)
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    assert (log_dir / ".lock").exists()  # as Kafka's LogManager: the repair locked a dir that had none
    assert json.loads(result.journal_path.read_text().splitlines()[0])["locks_created"] == [0]
    undo_journal(result.journal_path, now=NOW + 1)
    assert _listing(log_dir) == before  # .lock gone with the rest of the repair


def test_undo_keeps_a_lock_that_was_there(log_dir: Path, tmp_path: Path) -> None:
    assert (log_dir / ".lock").exists()
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    assert "locks_created" not in json.loads(result.journal_path.read_text().splitlines()[0])  # as before
    undo_journal(result.journal_path, now=NOW + 1)
    assert (log_dir / ".lock").exists()


def test_a_refused_undo_creates_nothing(log_dir: Path, tmp_path: Path) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    (log_dir / ".lock").unlink()  # e.g. removed by hand after the repair
    with open(log_dir / SEG, "ab") as f:
        f.write(b"\x09" * 100)  # the broker appended: undo refuses (under its lock)
    before = _listing(log_dir)
    with pytest.raises(RepairError, match="grew by 100 bytes"):
        undo_journal(result.journal_path, now=NOW + 1)
    assert _listing(log_dir) == before  # no .lock either


def test_execute_then_undo_leaves_the_dir_byte_for_byte(tmp_path: Path) -> None:
    """The issue's trial: ``abort-hanging --execute`` then ``undo``, ``diff -r`` against a pristine copy."""
    pristine = tmp_path / "pristine"
    shutil.copytree(ROOT / "fixtures" / "hanging", pristine)
    assert not (pristine / ".lock").exists()
    ld = tmp_path / "hanging"
    shutil.copytree(pristine, ld)
    journal = tmp_path / "j.journal"
    r = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--all", "--execute", "--now", str(NOW),
                                 "--journal", str(journal)])
    assert r.exit_code == 0, r.output
    assert not _same_tree(pristine, ld)
    u = CliRunner().invoke(app, ["undo", str(journal)])
    assert u.exit_code == 0, u.output
    assert _same_tree(pristine, ld)  # before: "Only in hanging: .lock"


def test_a_repair_with_nothing_to_do_creates_no_lock(tmp_path: Path) -> None:
    ld = tmp_path / "clean"
    shutil.copytree(ROOT / "fixtures" / "clean", ld)
    assert not (ld / ".lock").exists()
    r = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--all", "--execute", "--now", str(NOW),
                                 "--journal", str(tmp_path / "j.journal")])
    assert r.exit_code == 0, r.output
    assert not (ld / ".lock").exists()
    assert _same_tree(ROOT / "fixtures" / "clean", ld)
