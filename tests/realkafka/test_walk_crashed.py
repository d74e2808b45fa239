"""The 3 a.m. walk on the real crashed dir: one transaction counted once, no dead end within the timeout.

tx-hang-F (README: producer 6, ``transaction.timeout.ms=900000``) is ``Ongoing`` on five partitions
(describe_transactions.json's ``topic_partitions``), opened seconds before the recorded clock. At the
recorded clock it is within its timeout (``TransactionStateManager.timedOutTransactions``: start +
timeout < now is false), so it holds every data partition's LSO back without hanging; an hour later it
has timed out: one hanging transaction (one producer id and epoch, ``TransactionMetadata``) on five
partitions.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatx.cli.main import app

HOUR = 3_600_000
NAME = "3.8.0/crashed"


def _run(*args: str, columns: str | None = "80"):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": columns} if columns else {"COLUMNS": ""})


def _clock(real_kafka) -> int:
    return real_kafka.answer_json(NAME, "list_offsets")["recorded_at_ms"]


def _flat(text: str) -> str:
    return " ".join(text.split()).replace(" \\ ", " ")


def test_one_transaction_on_five_partitions_is_counted_once(real_kafka) -> None:
    d, now = real_kafka.extract(NAME), _clock(real_kafka) + HOUR
    hung = real_kafka.answer_json(NAME, "describe_transactions")["tx-hang-F"]
    n = len(hung["topic_partitions"])
    found = _run("find-hanging", "--log-dir", str(d), "--now", str(now))
    assert found.exit_code == 1
    assert f"1 hanging transaction holds back the LSO of {n} partitions." in _flat(found.stdout)
    assert "or every one of them at once" not in found.stdout  # one transaction: no --all alternative
    plan = _run("abort-hanging", "--all", "--log-dir", str(d), "--now", str(now))
    text = _flat(plan.stdout)
    assert f"Plan: 1 hanging transaction on {n} partitions to finish" in text
    # the plan's count is of the files it lists
    listed = [line for line in plan.stdout.splitlines() if line.split(" ", 1)[0] in
              ("append", "create", "replace", "move")]
    assert f"({len(listed)} files to change)" in text and f"plan: {len(listed)} files to change" in text
    # a log-dir file is named as the log dir knows it, not with the log dir's own name in front
    assert any(line.split()[-1] == "replication-offset-checkpoint" for line in listed)
    timeline = _run("timeline", "--log-dir", str(d), "--now", str(now))
    assert f"1 hanging transaction on {n} partitions" in timeline.stdout


def test_lag_within_the_timeout_names_the_holder_and_the_next_command(real_kafka) -> None:
    d, now = real_kafka.extract(NAME), _clock(real_kafka)
    hung = real_kafka.answer_json(NAME, "describe_transactions")["tx-hang-F"]
    result = _run("lag", "--log-dir", str(d), "--now", str(now))
    assert result.exit_code == 0
    text = _flat(result.stdout)
    held = [line for line in result.stdout.splitlines() if line.split(" ", 1)[0] in hung["topic_partitions"]]
    assert len(held) == len(hung["topic_partitions"]) and all("tx-hang-F" in line for line in held)
    assert "within its 15m timeout" in text and "not hanging" in text
    assert f"kafkatx describe-txn --log-dir {d} --transactional-id tx-hang-F --now {now}" in text
    assert f"kafkatx abort-hanging --log-dir {d} --transactional-id tx-hang-F --force --now {now}" in text
    assert "kafkatx find-hanging" not in text  # it would answer "no hanging transactions": a dead end
    # the command it names shows the transaction, and find-hanging indeed lists nothing yet
    assert _run("describe-txn", "--transactional-id", "tx-hang-F", "--log-dir", str(d), "--now", str(now)) \
        .exit_code == 0
    assert _run("find-hanging", "--log-dir", str(d), "--now", str(now)).exit_code == 0


def test_max_transaction_timeout_does_not_move_a_coordinator_timeout(real_kafka) -> None:
    """The help's rule: an Ongoing transaction is timed-out by its own timeout, whatever the flag says."""
    d, rec = real_kafka.extract(NAME), _clock(real_kafka)
    zero = _run("find-hanging", "--log-dir", str(d), "--now", str(rec), "--max-transaction-timeout", "0",
                "--format", "json")
    assert json.loads(zero.stdout) == []
    late = _run("find-hanging", "--log-dir", str(d), "--now", str(rec + HOUR), "--max-transaction-timeout", "120",
                "--format", "json")
    assert {r["kind"] for r in json.loads(late.stdout)} == {"timed-out"}
    help_text = _flat(_run("find-hanging", "--help", columns="200").stdout)
    assert "last write to the partition" in help_text and "by its own timeout only" in help_text


def test_abort_within_the_timeout_says_why_and_force_aborts_it(real_kafka) -> None:
    d, now = real_kafka.extract(NAME), _clock(real_kafka)
    sel = ["--topic", "orders", "--partition", "0", "--start-offset", "248", "--log-dir", str(d), "--now", str(now)]
    result = _run("abort-hanging", *sel)
    assert result.exit_code == 0
    text = _flat(result.stdout)
    assert "within their timeout" in text and "tx-hang-F (producer 6)" in text
    assert "--force" in text
    forced = _run("abort-hanging", *sel, "--force", "--format", "json")
    assert forced.exit_code == 1
    rows = json.loads(forced.stdout)
    assert {(r["kind"], r["transactional_id"]) for r in rows} == {("timed-out", "tx-hang-F")}


def test_verify_groups_startup_notes_once_and_can_hide_them(real_kafka) -> None:
    d = real_kafka.extract(NAME)
    full = _run("verify", "--log-dir", str(d), "--now", str(_clock(real_kafka)))
    assert full.exit_code == 0
    rows = [line for line in full.stdout.splitlines() if line.startswith("info")]
    checks = json.loads(_run("verify", "--log-dir", str(d), "--format", "json").stdout)
    kinds = {r["check"] for r in checks}
    assert len(rows) == len(kinds)  # one row per kind: no file row listed again under its group
    assert all(len(line) <= 80 and "~" not in line for line in rows)
    assert full.stdout.rstrip().splitlines()[-1].startswith("truncates") or "No problem found" in full.stdout
    hidden = _run("verify", "--log-dir", str(d), "--severity", "warning")
    assert hidden.exit_code == 0 and "info" not in hidden.stdout
    assert f"{len(checks)} startup notes not shown" in hidden.stderr


def test_piped_views_fit_80_columns_without_columns(real_kafka) -> None:
    d, now = real_kafka.extract(NAME), _clock(real_kafka) + HOUR
    for args in (["describe-txn", "tx-hang-F"], ["find-hanging"]):
        result = CliRunner().invoke(app, [*args, "--log-dir", str(d), "--now", str(now)], env={"COLUMNS": None})
        # a command to paste breaks only between its words (a long temp path may pass 80 by itself)
        assert max(len(line) for line in result.stdout.splitlines() if not line.startswith("  ")) <= 80, args


def test_abort_hanging_crashed_plan_notes_have_no_nested_parentheses(real_kafka) -> None:
    d, now = real_kafka.extract(NAME), _clock(real_kafka) + HOUR
    result = _run("abort-hanging", "--all", "--log-dir", str(d), "--now", str(now))
    [note] = [line for line in result.stderr.splitlines() if "aborted as Kafka" in line]
    depth = deepest = 0
    for ch in note:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        deepest = max(deepest, depth)
    assert deepest <= 1 and depth == 0, note


def test_retention_lag_and_find_hanging_tell_the_same_story(real_kafka) -> None:
    """tx-ghost began below the log start (retention deleted offset 5) but the coordinator still has it
    Ongoing on rt-0 and rt-1: find-hanging calls it timed-out (the coordinator aborts it on timeout,
    TransactionStateManager.timedOutTransactions), so lag does not call it a ghost either."""
    name = "3.8.0/startup/retention"
    d = real_kafka.extract(name)
    now = int((real_kafka.answers(name) / "recorded_ms.txt").read_text().strip()) + HOUR
    hanging = json.loads(_run("find-hanging", "--log-dir", str(d), "--now", str(now), "--format", "json").stdout)
    ghostly = {(r["topic"], r["partition"]) for r in hanging if r["kind"] == "ghost"}
    lag = json.loads(_run("lag", "--log-dir", str(d), "--now", str(now), "--format", "json").stdout)
    assert {(r["topic"], r["partition"]) for r in lag if r["held_by_ghost"]} == ghostly
    assert {r["kind"] for r in hanging if r["transactional_id"] == "tx-ghost"} == {"timed-out"}
    human = _run("lag", "--log-dir", str(d), "--now", str(now))
    assert "GHOST" not in human.stdout and "ghost transaction" not in human.stdout


def test_the_html_page_counts_the_transaction_once(real_kafka, tmp_path) -> None:
    d, now = real_kafka.extract(NAME), _clock(real_kafka) + HOUR
    page = tmp_path / "t.html"
    assert _run("timeline", "--log-dir", str(d), "--now", str(now), "--html", str(page)).exit_code == 0
    text = " ".join(page.read_text().split())
    assert "1 hanging transaction on 5 partitions" in text
    assert "1 hanging transaction holds back the LSO of 5 partitions." in text
