"""``__cluster_metadata`` record values decoded as kafka-dump-log.sh --cluster-metadata-decoder prints them.

The reference is the real 4.0 broker's dump (``answers/tv2-clean/dumps/cluster-metadata-0.txt``, made with
``kafka.tools.DumpLogSegments --cluster-metadata-decoder``, whose ``payload:`` is ``MetadataRecordSerde`` +
the generated ``JsonConverter``): every record's JSON must be the same text, byte for byte.
"""

from __future__ import annotations

import re

from kafkatx.format.cluster_metadata import decode_metadata_record, metadata_json
from kafkatx.format.record_batch import iter_records
from kafkatx.storage.cluster_metadata import read_cluster_image
from kafkatx.storage.log_dir import LogDir

NAME = "4.0-tv2/tv2-clean"
LINE = re.compile(r"^\| offset: (\d+) .*payload: (.*)$")


def test_every_record_matches_kafka_dump_log(real_kafka):
    d = real_kafka.extract(NAME)
    dump = {}
    for line in (real_kafka.answers(NAME) / "dumps" / "cluster-metadata-0.txt").read_text().splitlines():
        m = LINE.match(line)
        if m:
            dump[int(m.group(1))] = m.group(2)
    part = LogDir(d).partition("__cluster_metadata", 0)
    assert part is not None
    seen = {}
    for _seg, buf, header in part.iter_batch_buffers(0):
        if header.is_control:
            continue
        for rec in iter_records(buf, header):
            seen[rec.offset] = metadata_json(decode_metadata_record(rec.value))
    assert len(seen) == len(dump) == 602
    assert seen == dump


def test_the_image_of_the_tv2_metadata_log(real_kafka):
    """What the dump says, read by hand: metadata.version 25, group.version 1, transaction.version 2 (offsets
    2-4, the bootstrap transaction), five topics (orders 3, payments 2, tv2probe 1, and 50 each for the
    internal topics), broker 1, one producer-id block ending at 1000."""
    image = read_cluster_image(real_kafka.extract(NAME) / "__cluster_metadata-0")
    assert image.features == {"metadata.version": 25, "group.version": 1, "transaction.version": 2}
    assert image.feature_offsets["transaction.version"] == 4
    assert {n: len(t.partitions) for n, t in image.topics.items()} == {
        "orders": 3, "payments": 2, "tv2probe": 1, "__transaction_state": 50, "__consumer_offsets": 50}
    assert image.topics["orders"].topic_id == "rKsyPVduRqS0qACQySMavw"
    assert set(image.brokers) == {1} and image.producer_id_blocks == [(1, 9, 1000)]
    assert image.end_offset == 603


def test_dump_segment_prints_what_kafka_dump_log_printed(real_kafka, monkeypatch):
    """``dump-segment --files F --cluster-metadata-decoder`` (kafka-dump-log.sh's own spelling) prints the
    real tool's output line for line (``DumpLogSegments.dumpLog`` with ``ClusterMetadataLogMessageParser``;
    the 4.0.0-SNAPSHOT tool prints a LEADER_CHANGE control record as ``controlType: LEADER_CHANGE(2)``)."""
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    d = real_kafka.extract(NAME)
    monkeypatch.chdir(d.parent)
    rel = f"{d.name}/__cluster_metadata-0/00000000000000000000.log"
    res = CliRunner().invoke(app, ["dump-segment", "--files", rel, "--cluster-metadata-decoder"])
    assert res.exit_code == 0, res.output
    expected = (real_kafka.answers(NAME) / "dumps" / "cluster-metadata-0.txt").read_text()
    # the tool ran from the folder above the extracted one: its Dumping line names "data/tv2-clean/..."
    expected = expected.replace("Dumping data/", "Dumping ", 1)
    assert res.stdout.splitlines() == expected.splitlines()
    # --decoder cluster-metadata is the same; without a decoder, the folder name picks it
    same = CliRunner().invoke(app, ["dump-segment", rel, "--decoder", "cluster-metadata"])
    auto = CliRunner().invoke(app, ["dump-segment", rel, "--print-data"])
    assert same.stdout == res.stdout == auto.stdout
