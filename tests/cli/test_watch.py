"""``lag --watch`` and ``find-hanging --watch``: refresh until Ctrl-C, which exits 0 (3 when the last refresh was partial).

Each refresh's output is checked against the hand-reasoned expected files of
``fixtures/expected/hanging`` (the same files the one-shot commands are checked against).
In-process runs stop the loop by making its pause raise KeyboardInterrupt (what Ctrl-C does);
the process tests send a real SIGINT, once with stdout a pipe and once with stdout a
pseudo-terminal (the rich Live view).
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kafkatx.cli import watch as watch_mod
from kafkatx.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
HANGING = ROOT / "fixtures" / "hanging"
EXPECTED = ROOT / "fixtures" / "expected" / "hanging"
needs_fixtures = pytest.mark.skipif(not HANGING.is_dir(), reason="fixtures not built")


def now() -> str:
    return str(json.loads((EXPECTED / "scenario.json").read_text())["now_ms"])


def expected(name: str):
    return json.loads((EXPECTED / name).read_text())


@pytest.fixture
def ticks(monkeypatch):
    """Record each pause the watch loop takes; the ``n``-th pause is a Ctrl-C."""
    pauses: list[float] = []
    limit = {"n": 2}

    def fake_sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) >= limit["n"]:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch_mod.time, "sleep", fake_sleep)
    return pauses, limit


def json_stream(text: str) -> list:
    decoder, docs, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            break
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)
    return docs


@pytest.mark.parametrize("args, default", [
    (["--watch"], "5"), (["--watch", "--format", "json"], "5"), (["--watch", "2"], None), (["--watch=2"], None),
    (["--watch", "-1"], None), (["--watch", "--", "--watch"], "5"), (["--format", "json"], None)])
def test_bare_watch_gets_the_default(args, default):
    out = watch_mod.with_optional_value(args, "--watch", "5")
    if default is None:
        assert out == args
    else:
        assert out == [*args[:1], default, *args[1:]]


@needs_fixtures
def test_lag_watch_prints_one_json_document_per_refresh_and_ctrl_c_exits_0(ticks):
    result = CliRunner().invoke(app, ["lag", "--log-dir", str(HANGING), "--watch", "0.2", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json_stream(result.stdout) == [expected("lag.json")] * 2
    pauses, _ = ticks
    assert len(pauses) == 2 and all(0 <= p <= 0.2 for p in pauses)


@needs_fixtures
def test_find_hanging_watch_exits_0_on_ctrl_c_even_with_findings(ticks):
    one_shot = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(HANGING), "--now", now(), "--format", "json"])
    assert one_shot.exit_code == 1
    result = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(HANGING), "--now", now(), "--watch", "0.2",
                                      "--format", "yaml"])
    assert result.exit_code == 0, result.stderr
    assert list(yaml.safe_load_all(result.stdout)) == [expected("find-hanging.json")] * 2


@needs_fixtures
def test_bare_watch_refreshes_every_5_seconds(ticks):
    pauses, limit = ticks
    limit["n"] = 1
    result = CliRunner().invoke(app, ["lag", "--log-dir", str(HANGING), "--watch", "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == expected("lag.json")
    assert len(pauses) == 1 and 4 < pauses[0] <= 5  # 5 s minus the time the refresh took


def test_watch_must_be_positive():
    result = CliRunner().invoke(app, ["lag", "--log-dir", str(HANGING), "--watch", "0"])
    assert result.exit_code == 2


def test_an_unreachable_cluster_is_reported_each_refresh_and_retried(ticks):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    pauses, limit = ticks
    limit["n"] = 3
    result = CliRunner().invoke(app, ["lag", "--bootstrap-server", closed, "--watch", "0.1", "--timeout", "5"])
    assert result.exit_code == 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3 and all(closed in line and "retrying in 0.1s" in line for line in lines)
    assert result.stdout == ""


def _kafkatx(*args: str, **kw) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kafkatx", *args], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "LINES": "200"}, **kw)


# Bounds that only catch a hang: the tests wait on the event (the process's exit, its output's end),
# never on a time the command must beat, so a loaded CI machine does not fail them.
HANG_S = 180


def _interrupt(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise


@needs_fixtures
def test_sigint_stops_a_piped_watch_with_exit_0():
    rows = len(expected("lag.json"))
    proc = _kafkatx("lag", "--log-dir", str(HANGING), "--watch", "0.2", "--format", "jsonl",
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2 * rows)]  # two whole refreshes
        assert [json.loads(line) for line in lines] == expected("lag.json") * 2
        assert _interrupt(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@needs_fixtures
def test_sigint_stops_the_live_table_on_a_terminal_with_exit_0():
    """stdout a pseudo-terminal: the rich Live view, redrawn in place (cursor-up sequences between
    refreshes), headed by the refresh time; the table holds the fixture's rows."""
    master, slave = pty.openpty()
    proc = _kafkatx("lag", "--log-dir", str(HANGING), "--watch", "0.2", stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + HANG_S
        while seen.count(b"last refresh") < 3 and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                seen += os.read(master, 65536)
        assert seen.count(b"last refresh") >= 3, seen[-2000:]
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + HANG_S
        while proc.poll() is None and time.monotonic() < deadline:  # keep draining: a full pty blocks it
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        assert proc.wait(timeout=HANG_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    text = seen.decode(errors="replace")
    assert "kafkatx lag every 0.2s, last refresh " in text and "Ctrl-C stops" in text
    assert "\x1b[1A" in text or "\x1b[2K" in text  # Live moves the cursor up to redraw
    assert "186" in text and "137" in text  # orders-0: high watermark and LSO (fixtures/expected/hanging/lag.json)


@needs_fixtures
@pytest.mark.parametrize("command", ["lag", "find-hanging"])
def test_watch_over_an_unreadable_partition_says_so_each_refresh_and_exits_3(ticks, tmp_path, command):
    """Never a false all-clear, refreshed: every refresh names the partition it could not read, and
    Ctrl-C on a partial answer exits 3 as the one-shot command does (cli.md "Incomplete answers")."""
    import shutil

    ld = tmp_path / "hanging"
    shutil.copytree(HANGING, ld)
    os.truncate(ld / "orders-2" / "00000000000000000148.log", 1000)  # ends inside a batch; clean shutdown
    result = CliRunner().invoke(app, [command, "--log-dir", str(ld), "--now", now(), "--watch", "0.2",
                                      "--format", "json"])
    assert result.exit_code == 3, result.stderr
    gaps = [line for line in result.stderr.splitlines() if "could not be read" in line]
    assert len(gaps) == 3 and all("orders-2" in line for line in gaps)  # 2 refreshes, then the last line
