"""The consumer groups an open transaction on ``__consumer_offsets`` blocks (coordinator/groups.py).

The rule is ``OffsetMetadataManager.replay`` / ``replayEndTransactionMarker``: a transactional
OffsetCommit is pending until its producer's marker; a tombstone of the same (group, topic, partition)
drops it. The fixture is fixtures/groups (fixtures/build_groups.py: tx-eos left g2, g3 and g5 pending,
g5 then tombstoned; tx-done's g4 committed), the hand-reasoned rows in fixtures/expected/groups.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.coordinator.groups import PendingOffsets

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "groups"
EXPECTED = ROOT / "fixtures" / "expected" / "groups"
SENTENCE = ("__consumer_offsets-0, producer 8001 (tx-eos): group {g} cannot fetch its offsets "
            "(UNSTABLE_OFFSET_COMMIT) until this transaction ends.")


def _now() -> str:
    return str(json.loads((EXPECTED / "scenario.json").read_text())["now_ms"])


def test_pending_offsets_follow_the_group_coordinator():
    p = PendingOffsets([1, 2])
    p.commit(1, True, "a", "t", 0)
    p.commit(1, True, "b", "t", 0)
    p.commit(1, False, "c", "t", 0)  # a plain commit is never pending
    p.commit(2, True, "d", "t", 0)
    p.commit(3, True, "e", "t", 0)  # a producer not asked about
    p.tombstone("b", "t", 0)  # OffsetMetadataManager.replay: drops (b, t, 0) from every producer
    p.marker(2)  # replayEndTransactionMarker
    assert p.groups() == {1: ["a"], 2: []}


needs_fixture = pytest.mark.skipif(not FIXTURE.is_dir(), reason="fixtures/groups not built")


@needs_fixture
def test_find_hanging_names_the_blocked_groups():
    r = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(FIXTURE), "--now", _now(), "--format", "json"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout) == json.loads((EXPECTED / "find-hanging.json").read_text())


@needs_fixture
def test_the_human_view_says_each_group_at_80_columns():
    r = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(FIXTURE), "--now", _now()],
                           env={"COLUMNS": "80"})
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    text = " ".join(line.strip() for line in lines)
    assert SENTENCE.format(g="g2") in text and SENTENCE.format(g="g3") in text
    assert "group g5" not in text and "group g4" not in text


@needs_fixture
def test_describe_txn_and_the_plan_carry_them():
    r = CliRunner().invoke(app, ["describe-txn", "tx-eos", "--log-dir", str(FIXTURE), "--now", _now(),
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    opened = {o["partition"]: o["blocked_groups"] for o in json.loads(r.stdout)["open_partitions"]}
    assert opened == {"__consumer_offsets-0": ["g2", "g3"], "orders-0": None}
    r = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(FIXTURE), "--all", "--now", _now(),
                                 "--format", "json"])
    plan = json.loads(r.stdout)
    rows = plan["rows"] if isinstance(plan, dict) else plan
    assert {(p["topic"], tuple(p["blocked_groups"] or ())) for p in rows} == {
        ("__consumer_offsets", ("g2", "g3")), ("orders", ())}
    r = CliRunner().invoke(app, ["describe-txn", "tx-eos", "--log-dir", str(FIXTURE), "--now", _now()],
                           env={"COLUMNS": "80"})
    text = " ".join(line.strip() for line in r.stdout.splitlines())
    assert ("__consumer_offsets-0: group g2 cannot fetch its offsets (UNSTABLE_OFFSET_COMMIT) until this "
            "transaction ends.") in text


@needs_fixture
def test_the_abort_ends_the_pending_commits(tmp_path):
    """After abort-hanging --execute (the ABORT marker on __consumer_offsets-0), nothing is pending:
    replayEndTransactionMarker drops tx-eos's offsets, and find-hanging has no row left."""
    import shutil

    from kafkatx.coordinator.groups import partition_blocked_groups
    from kafkatx.storage.log_dir import LogDir

    copy = tmp_path / "groups"
    shutil.copytree(FIXTURE, copy)
    r = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(copy), "--all", "--execute", "--now", _now(),
                                 "--journal", str(tmp_path / "j.journal")])
    assert r.exit_code == 0, r.output
    (part,) = [p for p in LogDir(copy).partitions() if p.name == "__consumer_offsets-0"]
    assert partition_blocked_groups(part, [(8001, 27)]) == ({8001: []}, None)
    r = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(copy), "--now", _now(), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout) == []
