"""Every offline analysis command's JSON against the hand-reasoned files in fixtures/expected/.

The expected files come from the fixture generator's own bookkeeping (fixtures/build_fixtures.py),
not from kafkatx, so they are an independent oracle. Each case runs the real CLI (Typer's runner)
with ``--format json`` and compares the parsed output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
EXPECTED = FIXTURES / "expected"


def _fixture_dir(fixture: str) -> Path:
    """fixtures/<name>, or fixtures/loading/<rule> for the expected dir loading-<rule>."""
    if fixture.startswith("loading-"):
        return FIXTURES / "loading" / fixture[len("loading-"):]
    return FIXTURES / fixture


def _log_dir_args(fixture: str) -> list[str]:
    base = _fixture_dir(fixture)
    brokers = sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("broker"))
    args: list[str] = []
    for d in brokers or [base]:
        args += ["--log-dir", str(d)]
    return args


def _cases() -> list[tuple[str, str]]:
    if not EXPECTED.is_dir():
        return []
    return [(f.parent.name, f.stem) for f in sorted(EXPECTED.glob("*/*.json"))
            if f.name not in ("scenario.json", "loading.json", "abort-hanging.json")]  # abort: tests/repair


def _command(fixture: str, name: str) -> tuple[list[str], int]:
    """The CLI arguments for one expected file, and the exit code the case implies."""
    now = json.loads((EXPECTED / fixture / "scenario.json").read_text())["now_ms"]
    if name == "list-txn":
        return ["list-txn"], 0
    if name == "lag":
        return ["lag"], 0
    if name == "find-hanging":
        expected = json.loads((EXPECTED / fixture / f"{name}.json").read_text())
        return ["find-hanging", "--now", str(now)], 1 if expected else 0
    if name.startswith("describe-txn-"):
        return ["describe-txn", name[len("describe-txn-"):], "--now", str(now)], 0
    if name.startswith("describe-producers-"):
        # Producers idle past producer.id.expiration.ms at --now are expired by the broker.
        rest = name[len("describe-producers-"):]
        extra = []
        if rest.endswith("-include-expired"):
            rest, extra = rest[: -len("-include-expired")], ["--include-expired"]
        topic, part = rest.rsplit("-", 1)
        return ["describe-producers", "--topic", topic, "--partition", part, "--now", str(now), *extra], 0
    raise AssertionError(f"no command for expected file {fixture}/{name}.json")


@pytest.mark.skipif(not _cases(), reason="fixtures/expected not built")
@pytest.mark.parametrize(("fixture", "name"), _cases(), ids=[f"{a}/{b}" for a, b in _cases()])
def test_matches_expected(fixture, name):
    args, code = _command(fixture, name)
    result = CliRunner().invoke(app, [*args, *_log_dir_args(fixture), "--format", "json"])
    assert result.exit_code == code, result.output
    got = json.loads(result.stdout)
    expected = json.loads((EXPECTED / fixture / f"{name}.json").read_text())
    assert got == expected


@pytest.mark.skipif(not (FIXTURES / "clean").is_dir(), reason="fixtures not built")
def test_clean_fixture_has_nothing_hanging_and_verifies():
    now = json.loads((EXPECTED / "clean" / "scenario.json").read_text())["now_ms"]
    result = CliRunner().invoke(app, ["find-hanging", "--now", str(now), *_log_dir_args("clean"),
                                      "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    result = CliRunner().invoke(app, ["verify", *_log_dir_args("clean"), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def _loading_cases() -> list[str]:
    return sorted(d.name for d in EXPECTED.glob("loading-*") if (d / "loading.json").is_file())


@pytest.mark.skipif(not _loading_cases(), reason="fixtures/loading not built")
@pytest.mark.parametrize("fixture", _loading_cases())
def test_loading_plan_matches_expected(fixture):
    """What the broker does to the files on startup, against the hand-reasoned loading.json."""
    from kafkatx.storage.loading import plan_load
    from kafkatx.storage.log_dir import LogDir
    from kafkatx.storage.lso import clamp_high_watermark
    from kafkatx.storage.replay import replay_partition

    expected = json.loads((EXPECTED / fixture / "loading.json").read_text())
    now = json.loads((EXPECTED / fixture / "scenario.json").read_text())["now_ms"]
    log_dir = LogDir(_fixture_dir(fixture))
    got = {}
    for part in log_dir.partitions():
        plan = plan_load(part)
        deleted = sorted(({"file": Path(a.file).name, "why": a.reason} for a in plan.actions
                          if a.action == "delete-snapshot"), key=lambda d: d["file"])
        state = {"file": "snapshot", "log-start": "log-replay", "empty": "empty-upgrade"}[plan.chain.kind]
        truncated = None
        if plan.truncated is not None:
            truncated = {"file": Path(plan.truncated[0]).name, "position": plan.truncated[1],
                         "bytes": plan.truncated[2]}
        hw = log_dir.high_watermarks.get(part.key, plan.log_end_offset)
        got[part.name] = {
            "log_start_offset": plan.log_start_offset, "log_end_offset": plan.log_end_offset,
            "high_watermark": clamp_high_watermark(hw, plan.log_start_offset, plan.log_end_offset),
            "recovery_point": plan.recovery_point, "clean_shutdown": plan.clean_shutdown,
            "snapshots_deleted": deleted,
            "snapshot_loaded": plan.chain.path.name if plan.chain.path is not None else None,
            "producer_state": state,
            "recovered_segments": [Path(a.file).name for a in plan.actions if a.action == "recover-segment"],
            "truncated": truncated,
            "expired_producers": sorted(replay_partition(part, now=now).expired),
        }
    assert got == expected
    # Planning only reads: every snapshot the broker would delete is still on disk.
    for name, rows in expected.items():
        for d in rows["snapshots_deleted"]:
            assert (log_dir.path / name / d["file"]).is_file()
