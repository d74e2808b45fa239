"""Metadata, ListOffsets and InitProducerId through confluent-kafka (librdkafka).

librdkafka is the client operators' producers already run, so its view of
ListOffsets (``read_committed`` answers the LSO, ``read_uncommitted`` the high
watermark, KIP-98) and of InitProducerId (what a restarting producer does) is the
one that matters. The KIP-664 admin APIs librdkafka lacks go through
``admin.py`` (kafka-python).

librdkafka reports connection and authentication problems through ``error_cb``
and log lines rather than exceptions; we collect them so that a timeout can say
*why* ("authentication failed", "connection refused") and route the log lines to
the ``kafkatx.cluster.librdkafka`` logger instead of the terminal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

# confluent_kafka.admin imports OffsetSpec from its _listoffsets module without listing it in an __all__
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    OffsetSpec,
)

from kafkatx.cluster.backend import (
    BrokerInfo,
    ClusterMetadata,
    Isolation,
    OffsetSpecName,
    PartitionInfo,
    TopicPartitionKey,
)
from kafkatx.errors import ClusterError, UnsupportedApi

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# transaction.timeout.ms as a fence sends it (InitProducerId's transactionTimeoutMs): Kafka's
# ProducerConfig default, and librdkafka's allowed range (CONFIGURATION.md: 1000..2147483647).
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
MIN_TRANSACTION_TIMEOUT_MS = 1_000
MAX_TRANSACTION_TIMEOUT_MS = 2**31 - 1


def fence_timeout_ms(wanted: int | None) -> int:
    """The transactionTimeoutMs a fence sends, which the coordinator stores for the id after it
    (``TransactionMetadata.prepareIncrementProducerEpoch``): ``wanted`` (the id's own timeout, from
    DescribeTransactions) within librdkafka's range; the producer default when it is unknown."""
    if wanted is None:
        return DEFAULT_TRANSACTION_TIMEOUT_MS
    return min(max(wanted, MIN_TRANSACTION_TIMEOUT_MS), MAX_TRANSACTION_TIMEOUT_MS)

_rdkafka_log = logging.getLogger("kafkatx.cluster.librdkafka")
_rdkafka_log.addHandler(logging.NullHandler())
_rdkafka_log.propagate = False  # librdkafka is chatty about every reconnect; keep stderr to one line


def describe_kafka_error(err: KafkaError) -> str:
    """A short human reason for a librdkafka error code."""
    code = err.code()
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        return f"authentication failed: {err.str()}"
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return "not authorized (CLUSTER_AUTHORIZATION_FAILED: the principal needs a cluster ACL)"
    if code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return "not authorized for the transactional id (needs WRITE on the TransactionalId resource)"
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return "not authorized for the topic (needs DESCRIBE on the topic)"
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        return f"unreachable ({err.str()})"
    return err.str()


class ConfluentClient:
    """The confluent-kafka half of a live backend."""

    def __init__(self, bootstrap_server: str, config: dict[str, Any], *, timeout_s: float) -> None:
        self.bootstrap_server = bootstrap_server
        self.timeout_s = timeout_s
        self._errors: list[KafkaError] = []
        self._lock = threading.Lock()
        timeout_ms = max(1, int(timeout_s * 1000))
        self._base: dict[str, Any] = {
            "client.id": "kafkatx",
            **config,
            "bootstrap.servers": bootstrap_server,
            "socket.timeout.ms": max(10, timeout_ms),
            "logger": _rdkafka_log,
            "error_cb": self._on_error,
        }
        self._admin = AdminClient(dict(self._base))

    # -- plumbing

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self._errors.append(err)

    def _fail(self, what: str, err: BaseException | KafkaError | None = None) -> ClusterError:
        """Build the one-line error for a failed call, preferring the reason error_cb saw."""
        self._admin.poll(0)  # serve queued error callbacks
        kafka_err: KafkaError | None = None
        if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
            kafka_err = err.args[0]
        elif isinstance(err, KafkaError):
            kafka_err = err
        with self._lock:
            seen = list(self._errors)
        reason: str
        auth = [e for e in seen if e.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)]
        if auth:
            reason = describe_kafka_error(auth[-1])
        elif kafka_err is not None:
            if kafka_err.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT) and seen:
                reason = describe_kafka_error(seen[-1])
            elif kafka_err.code() == KafkaError._TIMED_OUT:
                reason = f"no answer within {self.timeout_s:g}s"
            else:
                reason = describe_kafka_error(kafka_err)
            if kafka_err.code() in (KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE):
                return UnsupportedApi(f"broker {self.bootstrap_server}: {what}: {reason}")
        elif err is not None:
            reason = str(err) or type(err).__name__
        else:
            reason = "failed"
        return ClusterError(f"broker {self.bootstrap_server}: {what}: {reason}")

    # -- metadata

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        # Always ask for every topic and filter here: a Metadata request naming a topic may create
        # it on brokers with auto.create.topics.enable (and Tansu creates it regardless), and
        # looking must never change the cluster.
        try:
            md = self._admin.list_topics(timeout=self.timeout_s)
        except KafkaException as err:
            raise self._fail("metadata", err) from err
        wanted = set(topics) if topics is not None else None
        brokers = tuple(sorted((BrokerInfo(node_id=b.id, host=str(b.host), port=int(b.port)) for b in md.brokers.values()),
                               key=lambda b: b.node_id))
        parts: list[PartitionInfo] = []
        for name, tmd in md.topics.items():
            if wanted is not None and name not in wanted:
                continue
            if tmd.error is not None:
                if tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise ClusterError(f"broker {self.bootstrap_server}: topic {name!r} does not exist")
                raise self._fail(f"metadata for topic {name!r}", tmd.error)
            for pid, pmd in tmd.partitions.items():
                parts.append(PartitionInfo(topic=name, partition=pid,
                                           leader=pmd.leader if pmd.leader >= 0 else None,
                                           replicas=tuple(pmd.replicas), internal=name in INTERNAL_TOPICS))
        if wanted is not None:
            missing = wanted - {p.topic for p in parts}
            if missing:
                raise ClusterError(f"broker {self.bootstrap_server}: topic {sorted(missing)[0]!r} does not exist")
        parts.sort(key=lambda p: (p.topic, p.partition))
        return ClusterMetadata(brokers=brokers, partitions=tuple(parts), cluster_id=md.cluster_id,
                               controller_id=md.controller_id if md.controller_id >= 0 else None)

    # -- ListOffsets

    def list_offsets(self, partitions: Iterable[TopicPartitionKey], *, isolation: Isolation,
                     spec: OffsetSpecName) -> dict[TopicPartitionKey, int]:
        tps = list(partitions)
        if not tps:
            return {}
        # OffsetSpec's class methods are unannotated in confluent_kafka (admin/_listoffsets.py)
        offset_spec = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        what = f"ListOffsets ({spec}, {isolation})"
        try:
            futures = self._admin.list_offsets({TopicPartition(t, p): offset_spec for t, p in tps},
                                               isolation_level=level, request_timeout=self.timeout_s)
        except KafkaException as err:
            raise self._fail(what, err) from err
        out: dict[TopicPartitionKey, int] = {}
        for tp, fut in futures.items():
            try:
                out[(tp.topic, tp.partition)] = fut.result(timeout=self.timeout_s + 1).offset
            except KafkaException as err:
                raise self._fail(f"{what} for {tp.topic}-{tp.partition}", err) from err
            except TimeoutError as err:
                raise ClusterError(f"broker {self.bootstrap_server}: {what}: no answer within "
                                   f"{self.timeout_s:g}s") from err
        return out

    # -- InitProducerId

    def force_terminate_transaction(self, transactional_id: str, *, transaction_timeout_ms: int = 60_000) -> None:
        """``Admin.forceTerminateTransaction`` (KIP-939) through the fence path: ``init_transactions``
        sends InitProducerId without ``keepPreparedTxn`` (false), which is the admin call's request
        (``FenceProducersHandler``): the coordinator fences and aborts the transaction, 2PC or not
        (``TransactionCoordinator.handleInitProducerId``), and librdkafka's retry after
        CONCURRENT_TRANSACTIONS writes ``Empty`` at the next epoch with ``transaction.timeout.ms``."""
        self.fence_transactional_id(transactional_id, transaction_timeout_ms=transaction_timeout_ms)

    def fence_transactional_id(self, transactional_id: str, *, transaction_timeout_ms: int | None = None) -> None:
        """Fence the id the way a restarting producer does: ``init_transactions``.

        The coordinator bumps the epoch and, when a transaction is Ongoing, aborts it
        (writes PrepareAbort, sends ABORT markers, CompleteAbort) before answering
        (TransactionCoordinator.handleInitProducerId); the id then keeps the request's
        transactionTimeoutMs: ``fence_timeout_ms(transaction_timeout_ms)``, sent as the
        producer's ``transaction.timeout.ms`` (librdkafka's default, 60 s, when None).
        """
        conf = {k: v for k, v in self._base.items()}
        conf["transactional.id"] = transactional_id
        conf["error_cb"] = self._on_error
        if transaction_timeout_ms is not None:
            timeout = fence_timeout_ms(transaction_timeout_ms)
            conf["transaction.timeout.ms"] = timeout
            # librdkafka refuses socket.timeout.ms above transaction.timeout.ms + 100
            conf["socket.timeout.ms"] = min(int(conf["socket.timeout.ms"]), timeout + 100)
        try:
            producer = Producer(conf)
        except KafkaException as err:
            raise self._fail(f"InitProducerId for {transactional_id!r}", err) from err
        try:
            producer.init_transactions(self.timeout_s)
        except KafkaException as err:
            producer.poll(0)
            raise self._fail(f"InitProducerId for {transactional_id!r}", err) from err
        finally:
            try:
                producer.close()
            except (KafkaException, RuntimeError):
                pass

    # -- Fetch

    def record_timestamps(self, offsets: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Fetch (read_uncommitted) at each offset and keep the timestamp of the record found there.

        One consumer for all the partitions, assigned at the offsets (no group joined, nothing
        committed; librdkafka wants a group.id all the same), each partition paused once its first
        record is in; bounded by the timeout. It needs READ on the topics. A partition whose offset
        is out of range (below the log start), at the log end, not readable, or that did not answer
        in time is left out: the caller falls back to what it knows otherwise.
        """
        wanted = dict(offsets)
        if not wanted:
            return {}
        conf = {k: v for k, v in self._base.items()}
        conf.update({"group.id": "kafkatx-record-timestamps", "enable.auto.commit": False,
                     "enable.auto.offset.store": False, "isolation.level": "read_uncommitted",
                     "auto.offset.reset": "error", "enable.partition.eof": True})
        try:
            consumer = Consumer(conf)
        except KafkaException as err:
            raise self._fail("Fetch", err) from err
        out: dict[TopicPartitionKey, int] = {}
        left = set(wanted)
        try:
            consumer.assign([TopicPartition(t, p, off) for (t, p), off in sorted(wanted.items())])
            deadline = time.monotonic() + self.timeout_s
            while left and (remaining := deadline - time.monotonic()) > 0:
                msg = consumer.poll(min(remaining, 0.5))
                if msg is None:
                    continue
                tp = (str(msg.topic()), int(msg.partition() or 0))
                if tp not in left:
                    continue
                if msg.error() is not None:
                    # nothing at that offset (any more: _PARTITION_EOF, _AUTO_OFFSET_RESET,
                    # OFFSET_OUT_OF_RANGE) or not readable (e.g. TOPIC_AUTHORIZATION_FAILED): no answer
                    left.discard(tp)
                    continue
                offset = msg.offset()
                if offset is None or offset < wanted[tp]:
                    continue
                kind, ts = msg.timestamp()
                if kind != TIMESTAMP_NOT_AVAILABLE and ts >= 0:
                    out[tp] = int(ts)
                left.discard(tp)
                consumer.pause([TopicPartition(*tp)])
        except KafkaException as err:
            raise self._fail("Fetch", err) from err
        finally:
            try:
                consumer.close()
            except (KafkaException, RuntimeError):
                pass
        return out

    def close(self) -> None:
        # The AdminClient holds error_cb, a bound method of self: a reference cycle that keeps
        # librdkafka's handle and its threads alive until the cyclic GC runs. Dropping our side
        # destroys the handle now (the exporter and --watch open one per refresh).
        admin = self.__dict__.pop("_admin", None)
        if admin is not None:
            admin.poll(0)
