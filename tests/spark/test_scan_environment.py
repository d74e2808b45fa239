"""Which interpreter Spark's Python workers run, failed-job messages, progress: no cluster needed
(except the progress test, which runs a real scan on the shared local session)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kafkatx.errors import KafkaTxError
from kafkatx.spark import job

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("master", ["local", "local[1]", "local[*]", "local[2,3]"])
def test_local_masters_run_this_interpreter(clean_env, master):
    env = job.spark_environ(master, {})
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    effective = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    assert str(REPO) in effective.split(os.pathsep)  # local workers import this kafkatx


def test_users_environment_is_kept(clean_env):
    clean_env.setenv("PYSPARK_PYTHON", "/opt/py/bin/python")
    clean_env.setenv("PYSPARK_DRIVER_PYTHON", "/opt/py/bin/python")
    env = job.spark_environ("local[2]", {})
    assert "PYSPARK_PYTHON" not in env and "PYSPARK_DRIVER_PYTHON" not in env


def test_spark_pyspark_python_conf_reaches_the_workers(clean_env):
    clean_env.setenv("PYSPARK_PYTHON", "/from/env")
    env = job.spark_environ("spark://h:7077", {"spark.pyspark.python": "/opt/kafkatx/bin/python"})
    assert env["PYSPARK_PYTHON"] == "/opt/kafkatx/bin/python"


def test_cluster_masters_keep_sparks_default_unless_told(clean_env):
    assert "PYSPARK_PYTHON" not in job.spark_environ("spark://h:7077", {})
    assert "PYSPARK_PYTHON" not in job.spark_environ("yarn", {})
    assert job.spark_environ("yarn", {}, pack_env="env.tar.gz")["PYSPARK_PYTHON"] == "./environment/bin/python"


# A failed job's text as py4j hands it to Python: Java frames around the Python worker's traceback.
_FAILED = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (127.0.0.1 executor 0): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/pyspark.zip/pyspark/worker.py", line 4197, in invoke_udf
    func, profiler, deserializer, serializer = read_command(pickleSer, init_info.udf_info)
  File "/w/kafkatx.zip/kafkatx/format/record_batch.py", line 48, in <module>
    import crc32c as _crc32c
{last}

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:624)
\tat org.apache.spark.scheduler.Task.run(Task.scala:147)
"""


def test_missing_module_names_the_module_and_the_interpreter():
    err = job.job_error(Exception(_FAILED.format(last="ModuleNotFoundError: No module named 'crc32c'")), "python3")
    assert isinstance(err, KafkaTxError) and err.exit_code == 3
    text = str(err)
    assert "\n" not in text and "no module 'crc32c'" in text and "(python3)" in text and "\tat" not in text


def test_a_kafkatx_error_on_an_executor_is_its_own_message():
    err = job.job_error(Exception(_FAILED.format(
        last="kafkatx.errors.MissingFile: /data/orders-0: no such partition folder")), "python3")
    assert str(err) == "/data/orders-0: no such partition folder (on a Spark executor)"


def test_other_worker_errors_keep_the_exception_line_only():
    err = job.job_error(Exception(_FAILED.format(last="MemoryError: out of memory")), "python3")
    assert str(err) == "Spark job failed in a Python worker: MemoryError: out of memory"


def test_interpreter_that_cannot_run():
    text = ('Job aborted due to stage failure: java.io.IOException: Cannot run program '
            '"./environment/bin/python": error=2, No such file or directory\n\tat java.lang.ProcessBuilder.start')
    assert "'./environment/bin/python'" in str(job.job_error(Exception(text), "./environment/bin/python"))


def test_progress_is_a_bar_on_a_terminal_lines_for_text_and_nothing_for_piped_json(monkeypatch):
    from kafkatx.cli import scan

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert scan._status("json") is None and scan._status("yaml") is None
    assert isinstance(scan._status("text"), scan._PlainStatus)


def test_plain_progress_lines(capsys):
    from kafkatx.cli import scan

    status = scan._PlainStatus(every=0)
    status.update("decoding segments -> batches/", 3, 8, 3 << 20, 8 << 20)
    err = capsys.readouterr().err
    assert err == "kafkatx: scan: decoding segments -> batches/: 3/8 tasks, 3.0 MB/8.0 MB decoded\n"


@pytest.mark.spark
def test_progress_reports_tasks_and_bytes_from_the_status_tracker(spark, tmp_path):
    """A real scan with a recording progress sink: tasks from statusTracker, bytes up to the
    sum of the segment files' sizes (computed here from the files)."""
    fixture = REPO / "fixtures" / "hanging"
    updates: list[tuple] = []

    class Record:
        def update(self, description, completed, total, bytes_done, bytes_total):
            updates.append((description, completed, total, bytes_done, bytes_total))

    job.run_scan([fixture], tmp_path / "out", now=1_700_007_200_000, spark=spark, progress=Record())
    size = sum(p.stat().st_size for p in fixture.glob("*/*.log"))
    assert updates, "no progress reported"
    assert all(u[4] == size for u in updates)
    assert updates[-1][3] == size  # the final poll: every segment decoded
    assert all(0 <= u[1] <= u[2] for u in updates)
    assert [u[3] for u in updates] == sorted(u[3] for u in updates)  # bytes never go back


@pytest.mark.spark
def test_local_workers_import_the_drivers_kafkatx_with_its_c_extension(spark):
    """No zip of .py files shadows the driver's kafkatx on local workers: they import the same
    files, and the C extension when the driver has it."""
    import kafkatx
    from kafkatx.format import record_batch

    def probe(_):
        import kafkatx as k
        from kafkatx.format import record_batch as rb

        return k.__file__, rb._batch is not None

    got = spark.sparkContext.parallelize([0], 1).map(probe).collect()
    assert got == [(kafkatx.__file__, record_batch._batch is not None)]


def test_coordinator_notices_said_once_after_the_partitions_notices():
    """Per-partition fold results: each partition's notices once, in partition order, then the
    coordinator-level ones (said once by the driver), and those only when a partition was replayed."""
    coord = "transaction 'x' (producer 1) is Ongoing past its timeout ... holds it open"
    per = [(True, ["a-0: note"]), (True, ["a-0: note", "a-1: note"]), (False, ["b-0: skipped note"])]
    assert job._partition_notices(per, [coord]) == ["a-0: note", "a-1: note", "b-0: skipped note", coord]
    assert job._partition_notices([(False, ["b-0: skipped note"])], [coord]) == ["b-0: skipped note"]


def test_owed_abort_notice_only_when_no_partition_holds_the_transaction():
    """``hanging.owed_abort_notices`` over the pairs all partitions hold open (what the driver unites
    from the fold tasks): a transaction one partition holds open gets no "held open by no partition"."""
    from kafkatx.checks.hanging import owed_abort_notices
    from kafkatx.coordinator.state_manager import replay_transaction_log

    coordinator = replay_transaction_log([REPO / "fixtures" / "hanging"])
    now = 1_700_007_200_000  # fixtures/README.md: stale-loader (orders-0, payments-1) is past its timeout
    none_held = owed_abort_notices(coordinator, set(), now=now)
    assert len(none_held) == 1 and none_held[0].startswith("transaction 'stale-loader' (producer ")
    assert "no partition in these log dirs holds it open" in none_held[0]
    assert owed_abort_notices(coordinator, {("stale-loader", ("payments", 1))}, now=now) == []
    assert owed_abort_notices(coordinator, {("other-id", ("payments", 1))}, now=now) == none_held
    assert owed_abort_notices(coordinator, set(), now=now, in_scope=lambda tp: tp[0] == "orders") == []
@pytest.mark.spark
@pytest.mark.parametrize("fixture", ["hanging", "ghost"])
def test_scan_says_the_coordinator_notices_find_hanging_says(spark, tmp_path, fixture):
    """A transaction some partition holds open is not "held open by no partition" (before, every
    fold task that did not hold it said so)."""
    from kafkatx.session import offline

    root = REPO / "fixtures" / fixture
    dirs = sorted(root.glob("broker-*")) or [root]
    now = 1_700_007_200_000
    expected = [n for n in offline.find_hanging(dirs, now=now).notices if "holds it open" in n]
    got = [n for n in job.run_scan(dirs, tmp_path / "out", now=now, spark=spark).notices if "holds it open" in n]
    assert got == expected
