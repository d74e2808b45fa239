"""``job._Beside``: the ``batches/`` job run from a thread of its own beside the scan's other jobs, on a real
local SparkSession: both finish, the first error is the one raised, a failing body cancels the job beside,
the action's return value is kept."""

from __future__ import annotations

import os
import threading
import time

import pytest

pytest.importorskip("pyspark")

from kafkatx.spark.job import _Beside  # noqa: E402

pytestmark = pytest.mark.spark


def _slow(spark, seconds: float, tasks: int = 2, done_dir: str | None = None) -> int:
    def wait(index, rows):  # type: ignore[no-untyped-def]
        time.sleep(seconds)
        if done_dir is not None:  # local mode: the tasks share this filesystem
            open(os.path.join(done_dir, str(index)), "w").close()
        yield from rows

    rdd = spark.sparkContext.parallelize(range(2 * tasks), tasks)
    return rdd.mapPartitionsWithIndex(wait).count()  # type: ignore[no-any-return]


def test_both_jobs_run_and_overlap(spark, tmp_path):
    """The body's job ends while the job beside still has most of its tasks to run: with FAIR pools it takes
    the first core one of the job's tasks frees. (FIFO would queue it behind all 8 of them: it would end
    after at least 6 of them had.)"""
    got: list[int] = []
    seen_threads: set[str] = set()
    done = tmp_path / "done"
    done.mkdir()

    def beside() -> None:
        seen_threads.add(threading.current_thread().name)
        got.append(_slow(spark, 1.0, tasks=8, done_dir=str(done)))

    with _Beside(spark.sparkContext, beside, "beside"):
        time.sleep(0.5)  # its tasks started
        body = spark.sparkContext.parallelize(range(10), 2).map(lambda x: x * 2).sum()
        finished_before = len(list(done.iterdir()))
    assert got == [16] and body == 90 and len(list(done.iterdir())) == 8
    assert seen_threads == {"kafkatx-scan-beside"}
    assert finished_before < 6


def test_an_error_beside_is_raised_after_the_body(spark):
    class Boom(Exception):
        pass

    def beside() -> None:
        raise Boom("beside")

    ran = []
    with pytest.raises(Boom, match="beside"), _Beside(spark.sparkContext, beside, "beside"):
        ran.append(spark.sparkContext.parallelize(range(3), 1).count())
    assert ran == [3]


def test_a_failing_body_cancels_the_job_beside_and_its_error_is_raised(spark):
    finished: list[float] = []

    def beside() -> None:
        try:
            _slow(spark, 60.0)
        finally:
            finished.append(time.monotonic())

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="body"), _Beside(spark.sparkContext, beside, "beside"):
        time.sleep(1.0)  # the job beside is running
        raise ValueError("body")
    assert finished and finished[0] - t0 < 50  # cancelled, not waited out


def test_the_action_s_return_value_is_its_result(spark):
    """The side beside hands its result to the caller (the scan's summary takes batches/' counts from it)."""
    with _Beside(spark.sparkContext, lambda: spark.sparkContext.parallelize(range(4), 2).sum(), "beside") as b:
        body = spark.sparkContext.parallelize(range(3), 1).count()
    assert (b.result(), body) == (6, 3)
