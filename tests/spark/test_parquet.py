"""The datasets' layout as Spark's writer makes it, read back by Spark and by pyarrow (kafkatx/spark/parquet.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from kafkatx.spark import parquet as P  # noqa: E402
from kafkatx.spark.job import run_scan  # noqa: E402
from kafkatx.spark.schema import COLUMNS, read_dataset  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


@pytest.mark.spark
def test_layouts_every_dataset_as_a_few_files_topic_a_column(spark, tmp_path):
    """Spark's writer writes every dataset as a few plain files (a file per task, no topic=<t>/ directories:
    a fleet of thousands of small topics would make thousands of tiny files; a fixture's few KB are one task
    per job, so one file each: job.MIN_BIN_WEIGHT), batches/' rows of a file in
    (topic, partition, log dir, segment, position) order, so a topic filter skips row groups by their
    statistics; read_arrow and read_dataset read them with the schema's columns."""
    import pyarrow.parquet as pq

    run_scan([REPO / "fixtures" / "hanging"], tmp_path / "out", now=NOW, spark=spark)
    out = tmp_path / "out"
    topics = {d.name.rsplit("-", 1)[0] for d in (REPO / "fixtures" / "hanging").iterdir() if d.is_dir()}
    assert len(topics) > 1
    assert all((out / name / "_SUCCESS").exists() for name in ("batches", "transactions", "partitions", "hanging"))
    for name in ("batches", "transactions", "partitions", "hanging"):
        assert not any(p.is_dir() for p in (out / name).iterdir())
    for name in ("batches", "transactions", "partitions", "hanging"):
        assert len(list((out / name).glob("*.parquet"))) == 1
    files = sorted((out / "batches").glob("*.parquet"))
    seen: set[str] = set()
    for f in files:
        rows = pq.read_table(f).to_pylist()
        keys = [(r["topic"], r["partition"], r["log_dir"], r["segment"], r["position"]) for r in rows]
        assert keys == sorted(keys)
        seen |= {r["topic"] for r in rows}
    assert seen == topics
    for name in ("batches", "transactions", "partitions", "hanging"):
        table = P.read_arrow(str(out), name)
        assert table.column_names == list(COLUMNS[name])
        assert read_dataset(spark, str(out), name).count() == table.num_rows


def test_read_arrow_reads_the_earlier_layout_by_topic(tmp_path):
    """An earlier kafkatx wrote batches/ with partitionBy("topic") (topic=<t>/ directories, no topic column
    in the files): read_arrow still gives the schema's columns, topic from the directory names."""
    import pyarrow.parquet as pq

    schema = P.arrow_schema("batches", with_partition_column=False)
    for topic, n in (("orders", 2), ("123", 1)):
        rows = {c: [None] * n for c in schema.names}
        rows.update(log_dir=["/d"] * n, partition=list(range(n)), segment=["0.log"] * n,
                    segment_base_offset=[0] * n)
        (tmp_path / "batches" / f"topic={topic}").mkdir(parents=True)
        pq.write_table(pa.table(rows, schema=schema), tmp_path / "batches" / f"topic={topic}" / "part-0.parquet")
    table = P.read_arrow(str(tmp_path), "batches")
    assert table.column_names == list(COLUMNS["batches"])
    assert sorted((r["topic"], r["partition"]) for r in table.to_pylist()) == [("123", 0), ("orders", 0),
                                                                               ("orders", 1)]


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
