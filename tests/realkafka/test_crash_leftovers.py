"""What a real broker killed with ``kill -9`` leaves is what Kafka says it is: startup work, not corruption.

The crashed dir (README of the real-broker data) has no ``.kafka_cleanshutdown`` and every active
segment's ``.index``/``.timeindex`` preallocated to ``segment.index.bytes`` (10 MiB; the time index
rounded down to a multiple of its 12-byte entry, ``AbstractIndex.roundDownToExactMultiple``) and
zero-filled. ``LogSegment.sanityCheck`` skips offset and time index checks and
``LogLoader.recoverLog`` recovers the segments from the recovery point on, rebuilding both indexes
(``LogSegment.recover``): each such file is one ``startup-rebuild-index`` info row, none an error.
The broker the dir came from restarted and answered from it (``test_answers.py``).
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.session import offline

SEGMENT_INDEX_BYTES = 10 * 1024 * 1024  # the broker's segment.index.bytes (default)


def _preallocated_files(log_dir) -> set[str]:
    """The index files at their preallocated size, found from the files' sizes alone."""
    sizes = {".index": SEGMENT_INDEX_BYTES - SEGMENT_INDEX_BYTES % 8,
             ".timeindex": SEGMENT_INDEX_BYTES - SEGMENT_INDEX_BYTES % 12}
    return {str(p) for p in log_dir.glob("*/*index") if p.suffix in sizes and p.stat().st_size == sizes[p.suffix]}


def test_verify_on_the_crashed_dir_has_no_error_row(real_kafka):
    d = real_kafka.extract("3.8.0/crashed")
    assert not (d / ".kafka_cleanshutdown").exists()
    expected = _preallocated_files(d)
    assert len(expected) >= 10  # every partition's active segment: both indexes
    rows = offline.verify([d]).rows
    assert [r for r in rows if r.severity == "error"] == []
    rebuilt = [r for r in rows if r.check == "startup-rebuild-index"]
    assert {r.file for r in rebuilt} == expected
    assert len(rebuilt) == len(expected)  # once per file
    assert all(r.severity == "info" and "index preallocated, rebuilt at startup" in r.message for r in rebuilt)
    # the broker recovers the segment each of them belongs to
    recovered = {r.file for r in rows if r.check == "startup-recover-segment"}
    assert {f.rsplit(".", 1)[0] + ".log" for f in expected} <= recovered


def test_verify_cli_on_the_crashed_dir_exits_0(real_kafka):
    d = real_kafka.extract("3.8.0/crashed")
    result = CliRunner().invoke(app, ["verify", "--log-dir", str(d), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {r["severity"] for r in json.loads(result.stdout)} == {"info"}


def test_verify_on_the_clean_dir_has_no_row(real_kafka):
    # A clean shutdown trims every index (AbstractIndex.trimToValidSize on close) and skips recovery,
    # except for the KRaft metadata log: KafkaMetadataLog opens __cluster_metadata-0 with recovery point 0
    # and an unclean flag at every start, so its recovery (and the snapshot it deletes) are the only rows,
    # all info (the restarted brokers of startup/ log exactly that: tests/realkafka/test_startup.py).
    d = real_kafka.extract("3.8.0/clean")
    assert (d / ".kafka_cleanshutdown").exists()
    assert _preallocated_files(d) == set()
    rows = offline.verify([d]).rows
    assert {(r.partition, r.severity) for r in rows} == {("__cluster_metadata-0", "info")}
    assert "startup-recover-segment" in {r.check for r in rows}


def test_dump_index_verify_on_a_preallocated_real_index(real_kafka):
    d = real_kafka.extract("3.8.0/crashed")
    for path in sorted(_preallocated_files(d))[:4]:
        result = CliRunner().invoke(app, ["dump-index", path, "--verify", "--format", "json"])
        assert result.exit_code == 0, result.output
        assert "index preallocated (" in result.stderr
        assert all(row["problem"] is None for row in json.loads(result.stdout))


def test_lag_and_find_hanging_list_no_metadata_log_partition(real_kafka):
    # LogManager.loadLogs skips KafkaRaftServer.MetadataTopic: ListOffsets has no __cluster_metadata.
    d = real_kafka.extract("3.8.0/crashed")
    assert (d / "__cluster_metadata-0").is_dir()
    assert all(r.topic != "__cluster_metadata" for r in offline.lag([d]).rows)
    runner = CliRunner()
    lag = runner.invoke(app, ["lag", "--log-dir", str(d), "--format", "json"])
    assert lag.exit_code == 0 and "__cluster_metadata" not in lag.stdout
    refused = runner.invoke(app, ["lag", "--log-dir", str(d), "--topic", "__cluster_metadata"])
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1
    refused = runner.invoke(app, ["describe-producers", "--log-dir", str(d), "--topic", "__cluster_metadata",
                                  "--partition", "0"])
    assert refused.exit_code == 2
    # verify and dump-segment still read it
    assert any(r.partition == "__cluster_metadata-0" for r in offline.verify([d]).rows)
    dump = runner.invoke(app, ["dump-segment", str(d / "__cluster_metadata-0" / f"{0:020d}.log")])
    assert dump.exit_code == 0 and "baseOffset: 0" in dump.stdout
