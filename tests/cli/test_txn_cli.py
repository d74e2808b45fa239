"""The analysis commands through the CLI: sources, formats, exit codes, stderr notices, online routing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.rows import HangingRow, LagRow, ProducerRow, Report, TransactionDescription, TransactionRow

ROOT = Path(__file__).resolve().parents[2]
HANGING = ROOT / "fixtures" / "hanging"
EXPECTED = ROOT / "fixtures" / "expected" / "hanging"
needs_fixtures = pytest.mark.skipif(not HANGING.is_dir(), reason="fixtures not built")


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def now() -> str:
    return str(json.loads((EXPECTED / "scenario.json").read_text())["now_ms"])


@pytest.mark.parametrize("command", [["list-txn"], ["lag"], ["find-hanging"], ["verify"], ["describe-txn", "x"],
                                     ["describe-producers", "--topic", "t", "--partition", "0"]])
def test_source_is_required(command, tmp_path):
    result = run(*command)
    assert result.exit_code == 2 and "no source" in result.stderr
    both = run(*command, "--log-dir", str(tmp_path), "--bootstrap-server", "h:1")
    assert both.exit_code == 2 and "not both" in both.stderr


def test_missing_log_dir_is_exit_3(tmp_path):
    result = run("lag", "--log-dir", str(tmp_path / "nope"))
    assert result.exit_code == 3 and "nope" in result.stderr and "Traceback" not in result.output


@needs_fixtures
def test_find_hanging_formats_and_exit(tmp_path):
    expected = json.loads((EXPECTED / "find-hanging.json").read_text())
    jl = run("find-hanging", "--log-dir", str(HANGING), "--now", now(), "--format", "jsonl")
    assert jl.exit_code == 1
    assert [json.loads(line) for line in jl.stdout.splitlines()] == expected
    ym = run("find-hanging", "--log-dir", str(HANGING), "--now", now(), "--format", "yaml")
    assert yaml.safe_load(ym.stdout) == expected
    table = run("find-hanging", "--log-dir", str(HANGING), "--now", now())
    assert table.exit_code == 1 and "incomplete-markers" in table.stdout and "stale-loader" in table.stdout
    # With a max timeout longer than everything's age only the coordinator's own timeouts remain.
    long = run("find-hanging", "--log-dir", str(HANGING), "--now", now(), "--max-transaction-timeout-ms",
               str(10**9), "--format", "json")
    assert {r["kind"] for r in json.loads(long.stdout)} == {"timed-out"}


@needs_fixtures
def test_list_txn_filters_and_describe(tmp_path):
    rows = json.loads(run("list-txn", "--log-dir", str(HANGING), "--state", "Ongoing", "--format", "json").stdout)
    assert rows and {r["state"] for r in rows} == {"Ongoing"}
    assert all("coordinator_partition" in r and "coordinator_id" not in r for r in rows)
    bad = run("list-txn", "--log-dir", str(HANGING), "--state", "Bogus")
    assert bad.exit_code == 2 and "Bogus" in bad.stderr
    bad_re = run("list-txn", "--log-dir", str(HANGING), "--transactional-id-pattern", "(")
    assert bad_re.exit_code == 2

    def ids(*flags: str) -> list[str]:
        out = run("list-txn", "--log-dir", str(HANGING), "--now", "1700007200000", "--format", "json", *flags)
        assert out.exit_code == 0, out.stderr
        return [r["transactional_id"] for r in json.loads(out.stdout)]

    # ListTransactions' filters (TransactionStateManager.listTransactionStates): the pattern matches
    # the whole id (KIP-1152), so "stale" names none; producer ids; running longer than MS (KIP-994):
    # stale-loader started at T0 + 600 s (fixtures/README.md), 6600 s before --now
    assert ids("--transactional-id-pattern", "stale") == []
    assert ids("--transactional-id-pattern", "stale.*") == ["stale-loader"]
    assert ids("--producer-id", "1004", "--producer-id", "1011") == ["report-builder", "stale-loader"]
    assert ids("--state", "Ongoing", "--duration-filter", "6599999") == ["stale-loader"]
    assert ids("--state", "Ongoing", "--duration-filter", "6600000") == []

    unknown = run("describe-txn", "no-such-id", "--log-dir", str(HANGING), "--format", "json")
    # one rule with abort-hanging --transactional-id: exit 3, the known ids named
    assert unknown.exit_code == 3 and json.loads(unknown.stdout) is None and "not found" in unknown.stderr
    assert "known ids: " in unknown.stderr and "inventory-sync" in unknown.stderr
    text = run("describe-txn", "stale-loader", "--log-dir", str(HANGING))
    assert text.exit_code == 0 and "history" in text.stdout and "Ongoing" in text.stdout


@needs_fixtures
def test_real_subprocess_json_is_clean_on_stdout():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "lag", "--log-dir", str(HANGING), "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads((EXPECTED / "lag.json").read_text())


# ----------------------------------------------------------------------------- online routing

class _Backend:
    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def online(monkeypatch):
    from kafkatx.cluster import service

    backend = _Backend()
    calls: list[tuple[str, dict]] = []

    def connect(**kw):
        calls.append(("connect", kw))
        return backend

    def record(name, result):
        def fn(b, *args, **kw):
            assert b is backend
            calls.append((name, {"args": args, **kw}))
            return result
        return fn

    monkeypatch.setattr(service, "connect", connect)
    row = TransactionRow(transactional_id="a", producer_id=1, producer_epoch=0, state="Ongoing", timeout_ms=1,
                         start_timestamp_ms=None, last_update_timestamp_ms=None, partitions=["t-0"],
                         coordinator_id=3)
    monkeypatch.setattr(service, "list_transactions", record("list_transactions", [row]))
    monkeypatch.setattr(service, "describe_transaction", record("describe_transaction", None))
    monkeypatch.setattr(service, "describe_producers", record("describe_producers", [ProducerRow(
        producer_id=1, producer_epoch=0, coordinator_epoch=0, last_sequence=0, last_timestamp_ms=5,
        current_txn_first_offset=None)]))
    monkeypatch.setattr(service, "find_hanging", record("find_hanging", [HangingRow(
        kind="orphaned", topic="t", partition=0, producer_id=1, producer_epoch=0, transactional_id=None,
        coordinator_state=None, first_offset=0, start_ms=1, duration_ms=2)]))
    monkeypatch.setattr(service, "lag", record("lag", [LagRow(
        topic="t", partition=0, log_start_offset=0, lso=0, high_watermark=1, log_end_offset=1, lag=1,
        open_transactions=1, oldest_open_producer_id=1, oldest_open_first_offset=0)]))
    return backend, calls


def test_online_routing(online):
    backend, calls = online
    out = run("list-txn", "--bootstrap-server", "h:9092", "--state", "ongoing", "--format", "json")
    assert out.exit_code == 0
    (row,) = json.loads(out.stdout)
    assert row["coordinator_id"] == 3 and "coordinator_partition" not in row
    assert calls[0] == ("connect", {"bootstrap_server": "h:9092", "command_config": None, "profile": None,
                                    "timeout_s": 30.0})
    assert calls[1][1]["states"] == ["Ongoing"] and backend.closed

    hang = run("find-hanging", "--bootstrap-server", "h:9092", "--now", "1700000000099", "--max-transaction-timeout-ms", "7",
               "--format", "json")
    assert hang.exit_code == 1
    # the online answer's report goes down with the question (what the cluster does not answer is said in it)
    assert calls[-1] == ("find_hanging", {"args": (), "max_timeout_ms": 7, "now_ms": 1700000000099, "topic": None,
                                          "report": Report()})
    # kafka-transactions.sh's --max-transaction-timeout is in minutes (TransactionsCommand: MINUTES.toMillis)
    assert run("find-hanging", "--bootstrap-server", "h:9092", "--now", "1700000000099", "--max-transaction-timeout", "7",
               "--format", "json").exit_code == 1
    assert calls[-1] == ("find_hanging", {"args": (), "max_timeout_ms": 7 * 60_000, "now_ms": 1700000000099,
                                          "topic": None, "report": Report()})

    assert run("lag", "--bootstrap-server", "h:9092", "--topic", "t").exit_code == 0
    # lag's call, then (its partitions held back) the coordinator's open transactions that hold them
    assert ("lag", {"args": (), "topic": "t", "report": Report()}) in calls
    assert calls[-1][0] in ("lag", "list_transactions")
    assert run("describe-producers", "--bootstrap-server", "h:9092", "--topic", "t", "--partition", "0",
               "--format", "json").exit_code == 0
    missing = run("describe-txn", "zzz", "--bootstrap-server", "h:9092")
    assert missing.exit_code == 3 and "zzz" in missing.stderr  # one rule for an unknown id


def test_online_describe_found(online, monkeypatch):
    from kafkatx.cluster import service

    row = TransactionRow(transactional_id="a", producer_id=1, producer_epoch=0, state="Ongoing", timeout_ms=1,
                         start_timestamp_ms=None, last_update_timestamp_ms=None, partitions=[], coordinator_id=3)
    monkeypatch.setattr(service, "describe_transaction", lambda b, tid, report=None: TransactionDescription(transaction=row))
    out = run("describe-txn", "a", "--bootstrap-server", "h:9092", "--format", "json")
    obj = json.loads(out.stdout)
    assert out.exit_code == 0 and obj["transactional_id"] == "a" and obj["history"] == []
    assert obj["partition_status"] == [] and obj["coordinator_id"] == 3


def test_find_hanging_help_names_every_kind():
    out = run("find-hanging", "--help")
    assert out.exit_code == 0
    text = " ".join(out.stdout.split())
    for kind in ("orphaned", "timed-out", "incomplete-markers", "ghost"):
        assert kind in text
    assert "below the log start" in text


def test_online_ghost_through_the_cli(monkeypatch):
    """The real online service against the fake cluster (tests/cluster/fakes.py; Tansu has no
    DescribeProducers): a transaction open at offset 2, log start raised to 6 by retention."""
    from kafkatx.cluster import service
    from tests.cluster.fakes import FakeCluster

    cluster = FakeCluster()
    cluster.add_topic("t", 1)
    cluster.append(("t", 0), 2, producer_id=1, timestamp=0)
    cluster.append(("t", 0), 3, producer_id=42, producer_epoch=5, transactional=True, timestamp=0)
    cluster.append(("t", 0), 4, producer_id=1, timestamp=0)
    cluster.delete_records(("t", 0), 6)
    monkeypatch.setattr(service, "connect", lambda **kw: cluster)

    hang = run("find-hanging", "--bootstrap-server", "h:9092", "--now", "1700000000000", "--format", "json")
    assert hang.exit_code == 1
    assert json.loads(hang.stdout) == [{
        "kind": "ghost", "topic": "t", "partition": 0, "producer_id": 42, "producer_epoch": 5,
        "transactional_id": None, "coordinator_state": None, "first_offset": 2, "start_ms": None,
        "duration_ms": None, "blocked_groups": None, "upload_blocked_bytes": None,
        "remote_copied_offset": None}]  # tiered keys: offline
    producers = run("describe-producers", "--bootstrap-server", "h:9092", "--topic", "t", "--partition", "0",
                    "--format", "json")
    assert [(r["producer_id"], r["ghost"]) for r in json.loads(producers.stdout)] == [(1, False), (42, True)]
    lag = run("lag", "--bootstrap-server", "h:9092", "--format", "json")
    (row,) = json.loads(lag.stdout)
    # log end 9, LSO clamped to the log start 6
    assert (row["log_start_offset"], row["lso"], row["high_watermark"], row["lag"], row["held_by_ghost"]) == (
        6, 6, 9, 3, True)


@pytest.mark.parametrize(("command", "message"), [("find-hanging", "no hanging transactions"),
                                                  ("verify", "no problems found")])
def test_nothing_found_in_a_table_is_said_on_stderr_not_drawn(command, message):
    """An empty table is noise to a human: stdout stays empty, one line on stderr says why;
    machine formats still print their empty list."""
    args = [command, "--log-dir", str(ROOT / "fixtures" / "clean")] + (["--now", now()] if command == "find-hanging" else [])
    table = run(*args)
    assert table.exit_code == 0 and table.stdout == "" and table.stderr.strip() == f"kafkatx: {message}"
    as_json = run(*args, "--format", "json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_describe_unknown_id_is_exit_3_and_a_null_document(fmt):
    result = run("describe-txn", "no-such-id", "--log-dir", str(HANGING), "--format", fmt)
    assert result.exit_code == 3  # one rule with abort-hanging --transactional-id
    loaded = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    assert loaded is None and "no-such-id" in result.stderr


@needs_fixtures
@pytest.mark.parametrize("command", [["list-txn"], ["lag"], ["find-hanging"], ["verify"], ["describe-txn", "x"],
                                     ["describe-producers", "--topic", "orders", "--partition", "0"], ["timeline"]])
def test_broker_config_is_offline_and_checked_up_front(command, tmp_path):
    bad = tmp_path / "server.properties"
    bad.write_text("producer.id.expiration.ms=soon\n")
    result = run(*command, "--log-dir", str(HANGING), "--broker-config", str(bad))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert str(bad) in result.stderr and "is not an integer" in result.stderr
    online = run(*command, "--broker-config", str(bad), "--bootstrap-server", "h:1")
    assert online.exit_code == 2 and "not both" in online.stderr


@needs_fixtures
def test_broker_config_settings_are_named_with_their_source(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"log.dirs={HANGING}\ntransaction.max.timeout.ms=60000\n")
    result = run("find-hanging", "--broker-config", str(cfg), "--now", now(), "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    assert f"transaction.max.timeout.ms=60000 ({cfg})" in result.stderr
    assert "transaction.state.log.num.partitions=50 (Kafka's default;" in result.stderr
    flag = run("find-hanging", "--broker-config", str(cfg), "--now", now(), "--max-transaction-timeout", "0",
               "--txn-state-partitions", "3", "--format", "json")
    assert "transaction.max.timeout.ms=0 (flag --max-transaction-timeout)" in flag.stderr
    assert "transaction.state.log.num.partitions=3 (flag --txn-state-partitions)" in flag.stderr
    # without --broker-config nothing changes: no settings note
    plain = run("find-hanging", "--log-dir", str(HANGING), "--now", now(), "--format", "json")
    assert "broker settings" not in plain.stderr
