"""Run events (a producer's consecutive data batches collapsed on the executor) fold like the batches.

The logs are built here with kafkatx's encoders; the reference is ``replay_partition``
(one event per batch, read from the files), not the scan's own output.
"""

from __future__ import annotations

from pathlib import Path

from kafkatx.format.control import ControlType
from kafkatx.format.producer_snapshot import encode_producer_snapshot
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.log.partition import Partition
from kafkatx.spark import rows as R
from kafkatx.txn.replay import replay_partition, replay_partition_events

T0 = 1_700_000_000_000


def _write_log(pdir: Path, base: int, plan: list[tuple]) -> int:
    """plan: ("data", pid, epoch, transactional) / ("marker", pid, epoch, ControlType). Returns the next offset."""
    pdir.mkdir(parents=True, exist_ok=True)
    offset = base
    with open(pdir / f"{base:020d}.log", "wb") as f:
        for step in plan:
            if step[0] == "data":
                _kind, pid, epoch, txn = step
                recs = [Record(offset=offset + i, timestamp=T0 + offset, key=None, value=b"x") for i in range(3)]
                f.write(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=0 if pid >= 0 else -1,
                                    is_transactional=txn))
                offset += 3
            else:
                _kind, pid, epoch, ctype = step
                f.write(build_control_batch(offset=offset, control_type=ctype, producer_id=pid, producer_epoch=epoch,
                                            coordinator_epoch=0, timestamp=T0 + offset))
                offset += 1
    return offset


def _events_state(part: Partition, log_dir: Path, **kw):
    tasks = [R.SegmentTask(log_dir=str(log_dir), topic=part.topic, partition=part.partition,
                           partition_path=str(part.path), segment_path=str(s.log_path),
                           segment_base_offset=s.base_offset, size=s.size, chosen=True) for s in part.segments]
    segs = [p for t in tasks for k, p in R.decode_segment(t) if k == R.EVENTS]
    events = [e for s in segs for e in s.events]
    return events, replay_partition_events(part, lambda _start: events, **kw)


def test_runs_collapse_and_fold_like_single_batches(tmp_path):
    pdir = tmp_path / "orders-0"
    plan = ([("data", 7, 0, True)] * 6 + [("data", -1, -1, False)] * 3 + [("marker", 7, 0, ControlType.COMMIT)]
            + [("data", 8, 1, True), ("data", 7, 0, True)] * 4 + [("data", 8, 2, True)] * 3
            + [("marker", 8, 2, ControlType.ABORT)])
    _write_log(pdir, 0, plan)
    part = Partition(pdir)
    events, got = _events_state(part, tmp_path, keep_completed=True)
    want = replay_partition(part, keep_completed=True)
    assert len(events) < len(plan)  # the runs did collapse
    assert sum(e.batch_count for e in events) == len(plan)
    assert (got.producers, got.completed, got.log_end_offset, got.batches, got.findings) == \
        (want.producers, want.completed, want.log_end_offset, want.batches, want.findings)
    assert got.producers[7].current_txn_first_offset is not None  # producer 7's last transaction is open


def test_non_transactional_run_inside_an_open_transaction_reports_every_batch(tmp_path):
    pdir = tmp_path / "orders-1"
    plan = [("data", 9, 0, True)] + [("data", 9, 0, False)] * 5 + [("marker", 9, 0, ControlType.ABORT)]
    _write_log(pdir, 0, plan)
    part = Partition(pdir)
    _events, got = _events_state(part, tmp_path)
    want = replay_partition(part)
    assert [f.check for f in want.findings] == ["non-transactional-in-txn"] * 5
    assert got.findings == want.findings and got.producers == want.producers


def test_a_run_straddling_the_log_start_counts_only_what_follows_it(tmp_path):
    pdir = tmp_path / "orders-2"
    end = _write_log(pdir, 0, [("data", 4, 0, True)] * 6 + [("marker", 4, 0, ControlType.COMMIT)]
                     + [("data", 4, 0, True)] * 3)
    # A cleanly stopped broker: an offset index, and a producer snapshot at the log start (which the
    # broker deletes on startup, so it rebuilds from the log start: txn/loading.py).
    (pdir / f"{0:020d}.index").write_bytes(b"")
    (pdir / f"{7:020d}.snapshot").write_bytes(encode_producer_snapshot([]))
    part = Partition(pdir)
    part_mid = Partition(pdir)
    # A DeleteRecords log start in the middle of producer 4's first run.
    from kafkatx.spark.rows import _LogDirStub
    part_mid.log_dir = _LogDirStub(str(tmp_path), part.key, 7, clean_shutdown=True)  # type: ignore[assignment]
    _events, got = _events_state(part_mid, tmp_path)
    want = replay_partition(part_mid)
    assert got.batches == want.batches == 8 and got.log_end_offset == want.log_end_offset == end
    assert got.producers == want.producers
