"""Repairs that cannot race or escape.

* One lock from the first read to the last write: a second repair that runs while the first is
  between its analysis and its plan (the ``after_analysis`` seam, passed in by the test) is
  refused at once or waits, then re-analyses; either way the log dir ends byte-identical to one
  repair (before the fix, the second repair appended a second set of markers).
* No write through a hard link: a segment with a second name outside the log dir is refused
  (exit 3 naming the file) by the repair and by undo, and the outside file keeps its bytes.
* Space before writes: a journal filesystem without room for journal + backups refuses before
  the first change, naming the filesystem and the shortfall.

Fixture: ``fixtures/hanging`` (fixtures/README.md), repaired at its scenario's ``now``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import EXIT_INPUT, LogDirLocked, RepairError
from kafkatx.repair import undo_journal
from kafkatx.repair.offline import execute_abort_hanging

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000  # fixtures/README.md: T0 + 2 h


def digest(root: Path) -> dict[str, str]:
    return {(Path(d) / f).relative_to(root).as_posix(): hashlib.sha256((Path(d) / f).read_bytes()).hexdigest()
            for d, _dirs, files in os.walk(root) for f in files if f != ".lock"}  # the lock a repair creates


def copy(tmp_path: Path, name: str = "one") -> Path:
    dest = tmp_path / name / "hanging"
    shutil.copytree(REPO / "fixtures" / "hanging", dest, symlinks=True)
    return dest


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def cli(ld: Path, journal: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kafkatx", "abort-hanging", "--log-dir", str(ld), "--all", "--execute",
            "--now", str(NOW), "--journal", str(journal), "--format", "json", *extra]


@pytest.fixture
def one_repair(tmp_path: Path) -> dict[str, str]:
    """The bytes a single repair leaves (the reference every interleaving must match)."""
    ld = copy(tmp_path, "reference")
    got = execute_abort_hanging([ld], now=NOW, journal=tmp_path / "reference.journal", all_=True)
    assert got.applied is not None and not got.applied.problems
    return digest(ld)


def test_second_repair_between_analysis_and_plan_is_refused(tmp_path: Path, one_repair: dict[str, str]) -> None:
    ld = copy(tmp_path)
    seen: list[subprocess.CompletedProcess[str]] = []

    def other_repair_runs_now() -> None:
        # Repair A, a separate process, runs to completion while B sits between analysis and plan.
        seen.append(subprocess.run(cli(ld, tmp_path / "a.journal"), capture_output=True, text=True, env=env(),
                                   timeout=120))

    got = execute_abort_hanging([ld], now=NOW, journal=tmp_path / "b.journal", all_=True,
                                after_analysis=other_repair_runs_now)
    assert got.applied is not None and not got.applied.problems
    a = seen[0]
    assert a.returncode == EXIT_INPUT, a.stderr
    assert ".lock: held by another process" in a.stderr
    assert not (tmp_path / "a.journal").exists()
    assert digest(ld) == one_repair


def test_second_repair_waits_then_finds_nothing_to_do(tmp_path: Path, one_repair: dict[str, str]) -> None:
    ld = copy(tmp_path)
    waiting: list[subprocess.Popen[str]] = []

    def other_repair_starts_now() -> None:
        # Repair A starts while B holds the lock and waits for it (--lock-timeout); it can only get
        # it after B released, and then reads B's result.
        waiting.append(subprocess.Popen(cli(ld, tmp_path / "a.journal", "--lock-timeout", "120"),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env()))

    got = execute_abort_hanging([ld], now=NOW, journal=tmp_path / "b.journal", all_=True,
                                after_analysis=other_repair_starts_now)
    assert got.applied is not None
    out, err = waiting[0].communicate(timeout=120)
    assert waiting[0].returncode == 0, err  # nothing hanging any more: no plan, no journal
    assert out.strip() in ("[]", "")
    assert not (tmp_path / "a.journal").exists()
    assert digest(ld) == one_repair


def test_in_process_second_repair_is_refused_by_flock(tmp_path: Path, one_repair: dict[str, str]) -> None:
    """POSIX locks are per process; the flock on a separate descriptor still excludes a second run."""
    ld = copy(tmp_path)
    errors: list[Exception] = []

    def nested() -> None:
        try:
            execute_abort_hanging([ld], now=NOW, journal=tmp_path / "a.journal", all_=True)
        except LogDirLocked as err:
            errors.append(err)

    execute_abort_hanging([ld], now=NOW, journal=tmp_path / "b.journal", all_=True, after_analysis=nested)
    assert len(errors) == 1
    assert digest(ld) == one_repair


def test_hard_linked_segment_is_refused_and_the_outside_file_is_untouched(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    seg = sorted((ld / "orders-0").glob("*.log"))[-1]  # the active segment, which the repair appends to
    outside = tmp_path / "outside.log"
    os.link(seg, outside)
    before_outside = outside.read_bytes()
    before = digest(ld)
    res = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--all", "--execute", "--now", str(NOW),
                                   "--journal", str(tmp_path / "r.journal")])
    assert res.exit_code == EXIT_INPUT, res.output
    assert f"{seg}: has 2 hard links" in res.output
    assert outside.read_bytes() == before_outside
    assert digest(ld) == before
    assert not (tmp_path / "r.journal").exists()


def test_undo_refuses_to_truncate_through_a_hard_link(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    got = execute_abort_hanging([ld], now=NOW, journal=tmp_path / "r.journal", all_=True)
    assert got.applied is not None
    seg = Path(next(r.path for r in got.applied.operations if r.op == "append" and r.path.endswith(".log")))
    outside = tmp_path / "outside.log"
    os.link(seg, outside)
    before_outside = outside.read_bytes()
    with pytest.raises(RepairError, match="has 2 hard links"):
        undo_journal(tmp_path / "r.journal")
    assert outside.read_bytes() == before_outside  # nothing truncated, inside or outside


def test_no_room_for_journal_and_backups_refuses_before_the_first_change(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    before = digest(ld)
    journal = tmp_path / "r.journal"
    with pytest.raises(RepairError) as err:
        execute_abort_hanging([ld], now=NOW, journal=journal, all_=True, free_space=lambda _p: 1000)
    msg = str(err.value)
    assert "No space left" in msg and "bytes short; nothing was changed" in msg
    assert msg.startswith(str(journal)) or msg.startswith(str(ld))
    assert digest(ld) == before
    assert not journal.exists()
