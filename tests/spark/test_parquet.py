"""The executors' Parquet writer (kafkatx/spark/parquet.py): layout, schema, atomicity, overwrite."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from kafkatx.spark import parquet as P  # noqa: E402
from kafkatx.spark import rows as R  # noqa: E402
from kafkatx.spark.job import plan_scan, run_scan  # noqa: E402
from kafkatx.spark.schema import COLUMNS, read_dataset  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


def _span(topic: str, partition: int, pid: int, outcome: str = "COMMIT") -> tuple:
    return (topic, partition, pid, 0, None, 10, 20, 21, outcome, 0, 5, 9, 4)


def test_layout_is_hive_style_and_topic_leaves_the_file(tmp_path):
    rows = [_span("a", 0, 1), _span("a", 1, 2), _span("b", 0, 3)]
    assert P.write_rows(str(tmp_path / "transactions"), "transactions", 7, rows) == 3
    files = sorted(str(p.relative_to(tmp_path / "transactions")) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["topic=a/part-00007.parquet", "topic=b/part-00007.parquet"]
    schema = pq.read_schema(tmp_path / "transactions" / "topic=a" / "part-00007.parquet")
    assert "topic" not in schema.names
    assert schema.names == [c for c in COLUMNS["transactions"] if c != "topic"]
    assert schema.field("partition").type == pa.int32() and schema.field("producer_id").type == pa.int64()
    assert not schema.field("producer_id").nullable and schema.field("transactional_id").nullable


def test_read_arrow_restores_columns_order_and_values(tmp_path):
    rows = [_span("a", 0, 1), _span("b", 2, 3, "ABORT")]
    P.write_dataset(str(tmp_path / "transactions"), "transactions", rows)
    table = P.read_arrow(str(tmp_path), "transactions")
    assert table.column_names == list(COLUMNS["transactions"])
    got = sorted(tuple(r.values()) for r in table.to_pylist())
    assert got == sorted(rows)
    assert (tmp_path / "transactions" / "_SUCCESS").exists()


def test_a_topic_seen_again_gets_a_second_file_and_a_retry_replaces_not_duplicates(tmp_path):
    rows = [_span("a", 0, 1), _span("b", 0, 2), _span("a", 1, 3)]
    d = tmp_path / "transactions"
    P.write_rows(str(d), "transactions", 0, rows)
    assert sorted(p.name for p in (d / "topic=a").iterdir()) == ["part-00000-1.parquet", "part-00000.parquet"]
    P.write_rows(str(d), "transactions", 0, rows)  # the same task run again (a retry)
    assert P.read_arrow(str(tmp_path), "transactions").num_rows == 3
    assert not [p for p in tmp_path.rglob(".*")]  # no temp file left behind


def test_failed_task_leaves_no_file(tmp_path):
    def rows():
        yield _span("a", 0, 1)
        raise RuntimeError("task killed")

    with pytest.raises(RuntimeError):
        P.write_rows(str(tmp_path), "transactions", 0, rows())
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_large_tasks_are_written_in_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "ROWS_PER_CHUNK", 10)
    rows = [_span("a", 0, i) for i in range(25)]
    P.write_rows(str(tmp_path), "transactions", 0, rows)
    meta = pq.ParquetFile(tmp_path / "topic=a" / "part-00000.parquet").metadata
    assert (meta.num_rows, meta.num_row_groups) == (25, 3)


def test_clear_dataset_empties_the_directory(tmp_path):
    (tmp_path / "d" / "topic=old").mkdir(parents=True)
    (tmp_path / "d" / "topic=old" / "part-00000.parquet").write_bytes(b"stale")
    P.clear_dataset(str(tmp_path / "d"))
    assert (tmp_path / "d").is_dir() and not list((tmp_path / "d").iterdir())


def test_escaping_matches_spark_path_names():
    assert P.escape_partition_value("orders.v1_x-y") == "orders.v1_x-y"
    assert P.escape_partition_value("a=b/c%") == "a%3Db%2Fc%25"


def test_decode_tasks_writes_batches_and_yields_only_the_small_items(tmp_path):
    plan = plan_scan([REPO / "fixtures" / "hanging"])
    items = list(R.decode_tasks(str(tmp_path / "batches"), 3, plan.tasks))
    assert items and all(kind != R.BATCH for kind, _p in items)
    events = [p for k, p in items if k == R.COUNTS]
    assert len(events) == len(plan.tasks)
    table = P.read_arrow(str(tmp_path), "batches")
    assert table.num_rows == sum(e.batches for e in events) > 0
    assert sorted(table.column("topic").unique().to_pylist()) == sorted({t.topic for t in plan.tasks})
    # One file per topic, named after the task.
    files = list(tmp_path.rglob("*.parquet"))
    assert sorted(p.parent.name for p in files) == sorted(f"topic={t}" for t in {t.topic for t in plan.tasks})
    assert {p.name for p in files} == {"part-00003.parquet"}


@pytest.mark.spark
def test_spark_and_pyarrow_read_the_same_batches(spark, tmp_path):
    from fixtures.corrupt import truncated_tail

    torn = truncated_tail(tmp_path / "in", partition="orders-1")
    run_scan([torn.log_dir], tmp_path / "out", now=NOW, spark=spark)
    by_spark = read_dataset(spark, str(tmp_path / "out"), "batches")
    arrow = P.read_arrow(str(tmp_path / "out"), "batches")
    assert by_spark.columns == arrow.column_names == list(COLUMNS["batches"])
    key = ("topic", "partition", "segment", "position")
    assert Counter(tuple(r) for r in by_spark.collect()) == Counter(tuple(r.values()) for r in arrow.to_pylist())
    assert arrow.num_rows == by_spark.count() > 1
    errors = [r for r in arrow.to_pylist() if r["error"] is not None]
    assert [tuple(r[k] for k in key) for r in errors] == [("orders", 1, torn.path.name, torn.position)]
    # Plain spark.read.parquet (no explicit schema) sees the same types for the stored columns.
    inferred = dict(spark.read.parquet(str(tmp_path / "out" / "batches")).dtypes)
    assert inferred["partition"] == "int" and inferred["producer_id"] == "bigint" and inferred["topic"] == "string"
