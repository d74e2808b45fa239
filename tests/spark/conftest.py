"""One local SparkSession for the whole spark test package (starting one costs ~10 s)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from kafkatx.spark.job import start_spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = start_spark("local[2]", {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
                                      "spark.default.parallelism": "4"})
    yield session
    session.stop()
