"""``kafkatx scan`` usage and environment errors: one line on stderr, no Spark needed."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]


def _cli(*args):
    from kafkatx.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_missing_output_is_a_usage_error():
    res = _cli("scan", "--log-dir", REPO / "fixtures" / "clean")
    assert res.exit_code == 2
    assert "--output" in res.stderr and "Traceback" not in res.stderr


def test_bad_conf_is_a_usage_error(tmp_path):
    res = _cli("scan", "--log-dir", REPO / "fixtures" / "clean", "--output", tmp_path, "--conf", "novalue")
    assert res.exit_code == 2
    assert "KEY=VALUE" in res.stderr


def test_missing_java_is_one_line_exit_3(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java anywhere
    from kafkatx.spark import job

    monkeypatch.setattr(job, "_session_running", lambda: False)
    res = _cli("scan", "--log-dir", REPO / "fixtures" / "clean", "--output", tmp_path / "o")
    assert res.exit_code == 3
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Java" in lines[0]


def test_missing_log_dir_is_exit_3(tmp_path):
    res = _cli("scan", "--log-dir", tmp_path / "nope", "--output", tmp_path / "o")
    assert res.exit_code in (2, 3)
    assert "Traceback" not in res.stderr


def test_help_does_not_import_pyspark():
    import subprocess
    import sys

    code = ("import sys; from kafkatx.cli.main import app; import kafkatx.cli.scan; "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={"PYTHONPATH": str(REPO)})


def test_missing_pyarrow_is_one_line_exit_3(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    res = _cli("scan", "--log-dir", REPO / "fixtures" / "clean", "--output", tmp_path / "o")
    assert res.exit_code == 3
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pyarrow" in lines[0] and "kafkatx[spark]" in lines[0]
    assert not (tmp_path / "o").exists()  # refused before Spark starts or anything is written


def test_help_does_not_import_pyarrow():
    import subprocess
    import sys

    code = ("import sys; from kafkatx.cli.main import app; import kafkatx.cli.scan, kafkatx.spark.job; "
            "assert 'pyarrow' not in sys.modules, 'pyarrow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={"PYTHONPATH": str(REPO)})


def test_pack_env_with_a_local_master_is_a_usage_error(tmp_path, monkeypatch):
    import tempfile

    logs = tmp_path / "tmp"
    logs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(logs))  # where the CLI puts Spark's log file
    archive = tmp_path / "env.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    res = _cli("scan", "--log-dir", REPO / "fixtures" / "clean", "--output", tmp_path / "o", "--master", "local[1]",
               "--pack-env", archive)
    assert res.exit_code == 2
    assert "--pack-env" in res.stderr and "cluster" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert list(logs.iterdir()) == []  # no empty Spark log left behind


def test_missing_pack_env_archive_is_one_line_exit_3(tmp_path):
    res = _cli("scan", "--log-dir", REPO / "fixtures" / "clean", "--output", tmp_path / "o",
               "--master", "spark://127.0.0.1:1", "--pack-env", tmp_path / "nope.zip")
    assert res.exit_code in (2, 3)
    assert "nope.zip" in res.stderr and len(res.stderr.strip().splitlines()) == 1
