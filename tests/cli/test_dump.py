"""dump-segment / dump-index / dump-snapshot / dump-txnindex through Typer's CliRunner."""

from __future__ import annotations

import base64
import json
import re

import pytest
import yaml

BATCH_KEYS = ["base_offset", "last_offset", "count", "position", "size", "magic", "crc", "crc_valid",
              "compression", "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
              "last_sequence", "is_transactional", "is_control", "control_type", "coordinator_epoch",
              "base_timestamp_ms", "max_timestamp_ms"]


def one_line_error(result, *needles):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kafkatx: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


# ---------------------------------------------------------------- text layout


def test_text_layout_matches_kafka_dump_log(invoke, pid, segment):
    r = invoke("dump-segment", segment.log, "--deep-iteration")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dumping {segment.log}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith(
        f"baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: {pid} "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1002 size: ")
    assert re.search(r" magic: 2 compresscodec: none crc: \d+ isvalid: true$", lines[2])
    assert lines[3] == "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 7 sequence: 0 headerKeys: [h1,h2]"
    marker = next(line for line in lines if "endTxnMarker: COMMIT" in line)
    assert marker == ("| offset: 3 CreateTime: 1010 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                      "endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert any(line.endswith("endTxnMarker: ABORT coordinatorEpoch: 5") for line in lines)
    gz = next(line for line in lines if line.startswith("baseOffset: 7"))
    assert f"position: {segment.positions[4]} " in gz and "compresscodec: gzip" in gz
    assert "payload" not in r.stdout  # only with --print-data
    # 5 batch lines + 9 record lines + 2 heading lines
    assert len(lines) == 2 + 5 + 9


def test_shallow_by_default_and_print_data(invoke, segment):
    shallow = invoke("dump-segment", segment.log).stdout.splitlines()
    assert not any(line.startswith("|") for line in shallow)
    assert len(shallow) == 2 + 5
    data = invoke("dump-segment", segment.log, "--print-data").stdout
    assert "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 7 sequence: 0 headerKeys: [h1,h2] " \
           "key: k0 payload: value-0" in data
    # no key, binary value: hex by default, base64 on request
    assert "headerKeys: [] payload: 00ff62696e" in data
    b64 = invoke("dump-segment", segment.log, "--print-data", "--payload-encoding", "base64").stdout
    assert "payload: " + base64.b64encode(b"\x00\xffbin").decode() in b64


# ---------------------------------------------------------------- structured formats


def test_json_keys_and_records(invoke, segment):
    r = invoke("dump-segment", segment.log, "--deep-iteration", "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert [b["base_offset"] for b in doc] == [0, 3, 4, 6, 7]
    assert list(doc[0])[: len(BATCH_KEYS)] == BATCH_KEYS
    assert [b["position"] for b in doc] == segment.positions
    assert doc[1]["control_type"] == "COMMIT" and doc[1]["coordinator_epoch"] == 5
    assert doc[3]["control_type"] == "ABORT"
    assert doc[0]["control_type"] is None and doc[0]["coordinator_epoch"] is None
    assert doc[4]["compression"] == "gzip" and doc[4]["producer_id"] == -1
    assert all(b["crc_valid"] is True for b in doc)
    rec = doc[0]["records"][1]
    assert rec == {"offset": 1, "timestamp_ms": 1001, "key": "k1", "value": "value-1",
                   "headers": [{"key": "h1", "value": "x"}, {"key": "h2", "value": None}]}
    assert doc[2]["records"][0]["key"] is None
    assert doc[2]["records"][0]["value"] == "00ff62696e"
    assert "decoded" not in rec  # orders-0 is no internal topic: no decoder


def test_json_shallow_has_no_records(invoke, segment):
    doc = json.loads(invoke("dump-segment", segment.log, "--format", "json").stdout)
    assert all("records" not in b for b in doc)


def test_jsonl_yaml_table(invoke, segment):
    lines = invoke("dump-segment", segment.log, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line)["last_offset"] for line in lines] == [2, 3, 5, 6, 8]
    data = yaml.safe_load(invoke("dump-segment", segment.log, "--format", "yaml").stdout)
    assert [b["is_control"] for b in data] == [False, True, False, True, False]
    table = invoke("dump-segment", segment.log, "--format", "table").stdout
    assert "base_offset" in table and "COMMIT" in table


def test_start_end_offset_and_max_bytes(invoke, segment):
    def offsets(*args):
        r = invoke("dump-segment", segment.log, "--format", "jsonl", *args)
        assert r.exit_code == 0, r.stderr
        return [json.loads(line)["base_offset"] for line in r.stdout.splitlines()]

    assert offsets("--start-offset", "5") == [4, 6, 7]
    assert offsets("--start-offset", "4", "--end-offset", "6") == [4, 6]
    assert offsets("--end-offset", "3") == [0, 3]
    # a limit that cuts the second batch: like Kafka, not a finding
    assert offsets("--max-bytes", str(segment.positions[1] + 10)) == [0]
    r = invoke("dump-segment", segment.log, "--start-offset", "6", "--end-offset", "2")
    assert r.exit_code == 2


def test_start_offset_uses_the_index(invoke, segment):
    # Make the first batch unreadable; the index entry (5 -> positions[2]) lets us skip it.
    raw = bytearray(segment.log.read_bytes())
    raw[16] = 77
    segment.log.write_bytes(bytes(raw))
    r = invoke("dump-segment", segment.log, "--start-offset", "5", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["base_offset"] for x in r.stdout.splitlines()] == [4, 6, 7]


# ---------------------------------------------------------------- findings and errors


def test_bad_crc_is_a_finding(invoke, segment):
    raw = bytearray(segment.log.read_bytes())
    raw[segment.positions[1] - 3] ^= 0xFF  # inside batch 0's last record value
    segment.log.write_bytes(bytes(raw))
    r = invoke("dump-segment", segment.log, "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert [b["crc_valid"] for b in doc] == [False, True, True, True, True]
    one_line_error(r, str(segment.log), "byte 0", "CRC")
    assert "isvalid: false" in invoke("dump-segment", segment.log).stdout
    r = invoke("dump-segment", segment.log, "--no-verify-crc", "--format", "json")
    assert r.exit_code == 0 and r.stderr == ""
    assert all(b["crc_valid"] is None for b in json.loads(r.stdout))


def test_trailing_bytes_reported(invoke, segment):
    size = segment.log.stat().st_size
    with segment.log.open("ab") as fh:
        fh.write(b"\x00" * 5)
    r = invoke("dump-segment", segment.log)
    assert r.exit_code == 1
    assert r.stdout.splitlines()[-1] == f"Found 5 invalid bytes at the end of {segment.log.name}"
    one_line_error(r, str(segment.log), f"byte {size}", "5 trailing bytes")
    r = invoke("dump-segment", segment.log, "--format", "json")
    last = json.loads(r.stdout)[-1]
    assert last == {"file": str(segment.log), "trailing_bytes": 5, "position": size, "error": last["error"]}


def test_truncated_segment(invoke, segment):
    data = segment.log.read_bytes()
    segment.log.write_bytes(data[: segment.positions[2] + 30])
    r = invoke("dump-segment", segment.log, "--format", "jsonl")
    assert r.exit_code == 1
    assert [json.loads(x).get("base_offset") for x in r.stdout.splitlines()] == [0, 3, None]
    one_line_error(r, str(segment.log), f"byte {segment.positions[2]}")


def test_garbage_file(invoke, tmp_path):
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b"this is not a kafka segment at all, just text" * 3)
    r = invoke("dump-segment", path)
    # no batch from the first byte on and no torn write: not a segment, input unreadable (cli.md: exit 3)
    assert r.exit_code == 3
    one_line_error(r, str(path), "byte ")
    assert "not a Kafka log segment" in r.stderr


def test_empty_segment(invoke, tmp_path):
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b"")
    r = invoke("dump-segment", path, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout) == []


def test_missing_file_and_bad_extension(invoke, tmp_path, segment):
    r = invoke("dump-segment", segment.log, tmp_path / "nope.log")
    assert r.exit_code == 3 and r.stdout == ""  # checked before any output
    one_line_error(r, str(tmp_path / "nope.log"), "no such file")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    r = invoke("dump-segment", other)
    assert r.exit_code == 2
    one_line_error(r, str(other))
    assert invoke("dump-index", segment.log).exit_code == 2
    assert invoke("dump-snapshot", segment.index).exit_code == 2
    assert invoke("dump-txnindex", segment.snapshot).exit_code == 2
    assert invoke("dump-segment", "--no-such-flag", segment.log).exit_code == 2


def test_corrupt_records_inside_intact_batch(invoke, tmp_path):
    from kafkatx.format.record_batch import Record, build_batch

    batch = bytearray(build_batch([Record(offset=0, timestamp=5, key=b"k", value=b"v")]))
    batch[57:61] = (5).to_bytes(4, "big")  # records count says 5, only 1 is there
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(bytes(batch))
    r = invoke("dump-segment", path, "--deep-iteration", "--no-verify-crc")
    assert r.exit_code == 1
    one_line_error(r, str(path), "byte ")


# ---------------------------------------------------------------- decoders


def test_auto_transaction_log_decoder(invoke, pid, txn_state_segment):
    r = invoke("dump-segment", txn_state_segment, "--print-data", "--kafka-version", "3.8")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert ("key: transaction_metadata::transactionalId=tx-a payload: producerId:4000,producerEpoch:0,"
            "state=Ongoing,partitions=[orders-0,orders-1],txnLastUpdateTimestamp=2000,txnTimeoutMs=60000") in out
    assert "key: transaction_metadata::transactionalId=tx-gone payload: <DELETE>" in out
    assert "key: Error at offset 2, skipping." in out
    # the default, Kafka 4.x (KAFKA-18207): TransactionLogMessageParser's JSON, the unknown-type line
    out = invoke("dump-segment", txn_state_segment, "--print-data").stdout
    assert ('key: {"type":"0","data":{"transactionalId":"tx-a"}} payload: {"version":"0","data":'
            '{"producerId":4000,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":1,'
            '"transactionPartitions":[{"topic":"orders","partitionIds":[1,0]}],'  # as stored
            '"transactionLastUpdateTimestampMs":2000,"transactionStartTimestampMs":') in out
    assert 'key: {"type":"0","data":{"transactionalId":"tx-gone"}} payload: <DELETE>' in out
    assert "key: Unknown record type 9 at offset 2, skipping.\n" in out
    doc = json.loads(invoke("dump-segment", txn_state_segment, "--deep-iteration", "--format", "json").stdout)
    decoded = doc[0]["records"][0]["decoded"]
    assert decoded["key"]["transactional_id"] == "tx-a"
    assert decoded["value"]["state"] == "Ongoing"
    assert decoded["value"]["producer_id"] == pid
    assert doc[1]["records"][0]["decoded"]["value"] is None
    assert "error" in doc[2]["records"][0]["decoded"]
    none = json.loads(invoke("dump-segment", txn_state_segment, "--deep-iteration", "--decoder", "none",
                             "--format", "json").stdout)
    assert "decoded" not in none[0]["records"][0]


def test_explicit_decoder_implies_print_data(invoke, tmp_path, txn_state_bytes):
    path = tmp_path / "copied" / f"{0:020d}.log"
    path.parent.mkdir()
    path.write_bytes(txn_state_bytes)
    assert "transactionalId=tx-a" not in invoke("dump-segment", path, "--print-data").stdout
    out = invoke("dump-segment", path, "--decoder", "transaction-log", "--kafka-version", "3.8").stdout
    assert "key: transaction_metadata::transactionalId=tx-a payload: producerId:4000" in out


def test_offsets_decoder(invoke, tmp_path):
    from kafkatx.format.consumer_offsets import (
        OffsetCommitKey,
        OffsetCommitValue,
        encode_offset_commit_key,
        encode_offset_commit_value,
    )
    from kafkatx.format.record_batch import Record, build_batch

    key = encode_offset_commit_key(OffsetCommitKey(version=1, group="g1", topic="orders", partition=3))
    value = encode_offset_commit_value(OffsetCommitValue(version=3, offset=42, leader_epoch=7, metadata="",
                                                         commit_timestamp=9_000))
    folder = tmp_path / "__consumer_offsets-12"
    folder.mkdir()
    path = folder / f"{0:020d}.log"
    path.write_bytes(build_batch([Record(offset=0, timestamp=9_000, key=key, value=value)]))
    out = invoke("dump-segment", path, "--print-data").stdout
    line = next(x for x in out.splitlines() if x.startswith("|"))
    key_json = json.loads(line.split(" key: ", 1)[1].split(" payload: ", 1)[0])
    assert key_json == {"type": "1", "data": {"group": "g1", "topic": "orders", "partition": 3}}
    payload = json.loads(line.split(" payload: ", 1)[1])
    assert payload["version"] == "3" and payload["data"]["offset"] == 42
    doc = json.loads(invoke("dump-segment", path, "--deep-iteration", "--format", "json").stdout)
    assert doc[0]["records"][0]["decoded"]["value"]["offset"] == 42


# ---------------------------------------------------------------- index, snapshot, txnindex


def test_dump_index_offset_and_time(invoke, segment):
    r = invoke("dump-index", segment.index)
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [f"Dumping {segment.index}", "offset: 2 position: 0",
                                     f"offset: 5 position: {segment.positions[2]}"]
    doc = json.loads(invoke("dump-index", segment.timeindex, "--format", "json").stdout)
    assert doc == [{"timestamp_ms": 1002, "offset": 2}, {"timestamp_ms": 1021, "offset": 5}]
    r = invoke("dump-index", segment.index, "--verify", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert all(row["problem"] is None for row in json.loads(r.stdout))
    r = invoke("dump-index", segment.timeindex, "--verify")
    assert r.exit_code == 0, r.stderr


def test_dump_index_verify_finds_bad_entries(invoke, segment):
    from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
    from kafkatx.format.time_index import TimeIndexEntry, encode_time_index

    segment.index.write_bytes(encode_offset_index([
        OffsetIndexEntry(offset=2, position=0),
        OffsetIndexEntry(offset=4, position=segment.positions[2] + 3),  # not a batch start
        OffsetIndexEntry(offset=6, position=segment.positions[4]),  # batch there starts at 7 > 6
    ], 0))
    r = invoke("dump-index", segment.index, "--verify", "--format", "json")
    assert r.exit_code == 1
    rows = json.loads(r.stdout)
    assert rows[0]["problem"] is None
    assert rows[1]["problem"] and rows[2]["problem"] and "starts at offset 7" in rows[2]["problem"]
    assert len(r.stderr.strip().splitlines()) == 2
    assert f"{segment.index}: byte 8:" in r.stderr and f"{segment.index}: byte 16:" in r.stderr
    segment.timeindex.write_bytes(encode_time_index([TimeIndexEntry(timestamp=999, offset=2)], 0))
    r = invoke("dump-index", segment.timeindex, "--verify")
    assert r.exit_code == 1
    one_line_error(r, str(segment.timeindex), "byte 0", "max timestamp 1002")


def test_dump_index_truncated_is_unreadable(invoke, segment):
    segment.index.write_bytes(segment.index.read_bytes()[:11])
    r = invoke("dump-index", segment.index)
    assert r.exit_code == 3
    one_line_error(r, str(segment.index), "byte 8")


def test_dump_snapshot(invoke, pid, segment):
    r = invoke("dump-snapshot", segment.snapshot, "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["version"] == 1 and doc["crc_valid"] is True
    assert doc["entries"][0] == {"producer_id": pid, "producer_epoch": 0, "last_sequence": 4, "last_offset": 5,
                                 "offset_delta": 1, "timestamp_ms": 1021, "coordinator_epoch": 5,
                                 "current_txn_first_offset": None}
    assert doc["entries"][1]["current_txn_first_offset"] == 8
    text = invoke("dump-snapshot", segment.snapshot).stdout
    assert f"producerId: {pid + 1} producerEpoch: 3 coordinatorEpoch: 1 currentTxnFirstOffset: OptionalLong[8]" \
        in text
    table = invoke("dump-snapshot", segment.snapshot, "--format", "table").stdout
    assert "crc_valid true" in table and "producer_id" in table


def test_dump_snapshot_bad_crc_and_truncated(invoke, segment):
    raw = bytearray(segment.snapshot.read_bytes())
    raw[-1] ^= 1
    segment.snapshot.write_bytes(bytes(raw))
    r = invoke("dump-snapshot", segment.snapshot, "--format", "json")
    assert r.exit_code == 1 and json.loads(r.stdout)["crc_valid"] is False
    one_line_error(r, str(segment.snapshot), "CRC")
    segment.snapshot.write_bytes(bytes(raw[:20]))
    r = invoke("dump-snapshot", segment.snapshot)
    assert r.exit_code == 3
    one_line_error(r, str(segment.snapshot), "byte ")


def test_dump_txnindex(invoke, pid, segment):
    r = invoke("dump-txnindex", segment.txnindex, "--format", "json")
    assert json.loads(r.stdout) == [{"version": 0, "producer_id": pid, "first_offset": 4, "last_offset": 6,
                                     "last_stable_offset": 7}]
    assert invoke("dump-txnindex", segment.txnindex).stdout.splitlines()[1] == \
        f"version: 0 producerId: {pid} firstOffset: 4 lastOffset: 6 lastStableOffset: 7"
    segment.txnindex.write_bytes(segment.txnindex.read_bytes() + b"\x00" * 10)
    r = invoke("dump-txnindex", segment.txnindex)
    assert r.exit_code == 3
    one_line_error(r, str(segment.txnindex), "byte 34")


def test_dump_segment_dispatches_by_extension(invoke, pid, segment):
    r = invoke("dump-segment", segment.index, segment.txnindex, segment.snapshot, "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc[0] == {"offset": 2, "position": 0}
    assert doc[2]["producer_id"] == pid and doc[2]["last_stable_offset"] == 7
    assert doc[3]["version"] == 1 and len(doc[3]["entries"]) == 2


@pytest.mark.parametrize("fmt", ["text", "table", "json", "jsonl", "yaml"])
def test_every_format_runs_for_every_dump_command(invoke, segment, fmt):
    for args in (("dump-segment", segment.log, "--deep-iteration"), ("dump-index", segment.index),
                 ("dump-index", segment.timeindex), ("dump-snapshot", segment.snapshot),
                 ("dump-txnindex", segment.txnindex)):
        r = invoke(*args, "--format", fmt)
        assert r.exit_code == 0, (args, r.stderr)
        assert r.stdout.strip()


def test_legacy_magic_segment(invoke, tmp_path):
    from kafkatx.format.record_batch import Record, build_batch

    data = build_batch([Record(offset=i, timestamp=10 + i, key=None, value=b"m%d" % i) for i in range(2)],
                       magic=1)
    path = tmp_path / "old-0" / f"{0:020d}.log"
    path.parent.mkdir()
    path.write_bytes(data)
    r = invoke("dump-segment", path, "--deep-iteration")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2].startswith("offset: 0 position: 0 CreateTime: 10 ") and " magic: 1 " in lines[2]
    assert lines[4].startswith("offset: 1 position: ")
