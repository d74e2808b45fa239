"""Fault injection: kill a real apply process at every step, then show the log dir is
untouched, fully applied, or restored exactly by undo - never left in between.

Each run starts ``fault_launcher.py <step>``, which passes ``apply_plan`` an ``on_step`` hook that
SIGKILLs the process right after that step (no cleanup handlers, no flush: as close to ``kill -9``
or an OOM kill as a test gets). The library has no fault switch of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from repair_fixtures import (
    FAULT_LAUNCHER,
    REPO,
    build_log_dir,
    expected_applied_contents,
    make_plan,
    sha,
    subprocess_env,
    tree,
)

from kafkatx.errors import RepairError
from kafkatx.repair import apply_plan, plan_steps, read_journal, undo_journal
from kafkatx.repair.plan import plan_abort_hanging
from kafkatx.storage.log_dir import LogDir


def _steps() -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        return plan_steps(make_plan(build_log_dir(Path(d))))


STEPS = _steps()


def _contents(ld: Path) -> dict[str, str]:
    return {rel: what for rel, (what, *_rest) in tree(ld).items()}


@pytest.mark.parametrize("step", STEPS)
def test_crash_at_every_step(tmp_path: Path, run_apply, step: str) -> None:
    ld = build_log_dir(tmp_path)
    original_tree = tree(ld)
    original_bytes = {p: p.read_bytes() for p in ld.rglob("*") if p.is_file()}
    journal = tmp_path / "r.journal"

    proc = run_apply(ld, journal, fault=step)
    assert proc.returncode == -9, (step, proc.stderr)
    assert "finished" not in proc.stdout

    crashed = _contents(ld)
    fully = dict(crashed)
    for rel, data in expected_applied_contents(original_bytes, ld).items():
        if data is None:
            fully.pop(rel, None)
        else:
            fully[rel] = sha(data)
    temps = [rel for rel in crashed if rel.endswith(".kafkatx-tmp")]
    if step == "journal-written":
        assert tree(ld) == original_tree  # nothing touched yet
    if step == "applied":
        assert crashed == fully and not temps  # everything done
        _, statuses = read_journal(journal)
        assert [s.status for s in statuses] == ["applied"]

    # Whatever the crash left, undo brings back the exact original directory.
    result = undo_journal(journal)
    assert all(r.verified for r in result.rows)
    assert tree(ld) == original_tree, step
    # ... and the backups it needed are still there for a second look
    assert journal.is_file()


def test_crash_then_rerun_of_apply_is_refused_until_undo(tmp_path: Path, run_apply) -> None:
    ld = build_log_dir(tmp_path)
    original = tree(ld)
    plan = make_plan(ld)
    journal = tmp_path / "r.journal"
    assert run_apply(ld, journal, fault="op4:create:linked").returncode == -9
    # the same plan, re-run after the crash, sees files changed since it was made
    after_crash = tree(ld)
    with pytest.raises(RepairError, match="changed since the plan"):
        apply_plan(plan, tmp_path / "again.journal", now=1)
    assert tree(ld) == after_crash
    undo_journal(journal)
    assert tree(ld) == original
    # now the plan applies cleanly from scratch
    again = tmp_path / "third.journal"
    assert run_apply(ld, again).returncode == 0
    undo_journal(again)
    assert tree(ld) == original


def test_steps_cover_every_operation() -> None:
    assert STEPS[0] == "journal-written" and STEPS[-1] == "applied"
    assert {s.split(":")[0] for s in STEPS[1:-1]} == {f"op{i}" for i in range(9)}


def test_on_step_is_called_at_every_step_in_order(tmp_path: Path) -> None:
    ld = build_log_dir(tmp_path)
    plan = make_plan(ld)
    seen: list[str] = []
    apply_plan(plan, tmp_path / "r.journal", now=1, on_step=seen.append)
    assert seen == plan_steps(plan) == STEPS


def test_the_old_fault_variable_is_inert(tmp_path: Path) -> None:
    """Nothing in the environment can make a repair kill itself: ``KAFKATX_FAULT_AT`` (the hook the
    library used to read) set to the first step leaves the apply to run to the end."""
    ld = build_log_dir(tmp_path)
    journal = tmp_path / "r.journal"
    proc = subprocess.run([sys.executable, str(FAULT_LAUNCHER), "-", "apply", str(ld), str(journal)],
                          env=subprocess_env(KAFKATX_FAULT_AT="journal-written"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "finished" in proc.stdout
    _, statuses = read_journal(journal)
    assert [s.status for s in statuses] == ["applied"]


# fixtures/README.md: the "hanging" log dir, analysed at T0 + 2 h, has eight hanging rows to repair.
HANGING = REPO / "fixtures" / "hanging"
HANGING_NOW = 1_700_007_200_000


def _digests(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f != ".lock":  # created by the repair's lock, as Kafka's LogManager does; never removed
                p = Path(dirpath) / f
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _hanging_steps() -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        ld = Path(shutil.copytree(HANGING, Path(d) / "hanging", symlinks=True))
        return plan_steps(plan_abort_hanging([LogDir(ld)], all_=True, now=HANGING_NOW).plan)


HANGING_STEPS = _hanging_steps()


@pytest.mark.parametrize("step", [HANGING_STEPS[0], HANGING_STEPS[len(HANGING_STEPS) // 2], HANGING_STEPS[-1]])
def test_cli_execute_killed_at_a_step_then_undo_restores(tmp_path: Path, step: str) -> None:
    """``abort-hanging --all --execute`` through the CLI, killed after ``step`` (the launcher's hook on
    the CLI's apply_plan); ``undo`` with the journal then gives back the exact log dir."""
    ld = Path(shutil.copytree(HANGING, tmp_path / "hanging", symlinks=True))
    before = _digests(ld)
    journal = tmp_path / "cli.journal"
    cli = [sys.executable, str(FAULT_LAUNCHER), step, "cli", "abort-hanging", "--log-dir", str(ld),
           "--now", str(HANGING_NOW), "--all", "--execute", "--journal", str(journal), "--format", "jsonl"]
    proc = subprocess.run(cli, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout == ""  # killed before any row was printed
    assert journal.is_file()
    if step == "journal-written":
        assert _digests(ld) == before
    else:
        assert _digests(ld) != before
    undo = subprocess.run([sys.executable, str(FAULT_LAUNCHER), "-", "cli", "undo", str(journal), "--format", "json"],
                          env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert undo.returncode == 0, undo.stderr
    assert json.loads(undo.stdout)
    assert _digests(ld) == before


RANDOM_KILL_SCRIPT = """
import os, random, signal, sys, threading, time
from pathlib import Path
from repair_fixtures import make_plan
from kafkatx.repair import apply_plan
ld, journal, delay = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
plan = make_plan(ld)
def killer():
    end = time.perf_counter() + delay
    while time.perf_counter() < end:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
threading.Thread(target=killer, daemon=True).start()
apply_plan(plan, journal, now=1_700_000_000_000)
print("finished", flush=True)
time.sleep(5)  # the killer still fires: a kill after the repair finished is a case too
"""

OUTCOMES: dict[str, int] = {}


def _apply_seconds(tmp: Path) -> float:
    ld = build_log_dir(tmp / "timing")
    start = time.perf_counter()
    apply_plan(make_plan(ld), tmp / "timing.journal", now=1)
    return time.perf_counter() - start


@pytest.mark.parametrize("seed", range(12))
def test_kill_at_a_random_point(tmp_path: Path, seed: int) -> None:
    """SIGKILL from a thread at a random moment of the apply (mid-write included), then undo.

    Outcomes are counted (``-s`` prints them): untouched (killed before the journal),
    partial (journal, some operations), applied (killed after it finished). In every case
    the directory is the original after undo (or was never touched).
    """
    ld = build_log_dir(tmp_path)
    original = tree(ld)
    journal = tmp_path / "r.journal"
    span = _apply_seconds(tmp_path) * 2.5
    delay = random.Random(seed).uniform(0, span)
    proc = subprocess.run([sys.executable, "-c", RANDOM_KILL_SCRIPT, str(ld), str(journal), f"{delay:.6f}"],
                          env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    if not journal.exists():
        outcome = "untouched"
        assert tree(ld) == original
        assert not [p for p in ld.rglob("*.kafkatx-tmp")]
    else:
        outcome = "applied" if "finished" in proc.stdout else "partial"
        result = undo_journal(journal)
        assert all(r.verified for r in result.rows)
        assert tree(ld) == original, (seed, delay)
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def test_random_kill_outcomes(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\nrandom kills: {dict(sorted(OUTCOMES.items()))}")
    assert sum(OUTCOMES.values()) in (0, 12)
