"""Partition replay (markers, epochs, snapshots with CRC fallback), coordinator replay, LSO."""

from __future__ import annotations

from pathlib import Path

import pytest
from txn_builders import PartitionWriter, TxnLogWriter, snapshot_entry, txn_value, write_log_dir

from kafkatx.coordinator.state_manager import replay_transaction_log
from kafkatx.errors import DecodeError
from kafkatx.format.txn_log import TxnState, coordinator_partition
from kafkatx.storage.log_dir import open_log_dirs
from kafkatx.storage.lso import last_stable_offset, txn_index_last_stable_offset
from kafkatx.storage.replay import replay_partition

S = TxnState


def only_partition(log_dir: Path, name: str):
    (d,) = open_log_dirs([log_dir])
    return next(p for p in d.partitions() if p.name == name)


# ----------------------------------------------------------------------------- LSO

def test_lso_rules():
    assert last_stable_offset([], 10) == 10  # nothing open: the high watermark
    assert last_stable_offset([7, 3], 10) == 3  # earliest open first offset
    assert last_stable_offset([12], 10) == 10  # open beyond the HW: capped at the HW
    assert last_stable_offset([10], 10) == 10
    assert txn_index_last_stable_offset([], 41) == 42
    assert txn_index_last_stable_offset([30, 20], 41) == 20


# ----------------------------------------------------------------------------- partition replay

def test_open_commit_abort(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 3, ts=100)            # 0..2 producer 1 opens
    p.data(2, 5, 2, ts=110)            # 3..4 producer 2 opens
    p.data(-1, -1, 1, ts=115)          # 5 plain record, no producer state
    p.data(1, 0, 1, ts=120)            # 6 producer 1 continues its txn
    p.marker(1, 0, commit=True, ts=130)   # 7 ends producer 1
    p.data(3, 0, 1, txn=False, ts=140)    # 8 idempotent, not transactional
    p.marker(2, 5, commit=False, coordinator_epoch=3, ts=150)  # 9 aborts producer 2
    p.data(1, 0, 2, ts=160)            # 10..11 producer 1 opens again
    write_log_dir(tmp_path, [p])
    seen = []
    st = replay_partition(only_partition(tmp_path, "t-0"), keep_completed=True, on_completed=seen.append)
    assert st.log_end_offset == 12 and st.batches == 8 and st.snapshot_offset is None
    assert set(st.producers) == {1, 2, 3}
    assert [(t.producer_id, t.first_offset, t.last_offset, t.start_timestamp) for t in st.open_transactions] == \
        [(1, 10, 11, 160)]
    assert st.producers[2].current_txn_first_offset is None and st.producers[2].coordinator_epoch == 3
    assert st.producers[3].current_txn_first_offset is None and st.producers[3].last_offset == 8
    assert st.producers[1].last_sequence == 5  # 6 records written: sequences 0..5
    c1, c2 = st.completed
    assert seen == st.completed
    assert (c1.producer_id, c1.first_offset, c1.last_offset, c1.outcome, c1.marker_offset) == (1, 0, 6, "COMMIT", 7)
    assert (c2.producer_id, c2.first_offset, c2.last_offset, c2.outcome, c2.marker_offset) == (2, 3, 4, "ABORT", 9)
    # Kafka's txnindex LSO for the abort at 9: no other producer open then -> 9 + 1.
    assert c2.last_stable_offset == 10
    # ...while the commit at 7 left producer 2 (from 3) open.
    assert c1.last_stable_offset == 3
    assert not st.findings


@pytest.mark.parametrize("coordinator_epoch", [0, 1, 2, 3, 255, 256, 65_535, 2**31 - 1])
def test_marker_outcome_does_not_depend_on_the_coordinator_epoch(tmp_path, coordinator_epoch):
    # A COMMIT stays a COMMIT and an ABORT an ABORT whatever coordinator epoch the marker carries:
    # the type is the control key's, the epoch only the value's (EndTransactionMarker).
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2, ts=100)                                                      # 0..1 producer 1
    p.marker(1, 0, commit=True, coordinator_epoch=coordinator_epoch, ts=110)     # 2 commits it
    p.data(2, 0, 1, ts=120)                                                      # 3 producer 2
    p.marker(2, 0, commit=False, coordinator_epoch=coordinator_epoch, ts=130)    # 4 aborts it
    write_log_dir(tmp_path, [p])
    st = replay_partition(only_partition(tmp_path, "t-0"), keep_completed=True)
    assert [(c.producer_id, c.outcome, c.marker_offset, c.coordinator_epoch) for c in st.completed] == [
        (1, "COMMIT", 2, coordinator_epoch), (2, "ABORT", 4, coordinator_epoch)]
    assert st.open_transactions == []
    assert st.producers[1].coordinator_epoch == st.producers[2].coordinator_epoch == coordinator_epoch


def test_stale_markers_are_applied_as_the_log_loader_does(tmp_path):
    # ProducerAppendInfo with AppendOrigin.REPLICATION (how LogLoader rebuilds state from files)
    # only logs stale markers and applies them; a leader would have rejected them.
    p = PartitionWriter("t", 0)
    p.data(1, 4, 1)                                     # 0: epoch 4 opens
    p.marker(1, 3, commit=False)                        # 1: epoch 3 < 4: stale, still ends the txn
    p.data(2, 0, 1)                                     # 2
    p.marker(2, 0, commit=True, coordinator_epoch=5)    # 3: ends producer 2, coordinator epoch 5
    p.data(2, 0, 1)                                     # 4: opens again
    p.marker(2, 0, commit=True, coordinator_epoch=4)    # 5: zombie coordinator (4 < 5): stale, applied
    write_log_dir(tmp_path, [p])
    st = replay_partition(only_partition(tmp_path, "t-0"))
    assert st.open_transactions == []
    assert st.producers[1].producer_epoch == 3          # maybeUpdateProducerEpoch takes the marker's epoch
    stale = [f for f in st.findings if f.check == "stale-marker"]
    assert [f.offset for f in stale] == [1, 5]
    assert "producer epoch 3 < 4" in stale[0].message and "coordinator epoch 4 < 5" in stale[1].message
    assert stale[0].file.endswith("00000000000000000000.log") and stale[0].position > 0
    assert {f.severity for f in stale} == {"warning"}


def test_marker_with_higher_epoch_ends_txn_and_bumps_epoch(tmp_path):
    # The coordinator's timeout abort bumps the epoch and writes the marker with the new epoch.
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2)
    p.marker(1, 1, commit=False)
    write_log_dir(tmp_path, [p])
    st = replay_partition(only_partition(tmp_path, "t-0"))
    assert st.open_transactions == [] and st.producers[1].producer_epoch == 1


def test_snapshot_used_and_bad_crc_falls_back(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2, ts=100)     # 0..1 opens txn of producer 1
    p.roll()
    p.data(2, 0, 1, ts=200)     # 2 opens txn of producer 2
    good = p.snapshot([snapshot_entry(1, 0, last_seq=1, last_offset=1, ts=100, txn_first=0)], offset=2)
    p.marker(1, 0, commit=True)  # 3
    p.roll()
    # A newer snapshot claiming producer 7 is open; its CRC is broken below, so it must not be used.
    bad = p.snapshot([snapshot_entry(7, 0, last_offset=3, txn_first=3)], offset=4)
    write_log_dir(tmp_path, [p])
    snap = tmp_path / "t-0" / f"{bad:020d}.snapshot"
    raw = bytearray(snap.read_bytes())
    raw[-1] ^= 0xFF
    snap.write_bytes(bytes(raw))

    st = replay_partition(only_partition(tmp_path, "t-0"))
    assert st.snapshot_offset == good == 2 and st.replay_start_offset == 2
    assert st.batches == 2  # only offsets 2 and 3 were read
    assert 7 not in st.producers
    assert [(t.producer_id, t.first_offset) for t in st.open_transactions] == [(2, 2)]
    assert any("CRC" in n and str(bad) in n.split("/")[-1] for n in st.notices)


def test_snapshot_open_txn_gets_start_time_from_log(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 2, ts=12_345)  # 0..1 still open at the snapshot
    p.snapshot([snapshot_entry(1, 0, last_seq=1, last_offset=1, ts=12_345, txn_first=0)])
    write_log_dir(tmp_path, [p], clean_shutdown=True)  # a crash would delete the snapshot (recovery)
    st = replay_partition(only_partition(tmp_path, "t-0"))
    (t,) = st.open_transactions
    assert (st.snapshot_offset, t.first_offset, t.start_timestamp) == (2, 0, 12_345)


def test_all_snapshots_bad_replays_from_log_start(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 1)
    p.snapshot([snapshot_entry(9, 0, txn_first=0)], offset=1)
    write_log_dir(tmp_path, [p])
    snap = tmp_path / "t-0" / f"{1:020d}.snapshot"
    raw = bytearray(snap.read_bytes())
    raw[3] ^= 0x01  # inside the CRC field
    snap.write_bytes(bytes(raw))
    st = replay_partition(only_partition(tmp_path, "t-0"))
    assert st.snapshot_offset is None and set(st.producers) == {1}
    assert any("replayed from the log start" in n for n in st.notices)


def test_snapshot_past_log_end_is_ignored(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 1)
    p.snapshot([snapshot_entry(9, 0, txn_first=5)], offset=50)
    write_log_dir(tmp_path, [p], clean_shutdown=True)
    st = replay_partition(only_partition(tmp_path, "t-0"))
    assert st.snapshot_offset is None and set(st.producers) == {1} and st.log_end_offset == 1
    assert any("past the log end" in n for n in st.notices)


def test_torn_tail_raises_decode_error_with_position(tmp_path):
    p = PartitionWriter("t", 0)
    p.data(1, 0, 1)
    p.data(1, 0, 1)
    p.snapshot([snapshot_entry(1, 0, last_offset=1)], offset=1)
    # A clean shutdown: the broker does not recover (truncate) the torn tail, so it cannot be read.
    write_log_dir(tmp_path, [p], clean_shutdown=True)
    log = tmp_path / "t-0" / f"{0:020d}.log"
    raw = log.read_bytes()
    log.write_bytes(raw[:-5])
    with pytest.raises(DecodeError) as err:
        replay_partition(only_partition(tmp_path, "t-0"))
    assert err.value.path == str(log) and err.value.position is not None


# ----------------------------------------------------------------------------- coordinator replay

def _txn_dir(tmp_path: Path, n: int = 3) -> tuple[Path, dict[str, int]]:
    ids = {tid: coordinator_partition(tid, n) for tid in ("alpha", "beta", "gamma", "delta")}
    writers = {i: TxnLogWriter(i) for i in range(n)}
    w = writers[ids["alpha"]]
    w.put("alpha", txn_value(S.EMPTY, pid=10))
    w.put("alpha", txn_value(S.ONGOING, pid=10, parts={"t": [0]}, start=500))
    w.put("alpha", txn_value(S.ONGOING, pid=10, parts={"t": [0, 1], "u": [2]}, start=500, update=600))
    w = writers[ids["beta"]]
    w.put("beta", txn_value(S.ONGOING, pid=20, parts={"t": [0]}))
    w.put("beta", txn_value(S.COMPLETE_COMMIT, pid=20, parts={}))  # illegal: skips PrepareCommit
    w = writers[ids["gamma"]]
    w.put("gamma", txn_value(S.COMPLETE_ABORT, pid=30, parts={}))
    w.put("gamma", None)  # expired
    w = writers[ids["delta"]]
    w.put("delta", txn_value(S.PREPARE_COMMIT, pid=40, epoch=2, parts={"t": [1]}, version=1,
                             previous_producer_id=39, next_producer_id=41, client_transaction_version=2))
    write_log_dir(tmp_path, list(writers.values()))
    return tmp_path, ids


def test_coordinator_replay(tmp_path):
    log_dir, ids = _txn_dir(tmp_path)
    coord = replay_transaction_log([log_dir])
    assert coord.partitions_count == 3 and coord.partitions_found == (0, 1, 2)
    assert sorted(coord.transactions) == ["alpha", "beta", "delta"]
    alpha = coord.transactions["alpha"]
    assert alpha.state is S.ONGOING and alpha.partition_names() == ["t-0", "t-1", "u-2"]
    assert alpha.coordinator_partition == ids["alpha"] and alpha.last_update_timestamp == 600
    assert [h.state for h in coord.history["alpha"]] == ["Empty", "Ongoing", "Ongoing"]
    # alpha's three records are the first ones written to its coordinator partition, whichever it is
    assert [h.offset for h in coord.history["alpha"]] == [0, 1, 2]
    # delta's one record comes after whatever alpha (3), beta (2) and gamma (2) wrote to the same partition
    written_before = {"alpha": 3, "beta": 2, "gamma": 2}
    assert [h.offset for h in coord.history["delta"]] == [
        sum(n for tid, n in written_before.items() if ids[tid] == ids["delta"])]
    assert [h.state for h in coord.history["gamma"]] == ["CompleteAbort", None]
    assert "gamma" in coord.tombstoned
    (illegal,) = [f for f in coord.findings if f.check == "illegal-transition"]
    assert (illegal.transactional_id, illegal.from_state, illegal.to_state) == ("beta", "Ongoing", "CompleteCommit")
    # producer id -> transactional id, through current, previous/next (v1 tags) and history
    assert coord.transactional_id_for(10) == "alpha"
    assert {coord.transactional_id_for(p) for p in (39, 40, 41)} == {"delta"}
    assert coord.transactional_id_for(30) is None  # its id expired: the coordinator forgot it
    assert coord.expired_transactional_id_for(30) == "gamma"
    assert coord.transactional_id_for(999) is None


def test_coordinator_partition_check(tmp_path):
    log_dir, ids = _txn_dir(tmp_path, n=3)
    # Told there are 50 partitions, ids sit in the wrong ones (unless they hash the same way).
    coord = replay_transaction_log([log_dir], partitions_count=50)
    wrong = {f.message.split("'")[1] for f in coord.findings if f.check == "wrong-coordinator-partition"}
    expected = {tid for tid, part in ids.items() if coordinator_partition(tid, 50) != part}
    assert wrong == expected and wrong


def test_replicas_use_longest_copy(tmp_path):
    # Broker A's copy of __transaction_state-0 has one more record than broker B's.
    a, b = TxnLogWriter(0), TxnLogWriter(0)
    for w in (a, b):
        w.put("x", txn_value(S.ONGOING, pid=1, parts={"t": [0]}))
    a.put("x", txn_value(S.PREPARE_COMMIT, pid=1, parts={"t": [0]}))
    write_log_dir(tmp_path / "b", [b])
    write_log_dir(tmp_path / "a", [a])
    coord = replay_transaction_log([tmp_path / "b", tmp_path / "a"], partitions_count=1)
    assert coord.transactions["x"].state is S.PREPARE_COMMIT
    assert any("2 replicas" in n and str(tmp_path / "a") in n for n in coord.notices)


def test_corrupt_txn_state_tail_is_skipped_after_a_clean_shutdown(tmp_path):
    """A clean shutdown recovers nothing: bytes past the last batch that do not form one leave the
    partition unreadable (named in skipped), the other partition still counts."""
    a, b = TxnLogWriter(0), TxnLogWriter(1)
    a.put("x", txn_value(S.ONGOING, pid=1, parts={"t": [0]}))
    b.put("y", txn_value(S.ONGOING, pid=2, parts={"t": [0]}))
    write_log_dir(tmp_path, [a, b], clean_shutdown=True)
    log = tmp_path / "__transaction_state-1" / f"{0:020d}.log"
    log.write_bytes(log.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x01\x7f\xff\xff\xff")
    coord = replay_transaction_log([tmp_path], partitions_count=2)
    assert coord.transactions.get("x") is not None or coordinator_partition("x", 2) != 0
    assert len(coord.skipped) == 1 and "__transaction_state-1" in coord.skipped[0]
    assert "y" not in coord.transactions


def test_torn_txn_state_tail_is_truncated_after_a_crash(tmp_path):
    """Without .kafka_cleanshutdown LogSegment.recover truncates the torn tail and the coordinator
    loads every record before it (LogLoader, then TransactionStateManager.loadTransactionMetadata)."""
    a, b = TxnLogWriter(0), TxnLogWriter(1)
    a.put("x", txn_value(S.ONGOING, pid=1, parts={"t": [0]}))
    b.put("y", txn_value(S.ONGOING, pid=2, parts={"t": [0]}))
    write_log_dir(tmp_path, [a, b])
    log = tmp_path / "__transaction_state-1" / f"{0:020d}.log"
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x01\x7f\xff\xff\xff")
    coord = replay_transaction_log([tmp_path], partitions_count=2)
    assert coord.skipped == []
    assert coord.transactions["y"].state is S.ONGOING and coord.transactions["y"].producer_id == 2
    assert any(f"12 bytes from byte {size}" in n and "recovery truncates" in n for n in coord.notices)


def _flip_batch_timestamp(tmp_path, offset: int) -> None:
    """Flip a byte of the base timestamp of the batch at ``offset`` in __transaction_state-0: the CRC fails,
    every field still decodes."""
    from kafkatx.format.record_batch import iter_batches as frame

    log = tmp_path / "__transaction_state-0" / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    header = next(h for h in frame(bytes(data)) if h.base_offset == offset)
    data[header.position + 30] ^= 0xFF
    log.write_bytes(bytes(data))


@pytest.mark.parametrize("clean", [False, True])
def test_a_corrupt_txn_state_batch_is_loaded_as_the_broker_loads_it(tmp_path, clean):
    """After a crash LogSegment.recover truncates at the first batch whose CRC fails (the records before it
    count, those after it are gone); after a clean shutdown nothing is recovered and
    TransactionStateManager.loadTransactionMetadata does not check CRCs: the batch counts, with a warning."""
    w = TxnLogWriter(0)
    w.put("x", txn_value(S.ONGOING, pid=1, parts={"t": [0, 1]}))
    w.put("x", txn_value(S.PREPARE_COMMIT, pid=1, parts={"t": [0, 1]}))
    w.put("x", txn_value(S.COMPLETE_COMMIT, pid=1, parts={}))
    write_log_dir(tmp_path, [w], clean_shutdown=clean)
    _flip_batch_timestamp(tmp_path, 1)
    coord = replay_transaction_log([tmp_path], partitions_count=1)
    assert coord.skipped == []
    x = coord.transactions["x"]
    if clean:
        assert x.state is S.COMPLETE_COMMIT
        assert [f.check for f in coord.findings] == ["crc-unchecked"] and coord.findings[0].offset == 1
    else:
        assert x.state is S.ONGOING and x.partition_names() == ["t-0", "t-1"]
        assert [h.offset for h in coord.history["x"]] == [0]
        assert any("recovery truncates the segment there (next offset 1)" in n for n in coord.notices)
