"""A repair on the real Kafka 4.0 TV2 dir writes what a TV2 coordinator writes (issue 27).

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
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.format.txn_log import decode_txn_log_key, decode_txn_log_value

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
    assert "transaction version 2 (the cluster's finalized transaction.version in __cluster_metadata-0 at " \
           "offset 4)" in res.stderr
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
