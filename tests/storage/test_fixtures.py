"""The log layer and the dump commands on engineer F's simulated broker log dirs (fixtures/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import Truncated
from kafkatx.storage.log_dir import LogDir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# every broker log dir under fixtures/ (folders holding topic-N/ partition folders), expected/ aside
DIRS = sorted({log.parent.parent for log in FIXTURES.rglob("*.log")
               if "expected" not in log.relative_to(FIXTURES).parts}) if FIXTURES.exists() else []
pytestmark = pytest.mark.skipif(not DIRS, reason="fixtures/ not built")
# Segments that end in a partial batch on purpose (a crash mid-append), with where the torn batch starts:
# fixtures/build_loading.py's torn-tail keeps 434 bytes of whole batches, then 68 of a 78-byte COMMIT.
TORN = {str(FIXTURES / "loading/torn-tail/events-0/00000000000000000000.log"): 434}


def whole_batches(part):
    """The partition's batches up to a torn tail; a torn tail must be one of TORN, at its position."""
    it = part.iter_batches()
    while True:
        try:
            yield next(it)
        except StopIteration:
            return
        except Truncated as err:
            assert err.path in TORN and err.position == TORN[err.path], err
            return


@pytest.mark.parametrize("root", DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_log_dir_reads_and_iterates(root):
    log_dir = LogDir(root)
    parts = log_dir.partitions()
    assert parts, root
    assert [p.key for p in parts] == sorted(p.key for p in parts)
    for part in parts:
        last_end = None
        for seg, header in whole_batches(part):
            # batches come in offset order across segments, inside the segment that names them
            assert header.base_offset >= seg.base_offset
            if last_end is not None:
                assert header.base_offset >= last_end
            last_end = header.last_offset + 1
        hw = log_dir.high_watermarks.get(part.key)
        torn = any(seg.log_path.as_posix() in TORN for seg in part.segments)
        # after a torn tail the checkpointed HW may lie past the whole batches: the broker caps it at the log end
        if hw is not None and last_end is not None and not torn:
            assert hw <= last_end


@pytest.mark.parametrize("root", DIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_dump_commands_accept_every_fixture_file(root):
    runner = CliRunner()
    for path in sorted(root.glob("*-[0-9]*/*")):
        if path.suffix == ".log":
            r = runner.invoke(app, ["dump-segment", str(path), "--deep-iteration", "--format", "jsonl"])
            if str(path) in TORN:  # reported, not dropped: exit 1 and the byte position of the torn batch
                assert r.exit_code == 1 and f"byte {TORN[str(path)]}: " in r.stderr, (path, r.stderr)
            else:
                assert r.exit_code == 0, (path, r.stderr)
            rows = [json.loads(line) for line in r.stdout.splitlines()]
            if str(path) in TORN:  # the last JSONL row names the bytes that do not form a batch
                tail = rows.pop()
                assert (tail["position"], tail["trailing_bytes"]) == (TORN[str(path)], path.stat().st_size - 434)
            assert all(row["crc_valid"] for row in rows)
            offsets = [rec["offset"] for row in rows for rec in row["records"]]
            assert offsets == sorted(offsets)
        elif path.suffix in (".index", ".timeindex"):
            r = runner.invoke(app, ["dump-index", str(path), "--verify"])
            if str(path.with_suffix(".log")) in TORN and path.suffix == ".timeindex":
                # its one entry (written at shutdown) points at offset 7, in the torn batch: a finding
                assert r.exit_code == 1 and "byte 0: " in r.stderr and "offset 7" in r.stderr, r.stderr
            else:
                assert r.exit_code == 0, (path, r.stderr)
        elif path.suffix == ".snapshot":
            r = runner.invoke(app, ["dump-snapshot", str(path), "--format", "json"])
            assert r.exit_code == 0 and json.loads(r.stdout)["crc_valid"] is True
        elif path.suffix == ".txnindex":
            r = runner.invoke(app, ["dump-txnindex", str(path), "--format", "json"])
            assert r.exit_code == 0
