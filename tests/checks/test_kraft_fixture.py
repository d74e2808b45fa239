"""The KRaft fixture: a combined node's ``__cluster_metadata-0`` with a TV2 cluster.

``fixtures/kraft`` and its expected values come from ``fixtures/build_kraft.py``, which encodes the metadata
records by hand from Kafka's schemas (not with kafkatx's decoder) and reasons the answers by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kafka.record import MemoryRecords
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.coordinator.state_manager import replay_transaction_log
from kafkatx.format.txn_log import decode_txn_log_key, decode_txn_log_value

REPO = Path(__file__).resolve().parents[2]
KRAFT = REPO / "fixtures" / "kraft"
SCENARIO = json.loads((REPO / "fixtures" / "expected" / "kraft" / "scenario.json").read_text())
NOW = SCENARIO["now_ms"]
META = KRAFT / "__cluster_metadata-0"


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_dump_segment_shows_every_record_the_builder_wrote() -> None:
    res = run("dump-segment", str(META / f"{0:020d}.log"), "--decoder", "cluster-metadata", "--format", "json")
    assert res.exit_code == 0, res.output
    got = [(r["offset"], r["decoded"]) for b in json.loads(res.stdout) for r in b.get("records", [])
           if not b["is_control"]]
    written = SCENARIO["metadata_records"]
    assert got == [(w["offset"], {"type": w["type"], "version": w["version"], "data": w["data"]}) for w in written]


def test_dump_segment_text_is_kafka_dump_logs_layout() -> None:
    """kafka-dump-log.sh's text (``DumpLogSegments.printRecordMetadata`` then ``printRecordContents`` with
    ``ClusterMetadataLogMessageParser``: no key, ``payload:`` the record as Jackson's compact JSON)."""
    res = run("dump-segment", "--files", str(META / f"{0:020d}.log"), "--cluster-metadata-decoder")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[:2] == [f"Dumping {META / f'{0:020d}.log'}", "Log starting offset: 0"]
    records = [ln for ln in lines if ln.startswith("| offset: ")]
    # the 4.0 tool's control-record lines (offsets 0 and 27)
    assert records[0].endswith(" controlType: LEADER_CHANGE(2)")
    assert records[-1].startswith("| offset: 27 ") and records[-1].endswith(" controlType: KRAFT_VERSION(5)")
    for w, line in zip(SCENARIO["metadata_records"], records[1:-1], strict=True):
        payload = json.dumps({"type": w["type"], "version": w["version"], "data": w["data"]}, separators=(",", ":"))
        assert line == (f"| offset: {w['offset']} CreateTime: {w['timestamp_ms']} keySize: -1 "
                        f"valueSize: {w['value_size']} sequence: -1 headerKeys: [] payload: {payload}")


def test_dump_segment_reads_the_kraft_snapshot() -> None:
    snap = META / f"{20:020d}-{1:010d}.checkpoint"
    res = run("dump-segment", "--files", str(snap), "--cluster-metadata-decoder")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    # DumpLogSegments.dumpLog: "Snapshot end offset: N, epoch: E" for a .checkpoint (Snapshots.parse)
    assert lines[1] == "Snapshot end offset: 20, epoch: 1"
    types = [json.loads(ln.split(" payload: ", 1)[1])["type"] for ln in lines if " payload: " in ln]
    # the image after offsets 0-19 without the metadata transaction's markers
    assert types == [w["type"] for w in SCENARIO["metadata_records"]
                     if w["offset"] < 20 and w["type"] not in ("BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD")]
    assert sum("controlType: SNAPSHOT_" in ln for ln in lines) == 2


def test_describe_cluster() -> None:
    res = run("describe-cluster", "--log-dir", str(KRAFT), "--format", "json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    exp = SCENARIO["describe_cluster"]
    assert Path(got.pop("metadata_log")) == META
    assert Path(got.pop("snapshot")).name == exp["snapshot"]
    assert got == {k: v for k, v in exp.items() if k != "snapshot"} | {"notices": [], "unreadable": []}
    human = run("describe-cluster", "--log-dir", str(KRAFT))
    assert human.exit_code == 0 and "transaction.version=2" in human.stdout
    assert max(len(ln) for ln in human.stdout.splitlines()) <= 80
    missing = run("describe-cluster", "--log-dir", str(REPO / "fixtures" / "hanging"))
    assert missing.exit_code == 3 and "no __cluster_metadata-0" in missing.output


def test_verify_reports_stray_folders_and_foreign_producer_ids() -> None:
    res = run("verify", "--log-dir", str(KRAFT), "--format", "json")
    rows = json.loads(res.stdout)
    assert [{"check": r["check"], "partition": r["partition"]} for r in rows] == SCENARIO["verify"]
    assert res.exit_code == 1
    assert "producer id 5000" in next(r["message"] for r in rows if r["check"] == "producer-id-block")


def test_replay_takes_the_partition_count_from_the_metadata() -> None:
    coord = replay_transaction_log([KRAFT])
    assert coord.partitions_count == 4  # the folders alone (0-2) would say 3
    assert coord.partitions_found == (0, 1, 2)
    assert any("__transaction_state has 4 partitions: taken from" in n for n in coord.notices)
    res = run("list-txn", "--log-dir", str(KRAFT), "--format", "json")
    assert res.exit_code == 0 and "__transaction_state has 4 partitions: taken from" in res.stderr
    assert {t["transactional_id"] for t in json.loads(res.stdout)} == {"tx-done", "tx-stale"}


def _last_values(ld: Path, tid: str) -> list:
    out = []
    for log in sorted((ld / "__transaction_state-0").glob("*.log")):
        recs = MemoryRecords(log.read_bytes())
        while (b := recs.next_batch()) is not None:
            out += [decode_txn_log_value(r.value) for r in b
                    if decode_txn_log_key(r.key).transactional_id == tid and r.value is not None]
    return out[-2:]


def test_repair_uses_the_clusters_transaction_version(tmp_path: Path) -> None:
    ld = tmp_path / "kraft"
    shutil.copytree(KRAFT, ld)
    exp = SCENARIO["abort_all"]
    res = run("abort-hanging", "--log-dir", str(ld), "--all", "--execute", "--now", str(NOW), "--journal",
              str(tmp_path / "j"), "--format", "json")
    assert res.exit_code == 0, res.output
    # read from the snapshot (it holds the state after offsets 0-19, FeatureLevelRecord at 3 included)
    # metadata.version 25 is 4.0-IV3 (MetadataVersion): Kafka 4.0's double bump
    assert "aborted as Kafka 4.0 does at transaction version 2: " in res.stderr
    assert "Kafka 4.0 from metadata.version 25 = 4.0-IV3 in __cluster_metadata-0 snapshot " \
           "00000000000000000020-0000000001.checkpoint; transaction version 2 from the cluster's finalized " \
           "transaction.version in __cluster_metadata-0 snapshot 00000000000000000020-0000000001.checkpoint" \
           in res.stderr
    rows = json.loads(res.stdout)
    assert {(f"{r['topic']}-{r['partition']}", r["marker_offset"], r["marker_epoch"]) for r in rows} == {
        (p, o, exp["epoch"]) for p, o in exp["markers"].items()}
    prepare, complete = _last_values(ld, "tx-stale")
    for v, state in ((prepare, "PrepareAbort"), (complete, "CompleteAbort")):
        assert (v.state.kafka_name, v.producer_epoch, v.client_transaction_version, v.version) == (
            state, exp["epoch"], exp["client_transaction_version"], exp["value_version"])


def test_without_the_metadata_log_the_transaction_says_its_version(tmp_path: Path) -> None:
    """No __cluster_metadata-0: tx-stale's own last record (ClientTransactionVersion 0) decides, TV0's
    epochs (fence only: 1), and the note says the version was taken from the record."""
    ld = tmp_path / "kraft"
    shutil.copytree(KRAFT, ld)
    shutil.rmtree(ld / "__cluster_metadata-0")
    res = run("abort-hanging", "--log-dir", str(ld), "--all", "--now", str(NOW), "--format", "json")
    assert res.exit_code == 1, res.output
    assert "ClientTransactionVersion=0 in tx-stale's last __transaction_state record" in res.stderr
    # the facts assumed without the metadata are said: the folders (0-2) give 3 partitions
    assert "no __cluster_metadata-0 in these log dirs: __transaction_state is assumed to have 3 partitions" \
        in res.stderr
    assert {r["marker_epoch"] for r in json.loads(res.stdout)} == {1}


def test_metadata_log_dir_points_at_a_metadata_log_elsewhere(tmp_path: Path) -> None:
    """A broker whose metadata.log.dir is another folder: --metadata-log-dir gives what the log dir lacks."""
    ld = tmp_path / "kraft"
    shutil.copytree(KRAFT, ld)
    meta = tmp_path / "metadata"
    meta.mkdir()
    shutil.move(str(ld / "__cluster_metadata-0"), str(meta / "__cluster_metadata-0"))
    res = run("abort-hanging", "--log-dir", str(ld), "--metadata-log-dir", str(meta), "--all", "--now", str(NOW),
              "--format", "json")
    assert res.exit_code == 1, res.output
    assert "__transaction_state has 4 partitions: taken from" in res.stderr
    assert "transaction version 2 from the cluster's finalized transaction.version" in res.stderr
    assert {r["marker_epoch"] for r in json.loads(res.stdout)} == {SCENARIO["abort_all"]["epoch"]}
    desc = run("describe-cluster", "--metadata-log-dir", str(meta), "--format", "json")
    assert desc.exit_code == 0 and json.loads(desc.stdout)["features"]["transaction.version"] == 2
    none = run("abort-hanging", "--log-dir", str(ld), "--metadata-log-dir", str(tmp_path), "--all",
               "--now", str(NOW))
    assert none.exit_code == 3 and "no __cluster_metadata-0 here" in none.output
