"""Tiered storage (KIP-405) on ``fixtures/tiered/`` (built by ``fixtures/build_tiered.py``; its
``expected/tiered/scenario.json`` holds the answers reasoned from Kafka's rules).

``tests/session/test_fixtures_expected.py`` compares ``lag``, ``find-hanging`` and ``describe-producers`` JSON
with the expected files; here: what decided each answer, the human views, ``verify``, the
``__remote_log_metadata`` dump, the exporter's gauge, and the rules with other inputs (no metadata log,
``--broker-config`` with the system disabled).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
TIERED = ROOT / "fixtures" / "tiered"
SCENARIO = json.loads((ROOT / "fixtures" / "expected" / "tiered" / "scenario.json").read_text())
NOW = str(SCENARIO["now_ms"])


def _lag_row(dirs, configs=()):
    from kafkatx.session import offline
    from kafkatx.storage.log_dir import open_log_dirs

    got = offline.lag(open_log_dirs(dirs, list(configs)), topic="events")
    (row,) = got.rows
    return row, got.notices


def test_answers_and_the_rules_that_decided_them():
    row, notices = _lag_row([TIERED])
    assert (row.log_start_offset, row.local_log_start_offset, row.lso, row.high_watermark) == (
        SCENARIO["log_start"], SCENARIO["local_start"], SCENARIO["lso"], SCENARIO["high_watermark"])
    assert row.held_by_ghost is False and row.remote_storage == "topic-config"
    assert row.remote_copied_offset == SCENARIO["copied"] and row.upload_blocked_bytes == SCENARIO["blocked_bytes"]
    said = "\n".join(notices)
    assert (f"events-0: tiered (KIP-405): log start {SCENARIO['log_start']}, local log start "
            f"{SCENARIO['local_start']}") in said
    assert "remote.storage.enable=true (" in said and "__cluster_metadata-0 at offset 12" in said
    assert f"holds the LSO at {SCENARIO['lso']}" in said and "The disk grows until the transaction ends." in said


def test_lag_table_shows_the_local_log_start_within_80_columns():
    r = CliRunner().invoke(app, ["lag", "--log-dir", str(TIERED), "--topic", "events"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    header = lines[0].split()
    assert header[:4] == ["partition", "start", "local", "LSO"]
    cells = next(line for line in lines if line.startswith("events-0")).split()
    assert cells[1:4] == [str(SCENARIO["log_start"]), str(SCENARIO["local_start"]), str(SCENARIO["lso"])]
    text = " ".join(r.stdout.split())
    assert (f"events-0 is tiered: {SCENARIO['blocked_bytes']} bytes of local segments can be neither uploaded "
            f"to remote storage nor deleted (last offset copied: {SCENARIO['copied']}). The disk grows until "
            f"the transaction ends.") in text


def test_lag_table_of_a_dir_without_tiered_partitions_has_no_local_column():
    r = CliRunner().invoke(app, ["lag", "--log-dir", str(ROOT / "fixtures" / "hanging")], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0].split()[:3] == ["partition", "start", "LSO"]


def test_find_hanging_says_what_the_transaction_costs_the_disk():
    r = CliRunner().invoke(app, ["find-hanging", "--log-dir", str(TIERED), "--now", NOW], env={"COLUMNS": "80"})
    assert r.exit_code == 1, r.output
    assert "The disk grows until the transaction ends." in " ".join(r.stdout.split())


def test_describe_producers_names_the_remote_tier_beside_the_local_segments():
    """Producers 900 and 1001 wrote only into the remote tier's offsets before the first local segment: the
    snapshot there (above the log start, so kept by truncateAndReload) still knows them."""
    r = CliRunner().invoke(app, ["describe-producers", "--log-dir", str(TIERED), "--topic", "events", "--partition",
                                 "0", "--now", NOW, "--format", "json"])
    assert r.exit_code == 0, r.output
    assert sorted(p["producer_id"] for p in json.loads(r.stdout)) == [900, 1001, 2002]
    said = " ".join(r.stderr.split())
    assert (f"remote tier offsets {SCENARIO['log_start']}-{SCENARIO['copied']} in 2 segment(s) "
            f"(COPY_SEGMENT_FINISHED), 1 DELETE_SEGMENT_FINISHED") in said
    assert f"local log start {SCENARIO['local_start']}" in said


def test_verify_follows_the_tiered_rule():
    """The checkpointed start below the first local segment is the remote tier, not lost offsets; the snapshots
    at the local segments name producers whose batches are all remote, which is no mismatch."""
    r = CliRunner().invoke(app, ["verify", "--log-dir", str(TIERED), "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    start = [p for p in rows if p["check"] == "checkpoint-log-start"]
    assert [p["severity"] for p in start] == ["info"]
    assert "in the remote tier" in start[0]["message"]
    assert not [p for p in rows if p["severity"] in ("warning", "error")]


def test_remote_log_metadata_dump():
    log = TIERED / "__remote_log_metadata-0" / f"{0:020d}.log"
    r = CliRunner().invoke(app, ["dump-segment", str(log), "--print-data", "--format", "json"])  # auto decoder
    assert r.exit_code == 0, r.output
    got = [(rec["decoded"]["type"], rec["decoded"]["state"]) for b in json.loads(r.stdout) for rec in b["records"]]
    assert got == [tuple(x) for x in SCENARIO["remote_log_metadata"]]
    text = CliRunner().invoke(app, ["dump-segment", "--files", str(log), "--remote-log-metadata-decoder"])
    assert text.exit_code == 0, text.output
    payloads = [line.split(" payload: ", 1)[1] for line in text.stdout.splitlines() if " payload: " in line]
    assert payloads[-3:] == SCENARIO["partition_delete_text"]
    assert payloads[0].startswith("RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=")
    assert "segmentLeaderEpochs={0=0}" in payloads[0] and "customMetadata=Optional.empty" in payloads[0]


def test_exporter_offline_gauge():
    r = CliRunner().invoke(app, ["exporter", "--log-dir", str(TIERED), "--once", "--format", "json"])
    assert r.exit_code == 1, r.output  # a hanging transaction was found
    samples = json.loads(r.stdout)
    blocked = [s for s in samples if s["name"] == "kafkatx_partition_upload_blocked_bytes"]
    assert blocked == [{"name": "kafkatx_partition_upload_blocked_bytes",
                        "labels": {"topic": "events", "partition": "0"}, "value": SCENARIO["blocked_bytes"]}]
    bad = CliRunner().invoke(app, ["exporter", "--log-dir", str(TIERED), "--bootstrap-server", "h:9092", "--once"])
    assert bad.exit_code == 2


@pytest.mark.parametrize(("setup", "start", "code"), [
    ("no-metadata-log", SCENARIO["log_start"], "looks-tiered"),
    ("no-metadata-log-crashed", SCENARIO["local_start"], None),
    ("system-disabled", SCENARIO["local_start"], None),
    ("system-enabled", SCENARIO["log_start"], "topic-config"),
])
def test_what_decides(tmp_path, setup, start, code):
    """Without the metadata log, a checkpoint below the first local segment after a clean shutdown is followed
    (LogManager writes such an entry only for a remote-enabled log) and said to be a guess; after a crash it may
    be stale and the first segment's base is taken. With --broker-config the broker's
    remote.log.storage.system.enable decides first (UnifiedLog.isRemoteLogEnabled)."""
    from kafkatx.storage.broker_config import read_broker_config

    d = tmp_path / "logs"
    shutil.copytree(TIERED, d)
    configs = []
    if setup.startswith("no-metadata-log"):
        shutil.rmtree(d / "__cluster_metadata-0")
        if setup.endswith("crashed"):
            (d / ".kafka_cleanshutdown").unlink()
    else:
        props = tmp_path / "server.properties"
        props.write_text(f"log.dirs={d}\nremote.log.storage.system.enable={str(setup.endswith('enabled')).lower()}\n")
        configs = [read_broker_config(props)]
    row, notices = _lag_row([d], configs)
    assert (row.log_start_offset, row.local_log_start_offset) == (start, SCENARIO["local_start"])
    assert row.remote_storage == code
    said = "\n".join(notices)
    if setup.startswith("no-metadata-log"):
        assert "looks tiered" in said
    if setup == "system-enabled":
        assert "remote.log.storage.system.enable=true" in said
    # never a ghost: the open transaction's first offset is above either log start
    assert row.held_by_ghost is False and row.lso == SCENARIO["lso"]


def test_decoder_refuses_what_kafka_refuses():
    """A record Kafka's constructors refuse prints Kafka's parser line, not a traceback."""
    from kafkatx.format.remote_log_metadata import decode_remote_log_metadata, remote_metadata_text
    from kafkatx.render.dump import DecoderChoice, _decode_record

    class Rec:
        offset = 7
        key = None
        value = bytes([1, 9, 0])  # frame 1, api key 9: none of RemoteLogMetadataSerde's

    decoded, _key, text = _decode_record(DecoderChoice.remote_log_metadata, Rec(), bytes.hex)
    assert text.startswith("Error at offset 7, skipping. ") and "unknown api key 9" in text
    # a segment update with state id 9 (RemoteLogSegmentState.forId gives null)
    log = TIERED / "__remote_log_metadata-0" / f"{0:020d}.log"
    from kafkatx.format.record_batch import iter_records
    from kafkatx.storage.segment import iter_batches_windowed, open_windowed

    with open_windowed(log) as (buf, win):
        header = next(h for h in iter_batches_windowed(buf, win) if h.base_offset == 1)
        (record,) = list(iter_records(buf, header))
        value = bytes(record.value)
    rec = decode_remote_log_metadata(value[:-2] + bytes([9, 0]))
    assert rec.state is None
    with pytest.raises(ValueError, match="state can not be null"):
        remote_metadata_text(rec)


@pytest.mark.parametrize(("system", "kind", "lso"), [
    ("true", "open", SCENARIO["lso"]),  # tiered: the log start is the checkpoint's, below the open transaction
    ("false", "ghost", None),  # the same files on a broker without tiered storage: the log start is the first segment
])
def test_an_open_transaction_below_the_first_local_segment_is_no_ghost_on_a_tiered_partition(tmp_path, system, kind,
                                                                                                lso):
    """The first local segment (holding tx-open's first offset) is gone: the snapshot at the next segment still
    remembers the transaction. UnifiedLog.maybeIncrementFirstUnstableOffset raises the first unstable offset to the
    log start only: on the tiered partition that is the checkpoint's 12, below the transaction, so it is an
    ordinary open transaction holding the LSO at its first offset; loaded without remote storage the log start is
    the first local segment's base, above the transaction: a ghost holding the LSO at the log start."""
    from kafkatx.session import offline
    from kafkatx.storage.broker_config import read_broker_config
    from kafkatx.storage.log_dir import open_log_dirs

    d = tmp_path / "logs"
    shutil.copytree(TIERED, d)
    first = SCENARIO["local_start"]
    for f in (d / "events-0").glob(f"{first:020d}.*"):
        f.unlink()
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={d}\nremote.log.storage.system.enable={system}\n")
    dirs = open_log_dirs([d], [read_broker_config(props)])
    (row,) = offline.lag(dirs, topic="events").rows
    second = row.local_log_start_offset
    assert second > SCENARIO["lso"] > SCENARIO["log_start"]
    assert row.held_by_ghost is (kind == "ghost")
    assert row.lso == (lso if lso is not None else second)
    producers = offline.describe_producers(open_log_dirs([d], [read_broker_config(props)]), topic="events",
                                           partition=0, now=SCENARIO["now_ms"]).rows
    assert [p.producer_id for p in producers if p.ghost] == ([2002] if kind == "ghost" else [])
    # the coordinator still has tx-open Ongoing past its timeout: find-hanging's kind is timed-out either way
    # (a ghost kind is an orphaned transaction only a snapshot remembers)
    (hanging,) = [h for h in offline.find_hanging(open_log_dirs([d], [read_broker_config(props)]),
                                                  now=SCENARIO["now_ms"]).rows if h.topic == "events"]
    assert (hanging.kind, hanging.first_offset) == ("timed-out", SCENARIO["lso"])


def test_unreadable_remote_log_metadata_gives_no_remote_facts(tmp_path):
    """A __remote_log_metadata file that does not read whole: no remote segments or last offset copied (a partial
    reading could name a wrong one), and a note saying so; the local answers stand."""
    d = tmp_path / "logs"
    shutil.copytree(TIERED, d)
    log = d / "__remote_log_metadata-0" / f"{0:020d}.log"
    log.write_bytes(log.read_bytes()[:-10])  # the last batch torn
    row, notices = _lag_row([d])
    assert (row.remote_segments, row.remote_copied_offset) == (None, None)
    assert (row.log_start_offset, row.lso, row.upload_blocked_bytes) == (
        SCENARIO["log_start"], SCENARIO["lso"], SCENARIO["blocked_bytes"])
    assert any("__remote_log_metadata could not be read whole" in n for n in notices)
