"""Repairing the ghost fixture with both strategies; undo restores every byte."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from kafka.record import MemoryRecords

from kafkatx.checks.ghost import apply_ghost_rule
from kafkatx.repair import apply_plan, undo_journal
from kafkatx.repair.plan import plan_abort_hanging, post_check_for
from kafkatx.session import offline
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.replay import replay_partition

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


def digest_tree(root: Path) -> dict[str, str]:
    return {(Path(d) / f).relative_to(root).as_posix(): hashlib.sha256((Path(d) / f).read_bytes()).hexdigest()
            for d, _dirs, files in os.walk(root) for f in files if f != ".lock"}  # the repair's (Kafka's) lock


def hanging_with_ghosts(ld: Path) -> list:
    states = {p.key: replay_partition(p) for p in LogDir(ld).partitions()}
    return apply_ghost_rule(offline.find_hanging([ld], now=NOW).rows, states)


@pytest.mark.parametrize("strategy", ["marker", "drop-snapshots"])
def test_ghost_strategies(tmp_path: Path, strategy: str) -> None:
    ld = tmp_path / "ghost"
    shutil.copytree(REPO / "fixtures" / "ghost", ld)
    before = digest_tree(ld)
    planned = plan_abort_hanging([ld], all_=True, now=NOW, ghost_strategy=strategy)
    [row] = planned.rows
    assert (row.kind, row.producer_id, row.first_offset) == ("ghost", 5001, 16)
    assert digest_tree(ld) == before  # planning writes nothing
    result = apply_plan(planned.plan, tmp_path / "g.journal", now=NOW, post_check=post_check_for(planned))
    assert result.problems == ()
    assert hanging_with_ghosts(ld) == []
    assert all(r.lag == 0 for r in offline.lag([ld]).rows)
    assert [r for r in offline.verify([ld]).rows if r.severity != "info"] == []  # info: startup rows
    part = LogDir(ld).partition("events", 0)
    if strategy == "marker":
        assert row.action == "write-abort-marker" and row.marker_epoch == 0
        [append] = [r for r in result.operations if r.path.endswith(".log")]
        with open(append.path, "rb") as fh:
            fh.seek(append.offset)
            records = MemoryRecords(fh.read(append.length))
        batch = records.next_batch()
        assert batch.validate_crc() and batch.is_control_batch and batch.producer_id == 5001
        assert batch.base_offset == 339  # README: events-0 log end 339
        assert part.snapshots  # kept: the broker replays the marker from the newest one
    else:
        assert row.action == "drop-snapshots"
        assert part.snapshots == []
        assert not (ld / ".kafka_cleanshutdown").exists()
        assert all(r.op == "move" for r in result.operations)
    undo_journal(result.journal_path)
    assert digest_tree(ld) == before
