"""A repair on the real Kafka 4.0 TV2 dir writes what a TV2 coordinator writes.

``4.0-tv2/tv2-clean`` was written by a broker whose metadata log finalizes ``transaction.version=2``
(``FEATURE_LEVEL_RECORD`` at offset 4 of ``__cluster_metadata-0``, README and ``dumps/``). ``tx-hang-F``
(producer 6, epoch 0, timeout 900000 ms, five partitions) is ``Ongoing``; at its start + 16 min it is past
its timeout, and a running coordinator would abort it (``TransactionCoordinator.abortTimedOutTransactions``).

Expected values, reasoned from Kafka's source (``TransactionMetadata.prepareFenceProducerEpoch`` then
``prepareAbortOrCommit`` with the cluster's version, ``TransactionStateManager.transactionVersionLevel``):
fence 0 -> 1, then ``supportsEpochBump`` (TV2) 1 -> 2: ``PrepareAbort`` and ``CompleteAbort`` at epoch 2 with
``ClientTransactionVersion=2`` (flexible v1 values), ABORT markers at epoch 2 with coordinator epoch 0 (the
leader epoch of ``__transaction_state-24``) at each partition's old log end (the broker's recorded high
watermarks: clean shutdown, HW = log end). That is what the broker itself wrote when it timed out
``tx-timeout-E`` (epoch 0 -> 2, ``ClientTransactionVersion=2``, markers at epoch 2, coordinator epoch 0), which
the test reads back from the same dir as the reference.
"""

from __future__ import annotations

import json

from kafka.record import MemoryRecords
from msgspec.structs import replace
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.format.txn_log import decode_txn_log_key, decode_txn_log_value, encode_txn_log_value

NAME = "4.0-tv2/tv2-clean"
PARTITIONS = ["orders-0", "orders-1", "orders-2", "payments-0", "payments-1"]


def _batches(folder):
    for log in sorted(folder.glob("*.log")):
        recs = MemoryRecords(log.read_bytes())
        while (b := recs.next_batch()) is not None:
            yield b


def _markers(folder, producer_id):
    """offset -> (epoch, is commit, coordinator epoch) of the producer's control batches."""
    out = {}
    for b in _batches(folder):
        if b.is_control_batch and b.producer_id == producer_id:
            (rec,) = list(b)
            out[b.base_offset] = (b.producer_epoch, rec.key[3] == 1, int.from_bytes(rec.value[2:6], "big"))
    return out


def _values(folder, tid):
    return [decode_txn_log_value(r.value) for b in _batches(folder) for r in b
            if decode_txn_log_key(r.key).transactional_id == tid and r.value is not None]


def test_abort_all_writes_what_a_tv2_coordinator_writes(real_kafka, tmp_path):
    d = real_kafka.copy(NAME, tmp_path / "tv2")
    described = real_kafka.answer_json(NAME, "describe_transactions")
    hws = {k: v["high_watermark"] for k, v in real_kafka.answer_json(NAME, "list_offsets")["partitions"].items()}
    f = described["tx-hang-F"]
    assert (f["state"], f["producer_id"], f["producer_epoch"]) == ("Ongoing", 6, 0)
    now = f["transaction_start_time_ms"] + 16 * 60_000

    # The reference: what the broker wrote for tx-timeout-E (producer 5), aborted by its own timeout.
    e_values = _values(d / "__transaction_state-36", "tx-timeout-E")
    assert [(v.state.kafka_name, v.producer_epoch, v.client_transaction_version) for v in e_values[-2:]] == [
        ("PrepareAbort", 2, 2), ("CompleteAbort", 2, 2)]
    assert set(_markers(d / "orders-0", 5).values()) == {(2, False, 0)}

    res = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(d), "--all", "--execute", "--now", str(now),
                                   "--journal", str(tmp_path / "j"), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "transaction version 2 from the cluster's finalized transaction.version in __cluster_metadata-0 at " \
           "offset 4" in res.stderr
    rows = json.loads(res.stdout)
    assert sorted(f"{r['topic']}-{r['partition']}" for r in rows) == PARTITIONS
    assert {(r["action"], r["marker_epoch"], r["coordinator_epoch"], r["result"]) for r in rows} == {
        ("abort-timed-out", 2, 0, "ok")}
    for p in PARTITIONS:
        assert _markers(d / p, 6) == {hws[p]: (2, False, 0)}, p
    f_values = _values(d / "__transaction_state-24", "tx-hang-F")
    prepare, complete = f_values[-2:]
    assert (prepare.state.kafka_name, prepare.producer_epoch, prepare.client_transaction_version,
            prepare.version, prepare.start_timestamp) == ("PrepareAbort", 2, 2, 1, f["transaction_start_time_ms"])
    assert {(t, p) for t, ps in prepare.partitions for p in ps} == {
        (p.rsplit("-", 1)[0], int(p.rsplit("-", 1)[1])) for p in PARTITIONS}
    assert (complete.state.kafka_name, complete.producer_epoch, complete.client_transaction_version,
            complete.partitions) == ("CompleteAbort", 2, 2, ())
    # the same fields the broker wrote for tx-timeout-E, apart from ids, timestamps and the timeout
    for ours, theirs in ((prepare, e_values[-2]), (complete, e_values[-1])):
        assert (ours.version, ours.producer_epoch, ours.client_transaction_version, ours.previous_producer_id,
                ours.next_producer_id, ours.next_producer_epoch) == \
               (theirs.version, theirs.producer_epoch, theirs.client_transaction_version,
                theirs.previous_producer_id, theirs.next_producer_id, theirs.next_producer_epoch)

    # find-hanging, lag and list-txn tell the same story afterwards
    def run(*args):
        out = CliRunner().invoke(app, [*args, "--log-dir", str(d), "--format", "json"])
        return out.exit_code, json.loads(out.stdout)

    assert run("find-hanging", "--now", str(now)) == (0, [])
    _, lag = run("lag")
    by = {f"{r['topic']}-{r['partition']}": r for r in lag}
    for p in PARTITIONS:
        assert (by[p]["lso"], by[p]["high_watermark"], by[p]["lag"], by[p]["open_transactions"]) == \
               (hws[p] + 1, hws[p] + 1, 0, 0), p
    _, txns = run("list-txn")
    row = next(t for t in txns if t["transactional_id"] == "tx-hang-F")
    assert (row["state"], row["producer_id"], row["producer_epoch"], row["partitions"]) == \
           ("CompleteAbort", 6, 2, [])


def test_replay_takes_the_partition_count_from_the_metadata(real_kafka):
    d = real_kafka.extract(NAME)
    res = CliRunner().invoke(app, ["list-txn", "--log-dir", str(d), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "__transaction_state has 50 partitions: taken from" in res.stderr
    assert "__cluster_metadata-0" in res.stderr


def _raw_values(folder, tid):
    """The raw value bytes of ``tid``'s records, in log order."""
    return [bytes(r.value) for b in _batches(folder) for r in b
            if decode_txn_log_key(r.key).transactional_id == tid and r.value is not None]


def _marker_batches(folder, producer_id):
    """offset -> (epoch, attributes, control key, control value) of the producer's control batches."""
    out = {}
    for b in _batches(folder):
        if b.is_control_batch and b.producer_id == producer_id:
            (rec,) = list(b)
            out[b.base_offset] = (b.producer_epoch, b.attributes, bytes(rec.key), bytes(rec.value))
    return out


def _timeout_abort(real_kafka, tmp_path, *version):
    tmp_path.mkdir(parents=True, exist_ok=True)
    d = real_kafka.copy(NAME, tmp_path / "tv2")
    f = real_kafka.answer_json(NAME, "describe_transactions")["tx-hang-F"]
    now = f["transaction_start_time_ms"] + 16 * 60_000
    res = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(d), "--transactional-id", "tx-hang-F",
                                   *version, "--execute", "--now", str(now), "--journal", str(tmp_path / "j"),
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    return d, res, now


def test_kafka_4_0_writes_the_bytes_the_recorded_broker_wrote(real_kafka, tmp_path):
    """The metadata log finalizes metadata.version 25 (4.0-IV3, MetadataVersion), so the repair follows Kafka
    4.0 unasked, and --kafka-version 4.0 says the same. Kafka 4.0's TransactionCoordinator.endTransaction sets
    the fenced epoch into txnMetadata before prepareAbortOrCommit bumps it again (TV2): tx-hang-F at epoch 0
    is aborted at 2. The PrepareAbort/CompleteAbort values are byte for byte what the broker wrote for
    tx-timeout-E, once E's own producer id, timeout, partitions and timestamps are put in; the ABORT markers
    are byte for byte E's (control key and value, batch attributes, epoch)."""
    for version in ((), ("--kafka-version", "4.0")):
        d, res, now = _timeout_abort(real_kafka, tmp_path / str(len(version)), *version)
        assert "aborted as Kafka 4.0 does at transaction version 2" in res.stderr
        assert "Kafka 4.0 from " + ("--kafka-version" if version else
                                    "metadata.version 25 = 4.0-IV3 in __cluster_metadata-0") in res.stderr
        theirs = _raw_values(d / "__transaction_state-36", "tx-timeout-E")[-2:]
        ours = _raw_values(d / "__transaction_state-24", "tx-hang-F")[-2:]
        for their_raw, our_raw in zip(theirs, ours, strict=True):
            their, our = decode_txn_log_value(their_raw), decode_txn_log_value(our_raw)
            assert our.producer_epoch == 2
            transplanted = replace(their, producer_id=our.producer_id, transaction_timeout_ms=our.transaction_timeout_ms,
                                   partitions=our.partitions, last_update_timestamp=our.last_update_timestamp,
                                   start_timestamp=our.start_timestamp)
            assert encode_txn_log_value(transplanted) == our_raw
        e_marker = next(iter(_marker_batches(d / "orders-0", 5).values()))
        f_markers = _marker_batches(d / "orders-0", 6)
        assert list(f_markers.values()) == [e_marker]  # epoch 2, ABORT, coordinator epoch 0


def test_kafka_4_1_aborts_at_one_epoch_bump(real_kafka, tmp_path):
    """--kafka-version 4.1: KAFKA-19367 (PR #19910) leaves the unfenced epoch in txnMetadata, so the
    coordinator's timeout abort under TV2 lands at E+1: PrepareAbort, ABORT markers and CompleteAbort of
    tx-hang-F (epoch 0) at epoch 1, still ClientTransactionVersion 2 and flexible v1 values."""
    d, res, _now = _timeout_abort(real_kafka, tmp_path, "--kafka-version", "4.1")
    assert "aborted as Kafka 4.1 does" in res.stderr and "Kafka 4.1 from --kafka-version" in res.stderr
    assert "at producer epoch 1" in res.stderr
    assert {r["marker_epoch"] for r in json.loads(res.stdout)} == {1}
    prepare, complete = _values(d / "__transaction_state-24", "tx-hang-F")[-2:]
    assert [(v.state.kafka_name, v.producer_epoch, v.client_transaction_version, v.version)
            for v in (prepare, complete)] == [("PrepareAbort", 1, 2, 1), ("CompleteAbort", 1, 2, 1)]
    for p in PARTITIONS:
        assert set(_markers(d / p, 6).values()) == {(1, False, 0)}, p
