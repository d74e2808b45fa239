"""abort-hanging and prepared two-phase-commit transactions (KIP-939).

On a copy of ``fixtures/twopc`` (see ``fixtures/build_twopc.py``): ``--all`` aborts the ordinary
timed-out ``tx-stuck`` and leaves the 30-day-old 2PC ``tx-2pc`` untouched (exit 3, naming it);
``--force-terminate tx-2pc`` aborts it as ``forceTerminateTransaction`` makes the coordinator do, and
``undo`` restores every byte. Expected epochs, offsets and versions are ``fixtures/expected/twopc``'s,
reasoned in the builder from ``TransactionMetadata.prepareFenceProducerEpoch``/``prepareAbortOrCommit``.
The appended bytes are read back with kafka-python's ``MemoryRecords`` (an independent decoder).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from kafka.record import MemoryRecords
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.format.txn_log import decode_txn_log_key, decode_txn_log_value

REPO = Path(__file__).resolve().parents[2]
EXPECTED = REPO / "fixtures" / "expected" / "twopc"
NOW = json.loads((EXPECTED / "scenario.json").read_text())["now_ms"]


def copy(tmp_path: Path) -> Path:
    dest = tmp_path / "twopc"
    shutil.copytree(REPO / "fixtures" / "twopc", dest)
    return dest


def digest_tree(root: Path) -> dict[str, str]:
    return {str(Path(d, f).relative_to(root)): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for d, _, files in os.walk(root) for f in files if f != ".lock"}  # the lock a repair creates (as Kafka)


def run(*args: str):
    return CliRunner().invoke(app, [*args, "--now", str(NOW)])


def batches(path: Path) -> list:
    recs = MemoryRecords(path.read_bytes())
    out = []
    while (b := recs.next_batch()) is not None:
        out.append(b)
    return out


def markers(ld: Path, partition: str) -> dict[int, tuple[int, int, bool]]:
    """offset -> (producer id, epoch, is commit) of every control batch in the partition's segments."""
    out = {}
    for log in sorted((ld / partition).glob("*.log")):
        for b in batches(log):
            if b.is_control_batch:
                (rec,) = list(b)
                out[b.base_offset] = (b.producer_id, b.producer_epoch, rec.key[3] == 1)
    return out


def txn_values(ld: Path, tid: str) -> list:
    vals = []
    for part in sorted(ld.glob("__transaction_state-*")):
        for log in sorted(part.glob("*.log")):
            for b in batches(log):
                for r in b:
                    if decode_txn_log_key(r.key).transactional_id == tid and r.value is not None:
                        vals.append(decode_txn_log_value(r.value))
    return vals


def test_all_aborts_the_timed_out_one_and_leaves_the_2pc_one_untouched(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    exp = json.loads((EXPECTED / "scenario.json").read_text())["abort_all"]
    before_2pc = txn_values(ld, "tx-2pc")
    res = run("abort-hanging", "--log-dir", str(ld), "--all", "--execute", "--journal", str(tmp_path / "j"),
              "--format", "json")
    assert res.exit_code == 3, res.output
    assert "left untouched: transactional id 'tx-2pc'" in res.stderr
    assert "--force-terminate tx-2pc" in res.stderr
    rows = json.loads(res.stdout)
    assert {(r["transactional_id"], r["action"]) for r in rows} == {
        ("tx-2pc", "untouched: prepared-2pc"), ("tx-stuck", "abort-timed-out")}
    stuck = exp["tx-stuck"]
    assert markers(ld, "orders-1")[stuck["markers"]["orders-1"]] == (7002, stuck["epoch"], False)
    last = txn_values(ld, "tx-stuck")[-2:]
    assert [(v.state.kafka_name, v.producer_epoch, v.client_transaction_version) for v in last] == [
        ("PrepareAbort", stuck["epoch"], stuck["client_transaction_version"]),
        ("CompleteAbort", stuck["epoch"], stuck["client_transaction_version"])]
    assert txn_values(ld, "tx-2pc") == before_2pc  # not one record for it
    assert all(pid != 7001 for pid, _, _ in markers(ld, "orders-0").values() if pid != 7000)
    # find-hanging afterwards: only the 2PC transaction, still prepared-2pc
    after = json.loads(run("find-hanging", "--log-dir", str(ld), "--format", "json").stdout)
    assert {(r["kind"], r["transactional_id"]) for r in after} == {("prepared-2pc", "tx-2pc")}


def test_plan_only_exits_3_and_changes_nothing(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    before = digest_tree(ld)
    res = run("abort-hanging", "--log-dir", str(ld), "--transactional-id", "tx-2pc")
    assert res.exit_code == 3, res.output
    assert "left untouched" in res.stderr and "tx-2pc" in res.stderr
    assert digest_tree(ld) == before


def test_force_terminate_aborts_it_and_undo_restores_it(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    before = digest_tree(ld)
    exp = json.loads((EXPECTED / "scenario.json").read_text())["force_terminate"]["tx-2pc"]
    journal = tmp_path / "ft.journal"
    res = run("abort-hanging", "--log-dir", str(ld), "--force-terminate", "tx-2pc", "--execute",
              "--journal", str(journal), "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {r["action"] for r in rows} == {"force-terminate"} and {r["result"] for r in rows} == {"ok"}
    for partition, offset in exp["markers"].items():
        assert markers(ld, partition)[offset] == (7001, exp["epoch"], False)
    last = txn_values(ld, "tx-2pc")[-3:]
    assert [(v.state.kafka_name, v.producer_epoch, v.client_transaction_version, v.transaction_timeout_ms)
            for v in last[:2]] == [("PrepareAbort", exp["epoch"], exp["client_transaction_version"], 2**31 - 1),
                                   ("CompleteAbort", exp["epoch"], exp["client_transaction_version"], 2**31 - 1)]
    # the admin's retried InitProducerId: Empty at the next epoch with a normal timeout
    empty = last[2]
    assert (empty.state.kafka_name, empty.producer_epoch, empty.transaction_timeout_ms, empty.start_timestamp,
            empty.partitions) == ("Empty", exp["empty"]["epoch"], exp["empty"]["timeout_ms"],
                                  exp["empty"]["start_timestamp"], exp["empty"]["partitions"])
    assert "Empty at producer epoch 2" in res.stderr
    after = json.loads(run("find-hanging", "--log-dir", str(ld), "--format", "json").stdout)
    assert {r["transactional_id"] for r in after} == {"tx-stuck"}  # only the ordinary one is left
    undo = CliRunner().invoke(app, ["undo", str(journal)])
    assert undo.exit_code == 0, undo.output
    assert digest_tree(ld) == before


def test_force_terminate_lists_its_records_and_follows_the_kafka_version(tmp_path: Path) -> None:
    """The plan (no --execute) names every record it writes; --kafka-version 4.0 bumps twice, and
    --transaction-timeout-ms sets the Empty record's timeout."""
    ld = copy(tmp_path)
    exp = json.loads((EXPECTED / "scenario.json").read_text())["force_terminate"]["tx-2pc@4.0"]
    journal = tmp_path / "ft.journal"
    res = run("abort-hanging", "--log-dir", str(ld), "--force-terminate", "tx-2pc", "--kafka-version", "4.0",
              "--transaction-timeout-ms", "30000", "--execute", "--journal", str(journal), "--format", "json")
    assert res.exit_code == 0, res.output
    assert "Kafka 4.0 from --kafka-version" in res.stderr
    assert {r["marker_epoch"] for r in json.loads(res.stdout)} == {exp["epoch"]}
    last = txn_values(ld, "tx-2pc")[-3:]
    assert [(v.state.kafka_name, v.producer_epoch, v.transaction_timeout_ms) for v in last] == [
        ("PrepareAbort", exp["epoch"], 2**31 - 1), ("CompleteAbort", exp["epoch"], 2**31 - 1),
        ("Empty", exp["empty_epoch"], 30000)]


def test_force_terminate_refuses_an_ordinary_transaction(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    res = run("abort-hanging", "--log-dir", str(ld), "--force-terminate", "tx-stuck")
    assert res.exit_code == 2
    assert "not a prepared two-phase-commit transaction" in res.output
    res = run("abort-hanging", "--log-dir", str(ld), "--force-terminate", "nope")
    assert res.exit_code == 2 and "no such transactional id" in res.output
