"""The Kafka 4.1-style TV2 fixture (fixtures/build_kafka41.py): what a 4.1 coordinator writes.

The expectations are the builder's, reasoned by hand from Kafka's source: a coordinator-side TV2 abort at
E+1 since KAFKA-19367 (4.1), producer-id rotation without PreviousProducerId/NextProducerId tags (4.0-4.2's
``TransactionLog.valueToBytes``), and the release taken from the finalized ``metadata.version`` 27 (4.1-IV1).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kafka.record import MemoryRecords
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.format.txn_log import decode_txn_log_key, decode_txn_log_value

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "kafka41"
SCENARIO = json.loads((REPO / "fixtures" / "expected" / "kafka41" / "scenario.json").read_text())
NOW = SCENARIO["now_ms"]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _batches(folder: Path):
    for log in sorted(folder.glob("*.log")):
        recs = MemoryRecords(log.read_bytes())
        while (b := recs.next_batch()) is not None:
            yield b


def _values(ld: Path, tid: str):
    return [decode_txn_log_value(r.value) for d in sorted(ld.glob("__transaction_state-*")) for b in _batches(d)
            for r in b if decode_txn_log_key(r.key).transactional_id == tid and r.value is not None]


def _markers(folder: Path, producer_id: int) -> dict[int, tuple[int, bool]]:
    out = {}
    for b in _batches(folder):
        if b.is_control_batch and b.producer_id == producer_id:
            (rec,) = list(b)
            out[b.base_offset] = (b.producer_epoch, rec.key[3] == 1)
    return out


def test_find_hanging_and_list_txn_read_a_rotation_without_tags() -> None:
    res = run("find-hanging", "--log-dir", str(FIXTURE), "--now", str(NOW), "--format", "json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout) == SCENARIO["find_hanging"]
    res = run("list-txn", "--log-dir", str(FIXTURE), "--format", "json")
    got = {r["transactional_id"]: [r["state"], r["producer_id"], r["producer_epoch"]] for r in json.loads(res.stdout)}
    assert got == SCENARIO["list_txn"]


def test_abort_all_follows_kafka_4_1_from_the_metadata_version(tmp_path: Path) -> None:
    exp = SCENARIO["abort_all"]
    # the reference: what the 4.1 coordinator itself wrote for tx-timeout-E (epoch 0 -> 1)
    assert {(v.state.kafka_name, v.producer_epoch) for v in _values(FIXTURE, "tx-timeout-E")[-2:]} == {
        ("PrepareAbort", exp["reference_epoch"]), ("CompleteAbort", exp["reference_epoch"])}
    for version, epoch in (((), exp["epoch"]), (("--kafka-version", "4.0"), exp["epoch_4_0"])):
        ld = tmp_path / f"kafka41-{epoch}"
        shutil.copytree(FIXTURE, ld)
        res = run("abort-hanging", "--log-dir", str(ld), "--all", *version, "--execute", "--now", str(NOW),
                  "--journal", str(tmp_path / f"j{epoch}"), "--format", "json")
        assert res.exit_code == 0, res.output
        if not version:
            assert "aborted as Kafka 4.1 does" in res.stderr
            assert "Kafka 4.1 from metadata.version 27 = 4.1-IV1 in __cluster_metadata-0 at offset 0" in res.stderr
        rows = json.loads(res.stdout)
        assert {(f"{r['topic']}-{r['partition']}", r["marker_offset"], r["marker_epoch"]) for r in rows} == {
            (p, o, epoch) for p, o in exp["markers"].items()}
        for p, o in exp["markers"].items():
            assert _markers(ld / p, 8003)[o] == (epoch, False)
        prepare, complete = _values(ld, "tx-hang")[-2:]
        for v, state in ((prepare, "PrepareAbort"), (complete, "CompleteAbort")):
            assert (v.state.kafka_name, v.producer_epoch, v.client_transaction_version, v.version) == (
                state, epoch, exp["client_transaction_version"], exp["value_version"])


def test_kafka_version_is_an_offline_release() -> None:
    bad = run("abort-hanging", "--log-dir", str(FIXTURE), "--all", "--kafka-version", "four")
    assert bad.exit_code == 2 and "not a Kafka version X.Y" in bad.output
    online = run("abort-hanging", "--bootstrap-server", "127.0.0.1:1", "--all", "--kafka-version", "4.1")
    assert online.exit_code == 2 and "--kafka-version is for offline repairs" in online.output
