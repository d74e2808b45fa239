"""One scenario, two paths: offline (real log dir files) and online (FakeCluster) give the same rows.

Both paths call kafkatx.coordinator.rules; this test holds them to one hand-worked answer, including the
PrepareEpochFence case they used to disagree on and the exact-deadline boundaries.
"""

from __future__ import annotations

from pathlib import Path

from kafkatx.cluster import service
from kafkatx.format.txn_log import TxnState
from kafkatx.session import offline
from tests.cluster.fakes import FakeCluster
from tests.storage.txn_builders import PartitionWriter, TxnLogWriter, txn_value, write_log_dir

S = TxnState
MIN = 60_000
MAX = 15 * MIN
T0 = 1_700_000_000_000
NOW = T0 + 60 * MIN

# (transactional id or None, producer id, epoch, coordinator state or None, its partitions, start, timeout,
#  the partition the producer has open, when it wrote its one batch there)
SCENARIO = [
    ("late", 10, 3, S.ONGOING, [("orders", 0)], T0, MIN, ("orders", 0), T0 + 1_000),
    # exactly at start + timeout: not timed out (Kafka: start + timeout < now)
    ("edge", 11, 0, S.ONGOING, [("orders", 0)], NOW - MIN, MIN, ("orders", 0), NOW - 1_000),
    ("past-edge", 12, 0, S.ONGOING, [("orders", 1)], NOW - MIN - 1, MIN, ("orders", 1), NOW - 1_000),
    # PrepareEpochFence past its timeout: no coordinator timeout applies; old -> orphaned
    ("fence", 13, 2, S.PREPARE_EPOCH_FENCE, [("orders", 1)], T0, MIN, ("orders", 1), T0 + 2_000),
    # PrepareEpochFence past its timeout, written to recently: nothing yet
    ("fence-young", 14, 0, S.PREPARE_EPOCH_FENCE, [("orders", 1)], T0, MIN, ("orders", 1), NOW - MIN),
    ("prep", 20, 1, S.PREPARE_COMMIT, [("payments", 0)], T0, MIN, ("payments", 0), T0 + 3_000),
    # last write exactly max timeout ago: not old
    ("prep-edge", 21, 0, S.PREPARE_ABORT, [("payments", 0)], T0, MIN, ("payments", 0), NOW - MAX),
    (None, 99, 1, None, [], 0, 0, ("payments", 0), T0 + 5_000),
    (None, 98, 0, None, [], 0, 0, ("payments", 0), NOW - MAX),
]

EXPECTED = [  # kind, topic, partition, producer id, transactional id, coordinator state, start_ms, duration_ms
    ("timed-out", "orders", 0, 10, "late", "Ongoing", T0, NOW - T0),
    ("timed-out", "orders", 1, 12, "past-edge", "Ongoing", NOW - MIN - 1, MIN + 1),
    ("orphaned", "orders", 1, 13, "fence", "PrepareEpochFence", T0 + 2_000, NOW - T0 - 2_000),
    ("incomplete-markers", "payments", 0, 20, "prep", "PrepareCommit", T0 + 3_000, NOW - T0 - 3_000),
    ("orphaned", "payments", 0, 99, None, None, T0 + 5_000, NOW - T0 - 5_000),
]


def _key(r):
    return (r.kind, r.topic, r.partition, r.producer_id, r.transactional_id, r.coordinator_state,
            r.start_ms, r.duration_ms)


def _offline_rows(tmp_path: Path):
    coord = TxnLogWriter(0)
    writers = {tp: PartitionWriter(*tp) for tp in [("orders", 0), ("orders", 1), ("payments", 0)]}
    for tid, pid, epoch, state, parts, start, timeout, tp, ts in SCENARIO:
        if tid is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in parts:
                by_topic.setdefault(t, []).append(p)
            coord.put(tid, txn_value(state, pid=pid, epoch=epoch, parts=by_topic, start=start, timeout_ms=timeout))
        writers[tp].data(pid, epoch, 1, ts=ts)
    d = write_log_dir(tmp_path / "broker", [coord, *writers.values()])
    return offline.find_hanging([d], now=NOW, max_timeout_ms=MAX).rows


def _online_rows():
    c = FakeCluster()
    c.add_topic("orders", 2)
    c.add_topic("payments", 1)
    for tid, pid, epoch, state, parts, start, timeout, tp, ts in SCENARIO:
        c.append(tp, 1, producer_id=pid, producer_epoch=epoch, transactional=True, timestamp=ts)
        if tid is not None:
            c.set_txn(tid, producer_id=pid, producer_epoch=epoch, state=state.kafka_name, partitions=parts,
                      start=start, timeout_ms=timeout)
    return service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)


def test_offline_gives_the_hand_worked_rows(tmp_path):
    assert sorted(map(_key, _offline_rows(tmp_path)), key=lambda k: (k[1], k[2], k[3])) == EXPECTED


def test_online_gives_the_hand_worked_rows():
    assert sorted(map(_key, _online_rows()), key=lambda k: (k[1], k[2], k[3])) == EXPECTED


def test_offline_and_online_agree_row_for_row(tmp_path):
    offline_rows = sorted(_key(r) + (r.first_offset, r.producer_epoch) for r in _offline_rows(tmp_path))
    online_rows = sorted(_key(r) + (r.first_offset, r.producer_epoch) for r in _online_rows())
    assert offline_rows == online_rows
