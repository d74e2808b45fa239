"""The app frame: exit-code mapping, --traceback, --version, and real ``python -m kafkatx`` processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kafkatx

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("KAFKATX_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "kafkatx", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60, **kw)


def test_version_and_help(invoke):
    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"kafkatx {kafkatx.__version__}"
    r = invoke("--help")
    assert r.exit_code == 0 and "dump-segment" in r.stdout and "--traceback" in r.stdout


def test_unexpected_exception_is_one_line_exit_4(invoke, segment, monkeypatch):
    # A bug must not look like bad input (exit 3): exit 4 and one line asking for a report.
    import kafkatx.render.dump as dump

    def boom(buf):
        raise RuntimeError("kaput")

    monkeypatch.setattr(dump, "read_txn_index", boom)
    r = invoke("dump-txnindex", segment.txnindex)
    assert r.exit_code == 4
    assert r.stderr.strip().splitlines() == [
        "kafkatx: internal error: RuntimeError: kaput (run with --traceback, please report)"]
    r = invoke("--traceback", "dump-txnindex", segment.txnindex)
    assert r.exit_code == 4
    assert "Traceback (most recent call last)" in r.stderr and "kaput" in r.stderr


def test_traceback_is_accepted_anywhere_on_the_line(invoke, segment, monkeypatch):
    # The crash line says "run with --traceback": users add it at the end, after the command's own options.
    import errno

    import kafkatx.render.dump as dump

    def boom(buf):
        raise RuntimeError("kaput")

    monkeypatch.setattr(dump, "read_txn_index", boom)
    for args in (["dump-txnindex", segment.txnindex, "--traceback"], ["dump-txnindex", "--traceback", segment.txnindex]):
        r = invoke(*args)
        assert r.exit_code == 4, r.stderr
        assert "Traceback (most recent call last)" in r.stderr and "No such option" not in r.stderr

    def denied(buf):
        raise PermissionError(errno.EACCES, "Permission denied", str(segment.txnindex))

    monkeypatch.setattr(dump, "read_txn_index", denied)
    r = invoke("dump-txnindex", segment.txnindex, "--traceback")
    assert r.exit_code == 3 and "Traceback (most recent call last)" in r.stderr and "Permission denied" in r.stderr
    # after `--` it is an argument like any other, not the root option
    r = invoke("dump-txnindex", "--", "--traceback")
    assert r.exit_code != 0 and "Traceback (most recent call last)" not in r.stderr


def test_os_error_reading_input_is_exit_3_naming_the_file(invoke, segment, monkeypatch):
    import errno

    import kafkatx.render.dump as dump

    def denied(buf):
        raise PermissionError(errno.EACCES, "Permission denied", str(segment.txnindex))

    monkeypatch.setattr(dump, "read_txn_index", denied)
    r = invoke("dump-txnindex", segment.txnindex)
    assert r.exit_code == 3
    assert r.stderr.strip().splitlines() == [f"kafkatx: {segment.txnindex}: Permission denied"]


def test_internal_error_in_a_real_process_is_exit_4(tmp_path):
    # sitecustomize-free: break the library from the command line the process runs
    code = ("import sys, kafkatx.render.dump as d; from kafkatx.cli.main import main\n"
            "def boom(*a, **k): raise KeyError('bug')\n"
            "d.read_txn_index = boom\n"
            "sys.exit(main(['dump-txnindex', sys.argv[1]]))")
    path = tmp_path / f"{0:020d}.txnindex"
    path.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("KAFKATX_TRACEBACK", None)
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 4
    assert r.stderr.strip().splitlines() == [
        "kafkatx: internal error: KeyError: 'bug' (run with --traceback, please report)"]


def test_subprocess_ok_found_usage_input(tmp_path, partition_writer):
    seg = partition_writer(tmp_path / "orders-0")
    ok = run("dump-segment", seg.log, "--format", "jsonl")
    assert ok.returncode == 0 and ok.stderr == "" and len(ok.stdout.splitlines()) == 5

    garbage = tmp_path / f"{0:020d}.log"
    noise = bytearray(os.urandom(64))
    noise[16] = 0x7F  # no record batch magic: not a torn write either
    garbage.write_bytes(bytes(noise))
    unreadable = run("dump-segment", garbage)
    assert unreadable.returncode == 3
    assert len(unreadable.stderr.splitlines()) == 1 and "Traceback" not in unreadable.stderr
    assert str(garbage) in unreadable.stderr and "byte 16" in unreadable.stderr

    usage = run("dump-segment", tmp_path / "x.bin")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr

    missing = run("dump-index", tmp_path / "nope.index")
    assert missing.returncode == 3
    assert missing.stderr.strip() == f"kafkatx: {tmp_path / 'nope.index'}: no such file"


def test_subprocess_broken_pipe_is_quiet(tmp_path):
    from kafkatx.format.record_batch import Record, build_batch

    path = tmp_path / "big-0" / f"{0:020d}.log"
    path.parent.mkdir()
    batches = [build_batch([Record(offset=i, timestamp=i, key=None, value=b"x" * 50)]) for i in range(20_000)]
    path.write_bytes(b"".join(batches))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "kafkatx", "dump-segment", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert first.startswith(b"Dumping ")
    assert err == ""
    assert proc.returncode in (0, 141)


@pytest.mark.parametrize("flag", ["--install-completion", "--show-completion"])
def test_completion_flags_exist(invoke, flag):
    assert flag in invoke("--help").stdout


def test_main_returns_exit_code(tmp_path, capsys):
    from kafkatx.cli.main import main

    assert main(["dump-index", str(tmp_path / "nope.index")]) == 3
    assert "no such file" in capsys.readouterr().err
    assert main(["--version"]) == 0
    assert Path(kafkatx.__file__).parent.name == "kafkatx"


def test_the_process_entry_exits_with_mains_code_and_frees_nothing_at_exit(monkeypatch):
    # kafkatx's console script and `python -m kafkatx` run cli.main.run: main's exit code, every object
    # still alive moved out of the collector's reach first (the collections at exit walked them all: ~0.1 s
    # after an answer over 10,000 partitions); main() alone, in a process that goes on, freezes nothing
    import gc
    import tomllib

    from kafkatx.cli import main as cli_main

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"kafkatx": "kafkatx.cli.main:run"}
    assert "run()" in (REPO / "kafkatx" / "__main__.py").read_text()
    before = gc.get_freeze_count()
    assert cli_main.main(["--version"]) == 0 and gc.get_freeze_count() == before
    monkeypatch.setattr(cli_main, "main", lambda: 3)
    try:
        with pytest.raises(SystemExit) as exited:
            cli_main.run()
        assert exited.value.code == 3 and gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
    r = run("lag", "--log-dir", REPO / "no-such-dir")  # a whole process: the same exit code and line as main's
    assert r.returncode == 3 and r.stderr.startswith("kafkatx: ") and "no such log dir" in r.stderr
