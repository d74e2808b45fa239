"""The online commands themselves, through the CLI, against a real Kafka-protocol broker (Tansu).

test_online.py calls ``kafkatx.cluster.service`` directly; here the same scenarios go through
``kafkatx.cli.main.app`` (typer's CliRunner) and, for the parts where a real process matters
(exit status, stderr, environment), through ``python -m kafkatx``. Expected values always come
from the broker itself (confluent-kafka's ListOffsets), never from kafkatx's own output.

Tansu departs from Apache Kafka; the departures (T1..T6) are listed in test_online.py and each
test here names the ones it steps around. Every command gets an explicit ``--timeout`` so a
wedged broker fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from tests.cluster.test_online import TIMEOUT_S, broker_offsets, committed_and_open, produce_one_by_one

__all__ = ["committed_and_open"]  # a fixture imported from test_online.py, used by name below

pytestmark = pytest.mark.online

ROOT = Path(__file__).resolve().parents[2]
LAG_KEYS = {"topic", "partition", "log_start_offset", "lso", "high_watermark", "log_end_offset", "lag",
            "open_transactions", "oldest_open_producer_id", "oldest_open_first_offset", "held_by_ghost",
            # offline only (null online): the local log start and the tiered storage keys (KIP-405)
            "local_log_start_offset", "remote_storage", "remote_segments", "remote_copied_offset",
            "upload_blocked_bytes"}
TIMEOUT = str(int(TIMEOUT_S))


def cli(*args: str, env: dict[str, str] | None = None):
    """One in-process CLI run; stdout and stderr kept apart (``result.stdout`` / ``result.stderr``)."""
    return CliRunner().invoke(app, list(args), env=env)


def kafkatx_process(*args: str, env: dict[str, str] | None = None,
                    timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """A real ``python -m kafkatx`` process (the package is not installed: PYTHONPATH points at it)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "kafkatx", *args], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=timeout, check=False)


def one_line(stderr: str) -> str:
    """stderr must be exactly one line (the app's error line), with no Python traceback."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def assert_lag_matches_broker(rows: list[dict], bootstrap: str, topic: str) -> None:
    """lag's JSON rows equal the broker's own ListOffsets answers, asked afterwards."""
    expected = broker_offsets(bootstrap, topic)
    assert len(rows) == 1
    (row,) = rows
    assert set(row) == LAG_KEYS
    assert (row["topic"], row["partition"]) == (topic, 0)
    assert row["log_start_offset"] == expected["earliest"] == 0
    # 3 committed records + their COMMIT marker + 2 open records (one record a batch: T1)
    assert row["high_watermark"] == expected["hw"] == 6
    assert row["log_end_offset"] == row["high_watermark"]
    assert row["lso"] == expected["lso"]
    assert row["lso"] <= 4 < row["high_watermark"]
    assert row["lag"] == row["high_watermark"] - row["lso"]
    # no DescribeProducers on Tansu (T5): unknown, not invented
    assert row["open_transactions"] is None and row["oldest_open_producer_id"] is None
    # without DescribeProducers held_by_ghost is unknown too
    assert row["held_by_ghost"] is None


# ----------------------------------------------------------------------------- lag

def test_lag_json_equals_the_brokers_list_offsets(tansu, committed_and_open):
    """``kafkatx lag --bootstrap-server --format json`` with one committed and one open transaction:
    high watermark = ListOffsets latest (read_uncommitted), lso = ListOffsets latest read_committed.
    Departure T2: Tansu answers 0 for read_committed while the transaction is open, where Kafka
    answers 4 (the open transaction's first offset); kafkatx reports what the broker says, so the
    test asserts equality with the broker plus what both brokers agree on (lso <= 4 < hw)."""
    topic, _, _ = committed_and_open
    result = cli("lag", "--bootstrap-server", tansu.bootstrap_server, "--topic", topic, "--format", "json",
                 "--timeout", TIMEOUT)
    assert result.exit_code == 0, result.stderr
    assert_lag_matches_broker(json.loads(result.stdout), tansu.bootstrap_server, topic)


def test_lag_in_a_real_process(tansu, committed_and_open):
    """The same through ``python -m kafkatx``: stdout is pure JSON (jq-able); stderr holds only the answer's
    report: Tansu has no DescribeProducers (KIP-664), so the open-transaction columns are null and a note says
    why (the answer is still whole: exit 0)."""
    topic, _, _ = committed_and_open
    proc = kafkatx_process("lag", "--bootstrap-server", tansu.bootstrap_server, "--topic", topic,
                           "--format", "json", "--timeout", TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("kafkatx: note: broker ") and proc.stderr.count("kafkatx:") == 1
    assert "has no DescribeProducers, which needs Kafka 3.0 (KIP-664)" in " ".join(proc.stderr.split())
    assert_lag_matches_broker(json.loads(proc.stdout), tansu.bootstrap_server, topic)


def test_lag_table_names_the_topic(tansu, committed_and_open):
    topic, _, _ = committed_and_open
    result = cli("lag", "--bootstrap-server", tansu.bootstrap_server, "--topic", topic, "--timeout", TIMEOUT)
    assert result.exit_code == 0, result.stderr
    # the human table: one partition a line as topic-N, short headers (JSON keys are for --format json)
    assert f"{topic}-0" in result.stdout and result.stdout.split()[:4] == ["partition", "start", "LSO", "HW"]


def test_lag_unknown_topic_is_one_line_exit_3(tansu):
    """Departure T6: the lookup must not create the topic, so a second run fails the same way."""
    missing = f"does-not-exist-{time.monotonic_ns()}"
    for _ in range(2):
        result = cli("lag", "--bootstrap-server", tansu.bootstrap_server, "--topic", missing,
                     "--timeout", TIMEOUT)
        assert result.exit_code == 3
        line = one_line(result.stderr)
        assert tansu.bootstrap_server in line and missing in line
        assert result.stdout == ""


# ----------------------------------------------------------------------------- abort-hanging

def test_abort_hanging_plan_then_execute_fences_the_open_transaction(tansu, committed_and_open,
                                                                   transactional_producer):
    """``abort-hanging --transactional-id ID``: the plan exits 1 and changes nothing (log end the
    same); ``--execute`` fences through InitProducerId (the coordinator aborts the open
    transaction: the log end moves by one ABORT marker, read_committed end offset reaches the
    high watermark) and exits 0; a new producer with the id then commits again.
    Departure T3: the fenced producer is never asked to commit. Departure T5: no
    DescribeTransactions, so the fence is planned blind (coordinator_state null)."""
    topic, open_id, _old = committed_and_open
    before = broker_offsets(tansu.bootstrap_server, topic)
    assert before["hw"] == 6 and before["lso"] < before["hw"]

    plan = cli("abort-hanging", "--bootstrap-server", tansu.bootstrap_server, "--transactional-id", open_id,
               "--format", "json", "--timeout", TIMEOUT)
    assert plan.exit_code == 1, plan.stderr
    planned = json.loads(plan.stdout)
    assert [(r["action"], r["transactional_id"], r["result"]) for r in planned] == [
        ("fence-epoch", open_id, None)]
    assert planned[0]["coordinator_state"] is None
    # blind: the plan says the timeout the fence will leave the id with (the producer default)
    assert planned[0]["transaction_timeout_ms"] == 60_000
    assert broker_offsets(tansu.bootstrap_server, topic) == before  # a plan changes nothing

    done = cli("abort-hanging", "--bootstrap-server", tansu.bootstrap_server, "--transactional-id", open_id,
               "--execute", "--format", "json", "--timeout", TIMEOUT)
    assert done.exit_code == 0, done.stderr
    assert [(r["action"], r["transactional_id"], r["result"]) for r in json.loads(done.stdout)] == [
        ("fence-epoch", open_id, "ok")]
    after = broker_offsets(tansu.bootstrap_server, topic)
    assert after["hw"] == before["hw"] + 1  # the ABORT marker
    assert after["lso"] == after["hw"]

    fresh = transactional_producer(open_id)
    fresh.init_transactions(TIMEOUT_S)
    fresh.begin_transaction()
    produce_one_by_one(fresh, topic, [b"n0"])
    fresh.commit_transaction(TIMEOUT_S)
    final = broker_offsets(tansu.bootstrap_server, topic)
    assert final["hw"] == after["hw"] + 2  # one record + its COMMIT marker
    assert final["lso"] == final["hw"]


def test_abort_hanging_needs_a_selection_online(tansu):
    result = cli("abort-hanging", "--bootstrap-server", tansu.bootstrap_server, "--timeout", TIMEOUT)
    assert result.exit_code == 2
    assert "nothing selected" in one_line(result.stderr)


# ----------------------------------------------------------------------------- KIP-664 APIs Tansu lacks

@pytest.mark.parametrize(("command", "api"), [
    (["find-hanging"], "DescribeProducers"),
    (["list-txn"], "ListTransactions"),
], ids=["find-hanging", "list-txn"])
def test_missing_kip664_api_is_one_line_exit_3(tansu, command, api):
    """Departure T5, through a real process: one stderr line naming the broker, the API Tansu
    lacks and the Kafka release that added it (3.0, KIP-664); exit 3, no traceback, no stdout.
    find-hanging needs a partition to ask about, so a topic is created first."""
    tansu.new_topic()
    proc = kafkatx_process(*command, "--bootstrap-server", tansu.bootstrap_server, "--timeout", TIMEOUT)
    assert proc.returncode == 3, proc.stderr
    line = one_line(proc.stderr)
    assert tansu.bootstrap_server in line
    assert api in line
    assert "Kafka 3.0" in line
    assert proc.stdout == ""


# ----------------------------------------------------------------------------- unreachable broker

def test_unreachable_broker_is_one_line_exit_3_within_the_timeout(closed_port):
    timeout_s = 2.0
    started = time.monotonic()
    proc = kafkatx_process("lag", "--bootstrap-server", closed_port, "--timeout", str(timeout_s))
    elapsed = time.monotonic() - started
    assert proc.returncode == 3
    line = one_line(proc.stderr)
    assert closed_port in line
    # the interpreter and confluent-kafka take a few seconds to start; the wait itself is bounded
    assert elapsed < timeout_s + 10.0
    assert proc.stdout == ""


def test_unreachable_broker_in_process_respects_the_timeout(closed_port):
    started = time.monotonic()
    result = cli("list-txn", "--bootstrap-server", closed_port, "--timeout", "2")
    assert time.monotonic() - started < 2.0 + 3.0
    assert result.exit_code == 3
    assert closed_port in one_line(result.stderr)


# ----------------------------------------------------------------------------- --command-config / --profile

def test_command_config_with_plaintext_properties(tansu, committed_and_open, tmp_path):
    """A Java-style client properties file (PLAINTEXT, the only listener Tansu has here)."""
    topic, _, _ = committed_and_open
    props = tmp_path / "client.properties"
    props.write_text("# on-call laptop\nsecurity.protocol=PLAINTEXT\nclient.id=kafkatx-test\n")
    result = cli("lag", "--bootstrap-server", tansu.bootstrap_server, "--command-config", str(props),
                 "--topic", topic, "--format", "json", "--timeout", TIMEOUT)
    assert result.exit_code == 0, result.stderr
    assert_lag_matches_broker(json.loads(result.stdout), tansu.bootstrap_server, topic)


def test_profile_from_xdg_config_home(tansu, committed_and_open, tmp_path):
    """``--profile NAME`` alone: the bootstrap server and properties come from
    $XDG_CONFIG_HOME/kafkatx/profiles.yaml (a real process, so the environment is the real one)."""
    topic, _, _ = committed_and_open
    xdg = tmp_path / "xdg"
    (xdg / "kafkatx").mkdir(parents=True)
    (xdg / "kafkatx" / "profiles.yaml").write_text(
        "profiles:\n"
        "  tansu:\n"
        f"    bootstrap_server: {tansu.bootstrap_server}\n"
        "    properties:\n"
        "      security.protocol: PLAINTEXT\n"
    )
    proc = kafkatx_process("lag", "--profile", "tansu", "--topic", topic, "--format", "json",
                           "--timeout", TIMEOUT, env={"XDG_CONFIG_HOME": str(xdg)})
    assert proc.returncode == 0, proc.stderr
    assert_lag_matches_broker(json.loads(proc.stdout), tansu.bootstrap_server, topic)

    unknown = kafkatx_process("lag", "--profile", "nope", "--timeout", TIMEOUT, env={"XDG_CONFIG_HOME": str(xdg)})
    assert unknown.returncode == 2
    line = one_line(unknown.stderr)
    assert "nope" in line and "tansu" in line
