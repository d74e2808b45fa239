"""The online commands' logic against FakeCluster (tests/cluster/fakes.py).

Every test here runs against the in-memory fake implementing the ClusterBackend
Protocol, because Tansu (the real broker the online tests use) lacks the KIP-664
APIs: ListTransactions, DescribeTransactions, DescribeProducers, WriteTxnMarkers.
Expected rows are worked out by hand from the scenario, following
TransactionsCommand.FindHangingTransactionsCommand.
"""

from __future__ import annotations

import pytest

from kafkatx.cluster import service
from kafkatx.cluster.backend import ClusterBackend
from kafkatx.errors import ClusterError, UnsupportedApi, UsageError
from kafkatx.rows import HangingRow, PartitionStatus, Report
from tests.cluster.fakes import FakeCluster

NOW = 10_000_000
MAX = 900_000
OLD = NOW - 1_000_000  # older than MAX
RECENT = NOW - 1_000


def scenario() -> FakeCluster:
    c = FakeCluster()
    c.add_topic("orders", 2)
    c.add_topic("__consumer_offsets", 1)
    # committed history so offsets are not all zero
    c.append(("orders", 0), 5, producer_id=50, transactional=False, timestamp=OLD)
    # 1. orphaned: open since offset 5, no transactional id maps to producer 100
    c.append(("orders", 0), 3, producer_id=100, producer_epoch=2, transactional=True, timestamp=OLD,
             coordinator_epoch=4)
    # 2. orphaned: app-a's coordinator already completed (KAFKA-12671 style)
    c.append(("orders", 1), 2, producer_id=200, producer_epoch=1, transactional=True, timestamp=OLD)
    c.set_txn("app-a", producer_id=200, producer_epoch=1, state="CompleteCommit", partitions=[], start=OLD)
    # 3. timed-out: Ongoing for 120 s with a 60 s timeout (the producer is not older than MAX)
    c.append(("orders", 0), 1, producer_id=300, transactional=True, timestamp=NOW - 100_000)
    c.set_txn("app-b", producer_id=300, state="Ongoing", partitions=[("orders", 0)], start=NOW - 120_000,
              timeout_ms=60_000)
    # 4. incomplete markers: PrepareCommit still waiting on orders-1
    c.append(("orders", 1), 4, producer_id=400, producer_epoch=7, transactional=True, timestamp=OLD,
             coordinator_epoch=3)
    c.set_txn("app-c", producer_id=400, producer_epoch=7, state="PrepareCommit", partitions=[("orders", 1)],
              start=OLD)
    # 5. healthy Ongoing transaction: not hanging
    c.append(("orders", 1), 1, producer_id=500, transactional=True, timestamp=RECENT)
    c.set_txn("app-d", producer_id=500, state="Ongoing", partitions=[("orders", 1)], start=RECENT)
    # 6. open with no id, but recent: not (yet) hanging
    c.append(("orders", 0), 1, producer_id=600, transactional=True, timestamp=RECENT)
    # 7. internal topics count too
    c.append(("__consumer_offsets", 0), 2, producer_id=700, transactional=True, timestamp=OLD)
    return c


def test_fake_implements_the_protocol():
    assert isinstance(FakeCluster(), ClusterBackend)


def test_find_hanging_classifies_each_open_transaction():
    c = scenario()
    rows = service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)
    by_pid = {r.producer_id: r for r in rows}
    assert sorted(by_pid) == [100, 200, 300, 400, 700]
    assert by_pid[100] == HangingRow(kind="orphaned", topic="orders", partition=0, producer_id=100,
                                     producer_epoch=2, transactional_id=None, coordinator_state=None,
                                     first_offset=5, start_ms=OLD, duration_ms=1_000_000)
    assert (by_pid[200].kind, by_pid[200].transactional_id, by_pid[200].coordinator_state,
            by_pid[200].first_offset) == ("orphaned", "app-a", "CompleteCommit", 0)
    assert (by_pid[300].kind, by_pid[300].start_ms, by_pid[300].duration_ms) == ("timed-out", NOW - 120_000,
                                                                                 120_000)
    assert (by_pid[400].kind, by_pid[400].coordinator_state, by_pid[400].partition) == (
        "incomplete-markers", "PrepareCommit", 1)
    assert (by_pid[700].kind, by_pid[700].topic) == ("orphaned", "__consumer_offsets")
    # the lookup is filtered by the open producers' ids, as TransactionsCommand does
    assert c.calls.count("ListTransactions") == 1


def test_find_hanging_respects_max_timeout():
    c = scenario()
    rows = service.find_hanging(c, max_timeout_ms=2_000_000, now_ms=NOW)
    # nothing is older than 2 000 s; only the coordinator-side timeout still fires
    assert [(r.kind, r.producer_id) for r in rows] == [("timed-out", 300)]


def test_find_hanging_with_nothing_open_asks_no_coordinator():
    c = FakeCluster(missing_apis={"ListTransactions", "DescribeTransactions"})
    c.add_topic("quiet", 1)
    c.append(("quiet", 0), 10, producer_id=1, timestamp=OLD)
    assert service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW) == []
    assert "ListTransactions" not in c.calls


def test_list_transactions_rows_and_filters():
    c = scenario()
    rows = service.list_transactions(c)
    assert [r.transactional_id for r in rows] == ["app-a", "app-b", "app-c", "app-d"]
    b = rows[1]
    assert (b.state, b.producer_id, b.timeout_ms, b.partitions) == ("Ongoing", 300, 60_000, ["orders-0"])
    assert (b.coordinator_id, b.coordinator_partition) == (1, None)
    assert [r.transactional_id for r in service.list_transactions(c, states=["Ongoing"])] == ["app-b", "app-d"]
    # state names are matched as offline: case-insensitively, sent to the broker as Kafka spells them
    assert [r.transactional_id for r in service.list_transactions(c, states=["ongoing"])] == ["app-b", "app-d"]
    assert [r.transactional_id for r in service.list_transactions(c, pattern="^app-[cd]$")] == ["app-c", "app-d"]
    with pytest.raises(UsageError, match="pattern"):
        service.list_transactions(c, pattern="(")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_list_transactions_pattern_is_a_full_match(version):
    """KIP-1152 (Kafka 4.1): the broker matches the whole id (Pattern.matcher(id).matches()), so
    "app" lists nothing where a search would list every app-* id; the same client-side on a broker
    whose ListTransactions predates the field."""
    c = scenario()
    c.list_transactions_version = version
    assert service.list_transactions(c, pattern="app") == []
    assert [r.transactional_id for r in service.list_transactions(c, pattern="app-.*")] == [
        "app-a", "app-b", "app-c", "app-d"]
    assert [r.transactional_id for r in service.list_transactions(c, pattern="app-[cd]")] == ["app-c", "app-d"]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_list_transactions_filters_go_to_the_broker_where_its_version_takes_them(version):
    """ListTransactions v1 (Kafka 3.8) carries DurationFilter, v2 (4.1) TransactionalIdPattern;
    ProducerIdFilters is v0. What the broker cannot take is applied here, said in a note. The
    answer is the same either way: --duration-filter 120000 at NOW keeps app-a and app-c (started
    1000 s ago) and drops app-b (exactly 120 s: not longer) and app-d (1 s)."""
    c = scenario()
    c.list_transactions_version, c.now_ms = version, NOW
    said = Report()
    rows = service.list_transactions(c, pattern="app-[abc]", duration_ms=120_000, producer_ids=[200, 300, 400, 500],
                                     now_ms=NOW, report=said)
    notes = said.notices
    assert [r.transactional_id for r in rows] == ["app-a", "app-c"]
    (sent,) = c.list_requests
    assert sent["producer_ids"] == [200, 300, 400, 500]
    assert sent["duration_filter_ms"] == (120_000 if version >= 1 else None)
    assert sent["pattern"] == ("app-[abc]" if version >= 2 else None)
    assert any("DurationFilter needs v1" in n for n in notes) == (version < 1)
    assert any("TransactionalIdPattern needs v2" in n for n in notes) == (version < 2)
    assert [r.transactional_id for r in service.list_transactions(c, producer_ids=[300])] == ["app-b"]
    assert [r.transactional_id for r in service.list_transactions(c, duration_ms=-1, now_ms=NOW)] == [
        "app-a", "app-b", "app-c", "app-d"]  # below 0: every transaction (KIP-994)


def test_describe_transaction_partition_status():
    c = scenario()
    d = service.describe_transaction(c, "app-c")
    assert d is not None
    assert d.transaction.state == "PrepareCommit"
    assert d.partition_status == [PartitionStatus(partition="orders-1", open=True, first_offset=2)]
    assert d.history == []
    assert service.describe_transaction(c, "nobody") is None


def test_describe_transaction_without_describe_producers_has_no_status():
    c = scenario()
    c.missing.add("DescribeProducers")
    d = service.describe_transaction(c, "app-b")
    assert d is not None and d.partition_status == []


def test_describe_producers_rows():
    c = scenario()
    rows = service.describe_producers(c, topic="orders", partition=0)
    assert [r.producer_id for r in rows] == [50, 100, 300, 600]
    r100 = rows[1]
    assert (r100.producer_epoch, r100.coordinator_epoch, r100.last_sequence, r100.last_timestamp_ms,
            r100.current_txn_first_offset) == (2, 4, 2, OLD, 5)
    assert rows[0].current_txn_first_offset is None
    with pytest.raises(ClusterError, match="no partition 9"):
        service.describe_producers(c, topic="orders", partition=9)
    with pytest.raises(ClusterError, match="'nope' does not exist"):
        service.describe_producers(c, topic="nope", partition=0)


def test_lag_uses_list_offsets_and_describe_producers():
    c = scenario()
    rows = {(r.topic, r.partition): r for r in service.lag(c)}
    o0 = rows[("orders", 0)]
    # orders-0: 5 plain + 3 (pid 100 from 5) + 1 (pid 300 at 8) + 1 (pid 600 at 9) = 10
    assert (o0.log_start_offset, o0.high_watermark, o0.log_end_offset, o0.lso, o0.lag) == (0, 10, 10, 5, 5)
    assert (o0.open_transactions, o0.oldest_open_producer_id, o0.oldest_open_first_offset) == (3, 100, 5)
    o1 = rows[("orders", 1)]
    assert (o1.high_watermark, o1.lso, o1.open_transactions, o1.oldest_open_producer_id) == (7, 0, 3, 200)
    assert [r.topic for r in service.lag(c, topic="orders")] == ["orders", "orders"]


def test_plan_then_execute_all_clears_find_hanging():
    c = scenario()
    plan = service.plan_abort(c, all_=True, max_timeout_ms=MAX, now_ms=NOW)
    actions = {(r.producer_id, r.action) for r in plan}
    assert actions == {(100, "write-abort-marker"), (200, "write-abort-marker"), (300, "fence-epoch"),
                       (400, "write-commit-marker"), (700, "write-abort-marker")}
    assert all(r.result is None for r in plan)
    assert next(r for r in plan if r.producer_id == 100).coordinator_epoch == 4
    # planning changed nothing
    assert len(service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)) == 5
    hw_before = c.list_offsets([("orders", 0), ("orders", 1)], isolation="read_uncommitted", spec="latest")

    done = service.execute_abort(c, plan)
    assert [r.result for r in done] == ["ok"] * 5
    assert "marker:COMMIT:orders-1:400" in c.calls  # a decided commit is finished, never reversed
    assert service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW) == []
    hw_after = c.list_offsets([("orders", 0), ("orders", 1)], isolation="read_uncommitted", spec="latest")
    # orders-0: markers for 100 (abort) and 300 (fence); orders-1: 200 (abort) and 400 (commit)
    assert hw_after == {("orders", 0): hw_before[("orders", 0)] + 2, ("orders", 1): hw_before[("orders", 1)] + 2}
    # the healthy transactions (500, 600) were left alone and still hold their LSOs
    lso = c.list_offsets([("orders", 0), ("orders", 1)], isolation="read_committed", spec="latest")
    assert lso == {("orders", 0): 9, ("orders", 1): 6}


def test_plan_by_transactional_id():
    c = scenario()
    plan = service.plan_abort(c, transactional_ids=["app-b", "app-c", "app-a", "ghost"], now_ms=NOW)
    assert [(r.transactional_id, r.kind, r.action, r.topic, r.partition) for r in plan] == [
        ("app-b", "timed-out", "fence-epoch", "orders", 0),
        ("app-c", "incomplete-markers", "write-commit-marker", "orders", 1),
    ]


def test_plan_by_id_timed_out_boundary_and_prepare_epoch_fence():
    # "timed-out" only for Ongoing strictly past start + timeout (timedOutTransactions); a
    # PrepareEpochFence id is still fenced on request, but it is no timed-out transaction.
    c = FakeCluster()
    c.add_topic("orders", 1)
    c.set_txn("at-deadline", producer_id=1, state="Ongoing", partitions=[("orders", 0)], start=NOW - 60_000,
              timeout_ms=60_000)
    c.set_txn("past-deadline", producer_id=2, state="Ongoing", partitions=[("orders", 0)], start=NOW - 60_001,
              timeout_ms=60_000)
    c.set_txn("fencing", producer_id=3, state="PrepareEpochFence", partitions=[("orders", 0)], start=0,
              timeout_ms=1)
    plan = service.plan_abort(c, transactional_ids=["at-deadline", "past-deadline", "fencing"], now_ms=NOW)
    assert [(r.transactional_id, r.kind, r.action) for r in plan] == [
        ("at-deadline", "requested", "fence-epoch"), ("past-deadline", "timed-out", "fence-epoch"),
        ("fencing", "requested", "fence-epoch")]


def test_plan_by_partition_and_producer():
    c = scenario()
    plan = service.plan_abort(c, topic="orders", partition=0, producer_id=100, now_ms=NOW)
    assert [(r.kind, r.producer_id, r.producer_epoch, r.first_offset, r.action) for r in plan] == [
        ("requested", 100, 2, 5, "write-abort-marker")]
    whole_topic = service.plan_abort(c, topic="orders", now_ms=NOW)
    assert sorted(r.producer_id for r in whole_topic) == [100, 200, 300, 400, 500, 600]


def test_plan_usage_errors():
    c = scenario()
    with pytest.raises(UsageError, match="nothing selected"):
        service.plan_abort(c)
    with pytest.raises(UsageError, match="--partition needs --topic"):
        service.plan_abort(c, partition=0)


def test_execute_reports_missing_cluster_action_acl():
    c = scenario()
    c.deny_cluster_action = True
    plan = service.plan_abort(c, topic="orders", partition=0, producer_id=100, now_ms=NOW)
    (row,) = service.execute_abort(c, plan)
    assert row.result is not None and row.result.startswith("failed:") and "CLUSTER_ACTION" in row.result
    # nothing changed: the transaction is still open
    assert 100 in {r.producer_id for r in service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)}


def test_execute_refuses_up_front_without_write_txn_markers():
    c = scenario()
    plan = service.plan_abort(c, all_=True, max_timeout_ms=MAX, now_ms=NOW)
    c.missing.add("WriteTxnMarkers")
    with pytest.raises(UnsupportedApi, match=r"WriteTxnMarkers.*KIP-664"):
        service.execute_abort(c, plan)
    assert "InitProducerId" not in c.calls  # nothing was fenced before refusing


def test_blind_fence_when_describe_transactions_is_missing():
    c = scenario()
    c.missing.add("DescribeTransactions")
    plan = service.plan_abort(c, transactional_ids=["app-b"], now_ms=NOW)
    assert [(r.kind, r.action, r.producer_id, r.topic) for r in plan] == [("requested", "fence-epoch", None, None)]
    # blind: the id's own timeout is unknown, so the plan says what it becomes (the producer default)
    assert plan[0].transaction_timeout_ms == 60_000
    (done,) = service.execute_abort(c, plan)
    assert done.result == "ok"
    # Ongoing at epoch 0: aborted at 1 (prepareFenceProducerEpoch), the client's retry leaves Empty at 2
    txn = c.transactions["app-b"]
    assert (txn.producer_epoch, txn.state, txn.timeout_ms) == (2, "Empty", 60_000)


def test_kafka_python_errors_map_to_one_line_cluster_errors():
    """The real admin client's error mapping (no broker needed): a missing CLUSTER_ACTION ACL on
    WriteTxnMarkers and a missing API name themselves and the broker."""
    import kafka.errors as kerr

    from kafkatx.cluster.admin import KafkaPythonAdmin

    admin = KafkaPythonAdmin("b1:9092", {}, timeout_s=1)
    acl = admin._fail("WriteTxnMarkers (ABORT) to t-0", kerr.ClusterAuthorizationFailedError())
    assert type(acl) is ClusterError
    assert str(acl).startswith("broker b1:9092: WriteTxnMarkers") and "CLUSTER_ACTION" in str(acl)
    unsupported = admin._fail("ListTransactions", kerr.IncompatibleBrokerVersion("no ListTransactionsRequest"))
    assert isinstance(unsupported, UnsupportedApi) and "b1:9092" in str(unsupported)
    auth = admin._fail("connect", kerr.SaslAuthenticationFailedError())
    assert "authentication failed" in str(auth)


def test_kafka_python_sends_the_list_filters_in_the_request():
    """The live path: kafkatx's admin passes both filters to kafka-python's list_transactions, and
    kafka-python 3.x puts them in ListTransactions v1 (DurationFilter) and v2
    (TransactionalIdPattern); api_version is the broker's ApiVersions answer. (Tansu has no
    ListTransactions, T5, so the wire itself is not exercised here.)"""
    from kafka.admin._transactions import TransactionsAdminMixin

    from kafkatx.cluster.admin import KafkaPythonAdmin

    sent: list[dict[str, object]] = []

    class Client:
        def api_versions(self):
            return {66: (0, 2), 61: (0, 0)}

        def list_transactions(self, **kw):
            sent.append(kw)
            return {}

    admin = KafkaPythonAdmin("b1:9092", {}, timeout_s=1)
    admin._client = Client()
    assert (admin.api_version("ListTransactions"), admin.api_version("DescribeProducers"),
            admin.api_version("WriteTxnMarkers")) == (2, 0, None)
    admin.list_transactions(producer_ids=[7], duration_filter_ms=60_000, pattern="tx-.*")
    assert sent == [{"producer_id_filters": [7], "state_filters": None, "duration_filter_ms": 60_000,
                     "transactional_id_pattern": "tx-.*"}]
    request = TransactionsAdminMixin._list_transactions_request(
        producer_id_filters=[7], duration_filter_ms=60_000, transactional_id_pattern="tx-.*")
    # the lowest version that carries both fields (kafka-python keeps it per request)
    assert (request._min_version, request.duration_filter, request.transactional_id_pattern) == (2, 60_000, "tx-.*")


def test_lag_and_find_hanging_never_list_the_metadata_log():
    # A broker's Metadata never names __cluster_metadata (LogManager.loadLogs skips
    # KafkaRaftServer.MetadataTopic); a backend that did is not followed, so lag, find-hanging and
    # the exporter (service.lag / service.find_hanging) list the same partitions offline and online.
    c = scenario()
    c.add_topic("__cluster_metadata", 1)
    c.append(("__cluster_metadata", 0), 3, producer_id=900, transactional=True, timestamp=OLD)
    assert ("__cluster_metadata", 0) not in {(r.topic, r.partition) for r in service.lag(c)}
    assert all(r.topic != "__cluster_metadata" for r in service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW))
    assert {(r.topic, r.partition) for r in service.lag(c)} == {("orders", 0), ("orders", 1), ("__consumer_offsets", 0)}


# ----------------------------------------------------------------------------- the fence keeps the timeout
# Tansu has no DescribeTransactions or DescribeProducers (docs/online.md, T5): the coordinator's view
# before and after a fence is the fake's, which answers as TransactionCoordinator.handleInitProducerId.

def _open_for_15_minutes() -> FakeCluster:
    """tx-open-T as the issue's 3.9 broker had it: Ongoing, transaction.timeout.ms 900000, epoch 0,
    open on tiered-0 from offset 368 (committed data below)."""
    c = FakeCluster()
    c.add_topic("tiered", 1)
    c.append(("tiered", 0), 368, producer_id=1, timestamp=OLD)
    c.append(("tiered", 0), 156, producer_id=7, transactional=True, timestamp=NOW - 640_000)
    c.set_txn("tx-open-T", producer_id=7, state="Ongoing", partitions=[("tiered", 0)], start=NOW - 640_000,
              timeout_ms=900_000)
    return c


def test_the_fence_plan_says_the_timeout_and_the_first_offset_and_the_broker_keeps_the_timeout():
    """The plan row carries the id's own timeout (what InitProducerId will send) and first_offset 368
    (DescribeProducers' currentTransactionStartOffset, as find-hanging and describe-txn give it);
    after the fence DescribeTransactions shows the id Empty two epochs on (the abort at E+1, the
    client's retry at E+2) with transaction.timeout.ms still 900000, and the LSO released."""
    c = _open_for_15_minutes()
    (row,) = service.plan_abort(c, transactional_ids=["tx-open-T"], now_ms=NOW)
    assert (row.action, row.topic, row.partition, row.first_offset, row.transaction_timeout_ms) == (
        "fence-epoch", "tiered", 0, 368, 900_000)
    (desc,) = service.describe_transaction(c, "tx-open-T").partition_status
    assert desc.first_offset == row.first_offset  # the same number describe-txn shows
    (done,) = service.execute_abort(c, [row])
    assert done.result == "ok" and c.fence_timeouts == [900_000]
    after = c.describe_transactions(["tx-open-T"])["tx-open-T"]
    assert (after.state, after.producer_epoch, after.timeout_ms) == ("Empty", 2, 900_000)
    lso = c.list_offsets([("tiered", 0)], isolation="read_committed", spec="latest")
    hw = c.list_offsets([("tiered", 0)], isolation="read_uncommitted", spec="latest")
    assert lso == hw == {("tiered", 0): 525}  # 524 records + the ABORT marker


def test_the_fence_of_a_timed_out_row_from_all_keeps_its_timeout_too():
    c = scenario()
    plan = service.plan_abort(c, all_=True, max_timeout_ms=MAX, now_ms=NOW)
    (fence,) = [r for r in plan if r.action == "fence-epoch"]
    assert (fence.transactional_id, fence.transaction_timeout_ms) == ("app-b", 60_000)
    assert all(r.transaction_timeout_ms is None for r in plan if r.action != "fence-epoch")


def test_fence_timeout_is_the_ids_own_within_librdkafkas_range():
    from kafkatx.cluster.confluent import fence_timeout_ms

    assert fence_timeout_ms(900_000) == 900_000
    assert fence_timeout_ms(None) == 60_000  # Kafka's and librdkafka's producer default
    assert fence_timeout_ms(500) == 1_000  # librdkafka refuses transaction.timeout.ms below 1000
    assert fence_timeout_ms(2**31 - 1) == 2**31 - 1


def test_the_live_fence_sends_the_timeout_as_the_producers_transaction_timeout(monkeypatch):
    """ConfluentClient.fence_transactional_id builds the producer whose init_transactions is the
    InitProducerId: transaction.timeout.ms is the planned timeout, and socket.timeout.ms is lowered
    where librdkafka would refuse it (at most transaction.timeout.ms + 100)."""
    from kafkatx.cluster import confluent

    made: list[dict[str, object]] = []

    class Producer:
        def __init__(self, conf):
            made.append(conf)

        def init_transactions(self, timeout):
            pass

        def close(self):
            pass

    monkeypatch.setattr(confluent, "Producer", Producer)
    client = confluent.ConfluentClient("127.0.0.1:1", {}, timeout_s=30.0)
    try:
        client.fence_transactional_id("tx-open-T", transaction_timeout_ms=900_000)
        client.fence_transactional_id("tx-short", transaction_timeout_ms=5_000)
        client.fence_transactional_id("tx-blind")
    finally:
        client.close()
    assert [(c["transactional.id"], c.get("transaction.timeout.ms"), c["socket.timeout.ms"]) for c in made] == [
        ("tx-open-T", 900_000, 30_000), ("tx-short", 5_000, 5_100), ("tx-blind", None, 30_000)]
