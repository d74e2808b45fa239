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
