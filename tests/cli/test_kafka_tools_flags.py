"""kafka-transactions.sh's forms work on kafkatx's commands, with Kafka's meaning.

Kafka's ``TransactionsCommand`` (tools/src/main/java/org/apache/kafka/tools/TransactionsCommand.java):
``describe --transactional-id``; ``describe-producers --broker-id --topic --partition``; ``find-hanging
--broker-id --topic --partition --max-transaction-timeout`` (MINUTES, default 15; ``--partition`` requires
``--topic``); ``abort --topic --partition --start-offset`` (the active producer whose
``currentTransactionStartOffset`` equals the offset). Expected rows are reasoned from fixtures/README.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from kafkatx.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
HANGING = ROOT / "fixtures" / "hanging"
TWO = ROOT / "fixtures" / "two-brokers"
NOW = "1700007200000"
needs_fixtures = pytest.mark.skipif(not HANGING.is_dir(), reason="fixtures not built")


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def rows(result) -> list[tuple[str, str, int, int]]:
    return sorted((r["kind"], r["topic"], r["partition"], r["producer_id"]) for r in json.loads(result.stdout))


@needs_fixtures
def test_max_transaction_timeout_is_minutes_as_kafka():
    src = ["--log-dir", str(HANGING), "--now", NOW, "--format", "json"]
    # 101 minutes: of the transactions only the producer's last write decides (fixtures/README.md), just
    # inventory-sync's (1005, first write 1700000900000: 105 min before --now) is older; audit-trail (1006,
    # 100 min), 1007 (95 min), the incomplete-markers ones (90, 85 min) and offsets-writer (80 min) are not.
    # stale-loader (1004) is timed-out by the coordinator's own 60 s timeout, whatever the threshold.
    minutes = run("find-hanging", *src, "--max-transaction-timeout", "101")
    assert minutes.exit_code == 1, minutes.stderr
    assert rows(minutes) == [("orphaned", "orders", 1, 1005), ("timed-out", "orders", 0, 1004),
                             ("timed-out", "payments", 1, 1004)]
    same = run("find-hanging", *src, "--max-transaction-timeout-ms", str(101 * 60_000))
    assert rows(same) == rows(minutes)
    # The default is Kafka's 15 minutes either way.
    assert rows(run("find-hanging", *src)) == rows(run("find-hanging", *src, "--max-transaction-timeout", "15")) \
        == rows(run("find-hanging", *src, "--max-transaction-timeout-ms", "900000"))
    both = run("find-hanging", *src, "--max-transaction-timeout", "15", "--max-transaction-timeout-ms", "900000")
    assert both.exit_code == 2 and "not both" in both.stderr


@needs_fixtures
def test_find_hanging_topic_partition_and_partition_needs_topic():
    src = ["--log-dir", str(HANGING), "--now", NOW, "--format", "json"]
    one = run("find-hanging", *src, "--topic", "orders", "--partition", "1")
    # orders-1: inventory-sync (1005) and audit-trail (1006), both orphaned (fixtures/README.md)
    assert rows(one) == [("orphaned", "orders", 1, 1005), ("orphaned", "orders", 1, 1006)]
    alone = run("find-hanging", *src, "--partition", "1")
    assert alone.exit_code == 2 and "--partition needs --topic" in alone.stderr


@needs_fixtures
def test_find_hanging_broker_id_searches_that_brokers_replicas():
    src = ["--log-dir", str(TWO / "broker-1"), "--log-dir", str(TWO / "broker-2"), "--now", NOW, "--format", "json"]
    every = rows(run("find-hanging", *src))
    # tb-stuck (4003) is timed-out on orders-1 and payments-0; broker 1 (meta.properties node.id=1) holds
    # orders-0 and payments-0, broker 2 holds orders-0, orders-1 and payments-0.
    assert every == [("timed-out", "orders", 1, 4003), ("timed-out", "payments", 0, 4003)]
    assert rows(run("find-hanging", *src, "--broker-id", "1")) == [("timed-out", "payments", 0, 4003)]
    assert rows(run("find-hanging", *src, "--broker-id", "2")) == every
    none = run("find-hanging", *src, "--broker-id", "3")
    assert none.exit_code == 2 and "broker-1 is broker 1" in none.stderr and "broker-2 is broker 2" in none.stderr
    online = run("find-hanging", "--bootstrap-server", "h:9092", "--broker-id", "1")
    assert online.exit_code == 2 and "--broker-id" in online.stderr


@needs_fixtures
def test_describe_producers_broker_id_reads_that_replica():
    src = ["--log-dir", str(TWO / "broker-1"), "--log-dir", str(TWO / "broker-2"), "--now", NOW, "--format", "json",
           "--topic", "payments", "--partition", "0"]
    # payments-0 (fixtures/README.md): led by broker 2; broker 1 holds a follower copy with the same bytes but
    # fewer batches, so on broker 1's replica idempotent producer 800 has written fewer sequences. tb-stuck's
    # open transaction (4003) starts at offset 42 in both copies. Without --broker-id: the longest copy.
    def producers(*extra: str) -> dict[int, dict]:
        result = run("describe-producers", *src, *extra)
        assert result.exit_code == 0, result.stderr
        return {r["producer_id"]: r for r in json.loads(result.stdout)}

    default, one, two = producers(), producers("--broker-id", "1"), producers("--broker-id", "2")
    assert two == default
    assert one[800]["last_sequence"] < default[800]["last_sequence"]
    assert one[4003]["current_txn_first_offset"] == default[4003]["current_txn_first_offset"] == 42
    online = run("describe-producers", "--bootstrap-server", "h:9092", "--topic", "t", "--partition", "0",
                 "--broker-id", "1")
    assert online.exit_code == 2 and "--broker-id" in online.stderr


@needs_fixtures
def test_describe_txn_transactional_id_option():
    src = ["--log-dir", str(HANGING), "--now", NOW, "--format", "json"]
    positional = run("describe-txn", "stale-loader", *src)
    option = run("describe-txn", "--transactional-id", "stale-loader", *src)
    assert option.exit_code == positional.exit_code == 0
    assert json.loads(option.stdout) == json.loads(positional.stdout)
    assert json.loads(option.stdout)["producer_id"] == 1004
    for bad in ([], ["stale-loader", "--transactional-id", "stale-loader"]):
        refused = run("describe-txn", *bad, *src)
        assert refused.exit_code == 2 and "transactional id once" in refused.stderr


@needs_fixtures
def test_abort_start_offset_selects_the_transaction_starting_there():
    src = ["--log-dir", str(HANGING), "--now", NOW, "--format", "json"]
    # orders-1: inventory-sync's (1005) open transaction spans offsets 147..149 (fixtures/README.md)
    by_offset = run("abort-hanging", *src, "--topic", "orders", "--partition", "1", "--start-offset", "147")
    by_pid = run("abort-hanging", *src, "--topic", "orders", "--partition", "1", "--producer-id", "1005")
    assert by_offset.exit_code == by_pid.exit_code == 1
    assert json.loads(by_offset.stdout) == json.loads(by_pid.stdout)
    assert [r["producer_id"] for r in json.loads(by_offset.stdout)] == [1005]
    missing = run("abort-hanging", *src, "--topic", "orders", "--partition", "1", "--start-offset", "148")
    assert missing.exit_code == 2 and "no open transaction starts at offset 148 on orders-1" in missing.stderr
    no_partition = run("abort-hanging", *src, "--topic", "orders", "--start-offset", "147")
    assert no_partition.exit_code == 2 and "--start-offset needs --topic and --partition" in no_partition.stderr
    other = run("abort-hanging", *src, "--topic", "orders", "--partition", "1", "--start-offset", "147",
                "--producer-id", "1006")
    assert other.exit_code == 2 and "producer 1005" in other.stderr


# ------------------------------------------------------------------ the mapping table in docs/cli.md

# Every flag of kafka-transactions.sh's subcommands (TransactionsCommand.java's addSubparser methods) and
# of its top level (bootstrap/command config), as of Kafka 4.x: list --duration-filter (KIP-994, 3.8),
# --transactional-id-pattern (KIP-1152, 4.1), forceTerminateTransaction --transactionalId (KIP-939).
KAFKA_TRANSACTIONS_FLAGS = {
    "(all)": ["--bootstrap-server", "--command-config"],
    "list": ["--duration-filter", "--transactional-id-pattern"],
    "forceTerminateTransaction": ["--transactionalId"],
    "describe": ["--transactional-id"],
    "describe-producers": ["--broker-id", "--topic", "--partition"],
    "find-hanging": ["--broker-id", "--max-transaction-timeout", "--topic", "--partition"],
    "abort": ["--topic", "--partition", "--start-offset", "--producer-id", "--producer-epoch",
              "--coordinator-epoch"],
}
CLI_MD = ROOT / "docs" / "cli.md"


def _table() -> list[tuple[str, str, str, str]]:
    """(kafka-transactions.sh subcommand, its flag, kafkatx command, kafkatx flag or '-') from cli.md."""
    text = CLI_MD.read_text()
    section = text.split("### kafka-transactions.sh", 1)[1].split("\n### ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`kafka-transactions.sh"):
            continue
        theirs = re.fullmatch(r"`kafka-transactions\.sh (\S+)(?: (--[A-Za-z-]+))?[^`]*`", cells[0])
        ours = re.fullmatch(r"`kafkatx (\S+)(?: (--[a-z-]+))?[^`]*`", cells[1])
        assert theirs, line
        out.append((theirs.group(1), theirs.group(2) or "", ours.group(1) if ours else "-",
                    (ours.group(2) or "") if ours else "-"))
    return out


def test_cli_md_maps_every_kafka_transactions_flag():
    table = _table()
    mapped = {(sub, flag) for sub, flag, _, _ in table}
    for sub, flags in KAFKA_TRANSACTIONS_FLAGS.items():
        assert (sub, "") in mapped or flags, f"cli.md does not map kafka-transactions.sh {sub}"
        for flag in flags:
            assert (sub, flag) in mapped, f"cli.md does not map kafka-transactions.sh {sub} {flag}"


def test_every_mapped_kafkatx_flag_exists():
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for sub, flag, ours, our_flag in _table():
        if ours == "-":
            continue
        assert ours in commands, f"{sub}: cli.md maps it to kafkatx {ours}, which does not exist"
        if our_flag:
            opts = {o for p in commands[ours].params for o in (*getattr(p, "opts", ()),
                                                               *getattr(p, "secondary_opts", ()))}
            assert our_flag in opts, f"kafka-transactions.sh {sub} {flag}: kafkatx {ours} has no {our_flag}"
