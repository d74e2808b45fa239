"""The log layer and the dump commands on engineer F's simulated broker log dirs (fixtures/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.log import LogDir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# every broker log dir under fixtures/ (folders holding topic-N/ partition folders), expected/ aside
DIRS = sorted({log.parent.parent for log in FIXTURES.rglob("*.log")
               if "expected" not in log.relative_to(FIXTURES).parts}) if FIXTURES.exists() else []
pytestmark = pytest.mark.skipif(not DIRS, reason="fixtures/ not built")


@pytest.mark.parametrize("root", DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_log_dir_reads_and_iterates(root):
    log_dir = LogDir(root)
    parts = log_dir.partitions()
    assert parts, root
    assert [p.key for p in parts] == sorted(p.key for p in parts)
    for part in parts:
        last_end = None
        for seg, header in part.iter_batches():
            # batches come in offset order across segments, inside the segment that names them
            assert header.base_offset >= seg.base_offset
            if last_end is not None:
                assert header.base_offset >= last_end
            last_end = header.last_offset + 1
        hw = log_dir.high_watermarks.get(part.key)
        if hw is not None and last_end is not None:
            assert hw <= last_end


@pytest.mark.parametrize("root", DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_dump_commands_accept_every_fixture_file(root):
    runner = CliRunner()
    for path in sorted(root.glob("*-[0-9]*/*")):
        if path.suffix == ".log":
            r = runner.invoke(app, ["dump-segment", str(path), "--deep-iteration", "--format", "jsonl"])
            assert r.exit_code == 0, (path, r.stderr)
            rows = [json.loads(line) for line in r.stdout.splitlines()]
            assert all(row["crc_valid"] for row in rows)
            offsets = [rec["offset"] for row in rows for rec in row["records"]]
            assert offsets == sorted(offsets)
        elif path.suffix in (".index", ".timeindex"):
            r = runner.invoke(app, ["dump-index", str(path), "--verify"])
            assert r.exit_code == 0, (path, r.stderr)
        elif path.suffix == ".snapshot":
            r = runner.invoke(app, ["dump-snapshot", str(path), "--format", "json"])
            assert r.exit_code == 0 and json.loads(r.stdout)["crc_valid"] is True
        elif path.suffix == ".txnindex":
            r = runner.invoke(app, ["dump-txnindex", str(path), "--format", "json"])
            assert r.exit_code == 0
