"""The executor-side code of ``scan`` without Spark: decoding rows and folding them.

These run the same functions the Spark job ships, on one process, and compare with the
offline library (txn.offline) and with the fixture generator's own bookkeeping
(fixtures/expected/<fixture>/scenario.json), not with scan's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pyarrow as pa
import pytest

from fixtures.corrupt import bad_batch_crc, scenario, trailing_garbage, truncated_tail
from kafkatx.format.record_batch import read_batch_header
from kafkatx.rows import HangingRow, LagRow
from kafkatx.session import offline
from kafkatx.spark import rows as R
from kafkatx.spark import tasks as X
from kafkatx.spark.job import plan_scan
from kafkatx.spark.schema import COLUMNS, dataset_markdown
from kafkatx.storage.segment import map_file

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
NOW = 1_700_007_200_000
COL = {c: i for i, c in enumerate(R.BATCH_COLUMNS)}


def _decode_all(plan):
    out = []
    for task in plan.tasks:
        out.extend(R.decode_segment(task))
    return out


def _local_scan(dirs):
    """The executors' work in one process: every segment's batches/ rows (the reference decoder) and every
    chosen partition replayed and reduced (tasks.replay_partitions): (batch rows, REPLAY rows as dicts)."""
    plan = plan_scan(dirs)
    batch_rows = [p for k, p in _decode_all(plan) if k == R.BATCH]
    blob = msgspec.msgpack.encode(plan.infos)
    replayed = [r for b in X.replay_partitions([pa.record_batch({"work": [blob]})], now=NOW) for r in b.to_pylist()]
    return batch_rows, replayed


def _lag_rows(replayed):
    return [LagRow(**{c: r[c] if c in ("topic", "partition") else r[f"lag_{c}"] for c in COLUMNS["partitions"]})
            for r in replayed if r["kind"] == X.LAG]


def test_batch_rows_match_the_generator_bookkeeping():
    plan = plan_scan([FIXTURES / "hanging"])
    rows = [p for k, p in _decode_all(plan) if k == R.BATCH]
    expected = scenario("hanging")["partitions"]["orders-0"]["batches"]
    got = [r for r in rows if r[COL["topic"]] == "orders" and r[COL["partition"]] == 0]
    assert [r[COL["base_offset"]] for r in got] == [b["base_offset"] for b in expected]
    assert [r[COL["position"]] for r in got] == [b["position"] for b in expected]
    assert [r[COL["size"]] for r in got] == [b["size"] for b in expected]
    assert all(r[COL["crc_valid"]] for r in got) and not any(r[COL["error"]] for r in got)
    markers = [(r[COL["base_offset"]], r[COL["control_type"]]) for r in got if r[COL["is_control"]]]
    assert markers == [(b["base_offset"], b["control"]) for b in expected if b["control"] is not None]
    assert all(len(r) == len(COLUMNS["batches"]) for r in rows)


def test_batch_rows_carry_the_decoded_header():
    plan = plan_scan([FIXTURES / "clean"])
    task = next(t for t in plan.tasks if t.topic == "orders")
    with map_file(Path(task.segment_path)) as buf:
        for kind, row in R.decode_segment(task):
            assert kind in (R.BATCH, R.EVENTS)
            if kind == R.BATCH:
                h = read_batch_header(buf, row[COL["position"]])
                assert (row[COL["base_offset"]], row[COL["last_offset"]], row[COL["size"]], row[COL["crc"]],
                        row[COL["producer_id"]], row[COL["producer_epoch"]], row[COL["max_timestamp_ms"]]) == \
                    (h.base_offset, h.last_offset, h.size, h.crc, h.producer_id, h.producer_epoch, h.max_timestamp)


@pytest.mark.parametrize("fixture", ["hanging", "clean", "two-brokers", "ghost"])
def test_local_replay_equals_offline_lag(fixture):
    root = FIXTURES / fixture
    if not root.exists():
        pytest.skip(f"fixtures/{fixture} not built")
    dirs = sorted(root.glob("broker-*")) or [root]
    _rows, replayed = _local_scan(dirs)
    lag = sorted(_lag_rows(replayed), key=lambda x: (x.topic, x.partition))
    assert lag == offline.lag(dirs).rows
    # ...and what the simulator that wrote the fixture says (fixtures/expected, never written by running
    # kafkatx), so a rule broken on both paths at once still fails here.
    expected_lag = json.loads((FIXTURES / "expected" / fixture / "lag.json").read_text())
    assert [msgspec.structs.asdict(r) for r in lag] == expected_lag
    # the open transactions the partitions hand to the join are lag's open_transactions
    assert sum(1 for r in replayed if r["kind"] == X.OPEN) == sum(r.open_transactions for r in lag)


def test_spans_follow_markers(tmp_path):
    """Every COMMIT/ABORT span ends at a marker of the same producer, with that outcome."""
    _rows, replayed = _local_scan([FIXTURES / "clean"])
    spans = [r for r in replayed if r["kind"] == X.SPAN]
    assert spans, "the clean fixture has committed and aborted transactions"
    markers = {(b["base_offset"], b["producer_id"]): b["control"]
               for name, part in scenario("clean")["partitions"].items()
               for b in part["batches"] if b["control"] in ("COMMIT", "ABORT")}
    for s in spans:
        assert s["span_outcome"] in ("COMMIT", "ABORT")  # clean: nothing open
        assert markers[(s["span_marker_offset"], s["span_producer_id"])] == s["span_outcome"]
        assert s["span_first_offset"] <= s["span_last_offset"] < s["span_marker_offset"]


def test_corrupt_segments_become_findings_not_failures(tmp_path):
    crc = bad_batch_crc(tmp_path / "a")
    rows, _ = _local_scan([crc.log_dir])
    bad = [r for r in rows if r[COL["crc_valid"]] is False]
    assert [(r[COL["segment"]], r[COL["position"]]) for r in bad] == [(crc.path.name, crc.position)]

    torn = truncated_tail(tmp_path / "b")
    rows, replayed = _local_scan([torn.log_dir])
    errors = [r for r in rows if r[COL["error"]] is not None]
    assert len(errors) == 1
    assert errors[0][COL["position"]] == torn.position
    assert str(torn.path) in errors[0][COL["error"]] and f"byte {torn.position}" in errors[0][COL["error"]]
    # Same verdict as the offline replay (which skips a partition it cannot read).
    offline_lag = offline.lag([torn.log_dir])
    assert sorted(_lag_rows(replayed), key=lambda x: (x.topic, x.partition)) == offline_lag.rows
    assert [r["text"] for r in replayed if r["kind"] == X.SKIP] == offline_lag.skipped

    garbage = trailing_garbage(tmp_path / "c")
    rows, _ = _local_scan([garbage.log_dir])
    errors = [r for r in rows if r[COL["error"]] is not None]
    assert [(r[COL["segment"]], r[COL["position"]]) for r in errors] == [(garbage.path.name, garbage.position)]


def test_split_tasks_cover_the_segment_exactly():
    whole = plan_scan([FIXTURES / "hanging"])
    split = plan_scan([FIXTURES / "hanging"], split_bytes=1024)
    assert len(split.tasks) > len(whole.tasks)
    key = lambda r: (r[COL["log_dir"]], r[COL["topic"]], r[COL["partition"]], r[COL["position"]])  # noqa: E731
    a = sorted((p for k, p in _decode_all(whole) if k == R.BATCH), key=key)
    b = sorted((p for k, p in _decode_all(split) if k == R.BATCH), key=key)
    assert a == b


def test_schema_columns_are_the_cli_keys():
    assert COLUMNS["partitions"] == tuple(f.name for f in msgspec.structs.fields(LagRow))
    assert COLUMNS["hanging"] == tuple(f.name for f in msgspec.structs.fields(HangingRow))


def test_docs_list_the_schemas():
    doc = (REPO / "docs" / "scan.md").read_text()
    assert dataset_markdown() in doc


@pytest.mark.parametrize("make", ["fixture", "damaged"])
def test_executor_reads_in_windows_on_the_pread_path(tmp_path, monkeypatch, make):
    """On the pread path (a live broker; ``KAFKATX_READ=pread``) the executors' decode
    and the driver's split read a segment forward in windows, and give the rows the mapped read gives
    (windows of 64 KiB read 4 KiB at a time over a 400 KB damaged segment: batches cross window ends)."""
    import sys

    from kafkatx.storage import segment as segment_mod
    from kafkatx.storage.segment import read_window

    if make == "fixture":
        dirs = [FIXTURES / "hanging"]
    else:
        sys.path.insert(0, str(REPO / "tests" / "log"))
        from log_builders import damaged_txn_segment

        damaged_txn_segment(tmp_path / "logs" / "t-0" / "00000000000000000000.log", open_tail=True)
        dirs = [tmp_path / "logs"]

    def run():
        plan = plan_scan(dirs, split_bytes=100_000)
        return [t.start for t in plan.tasks], _decode_all(plan)

    monkeypatch.setenv("KAFKATX_READ", "mmap")
    mapped = run()
    monkeypatch.setenv("KAFKATX_READ", "pread")
    monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 4096)
    with read_window(65536):
        windowed = run()
    assert windowed == mapped and mapped[1]
