"""abort-hanging online: renders cluster.service's AbortPlanRow rows; non-zero exit on a failed result."""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.cluster import service

ROW = service.AbortPlanRow(kind="orphaned", topic="orders", partition=1, producer_id=1005, producer_epoch=0,
                           transactional_id=None, coordinator_state=None, first_offset=147, start_ms=1, duration_ms=2,
                           action="write-abort-marker")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    calls = {}

    class Backend:
        def close(self) -> None:
            calls["closed"] = True

    monkeypatch.setattr(service, "connect", lambda **kw: Backend())
    monkeypatch.setattr(service, "plan_abort", lambda b, **kw: calls.setdefault("plan", kw) and [ROW])
    return calls


@pytest.mark.parametrize(("result", "code"), [("ok", 0), ("failed: NOT_LEADER_OR_FOLLOWER", 3)])
def test_online_execute_exit_code(fake, monkeypatch: pytest.MonkeyPatch, result: str, code: int) -> None:
    monkeypatch.setattr(service, "execute_abort", lambda b, rows: [replace(r, result=result) for r in rows])
    out = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--all", "--execute",
                                   "--format", "json"])
    assert out.exit_code == code, out.output
    assert result in out.stdout and fake["closed"]
    assert fake["plan"]["all_"] is True


def test_online_plan_exits_1(fake) -> None:
    out = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", "h:9092", "--topic", "orders"])
    assert out.exit_code == 1
    assert fake["plan"]["topic"] == "orders"
