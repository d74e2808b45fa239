"""Packed events (spark/rows.py pack_events/unpack_events): what crosses Spark between decode and fold."""

from __future__ import annotations

import pickle
from pathlib import Path

from kafkatx.format.record_batch import BatchHeader
from kafkatx.spark import rows as R
from kafkatx.spark.job import plan_scan

REPO = Path(__file__).resolve().parents[2]


def _segments(fixture: str) -> list[R.SegmentEvents]:
    plan = plan_scan([REPO / "fixtures" / fixture])
    return [p for t in plan.tasks for k, p in R.decode_segment(t) if k == R.EVENTS and p.chosen]


def test_unpack_restores_equal_events_with_real_headers():
    segs = _segments("hanging")
    events = [e for s in segs for e in s.events]
    assert any(e.last is not None for e in events) and any(e.control_type is not None for e in events)
    back = [e for s in segs for e in R.unpack_events(R.pack_events(s.events))]
    assert back == events
    assert all(type(e.header) is BatchHeader for e in back if e.header is not None)
    h = next(e.header for e in back if e.header is not None)
    assert h.last_offset == h.base_offset + h.last_offset_delta  # properties work on the retyped object
    assert hash(h) == hash(next(e.header for e in events if e.header is not None))


def test_error_events_survive_packing(tmp_path):
    from fixtures.corrupt import truncated_tail

    torn = truncated_tail(tmp_path / "in", partition="orders-1")
    plan = plan_scan([torn.log_dir])
    task = next(t for t in plan.tasks if t.segment_path == str(torn.path))
    seg = next(p for k, p in R.decode_segment(task) if k == R.EVENTS)
    err = [e for e in seg.events if e.error is not None]
    assert len(err) == 1 and err[0].header is None
    assert R.unpack_events(R.pack_events(seg.events)) == seg.events


def test_decode_tasks_splits_counts_from_packed_events(tmp_path):
    plan = plan_scan([REPO / "fixtures" / "hanging"])
    items = list(R.decode_tasks(str(tmp_path / "batches"), 0, plan.tasks))
    counts = [p for k, p in items if k == R.COUNTS]
    packed = [p for k, p in items if k == R.PACKED]
    assert len(counts) == len(plan.tasks) and all(c.events == [] for c in counts)
    assert len(packed) == sum(1 for t in plan.tasks if t.chosen)
    # What the shuffle carries is bytes; it is smaller than pickling the events themselves.
    for path, order, blob in packed:
        assert order[0] >= 0
        assert isinstance(blob, bytes) and path in {t.partition_path for t in plan.tasks}
        events = R.unpack_events(blob)
        if events:
            assert len(blob) < len(pickle.dumps(events, protocol=pickle.HIGHEST_PROTOCOL))
