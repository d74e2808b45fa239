"""The abort plan lists every file it will create, append to, replace or move, in the table and in JSON.

It used to say only ``plan: 5 file operation(s)``: which files, only ``undo --dry-run`` told, after the fact.
The expected files are reasoned from the fixture (fixtures/README.md) and Kafka's layout: an ABORT marker
for inventory-sync (1005, orphaned on orders-1) goes into orders-1's active segment with its time index and
txnindex entry (the transaction has data: ``TransactionIndex``), and the checkpoints move the high
watermark and recovery point over it.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.storage.log_dir import LogDir

REPO = Path(__file__).resolve().parents[2]
HANGING = REPO / "fixtures" / "hanging"
NOW = "1700007200000"


def _active_segment(topic: str, partition: int) -> str:
    part = LogDir(HANGING).partition(topic, partition)
    assert part is not None
    return part.segments[-1].log_path.name.removesuffix(".log")


def test_plan_names_every_file_in_json_and_table():
    args = ["abort-hanging", "--log-dir", str(HANGING), "--transactional-id", "inventory-sync", "--now", NOW]
    rows = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    (row,) = rows
    base = _active_segment("orders", 1)
    expected = {("append", f"orders-1/{base}.log"), ("append", f"orders-1/{base}.timeindex"),
                ("append", f"orders-1/{base}.txnindex"), ("replace", "replication-offset-checkpoint"),
                ("replace", "recovery-point-offset-checkpoint")}
    got = {(f["op"], str(Path(f["path"]).relative_to(HANGING))) for f in row["files"]}
    assert got == expected
    table = CliRunner().invoke(app, args, env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert table.exit_code == 1
    assert "plan: 5 files to change" in table.stdout  # the count is of the files it lists
    for op, path in expected:
        assert any(line.split()[:1] == [op] and line.rstrip().endswith(path) for line in table.stdout.splitlines()), \
            (op, path, table.stdout)


def test_a_row_lists_its_own_partition_and_the_shared_files():
    result = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(HANGING), "--all", "--now", NOW,
                                      "--format", "json"])
    rows = json.loads(result.stdout)
    for row in rows:
        folders = {Path(f["path"]).parent.name for f in row["files"]}
        data_folders = {f for f in folders if f != HANGING.name and not f.startswith("__transaction_state-")}
        assert data_folders == {f"{row['topic']}-{row['partition']}"}, (row["topic"], row["partition"], folders)
    every = {(f["op"], f["path"]) for r in rows for f in r["files"]}
    # coordinator-side rows (timed-out, incomplete-markers) append to __transaction_state
    assert any(Path(p).parent.name.startswith("__transaction_state-") for _op, p in every)
