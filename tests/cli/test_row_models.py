"""One row model per output (kafkatx.render.rows): every consumer's field list is the Struct's.

The consumers: the dump commands' JSON objects (dump-segment, dump-index, dump-snapshot,
dump-txnindex, through the CLI), the compiled renderer (``_dump.render_setup`` takes the
classes and refuses a layout that is not its own), and ``kafkatx scan``'s ``batches/`` rows and
Spark schema. Values are checked against the fixture generator's own bookkeeping
(fixtures/expected/hanging/scenario.json), not against kafkatx's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from fixtures.corrupt import scenario
from kafkatx.render import kafka_dump as kd
from kafkatx.render import rows
from kafkatx.spark import rows as R
from kafkatx.spark import schema
from kafkatx.spark.job import plan_scan

REPO = Path(__file__).resolve().parents[2]
PART = REPO / "fixtures" / "hanging" / "orders-0"
SEGMENT = PART / "00000000000000000000.log"


def _json(invoke, *args):
    r = invoke(*args, "--format", "json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_dump_segment_objects_have_the_batch_rows_keys(invoke):
    expected = [b for b in scenario("hanging")["partitions"]["orders-0"]["batches"] if b["segment"] == 0]
    batches = _json(invoke, "dump-segment", str(SEGMENT))
    assert [tuple(b) for b in batches] == [rows.BatchRow.__struct_fields__[:-1]] * len(expected)  # no records
    assert [(b["base_offset"], b["last_offset"], b["position"], b["size"], b["producer_id"], b["control_type"])
            for b in batches] == [(e["base_offset"], e["last_offset"], e["position"], e["size"], e["producer_id"],
                                   e["control"]) for e in expected]
    deep = _json(invoke, "dump-segment", "--deep-iteration", str(SEGMENT))
    assert all(tuple(b) == rows.BatchRow.__struct_fields__ for b in deep)
    first = deep[0]["records"][0]
    assert tuple(first) == rows.RecordRow.__struct_fields__
    assert len(deep[0]["records"]) == expected[0]["last_offset"] - expected[0]["base_offset"] + 1


def test_decoded_records_add_decoded_after_the_record_keys(invoke):
    txn = REPO / "fixtures" / "hanging" / "__transaction_state-0"
    log = sorted(txn.glob("*.log"))[0]
    batches = _json(invoke, "dump-segment", "--decoder", "transaction-log", str(log))
    records = [r for b in batches for r in b["records"]]
    assert records and all(tuple(r) == rows.DecodedRecordRow.__struct_fields__ for r in records)
    assert rows.DecodedRecordRow.__struct_fields__ == rows.RecordRow.__struct_fields__ + ("decoded",)


def test_index_snapshot_txnindex_objects_have_their_rows_keys(invoke):
    index = _json(invoke, "dump-index", str(PART / "00000000000000000055.index"))
    assert index and all(tuple(r) == rows.OffsetIndexRow.__struct_fields__[:-1] for r in index)  # no problem key
    verified = _json(invoke, "dump-index", "--verify", str(PART / "00000000000000000055.index"))
    assert all(tuple(r) == rows.OffsetIndexRow.__struct_fields__ for r in verified)
    assert [r["problem"] for r in verified] == [None] * len(index)
    times = _json(invoke, "dump-index", str(PART / "00000000000000000055.timeindex"))
    assert times and all(tuple(r) == rows.TimeIndexRow.__struct_fields__[:-1] for r in times)
    snap = _json(invoke, "dump-snapshot", str(PART / "00000000000000000055.snapshot"))
    assert tuple(snap) == rows.SnapshotRow.__struct_fields__
    assert snap["entries"] and all(tuple(e) == rows.SnapshotEntryRow.__struct_fields__ for e in snap["entries"])
    aborted = _json(invoke, "dump-txnindex", str(PART / "00000000000000000109.txnindex"))
    assert aborted and all(tuple(r) == rows.TxnIndexRow.__struct_fields__ for r in aborted)


def test_trailing_bytes_object_has_its_rows_keys(invoke, tmp_path):
    seg = tmp_path / "orders-0" / SEGMENT.name
    seg.parent.mkdir()
    seg.write_bytes(SEGMENT.read_bytes() + b"\x00\x01junk")
    r = invoke("dump-segment", str(seg), "--format", "json")
    assert r.exit_code == 1
    last = json.loads(r.stdout)[-1]
    assert tuple(last) == rows.TrailingBytesRow.__struct_fields__
    assert (last["trailing_bytes"], last["position"]) == (6, SEGMENT.stat().st_size)


@pytest.mark.skipif(kd._dump is None, reason="no compiled code (KAFKATX_PURE_PYTHON=1 or the extension "
                    "not built): no compiled renderer to hold to the row model")
def test_the_compiled_renderer_takes_the_row_classes_and_refuses_another_layout():
    sp = kd._dump
    assert kd._jsonl_rows(sp) is rows  # render_setup accepted BatchRow, RecordRow, HeaderRow as they are

    class Reordered(msgspec.Struct, gc=False):
        last_offset: int
        base_offset: int

    try:
        with pytest.raises(TypeError):
            sp.render_setup(Reordered, rows.RecordRow, rows.HeaderRow, rows.UNSET)
    finally:
        sp.render_setup(rows.BatchRow, rows.RecordRow, rows.HeaderRow, rows.UNSET)


def test_scan_batches_columns_types_and_nullability_are_the_scan_row_model():
    fields = rows.ScanBatchRow.__struct_fields__
    assert R.BATCH_COLUMNS == fields == schema.COLUMNS["batches"]
    # by hand from Kafka's DefaultRecordBatch field widths: INT32 fields are Spark ints, INT64 longs
    assert {c for c, t in schema.TYPES["batches"].items() if t == "int"} == {
        "partition", "count", "magic", "attributes", "partition_leader_epoch", "producer_epoch", "base_sequence",
        "last_sequence", "coordinator_epoch"}
    assert schema.NOT_NULL["batches"] == {"log_dir", "topic", "partition", "segment", "segment_base_offset"}
    # the dump's batch keys are all scan columns too (one name per header field)
    assert set(rows.BatchRow.__struct_fields__) - {"records"} <= set(fields)


def test_scan_batch_tuples_fill_the_scan_row_model_in_order():
    plan = plan_scan([REPO / "fixtures" / "hanging"])
    task = next(t for t in plan.tasks if t.topic == "orders" and t.partition == 0 and t.segment_base_offset == 0)
    got = [rows.ScanBatchRow(*p) for k, p in R.decode_segment(task) if k == R.BATCH]
    expected = [b for b in scenario("hanging")["partitions"]["orders-0"]["batches"] if b["segment"] == 0]
    assert [(r.base_offset, r.last_offset, r.position, r.size, r.producer_id, r.producer_epoch, r.is_transactional,
             r.control_type, r.max_timestamp_ms, r.compression, r.segment, r.topic, r.error) for r in got] == [
        (e["base_offset"], e["last_offset"], e["position"], e["size"], e["producer_id"], e["producer_epoch"],
         e["transactional"], e["control"], e["max_timestamp_ms"], e["compression"], SEGMENT.name, "orders", None)
        for e in expected]


def test_field_types_refuses_a_field_no_column_can_hold():
    class Odd(msgspec.Struct):
        when: float

    with pytest.raises(TypeError, match="Odd.when"):
        rows.field_types(Odd)
