"""abort-hanging plans only what the broker would still see after loading.

The oracle is each loading fixture's hand-reasoned ``find-hanging.json`` (fixtures/build_loading.py
writes it from semantics.md's loading rules, not from kafkatx): the plan must name exactly those
(kind, partition, producer, first offset) rows. Where loading makes the broker forget a transaction
(a snapshot it deletes, a crash that rebuilds state from the log), nothing is planned and nothing is
written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from kafkatx.repair import apply_plan, undo_journal
from kafkatx.repair.plan import plan_abort_hanging, post_check_for
from kafkatx.session import offline

REPO = Path(__file__).resolve().parents[2]
LOADING = REPO / "fixtures" / "loading"
EXPECTED = REPO / "fixtures" / "expected"
RULES = sorted(p.name for p in LOADING.iterdir() if p.is_dir()) if LOADING.is_dir() else []


def digest_tree(root: Path) -> dict[str, str]:
    return {(Path(d) / f).relative_to(root).as_posix(): hashlib.sha256((Path(d) / f).read_bytes()).hexdigest()
            for d, _dirs, files in os.walk(root) for f in files if f != ".lock"}  # the repair's (Kafka's) lock


def expected(rule: str) -> tuple[int, list[tuple]]:
    base = EXPECTED / f"loading-{rule}"
    now = json.loads((base / "scenario.json").read_text())["now_ms"]
    rows = json.loads((base / "find-hanging.json").read_text())
    return now, sorted((r["kind"], r["topic"], r["partition"], r["producer_id"], r["first_offset"]) for r in rows)


@pytest.mark.parametrize("rule", RULES)
def test_plan_names_exactly_what_the_broker_still_sees(tmp_path: Path, rule: str) -> None:
    now, want = expected(rule)
    ld = tmp_path / rule
    shutil.copytree(LOADING / rule, ld)
    before = digest_tree(ld)
    for strategy in ("marker", "drop-snapshots"):
        planned = plan_abort_hanging([ld], all_=True, now=now, ghost_strategy=strategy)
        got = sorted((r.kind, r.topic, r.partition, r.producer_id, r.first_offset) for r in planned.rows)
        assert got == want, (rule, strategy)
        if not want:
            assert not planned.plan.operations
    assert digest_tree(ld) == before  # planning writes nothing


@pytest.mark.parametrize("strategy", ["marker", "drop-snapshots"])
def test_ghost_that_survives_a_clean_restart_is_repaired_and_undone(tmp_path: Path, strategy: str) -> None:
    """ghost-clean: the ghost (producer 5, first offset 2, below the log start 20) survives loading.

    After either strategy the broker's view has nothing hanging and LSO = high watermark; undo puts
    every byte back.
    """
    now, want = expected("ghost-clean")
    assert want == [("ghost", "events", 0, 5, 2)]
    ld = tmp_path / "ghost-clean"
    shutil.copytree(LOADING / "ghost-clean", ld)
    before = digest_tree(ld)
    planned = plan_abort_hanging([ld], all_=True, now=now, ghost_strategy=strategy)
    [row] = planned.rows
    assert row.action == ("write-abort-marker" if strategy == "marker" else "drop-snapshots")
    result = apply_plan(planned.plan, tmp_path / "r.journal", now=now, post_check=post_check_for(planned))
    assert result.problems == ()
    assert offline.find_hanging([ld], now=now).rows == []
    [lag] = offline.lag([ld]).rows
    # the hand-reasoned lag.json has HW 25; the marker strategy appends one offset (the ABORT) past it,
    # which the broker's checkpointed HW catches up with when it restarts as leader
    assert lag.lso == lag.high_watermark and lag.open_transactions == 0
    undo_journal(result.journal_path)
    assert digest_tree(ld) == before
