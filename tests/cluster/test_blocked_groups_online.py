"""Online: the consumer groups a hanging transaction on ``__consumer_offsets`` blocks.

find-hanging and abort-hanging (``--bootstrap-server``) ask the group coordinator: ListGroups, each
group's coordinator partition (``GroupCoordinator.partitionFor``), and OffsetFetch with
``require_stable`` (KIP-447), which answers UNSTABLE_OFFSET_COMMIT while a transactional commit of
the group is pending (``OffsetMetadataManager``). The find-hanging path needs DescribeProducers,
which Tansu lacks, so those tests run on FakeCluster (tests/cluster/fakes.py), a fake of the backend
Protocol that models the pending offsets as ``OffsetMetadataManager`` does; the two OffsetFetch /
ListGroups primitives themselves run against the real Tansu broker (marked ``online``).
"""

from __future__ import annotations

import uuid

import pytest

from kafkatx.cluster import abort as online_abort
from kafkatx.cluster import service
from kafkatx.format.txn_log import coordinator_partition
from tests.cluster.fakes import FakeCluster

NOW = 10_000_000
OLD = NOW - 1_000_000
PARTITIONS = 3


def _groups_on(partition: int, n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        g = f"group-{i}"
        if coordinator_partition(g, PARTITIONS) == partition:
            out.append(g)
        i += 1
    return out


def _cluster() -> tuple[FakeCluster, int, list[str]]:
    c = FakeCluster()
    c.add_topic("orders", 1)
    c.add_topic("__consumer_offsets", PARTITIONS)
    blocked = _groups_on(1, 3)
    # eos-app (producer 700): consumed, produced to orders-0, sent g0 and g1's offsets to its
    # transaction, then died: Ongoing past its 60 s timeout
    c.append(("orders", 0), 3, producer_id=700, transactional=True, timestamp=OLD)
    for g in blocked[:2]:
        tp = c.txn_offset_commit(g, producer_id=700, timestamp=OLD, partitions=PARTITIONS)
    c.set_txn("eos-app", producer_id=700, state="Ongoing", partitions=[("orders", 0), tp], start=OLD)
    # done-app (producer 701) committed g2's offsets: its marker ended them
    c.txn_offset_commit(blocked[2], producer_id=701, timestamp=OLD, partitions=PARTITIONS)
    c.write_txn_markers(topic=tp[0], partition=tp[1], producer_id=701, producer_epoch=0, coordinator_epoch=0,
                        commit=True)
    return c, tp[1], blocked


def test_find_hanging_names_the_groups_the_coordinator_reports_unstable():
    c, n, groups = _cluster()
    rows = {(r.topic, r.partition): r for r in service.find_hanging(c, now_ms=NOW)}
    assert rows[("__consumer_offsets", n)].blocked_groups == sorted(groups[:2])
    assert rows[("orders", 0)].blocked_groups is None
    assert "OffsetFetch" in c.calls and "ListGroups" in c.calls


def test_the_plan_carries_them_and_the_fence_frees_the_groups():
    c, n, groups = _cluster()
    plan = online_abort.plan_abort(c, all_=True, now_ms=NOW)
    assert {(r.topic, tuple(r.blocked_groups or ())) for r in plan} == {
        ("__consumer_offsets", tuple(sorted(groups[:2]))), ("orders", ())}
    online_abort.execute_abort(c, plan)
    assert c.unstable_groups(groups) == set()
    assert service.find_hanging(c, now_ms=NOW) == []


def test_two_open_transactions_on_the_partition_leave_the_groups_unknown():
    c, n, groups = _cluster()
    c.append(("__consumer_offsets", n), 1, producer_id=702, transactional=True, timestamp=OLD)
    c.set_txn("other", producer_id=702, state="Ongoing", partitions=[("__consumer_offsets", n)], start=OLD)
    rows = [r for r in service.find_hanging(c, now_ms=NOW) if r.topic == "__consumer_offsets"]
    assert len(rows) == 2 and all(r.blocked_groups is None for r in rows)


def test_without_listgroups_the_groups_stay_unknown():
    c, _n, _groups = _cluster()
    c.missing.add("ListGroups")
    rows = service.find_hanging(c, now_ms=NOW)
    assert rows and all(r.blocked_groups is None for r in rows)


@pytest.mark.online
def test_listgroups_and_offsetfetch_require_stable_against_tansu(tansu):
    """LiveCluster's two primitives on the real broker. ListGroups lists a group with a plain commit.
    OffsetFetch of all a group's offsets (null topics) with ``require_stable`` is what Kafka answers
    with UNSTABLE_OFFSET_COMMIT for a pending partition (``OffsetMetadataManager.fetchAllOffsets``);
    Tansu 0.6 leaves that request unanswered (and answers OffsetFetch of named partitions without
    KIP-447's UNSTABLE_OFFSET_COMMIT), so there the primitive fails with a ClusterError naming the
    broker, which find-hanging turns into ``blocked_groups: null`` (unknown), never an empty list."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from kafkatx.cluster.config import ClientConfig
    from kafkatx.errors import ClusterError

    topic = tansu.new_topic()
    group = f"eos-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": tansu.bootstrap_server, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    producer = Producer({"bootstrap.servers": tansu.bootstrap_server, "transactional.id": f"tx-{group}"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 15)
    backend = service.LiveCluster(tansu.bootstrap_server, ClientConfig(), timeout_s=5)
    try:
        assert group in backend.list_groups()
        try:
            unstable = backend.unstable_groups([group])
        except ClusterError as err:
            assert tansu.bootstrap_server in str(err) and "OffsetFetch" in str(err)
            return
        assert unstable == {group}  # a broker that implements KIP-447 (Kafka)
    finally:
        producer.abort_transaction(15)
        backend.close()
        consumer.close()
