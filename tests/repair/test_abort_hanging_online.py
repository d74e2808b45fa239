"""abort-hanging online: renders txn.model.AbortPlanRow rows (the offline planner's class too);
non-zero exit on a failed result; the same JSON keys as offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from msgspec.structs import replace
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.cluster import abort as online_abort
from kafkatx.cluster import service
from kafkatx.rows import AbortPlanRow

ROW = AbortPlanRow(kind="orphaned", topic="orders", partition=1, producer_id=1005, producer_epoch=0,
                   transactional_id=None, coordinator_state=None, first_offset=147, start_ms=1, duration_ms=2,
                   action="write-abort-marker")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    calls = {}

    class Backend:
        def close(self) -> None:
            calls["closed"] = True

    monkeypatch.setattr(service, "connect", lambda **kw: Backend())
    monkeypatch.setattr(online_abort, "plan_abort", lambda b, **kw: calls.setdefault("plan", kw) and [ROW])
    return calls


@pytest.mark.parametrize(("result", "code"), [("ok", 0), ("failed: NOT_LEADER_OR_FOLLOWER", 3)])
def test_online_execute_exit_code(fake, monkeypatch: pytest.MonkeyPatch, result: str, code: int) -> None:
    monkeypatch.setattr(online_abort, "execute_abort", lambda b, rows, **kw: [replace(r, result=result) for r in rows])
    out = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--all", "--execute",
                                   "--format", "json"])
    assert out.exit_code == code, out.output
    assert result in out.stdout and fake["closed"]
    assert fake["plan"]["all_"] is True


def test_online_plan_exits_1(fake) -> None:
    out = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--topic", "orders"])
    assert out.exit_code == 1
    assert fake["plan"]["topic"] == "orders"


# cli.md's find-hanging keys, then what abort-hanging adds; both paths print exactly these.
ABORT_KEYS = ["kind", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
              "coordinator_state", "first_offset", "start_ms", "duration_ms", "action", "result",
              "coordinator_epoch", "control_type", "marker_offset", "marker_epoch", "why",
              "transaction_timeout_ms", "blocked_groups", "files"]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIXTURE_NOW = 1_700_007_200_000  # fixtures/README.md: T0 + 2 h


@pytest.mark.skipif(not (FIXTURES / "hanging").is_dir(), reason="fixtures not built")
def test_json_keys_are_the_same_offline_and_online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cluster.fakes import FakeCluster

    ld = tmp_path / "hanging"
    shutil.copytree(FIXTURES / "hanging", ld, symlinks=True)
    offline = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--all", "--now", str(FIXTURE_NOW),
                                       "--format", "json"])
    assert offline.exit_code == 1, offline.output
    offline_rows = json.loads(offline.stdout)
    assert offline_rows and all(list(r) == ABORT_KEYS for r in offline_rows)

    # online through the real planner, against the fake cluster (Tansu lacks DescribeProducers)
    cluster = FakeCluster()
    cluster.add_topic("orders", 1)
    cluster.append(("orders", 0), 3, producer_id=7, producer_epoch=2, transactional=True, timestamp=0,
                   coordinator_epoch=1)
    monkeypatch.setattr(service, "connect", lambda **kw: cluster)
    online = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--all",
                                      "--now", "1700000000000", "--format", "json"])
    assert online.exit_code == 1, online.output
    (row,) = json.loads(online.stdout)
    assert list(row) == ABORT_KEYS
    assert (row["kind"], row["action"], row["control_type"], row["marker_epoch"], row["coordinator_epoch"],
            row["marker_offset"], row["result"]) == ("orphaned", "write-abort-marker", "ABORT", 2, 1, None, None)
    assert row["files"] == []  # online changes no file of the broker's


def test_the_plan_says_the_timeout_each_fence_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fence row's transaction_timeout_ms is said once per id under the table (the coordinator
    keeps it for the id), and is the JSON key."""
    fence = replace(ROW, kind="timed-out", transactional_id="tx-open-T", coordinator_state="Ongoing",
                    action="fence-epoch", first_offset=368, transaction_timeout_ms=900_000)

    class Backend:
        def close(self) -> None:
            pass

    monkeypatch.setattr(service, "connect", lambda **kw: Backend())
    monkeypatch.setattr(online_abort, "plan_abort", lambda b, **kw: [fence, replace(fence, topic="payments")])
    out = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--transactional-id",
                                   "tx-open-T", "--format", "text"], env={"COLUMNS": "80"})
    assert out.exit_code == 1, out.output
    said = " ".join(out.stdout.split())
    assert said.count("Fence of tx-open-T: InitProducerId with transaction.timeout.ms 900000 (its own)") == 1
    rows = json.loads(CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--transactional-id",
                                               "tx-open-T", "--format", "json"]).stdout)
    assert [(r["first_offset"], r["transaction_timeout_ms"]) for r in rows] == [(368, 900_000), (368, 900_000)]
