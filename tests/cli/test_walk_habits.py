"""Kafka habits and small things a tired operator trips over (fixtures/hanging, README clock)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kafkatx.cli.main import app

HANGING = Path(__file__).resolve().parents[2] / "fixtures" / "hanging"
NOW = "1700007200000"  # fixtures/expected/hanging/scenario.json


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})


def test_kafka_transactions_subcommand_names_get_their_kafkatx_names() -> None:
    result = run("abort", "--all")
    assert result.exit_code == 2 and "Did you mean 'abort-hanging'?" in result.stderr
    assert "Did you mean 'list-txn'?" in run("list").stderr


def test_lag_topic_is_repeatable_and_one_topic_commands_refuse_a_second() -> None:
    both = run("lag", "--log-dir", str(HANGING), "--topic", "orders", "--topic", "payments", "--now", NOW,
               "--format", "json")
    assert both.exit_code == 0
    assert {r["topic"] for r in json.loads(both.stdout)} == {"orders", "payments"}
    for command in (["find-hanging"], ["abort-hanging"], ["timeline"]):
        result = run(*command, "--log-dir", str(HANGING), "--topic", "orders", "--topic", "payments", "--now", NOW)
        assert result.exit_code == 2 and "--topic given 2 times" in result.stderr, command


def test_an_unknown_id_is_one_rule_across_describe_txn_and_abort_hanging() -> None:
    described = run("describe-txn", "nosuch", "--log-dir", str(HANGING), "--now", NOW)
    aborted = run("abort-hanging", "--transactional-id", "nosuch", "--log-dir", str(HANGING), "--now", NOW)
    assert described.exit_code == aborted.exit_code == 3
    for result in (described, aborted):
        assert "known ids: " in result.stderr and "inventory-sync" in result.stderr


def test_lag_exits_0_with_partitions_held_back_as_documented() -> None:
    result = run("lag", "--log-dir", str(HANGING), "--now", NOW, "--format", "json")
    assert result.exit_code == 0 and any(r["lag"] for r in json.loads(result.stdout))
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert "Exit 0 with the rows, held-back partitions included" in " ".join(doc.split())


def test_the_timeline_legend_names_every_mark() -> None:
    result = run("timeline", "--log-dir", str(HANGING), "--now", NOW)
    legend = [line for line in result.stdout.splitlines() if line.startswith("legend")][0]
    drawn = "".join(line for line in result.stdout.splitlines() if line.startswith("  ") and "━" in line)
    assert "│" in drawn and "│" in legend


def test_execute_says_the_undo_command_once(tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "hanging"
    shutil.copytree(HANGING, d)
    result = run("abort-hanging", "--all", "--execute", "--log-dir", str(d), "--now", NOW,
                 "--journal", str(tmp_path / "r.journal"))
    assert result.exit_code == 0, result.output
    assert result.output.count("kafkatx undo") == 1


def test_verify_takes_now_and_severity() -> None:
    result = run("verify", "--log-dir", str(HANGING), "--now", NOW, "--severity", "error")
    assert result.exit_code in (0, 1) and "No such option" not in result.stderr
