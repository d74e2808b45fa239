"""A real Kafka 3.9 broker with tiered storage (KIP-405): ``3.9-tiered/`` (README section ``3.9-tiered/``).

``tiered-clean.tar.gz`` is the log dir after a clean shutdown: ``tiered-0``'s segments 0-367 were uploaded
to the remote tier and deleted locally (first local segment 368), ``log-start-offset-checkpoint`` says
``tiered 0 0``, ``__remote_log_metadata-22`` holds the upload records, and ``tx-open-T`` holds the LSO at
368. ``answers/broker_answers_running.json`` is what the live broker answered (ListOffsets,
DescribeProducers, transactions); ``dump-log/clean/`` is ``kafka-dump-log.sh --deep-iteration
--print-data-log`` of every file (``--remote-log-metadata-decoder`` for ``__remote_log_metadata``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

NAME = "3.9-tiered/tiered-clean"
BROKER_PATH = b"/srv/kafka/logs/"  # where the broker's log dir was when kafka-dump-log.sh ran


def _dumps(real_kafka) -> Path:
    out = real_kafka.root / "3.9-tiered" / "dump-log" / "clean"
    if not out.is_dir():
        pytest.skip(f"no kafka-dump-log.sh output in {out}")
    return out


def _first_difference(want: bytes, got: bytes) -> str:
    a, b = want.split(b"\n"), got.split(b"\n")
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return (f"line {n + 1} ({len(a)} vs {len(b)} lines): kafka {a[n][:200] if n < len(a) else b'<none>'!r}"
            f" kafkatx {b[n][:200] if n < len(b) else b'<none>'!r}")


def test_segments_dump_as_kafka_dump_log_does(real_kafka):
    """Every ``.log`` of ``tiered-0`` and of the 50 ``__remote_log_metadata`` partitions, with the flags
    the recorded output was made with, prints Kafka's bytes (the path prefix aside)."""
    from kafkatx.cli.main import app

    top = real_kafka.extract(NAME)
    runner = CliRunner()
    differ, checked, decoded = [], 0, 0
    for expected in sorted(_dumps(real_kafka).glob("*/*.log.txt")):
        part = expected.parent.name
        log = top / part / expected.name[: -len(".txt")]
        flags = ["--deep-iteration", "--print-data-log"]
        if part.startswith("__remote_log_metadata-"):
            flags.append("--remote-log-metadata-decoder")
        r = runner.invoke(app, ["dump-segment", "--files", str(log), *flags])
        want = expected.read_bytes().replace(BROKER_PATH, f"{top}/".encode())
        checked += 1
        decoded += want.count(b"payload: RemoteLogSegmentMetadata")
        if r.exit_code != 0 or r.stdout_bytes != want:
            differ.append(f"{part}/{log.name}: exit {r.exit_code}, {_first_difference(want, r.stdout_bytes)}")
    assert checked == 55  # 5 local segments of tiered-0 + one per __remote_log_metadata partition
    assert decoded == 26  # 13 COPY_SEGMENT_STARTED + 13 COPY_SEGMENT_FINISHED (the README)
    assert not differ, "\n".join(differ)


def test_decoder_alias_and_auto_choice(real_kafka):
    """``--decoder remote-log-metadata``, its alias, and the folder-name auto choice print the same."""
    from kafkatx.cli.main import app

    log = real_kafka.extract(NAME) / "__remote_log_metadata-22" / f"{0:020d}.log"
    runner = CliRunner()
    outs = [runner.invoke(app, ["dump-segment", str(log), *flags]) for flags in
            (["--decoder", "remote-log-metadata"], ["--remote-log-metadata-decoder"], ["--print-data"])]
    assert all(r.exit_code == 0 for r in outs), [r.output for r in outs]
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout
    assert "state=COPY_SEGMENT_FINISHED" in outs[0].stdout
    r = runner.invoke(app, ["dump-segment", str(log), "--decoder", "remote-log-metadata", "--format", "json"])
    assert r.exit_code == 0, r.output
    records = [rec for b in json.loads(r.stdout) for rec in b["records"]]
    states = [rec["decoded"]["state"] for rec in records]
    assert states == ["COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED"] * 13
    first = records[0]["decoded"]["data"]
    assert (first["startOffset"], first["endOffset"]) == (0, 29)
    assert first["remoteLogSegmentId"]["topicIdPartition"]["name"] == "tiered"


# ----------------------------------------------------------------------------- the broker's answers

def _answers(real_kafka) -> dict:
    path = real_kafka.root / "3.9-tiered" / "answers" / "broker_answers_running.json"
    if not path.is_file():
        pytest.skip(f"no recorded broker answers: {path}")
    return json.loads(path.read_text())


def _lag(dirs):
    from kafkatx.session import offline

    got = offline.lag(dirs, topic="tiered")
    (row,) = got.rows
    return row, got.notices


def test_lag_equals_list_offsets(real_kafka):
    """ListOffsets of the running broker: EARLIEST 0 (the checkpoint: LogLoader's remote branch), EARLIEST_LOCAL
    368 (UnifiedLog.localLogStartOffset), LATEST 523, read_committed 368 (tx-open-T holds the LSO; it is no
    ghost: its first offset 368 is above the log start), LATEST_TIERED 367 (the last offset copied)."""
    from kafkatx.storage.log_dir import open_log_dirs

    b = _answers(real_kafka)["list_offsets_kafka_python"]
    row, notices = _lag(open_log_dirs([real_kafka.extract(NAME)]))
    ours = {"EARLIEST/read_uncommitted": row.log_start_offset, "EARLIEST/read_committed": row.log_start_offset,
            "EARLIEST_LOCAL/read_uncommitted": row.local_log_start_offset,
            "EARLIEST_LOCAL/read_committed": row.local_log_start_offset,
            "LATEST/read_uncommitted": row.high_watermark, "LATEST/read_committed": row.lso,
            "LATEST_TIERED/read_uncommitted": row.remote_copied_offset,
            "LATEST_TIERED/read_committed": row.remote_copied_offset}
    assert {k: b[k]["offset"] for k in ours} == ours
    assert row.held_by_ghost is False
    assert row.oldest_open_producer_id == 2 and row.oldest_open_first_offset == 368
    assert row.remote_storage == "topic-config"
    assert [(s.start_offset, s.end_offset, s.state) for s in row.remote_segments][::12] == [
        (0, 29, "COPY_SEGMENT_FINISHED"), (348, 367, "COPY_SEGMENT_FINISHED")]
    # DescribeLogDirs' partition_size: every local byte is at or above the LSO, none can be uploaded
    (size,) = [p["partition_size"] for d in _answers(real_kafka)["describe_log_dirs"][0]["log_dirs"]
               for t in d["topics"] if t["name"] == "tiered" for p in t["partitions"]]
    assert row.upload_blocked_bytes == size == 18056
    assert any("The disk grows until the transaction ends." in n for n in notices)


def test_describe_producers_equals_describe_producers(real_kafka):
    from kafkatx.session import offline
    from kafkatx.storage.log_dir import open_log_dirs

    answers = _answers(real_kafka)
    broker = answers["describe_producers"]["TopicPartition(topic='tiered', partition=0)"]["active_producers"]
    rows = offline.describe_producers(open_log_dirs([real_kafka.extract(NAME)]), topic="tiered", partition=0,
                                      now=answers["describe_producers_clock_ms"]).rows
    ours = [{"producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
             "coordinator_epoch": r.coordinator_epoch, "last_sequence": r.last_sequence,
             "last_timestamp": r.last_timestamp_ms,
             "current_transaction_start_offset": -1 if r.current_txn_first_offset is None
             else r.current_txn_first_offset} for r in rows]
    assert ours == sorted(broker, key=lambda p: p["producer_id"])
    assert not any(r.ghost for r in rows)


def test_transactions_equal_the_coordinator(real_kafka):
    from kafkatx.session import offline
    from kafkatx.storage.log_dir import open_log_dirs

    answers = _answers(real_kafka)
    dirs = open_log_dirs([real_kafka.extract(NAME)])
    listed = {r.transactional_id: (r.producer_id, r.state) for r in offline.list_transactions(dirs).rows}
    assert listed == {t["transactional_id"]: (t["producer_id"], t["state"]["value"])
                      for t in answers["list_transactions"]["1"]}
    for tid, b in answers["describe_transactions"].items():
        (row,) = offline.describe_transaction(dirs, tid).rows
        r = row.transaction
        assert (r.coordinator_id, r.state, r.producer_id, r.producer_epoch, r.timeout_ms, r.start_timestamp_ms,
                r.partitions) == (b["coordinator_id"], b["state"]["value"], b["producer_id"], b["producer_epoch"],
                                  b["transaction_timeout_ms"], b["transaction_start_time_ms"],
                                  sorted(f"{p['topic']}-{p['partition']}" for p in b["topic_partitions"]))


def test_no_ghost_at_any_timeout(real_kafka):
    """tx-open-T's first offset 368 is in the local tier and above the log start 0: past its timeout it is a
    timed-out transaction, never a ghost (a ghost begins below the log start, UnifiedLog's rule), and
    find-hanging says what it costs the tiered partition's disk."""
    from kafkatx.session import offline
    from kafkatx.storage.log_dir import open_log_dirs

    answers = _answers(real_kafka)
    dirs = open_log_dirs([real_kafka.extract(NAME)])
    now = answers["describe_producers_clock_ms"]
    assert offline.find_hanging(dirs, now=now).rows == []  # 33 s old, within the 15-minute default
    assert offline.find_hanging(dirs, now=now, max_timeout_ms=0).rows == []  # the coordinator keeps it Ongoing
    later = offline.find_hanging(dirs, now=now + 3_600_000)  # an hour on: past its 15-minute timeout
    (row,) = later.rows
    assert (row.kind, row.producer_id, row.first_offset) == ("timed-out", 2, 368)
    assert any("18056 bytes of local segments from offset 368" in n for n in later.notices)


@pytest.mark.parametrize(("setup", "code", "start"), [
    ("broker-config-true", "topic-config", 0),
    ("broker-config-false", "broker-config-disabled", 368),
    ("no-metadata-log", "looks-tiered", 0),
])
def test_what_decides_the_log_start(real_kafka, tmp_path, setup, code, start):
    """The broker's server.properties (remote.log.storage.system.enable=true) agrees with the metadata log;
    the same files with the system disabled load as a local log (UnifiedLog.isRemoteLogEnabled false: the
    log start rises to the first local segment); without the metadata log the checkpoint below the first
    local segment after a clean shutdown says the partition looks tiered."""
    import shutil

    from kafkatx.storage.broker_config import read_broker_config
    from kafkatx.storage.log_dir import open_log_dirs

    top = real_kafka.copy(NAME, tmp_path / "logs")
    properties = real_kafka.root / "3.9-tiered" / "server.properties"
    configs = []
    if setup.startswith("broker-config"):
        text = properties.read_text()
        if setup.endswith("false"):
            text = text.replace("remote.log.storage.system.enable=true", "remote.log.storage.system.enable=false")
        (tmp_path / "server.properties").write_text(text)
        configs = [read_broker_config(tmp_path / "server.properties")]
    else:
        shutil.rmtree(top / "__cluster_metadata-0")
    row, notices = _lag(open_log_dirs([top], configs))
    assert (row.log_start_offset, row.local_log_start_offset) == (start, 368)
    assert row.remote_storage == (None if code == "broker-config-disabled" else code)
    said = " ".join(notices)
    if code == "topic-config":
        assert "remote.log.storage.system.enable=true" in said
    if code == "looks-tiered":
        assert "looks tiered" in said
