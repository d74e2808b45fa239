"""Spark test fixtures: one local SparkSession for the package (starting one costs ~10 s), a
bare virtualenv standing for a machine whose ``python3`` lacks kafkatx's dependencies, and
one real standalone cluster (master + 1 worker, separate JVMs) per test session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from kafkatx.spark.job import start_spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = start_spark("local[2]", {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
                                      "spark.default.parallelism": "4"})
    yield session
    session.stop()


def _java_or_skip() -> None:
    pytest.importorskip("pyspark")
    home = os.environ.get("JAVA_HOME")
    if not (home and Path(home, "bin", "java").exists()) and shutil.which("java") is None:
        pytest.skip("no Java (JAVA_HOME or java on PATH): Spark cannot start")


@pytest.fixture(scope="session")
def bare_venv(tmp_path_factory) -> Path:
    """A virtualenv with nothing installed: its ``bin/`` first on PATH makes ``python3`` an
    interpreter without crc32c, cramjam, pyarrow (what a worker finds on a fresh machine)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    probe = subprocess.run([str(venv / "bin" / "python3"), "-c", "import crc32c"], capture_output=True,
                           env={"PATH": "/usr/bin:/bin"})
    assert probe.returncode != 0, "the bare venv must not see crc32c"
    return venv


def bare_path(bare_venv: Path) -> str:
    """A PATH whose python3 is the bare venv's (java, bash, coreutils from /usr/bin, /bin)."""
    return os.pathsep.join([str(bare_venv / "bin"), "/usr/bin", "/bin"])


def driver_env(bare_venv: Path, **extra: str) -> dict[str, str]:
    """A user's shell where kafkatx's venv is not activated: only the bare python3 on PATH.
    PYTHONPATH points at this checkout so the installed console script runs this code."""
    env = {"PATH": bare_path(bare_venv), "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(REPO),
           "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def standalone(bare_venv, tmp_path_factory):
    """A Spark standalone master and one worker (1 core, 1 GB) from pyspark's distribution on
    127.0.0.1, free ports, ready when the master's JSON lists the worker ALIVE; stopped after.
    The worker's environment has no kafkatx and a python3 without its dependencies."""
    _java_or_skip()
    from kafkatx.spark.standalone import start_standalone

    env: dict[str, str | None] = {"PATH": bare_path(bare_venv), "PYTHONPATH": None, "PYSPARK_PYTHON": None,
                                  "PYSPARK_DRIVER_PYTHON": None, "VIRTUAL_ENV": None}
    cluster = start_standalone(workers=1, cores=1, memory="1g", env=env,
                               workdir=tmp_path_factory.mktemp("standalone"))
    yield cluster
    cluster.stop()


def console_script() -> Path:
    """The installed ``kafkatx`` console script next to this interpreter (a venv's bin/)."""
    script = Path(sys.executable).parent / "kafkatx"
    if not script.exists():
        pytest.skip(f"{script}: kafkatx is not installed next to this interpreter (pip install -e .)")
    return script


def expected_json(command: str, log_dirs: list[Path], now: int = NOW) -> list[dict]:
    """``kafkatx lag`` / ``find-hanging --format json`` (the offline commands, in-process)."""
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    args = [command, *[a for d in log_dirs for a in ("--log-dir", str(d))], "--format", "json"]
    if command == "find-hanging":
        args += ["--now", str(now)]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code in (0, 1), res.stderr
    return json.loads(res.stdout)


def read_rows(output: Path, name: str) -> list[dict]:
    """A dataset read back with pyarrow (no Spark), rows in the commands' order."""
    from kafkatx.spark.parquet import read_arrow

    rows = read_arrow(str(output), name).to_pylist()
    key = (lambda r: (r["topic"], r["partition"])) if name == "partitions" else \
        (lambda r: (r["topic"], r["partition"], r["first_offset"], r["producer_id"]))
    return sorted(rows, key=key)
