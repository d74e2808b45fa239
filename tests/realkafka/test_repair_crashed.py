"""abort-hanging on a copy of the real crashed dir: the repair's own effects check out, exit 0.

tx-hang-F (README: ``transaction.timeout.ms=900000``, left ``Ongoing`` by a killed producer, holding
every data partition's LSO) has timed out 16 minutes after the recorded clock
(``TransactionStateManager.timedOutTransactions``: start + timeout < now), so ``--all`` aborts it
with an epoch bump in each of its partitions (DescribeTransactions' ``topic_partitions``). The
crashed dir's preallocated index tails were there before the repair and are not the repair's doing:
the post-check judges only what the repair changed. Afterwards nothing hangs and LSO = HW.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatx.cli.main import app

SIXTEEN_MINUTES = 16 * 60 * 1000


def test_abort_hanging_all_on_the_crashed_dir_exits_0_and_every_row_is_repaired(real_kafka, tmp_path):
    d = real_kafka.copy("3.8.0/crashed", tmp_path / "crashed")
    now = real_kafka.answer_json("3.8.0/crashed", "list_offsets")["recorded_at_ms"] + SIXTEEN_MINUTES
    hung = real_kafka.answer_json("3.8.0/crashed", "describe_transactions")["tx-hang-F"]
    runner = CliRunner()
    result = runner.invoke(app, ["abort-hanging", "--log-dir", str(d), "--all", "--execute", "--now", str(now),
                                 "--journal", str(tmp_path / "repair.journal"), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert sorted(f"{r['topic']}-{r['partition']}" for r in rows) == sorted(hung["topic_partitions"])
    assert {(r["kind"], r["transactional_id"], r["producer_id"], r["result"]) for r in rows} == \
        {("timed-out", "tx-hang-F", hung["producer_id"], "ok")}
    assert "post-check: /" not in result.stderr  # no failure line

    hanging = runner.invoke(app, ["find-hanging", "--log-dir", str(d), "--now", str(now), "--format", "json"])
    assert hanging.exit_code == 0 and json.loads(hanging.stdout) == []
    lag = runner.invoke(app, ["lag", "--log-dir", str(d), "--format", "json"])
    assert lag.exit_code == 0
    held = [r for r in json.loads(lag.stdout) if r["lso"] != r["high_watermark"]]
    assert held == []
    verify = runner.invoke(app, ["verify", "--log-dir", str(d), "--format", "json"])
    assert verify.exit_code == 0 and [r for r in json.loads(verify.stdout) if r["severity"] == "error"] == []
