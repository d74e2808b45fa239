"""kafkatx against a real Kafka-protocol broker (Tansu, memory storage) on loopback.

Tansu departs from Apache Kafka in ways these tests must not bake into kafkatx
(each test names the departure it steps around):

- T1: ListOffsets ``latest`` answers the *base* offset of the last batch plus one, not the
  last offset plus one, so a multi-record batch under-reports the high watermark. The tests
  produce one record per batch (flush after each), where both agree.
- T2: ListOffsets ``read_committed`` answers 0 while a transaction is open instead of the
  first offset of the oldest open transaction (Kafka's LSO).
- T3: a fenced producer's ``commit_transaction`` times out instead of failing with
  PRODUCER_FENCED; the tests never commit from a fenced producer.
- T4: read_committed fetches still return aborted records; the tests read offsets, not data.
- T6: a Metadata request naming an unknown topic creates it (Kafka does so only with
  auto.create.topics.enable and when the client allows it); kafkatx only ever asks for all topics.
- T5: no ListTransactions, DescribeTransactions, DescribeProducers or WriteTxnMarkers
  (KIP-664): those paths are tested against a fake backend (test_service_fake.py); here we
  assert the UnsupportedApi error a broker without them produces.
"""

from __future__ import annotations

import time

import pytest

from kafkatx.cluster import abort as online_abort
from kafkatx.cluster import service
from kafkatx.errors import ClusterError, UnsupportedApi
from kafkatx.rows import AbortPlanRow

pytestmark = pytest.mark.online

TIMEOUT_S = 15.0


def produce_one_by_one(producer, topic: str, values: list[bytes], partition: int = 0) -> None:
    """One record per batch (see departure T1)."""
    for v in values:
        producer.produce(topic, value=v, partition=partition)
        producer.flush(TIMEOUT_S)


def broker_offsets(bootstrap: str, topic: str, partition: int = 0) -> dict[str, int]:
    """The broker's own ListOffsets answers, asked directly through confluent-kafka."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, partition)

    def ask(spec, level):
        fut = admin.list_offsets({tp: spec}, isolation_level=level)[tp]
        return fut.result(TIMEOUT_S).offset

    return {
        "earliest": ask(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
        "hw": ask(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
        "lso": ask(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
    }


@pytest.fixture
def committed_and_open(tansu, transactional_producer):
    """A topic with one committed transaction (3 records + COMMIT marker: offsets 0..3) and one
    left open (2 records at 4..5). Returns (topic, open transactional id, open producer)."""
    topic = tansu.new_topic(partitions=1)
    committed = transactional_producer(f"committed-{topic}")
    committed.init_transactions(TIMEOUT_S)
    committed.begin_transaction()
    produce_one_by_one(committed, topic, [b"c0", b"c1", b"c2"])
    committed.commit_transaction(TIMEOUT_S)

    open_id = f"open-{topic}"
    opened = transactional_producer(open_id, **{"transaction.timeout.ms": 600_000})
    opened.init_transactions(TIMEOUT_S)
    opened.begin_transaction()
    produce_one_by_one(opened, topic, [b"o0", b"o1"])
    return topic, open_id, opened


def test_connect_and_metadata(tansu):
    topic = tansu.new_topic(partitions=3)
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        md = backend.metadata([topic])
        assert [(p.topic, p.partition) for p in md.partitions] == [(topic, 0), (topic, 1), (topic, 2)]
        assert all(p.leader is not None for p in md.partitions)
        assert md.brokers and md.brokers[0].port == int(tansu.bootstrap_server.rsplit(":", 1)[1])
    finally:
        backend.close()


def test_lag_reports_the_brokers_list_offsets(tansu, committed_and_open):
    """lag's columns are exactly the broker's ListOffsets answers (earliest / latest uncommitted /
    latest read_committed). Departure T2: Tansu's LSO is 0 while a transaction is open, where Kafka
    answers 4 (the open transaction's first offset); we assert only what both agree on: the open
    transaction holds the LSO below the high watermark, and lag = hw - lso."""
    topic, _, _ = committed_and_open
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        rows = service.lag(backend, topic=topic)
    finally:
        backend.close()
    expected = broker_offsets(tansu.bootstrap_server, topic)
    assert len(rows) == 1
    row = rows[0]
    assert (row.topic, row.partition) == (topic, 0)
    assert row.log_start_offset == expected["earliest"] == 0
    # 3 committed records + their COMMIT marker + 2 open records
    assert row.high_watermark == expected["hw"] == 6
    assert row.log_end_offset == row.high_watermark
    assert row.lso == expected["lso"]
    assert row.lso <= 4 < row.high_watermark
    assert row.lag == row.high_watermark - row.lso
    # Tansu has no DescribeProducers (T5): the open-transaction columns are unknown, not invented.
    assert row.open_transactions is None and row.oldest_open_producer_id is None


def test_lag_unknown_topic_is_a_cluster_error(tansu):
    """Departure T6: asking must not create the topic, so the second look still fails."""
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        missing = f"does-not-exist-{time.monotonic_ns()}"
        for _ in range(2):
            with pytest.raises(ClusterError, match=rf"{tansu.bootstrap_server}.*{missing}.*does not exist"):
                service.lag(backend, topic=missing)
        assert missing not in backend.metadata().topics()
    finally:
        backend.close()


def test_abort_hanging_by_transactional_id_fences_the_open_transaction(tansu, committed_and_open,
                                                                     transactional_producer):
    """abort-hanging --transactional-id ID --execute: InitProducerId bumps the epoch and the
    coordinator aborts the open transaction. The log end moves by one (the ABORT marker), the
    read_committed end offset reaches the high watermark, and a new producer with that id commits
    again. Departure T3: the old (fenced) producer is never asked to commit. Departure T5: without
    DescribeTransactions the fence is planned blind (coordinator fields null)."""
    topic, open_id, _old = committed_and_open
    before = broker_offsets(tansu.bootstrap_server, topic)
    assert before["hw"] == 6

    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        plan = online_abort.plan_abort(backend, transactional_ids=[open_id])
        assert [(r.action, r.transactional_id, r.result) for r in plan] == [("fence-epoch", open_id, None)]
        # T5, blind: the id's own timeout is unknown, so the plan says what the fence sends
        assert plan[0].transaction_timeout_ms == 60_000
        # a plan changes nothing
        assert broker_offsets(tansu.bootstrap_server, topic) == before
        done = online_abort.execute_abort(backend, plan)
    finally:
        backend.close()
    assert [(r.action, r.transactional_id, r.result) for r in done] == [("fence-epoch", open_id, "ok")]

    after = broker_offsets(tansu.bootstrap_server, topic)
    assert after["hw"] == before["hw"] + 1  # the ABORT marker
    assert after["lso"] == after["hw"]

    fresh = transactional_producer(open_id)
    fresh.init_transactions(TIMEOUT_S)
    fresh.begin_transaction()
    produce_one_by_one(fresh, topic, [b"n0"])
    fresh.commit_transaction(TIMEOUT_S)
    final = broker_offsets(tansu.bootstrap_server, topic)
    assert final["hw"] == after["hw"] + 2  # one record + its COMMIT marker
    assert final["lso"] == final["hw"]


def test_force_terminate_sends_init_producer_id_without_keep_prepared(tansu, committed_and_open):
    """The live client's forceTerminateTransaction is the InitProducerId Admin.forceTerminateTransaction sends
    (keepPreparedTxn=false: librdkafka's init_transactions sends none), with --transaction-timeout-ms as its
    transaction timeout: a real broker fences and aborts the open transaction (the log end moves by the ABORT
    marker, the LSO reaches the high watermark). Tansu has no two-phase-commit transactions, so the open one
    is ordinary; the prepared 2PC case is tests/cluster/test_twopc_online.py against a fake backend."""
    topic, open_id, _old = committed_and_open
    before = broker_offsets(tansu.bootstrap_server, topic)
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        backend.force_terminate_transaction(open_id, transaction_timeout_ms=30_000)
    finally:
        backend.close()
    after = broker_offsets(tansu.bootstrap_server, topic)
    assert after["hw"] == before["hw"] + 1  # the ABORT marker
    assert after["lso"] == after["hw"]


@pytest.mark.parametrize("call", [
    lambda b: service.list_transactions(b),
    lambda b: service.describe_transaction(b, "some-id"),
    lambda b: service.describe_producers(b, topic=b._probe_topic, partition=0),
    lambda b: service.find_hanging(b, max_timeout_ms=0),
], ids=["ListTransactions", "DescribeTransactions", "DescribeProducers", "find-hanging"])
def test_kip664_apis_missing_on_tansu_raise_unsupported_api(tansu, call):
    """Departure T5, for real: Tansu lacks the KIP-664 APIs, and kafkatx says which one and which
    Kafka release has it, in one line naming the broker."""
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    backend._probe_topic = tansu.new_topic()  # type: ignore[attr-defined]
    try:
        with pytest.raises(UnsupportedApi) as info:
            call(backend)
    finally:
        backend.close()
    msg = str(info.value)
    assert "\n" not in msg
    assert tansu.bootstrap_server in msg
    assert "Kafka 3.0" in msg and "KIP-664" in msg
    assert any(api in msg for api in ("ListTransactions", "DescribeTransactions", "DescribeProducers"))


def test_write_txn_markers_missing_on_tansu(tansu, committed_and_open):
    """Departure T5: abort by partition needs DescribeProducers then WriteTxnMarkers; the plan
    already stops at DescribeProducers with UnsupportedApi."""
    topic, _, _ = committed_and_open
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        assert backend.supports("WriteTxnMarkers") is False
        with pytest.raises(UnsupportedApi, match="DescribeProducers"):
            online_abort.plan_abort(backend, topic=topic, partition=0)
        row = AbortPlanRow(kind="orphaned", topic=topic, partition=0, producer_id=1, producer_epoch=0,
                           transactional_id=None, coordinator_state=None, first_offset=4, start_ms=None,
                           duration_ms=None, action="write-abort-marker")
        with pytest.raises(UnsupportedApi, match=r"WriteTxnMarkers.*Kafka 3\.0"):
            online_abort.execute_abort(backend, [row])
    finally:
        backend.close()


def test_unreachable_broker_is_a_cluster_error_within_the_timeout(closed_port):
    started = time.monotonic()
    with pytest.raises(ClusterError) as info:
        service.connect(bootstrap_server=closed_port, timeout_s=2.0)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0 + 3.0
    msg = str(info.value)
    assert closed_port in msg and "\n" not in msg
    assert not isinstance(info.value, UnsupportedApi)


def test_a_fence_sends_the_planned_transaction_timeout(tansu, transactional_producer):
    """InitProducerId with the id's own timeout (a fence planned from DescribeTransactions) is
    accepted by the broker: 900000 ms (Kafka's default transaction.max.timeout.ms) and 5000 ms,
    whose librdkafka socket timeout must be lowered to fit. Tansu cannot show the stored timeout
    (no DescribeTransactions, T5); test_service_fake.py checks what the coordinator keeps."""
    topic = tansu.new_topic(partitions=1)
    producer = transactional_producer(f"timeout-{topic}", **{"transaction.timeout.ms": 900_000})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    produce_one_by_one(producer, topic, [b"x"])
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        backend.fence_transactional_id(f"timeout-{topic}", transaction_timeout_ms=900_000)
        backend.fence_transactional_id(f"timeout-{topic}", transaction_timeout_ms=5_000)
    finally:
        backend.close()
    after = broker_offsets(tansu.bootstrap_server, topic)
    assert after["hw"] == 2 and after["lso"] == after["hw"]  # the first fence aborted it: its marker


def test_record_timestamps_fetch_the_record_at_each_offset(tansu):
    """Fetch at an offset gives the timestamp of the record there (CreateTime as the producer set
    it); an offset at the log end has no record and is left out at once (end of partition), not
    after the timeout."""
    from confluent_kafka import Producer

    topic = tansu.new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": tansu.bootstrap_server, "linger.ms": 0})
    for partition, stamps in ((0, (1_700_000_000_000, 1_700_000_060_000)), (1, (1_700_000_120_000,))):
        for ts in stamps:
            producer.produce(topic, value=b"v", partition=partition, timestamp=ts)
            producer.flush(TIMEOUT_S)
    backend = service.connect(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S)
    try:
        assert backend.record_timestamps({(topic, 0): 1, (topic, 1): 0}) == {
            (topic, 0): 1_700_000_060_000, (topic, 1): 1_700_000_120_000}
        started = time.monotonic()
        assert backend.record_timestamps({(topic, 1): 1}) == {}
        assert time.monotonic() - started < TIMEOUT_S / 2
    finally:
        backend.close()
