"""Kafka's ``<logdir>/.lock``: a held lock (flock, or the POSIX lock the JVM takes) makes
apply and undo refuse with LogDirLocked (exit 3) and touch nothing; while a repair runs,
kafkatx holds both locks itself so a broker starting mid-repair fails to lock the dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repair_fixtures import LOCK_SCRIPT, make_plan, subprocess_env, tree
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import EXIT_INPUT, LogDirLocked
from kafkatx.repair import RepairPlan, apply_plan, undo_journal
from kafkatx.repair.fsutil import probe_lock

NOW = 1_700_000_000_000


@pytest.mark.parametrize("kind", ["flock", "posix"])
def test_apply_refuses_locked_log_dir(log_dir: Path, tmp_path: Path, hold_lock, kind: str) -> None:
    plan = make_plan(log_dir)
    hold_lock(log_dir / ".lock", kind)
    before = tree(log_dir)
    journal = tmp_path / "r.journal"
    with pytest.raises(LogDirLocked, match=r"kafka-logs/\.lock: held by another process") as err:
        apply_plan(plan, journal, now=NOW)
    assert err.value.exit_code == EXIT_INPUT == 3
    assert tree(log_dir) == before
    assert not journal.exists()


def test_apply_refuses_when_any_of_several_log_dirs_is_locked(tmp_path: Path, hold_lock) -> None:
    from repair_fixtures import build_log_dir

    a = build_log_dir(tmp_path / "a")
    b = build_log_dir(tmp_path / "b")
    hold_lock(b / ".lock", "posix")
    plan = make_plan(a)
    plan = type(plan)(log_dirs=(a, b), operations=plan.operations, description=plan.description)
    before = tree(a)
    with pytest.raises(LogDirLocked, match=r"b/kafka-logs/\.lock"):
        apply_plan(plan, tmp_path / "r.journal", now=NOW)
    assert tree(a) == before
    # our own lock on a was released when the refusal happened
    assert probe_lock(a) is False


@pytest.mark.parametrize("kind", ["flock", "posix"])
def test_we_hold_the_lock_during_the_whole_apply(log_dir: Path, tmp_path: Path, kind: str) -> None:
    outcome = []

    def broker_tries_to_start() -> list[str]:
        # A separate process (as a broker would be) tries to take the lock while we apply.
        proc = subprocess.run([sys.executable, "-c", LOCK_SCRIPT.replace("fcntl.LOCK_EX)", "fcntl.LOCK_EX | fcntl.LOCK_NB)"),
                               str(log_dir / ".lock"), kind], capture_output=True, text=True, input="",
                              env=subprocess_env(), timeout=30)
        outcome.append(proc)
        return []

    apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW, post_check=broker_tries_to_start)
    assert outcome[0].returncode != 0 and "BlockingIOError" in outcome[0].stderr
    assert probe_lock(log_dir) is False  # released afterwards


def test_undo_refuses_locked_log_dir(log_dir: Path, tmp_path: Path, hold_lock) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    hold_lock(log_dir / ".lock", "posix")
    state = tree(log_dir)
    with pytest.raises(LogDirLocked):
        undo_journal(result.journal_path)
    assert tree(log_dir) == state
    # a dry run only reads, so it still answers
    assert {r.action for r in undo_journal(result.journal_path, dry_run=True).rows} >= {"truncate"}


def test_cli_undo_locked_is_exit_3(log_dir: Path, tmp_path: Path, hold_lock) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    hold_lock(log_dir / ".lock", "flock")
    state = tree(log_dir)
    out = CliRunner().invoke(app, ["undo", str(result.journal_path)])
    assert out.exit_code == 3
    assert len(out.stderr.strip().splitlines()) == 1 and ".lock: held by another process" in out.stderr
    assert tree(log_dir) == state


def test_lock_file_that_is_a_symlink_is_refused(log_dir: Path, tmp_path: Path) -> None:
    (log_dir / ".lock").unlink()
    (tmp_path / "elsewhere.lock").write_bytes(b"")
    (log_dir / ".lock").symlink_to(tmp_path / "elsewhere.lock")
    with pytest.raises(Exception, match=r"\.lock: is not a regular file"):
        apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)


def test_plan_touching_the_lock_file_is_refused(log_dir: Path, tmp_path: Path) -> None:
    from kafkatx.errors import RepairError
    from kafkatx.repair import ReplaceFile

    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        ReplaceFile(path=log_dir / ".lock", expected_sha256="0" * 64, data=b""),))
    with pytest.raises(RepairError, match=r"\.lock: a repair never touches the broker's lock file"):
        apply_plan(plan, tmp_path / "r.journal", now=NOW)
