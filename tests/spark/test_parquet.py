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
def test_layouts_batches_by_topic_the_small_datasets_in_few_files(spark, tmp_path):
    """Spark's writer lays batches/ out by topic (topic=<t>/ directories) and writes the small datasets
    as a file or a few, topic a column; read_arrow and read_dataset read both with the schema's columns."""
    run_scan([REPO / "fixtures" / "hanging"], tmp_path / "out", now=NOW, spark=spark)
    out = tmp_path / "out"
    topics = {d.name.rsplit("-", 1)[0] for d in (REPO / "fixtures" / "hanging").iterdir() if d.is_dir()}
    assert {p.name for p in (out / "batches").iterdir() if p.is_dir()} == {f"topic={t}" for t in topics}
    assert all((out / name / "_SUCCESS").exists() for name in ("batches", "transactions", "partitions", "hanging"))
    for name in ("partitions", "hanging"):
        assert len(list((out / name).glob("*.parquet"))) == 1
        assert not any(p.is_dir() for p in (out / name).iterdir())
    for name in ("batches", "transactions", "partitions", "hanging"):
        table = P.read_arrow(str(out), name)
        assert table.column_names == list(COLUMNS[name])
        assert read_dataset(spark, str(out), name).count() == table.num_rows


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
