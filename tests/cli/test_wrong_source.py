"""A wrong source is never an "all clear" (items 5 and 6), tried as a user would.

- a --log-dir that is no Kafka log dir (an empty dir, /etc, the parent of the real log dirs,
  a partition folder, a regular file) is exit 3 with one stderr line saying so, for every
  command that reads log dirs, and nothing on stdout;
- a bootstrap list that refuses every connection fails at once (the client is never made, see
  tests/cluster/test_probe.py); one that accepts and never answers is bounded by --timeout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

REPO = Path(__file__).resolve().parents[2]

COMMANDS = [
    ["lag"], ["find-hanging"], ["list-txn"], ["verify"], ["describe-txn", "stale-loader"],
    ["describe-producers", "--topic", "orders", "--partition", "0"], ["abort-hanging", "--all"],
]


def one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "80"})


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_empty_dir_is_refused_by_every_command(tmp_path, command):
    result = invoke(*command, "--log-dir", tmp_path)
    assert result.exit_code == 3
    assert result.stdout == ""
    line = one_line(result)
    assert str(tmp_path) in line and "not a Kafka log dir" in line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_regular_file_is_refused_by_every_command(tmp_path, command):
    file = tmp_path / "server.properties"
    file.write_text("log.dirs=/var/lib/kafka\n")
    result = invoke(*command, "--log-dir", file)
    assert result.exit_code == 3 and result.stdout == ""
    line = one_line(result)
    assert str(file) in line and "not a directory" in line


@pytest.mark.skipif(not Path("/etc").is_dir(), reason="no /etc on this system")
def test_etc_is_refused():
    result = invoke("find-hanging", "--log-dir", "/etc")
    assert result.exit_code == 3 and result.stdout == ""
    assert "/etc: not a Kafka log dir" in one_line(result)


def test_the_parent_of_the_log_dirs_is_refused_naming_them(monkeypatch):
    monkeypatch.chdir(REPO)
    result = invoke("lag", "--log-dir", "fixtures/two-brokers")
    assert result.exit_code == 3 and result.stdout == ""
    line = one_line(result)
    assert "these subfolders look like log dirs" in line
    assert "fixtures/two-brokers/broker-1" in line and "fixtures/two-brokers/broker-2" in line


def test_a_partition_folder_is_refused_naming_its_log_dir(monkeypatch):
    monkeypatch.chdir(REPO)
    result = invoke("find-hanging", "--log-dir", "fixtures/hanging/orders-0")
    assert result.exit_code == 3
    assert "give its log dir, fixtures/hanging" in one_line(result)


def test_one_wrong_dir_among_good_ones_is_still_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    result = invoke("lag", "--log-dir", "fixtures/hanging", "--log-dir", tmp_path, "--format", "json")
    assert result.exit_code == 3 and result.stdout == ""
    assert str(tmp_path) in one_line(result)


def test_a_real_process_names_the_wrong_dir_on_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "find-hanging", "--log-dir", str(tmp_path)],
                          capture_output=True, text=True, check=False, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"kafkatx: {tmp_path}: not a Kafka log dir (no meta.properties, no checkpoint files, "
        "no topic-N partition folders)"]


@pytest.fixture
def silent_broker():
    """A TCP listener that accepts connections and never answers (a hung broker, a wrong port)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_broker_that_never_answers_is_bounded_by_timeout(silent_broker):
    """The probe connects, so only --timeout can end the wait: exit 3, one line naming the broker.
    (subprocess's own timeout only keeps a regression from hanging the suite.)"""
    pytest.importorskip("confluent_kafka")
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "lag", "--bootstrap-server", silent_broker,
                           "--timeout", "2"], capture_output=True, text=True, check=False, timeout=90,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 3 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and silent_broker in lines[0]
