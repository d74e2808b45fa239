"""The ghost rule on the ghost fixture and its edge cases."""

from __future__ import annotations

import shutil
from pathlib import Path

from kafkatx.checks.ghost import apply_ghost_rule, ghost_transactions
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import build_control_batch
from kafkatx.rows import HangingRow
from kafkatx.session import offline
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.producer_state import PartitionProducerState, ProducerState
from kafkatx.storage.replay import replay_partition

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


def ghost_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "ghost"
    shutil.copytree(REPO / "fixtures" / "ghost", dest)
    return dest


def rows_with_rule(ld: Path) -> tuple[list[HangingRow], list[str]]:
    answer = offline.find_hanging([ld], now=NOW)
    states = {p.key: replay_partition(p) for p in LogDir(ld).partitions()}
    notices = [n for s in states.values() for n in s.notices]
    return apply_ghost_rule(answer.rows, states), notices


def test_fixture_reports_exactly_the_ghost(tmp_path: Path) -> None:
    rows, _ = rows_with_rule(ghost_copy(tmp_path))
    # fixtures/README.md: events-0 starts at 123; the snapshots keep producer 5001 open from 16.
    assert [(r.kind, r.topic, r.partition, r.producer_id, r.first_offset, r.transactional_id, r.start_ms,
             r.duration_ms) for r in rows] == [("ghost", "events", 0, 5001, 16, "ghost-writer", None, None)]


def _state(first: int, log_start: int, snapshot: int | None) -> PartitionProducerState:
    p = ProducerState(producer_id=7, producer_epoch=0, last_sequence=3, last_offset=first + 3, last_timestamp=1,
                      coordinator_epoch=0, current_txn_first_offset=first)
    return PartitionProducerState(topic="t", partition=0, path="/x/t-0", log_start_offset=log_start,
                                  log_end_offset=log_start + 10, replay_start_offset=log_start,
                                  snapshot_offset=snapshot, batches=1, producers={7: p})


def _orphan(first: int) -> HangingRow:
    return HangingRow(kind="orphaned", topic="t", partition=0, producer_id=7, producer_epoch=0, transactional_id=None,
                      coordinator_state=None, first_offset=first, start_ms=5, duration_ms=10)


def test_first_offset_at_log_start_is_not_a_ghost() -> None:
    state = _state(first=100, log_start=100, snapshot=100)
    assert ghost_transactions(state) == []
    assert apply_ghost_rule([_orphan(100)], {("t", 0): state})[0].kind == "orphaned"
    below = _state(first=99, log_start=100, snapshot=100)
    assert [t.first_offset for t in ghost_transactions(below)] == [99]
    assert apply_ghost_rule([_orphan(99)], {("t", 0): below})[0].kind == "ghost"


def test_without_a_snapshot_nothing_is_a_ghost() -> None:
    state = _state(first=99, log_start=100, snapshot=None)
    assert ghost_transactions(state) == []


def test_a_marker_after_the_snapshot_closes_it(tmp_path: Path) -> None:
    ld = ghost_copy(tmp_path)
    part = LogDir(ld).partition("events", 0)
    seg = part.segments[-1]
    end = replay_partition(part).log_end_offset
    with open(seg.log_path, "ab") as fh:
        fh.write(build_control_batch(offset=end, control_type=ControlType.ABORT, producer_id=5001, producer_epoch=0,
                                     coordinator_epoch=0, timestamp=NOW))
    rows, _ = rows_with_rule(ld)
    assert rows == []


def test_bad_snapshot_crc_falls_back_to_an_older_snapshot(tmp_path: Path) -> None:
    ld = ghost_copy(tmp_path)
    part = LogDir(ld).partition("events", 0)
    newest = part.snapshots[-1][1]
    data = bytearray(newest.read_bytes())
    data[2] ^= 0xFF  # the CRC field (version int16, then crc uint32)
    newest.write_bytes(bytes(data))
    rows, notices = rows_with_rule(ld)
    assert [r.kind for r in rows] == ["ghost"]
    assert any(str(newest) in n and "older snapshot" in n for n in notices)


def test_all_snapshots_bad_replays_the_log_and_finds_no_ghost(tmp_path: Path) -> None:
    ld = ghost_copy(tmp_path)
    for _off, path in LogDir(ld).partition("events", 0).snapshots:
        data = bytearray(path.read_bytes())
        data[2] ^= 0xFF
        path.write_bytes(bytes(data))
    rows, notices = rows_with_rule(ld)
    assert rows == []
    assert any("no usable producer snapshot" in n for n in notices)
