"""``kafkatx scan`` where users start it: an unactivated venv, a real standalone cluster,
executors without kafkatx (a packed venv), spark-submit.

Every scan here is a separate driver process (the installed console script, or spark-submit)
with a PATH whose ``python3`` is a bare virtualenv (no crc32c): what a worker would pick if
kafkatx did not tell Spark which interpreter to run. Results are compared with the offline
commands ``lag`` / ``find-hanging`` on the same fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.spark.conftest import NOW, REPO, console_script, driver_env, expected_json, read_rows

pytestmark = pytest.mark.spark

FIXTURE = REPO / "fixtures" / "hanging"
TIMEOUT = 900


def _run(cmd: list, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)


def _assert_parity(res: subprocess.CompletedProcess, out: Path, log_dirs: list[Path]) -> None:
    """Exit code, a stdout that is nothing but the JSON summary, and partitions/ + hanging/
    equal to lag / find-hanging."""
    lag = expected_json("lag", log_dirs)
    hanging = expected_json("find-hanging", log_dirs)
    assert res.returncode == (1 if hanging else 0), res.stderr
    summary = json.loads(res.stdout)  # clean stdout: the summary only
    assert summary["hanging"] == len(hanging) and summary["partitions"] == len(lag)
    assert summary["decode_errors"] == 0 and summary["crc_errors"] == 0
    assert summary["segments"] == sum(len(list(d.glob("*/*.log"))) for d in log_dirs)
    assert read_rows(out, "partitions") == lag
    assert read_rows(out, "hanging") == hanging


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "\tat " not in stderr and "Exception in" not in stderr
    return lines[0]


def _no_progress_noise(stderr: str) -> None:
    """--format json piped: stderr holds notices only, no progress lines, no Spark logging."""
    for line in stderr.splitlines():
        assert line.startswith(("kafkatx: note:", "kafkatx: skipped:")), line


# ----------------------------------------------------------------------------- item 1: unactivated venv

def test_console_script_by_full_path_outside_its_venv(bare_venv, tmp_path):
    """The installed console script, by its full path, from a shell whose PATH has neither its
    venv nor any python3 with the dependencies: local workers run kafkatx's interpreter."""
    script = console_script()
    env = driver_env(bare_venv)
    assert str(script.parent) not in env["PATH"].split(":")
    out = tmp_path / "out"
    # a relative --log-dir, as a user types it
    res = _run([script, "scan", "--log-dir", "fixtures/hanging", "--output", out, "--now", NOW,
                "--format", "json"], env)
    _assert_parity(res, out, [FIXTURE])
    _no_progress_noise(res.stderr)


# What a bare python3 misses first depends on import order (crc32c is imported lazily since the
# C extension has its own CRC-32C; msgspec, the records' type, comes first now): any of kafkatx's own dependencies.
_DEPENDENCY_MODULES = ("crc32c", "cramjam", "msgspec", "orjson", "pyarrow", "yaml")


def _names_a_dependency(line: str) -> bool:
    return any(f"no module '{m}'" in line for m in _DEPENDENCY_MODULES)


def test_users_pyspark_python_is_respected_and_a_missing_module_is_one_line(bare_venv, tmp_path):
    """PYSPARK_PYTHON set by the user wins (here the bare python3, which is what the workers ran
    before the fix): exit 3, one line naming the module, no Java or Python stack."""
    script = console_script()
    env = driver_env(bare_venv, PYSPARK_PYTHON="python3", TMPDIR=str(tmp_path))  # Spark's log, kept on failure
    res = _run([script, "scan", "--log-dir", FIXTURE, "--output", tmp_path / "out", "--now", NOW,
                "--format", "json"], env)
    assert res.returncode == 3, res.stderr
    line = _one_line(res.stderr)
    assert _names_a_dependency(line) and "(python3)" in line, line
    assert res.stdout == ""
    logs = list(tmp_path.glob("kafkatx-spark-*.log"))  # the JVM's output went there, and is named
    assert len(logs) == 1 and str(logs[0]) in line and logs[0].stat().st_size > 0


# ----------------------------------------------------------------------------- item 2: standalone cluster

def test_scan_on_a_standalone_cluster_equals_lag_and_find_hanging(standalone, bare_venv, tmp_path):
    """A real multi-process cluster: the executor is a JVM the worker started, its Python
    workers are the interpreter named by spark.pyspark.python (kafkatx installed there;
    kafkatx's own code shipped as a zip), the log dir given relative to the driver's cwd."""
    assert standalone.alive_workers() == 1
    out = tmp_path / "out"
    res = _run([console_script(), "scan", "--master", standalone.master_url, "--log-dir", "fixtures/hanging",
                "--output", out, "--now", NOW, "--format", "json",
                "--conf", f"spark.pyspark.python={sys.executable}"], driver_env(bare_venv))
    _assert_parity(res, out, [FIXTURE])
    _no_progress_noise(res.stderr)
    apps = standalone.state().get("completedapps", [])
    assert any(a.get("name") == "kafkatx-scan" for a in apps), apps  # it really ran on this cluster


def test_executor_python_without_dependencies_is_one_line_exit_3(standalone, bare_venv, tmp_path):
    """The worker's default python3 lacks kafkatx's dependencies: one line naming the first it misses, exit 3."""
    res = _run([console_script(), "scan", "--master", standalone.master_url, "--log-dir", FIXTURE,
                "--output", tmp_path / "out", "--now", NOW, "--format", "json",
                "--conf", "spark.task.maxFailures=1"], driver_env(bare_venv, TMPDIR=str(tmp_path)))
    assert res.returncode == 3, res.stderr
    line = _one_line(res.stderr)
    assert _names_a_dependency(line) and "executor" in line, line


# ----------------------------------------------------------------------------- item 3: packed venv

@pytest.fixture(scope="session")
def packed_env(tmp_path_factory) -> Path:
    """python -m kafkatx.spark.pack: a venv-pack archive of kafkatx (C extension built) + deps."""
    pytest.importorskip("venv_pack")
    out = tmp_path_factory.mktemp("pack") / "kafkatx-env.zip"  # Spark keeps file modes for zips only
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # pip's own configuration (index, cache) included
    res = subprocess.run([sys.executable, "-m", "kafkatx.spark.pack", str(out), "--compress-level", "0"], cwd=REPO, capture_output=True,
                         text=True, timeout=TIMEOUT, env=env)
    if res.returncode != 0 and ("No matching distribution" in res.stdout + res.stderr
                                or "Could not find a version" in res.stdout + res.stderr):
        pytest.skip(f"pip cannot reach the package index to build the env: {res.stderr.strip()[-300:]}")
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.slow
def test_packed_env_runs_on_executors_without_kafkatx(standalone, bare_venv, packed_env, tmp_path):
    """--pack-env: the executor unpacks the archive and runs ./environment/bin/python; the worker
    has no kafkatx and no dependencies, and no zip of kafkatx is shipped, so the scan can only
    succeed with the archive's kafkatx, whose C extension is in it."""
    with zipfile.ZipFile(packed_env) as zf:
        names = zf.namelist()
    for compiled_module in ("format/_batch", "format/_fold", "format/_txn_log", "storage/_replay",
                            "coordinator/_coordinator", "render/_dump"):
        assert any(f"site-packages/kafkatx/{compiled_module}" in n and n.endswith(".so") for n in names), compiled_module
    assert not any(n.startswith("lib/python3.11/site-packages/pyspark/") for n in names)
    out = tmp_path / "out"
    res = _run([console_script(), "scan", "--master", standalone.master_url, "--log-dir", FIXTURE,
                "--output", out, "--now", NOW, "--format", "json", "--pack-env", packed_env,
                "--conf", "spark.kafkatx.shipPackage=auto"], driver_env(bare_venv))
    _assert_parity(res, out, [FIXTURE])


# ----------------------------------------------------------------------------- item 4: spark-submit

def test_spark_submit_runs_the_module_entry(bare_venv, tmp_path):
    """spark-submit (pyspark's own bin/) runs kafkatx/spark/__main__.py with scan's options;
    the master is spark-submit's."""
    pytest.importorskip("pyspark")
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    entry = REPO / "kafkatx" / "spark" / "__main__.py"
    out = tmp_path / "out"
    env = driver_env(bare_venv, PYSPARK_DRIVER_PYTHON=sys.executable)
    res = _run([submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false", entry,
                "--log-dir", FIXTURE, "--output", out, "--now", NOW, "--format", "json"], env)
    json_start = res.stdout.find("{")  # spark-submit's own JVM may print before the driver does
    assert json_start >= 0, res.stdout + res.stderr
    res.stdout = res.stdout[json_start:]
    _assert_parity(res, out, [FIXTURE])


def test_module_entry_usage_error_without_spark(tmp_path):
    res = subprocess.run([sys.executable, "-m", "kafkatx.spark", "--log-dir", FIXTURE], cwd=REPO,
                         capture_output=True, text=True, env={**driver_env(Path("/nonexistent"))})
    assert res.returncode == 2
    assert "--output" in _one_line(res.stderr)
