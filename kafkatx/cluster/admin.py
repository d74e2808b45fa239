"""The KIP-664 admin APIs through kafka-python 3.x's ``KafkaAdminClient``.

librdkafka (confluent-kafka) has no ListTransactions / DescribeTransactions /
DescribeProducers / admin WriteTxnMarkers; kafka-python 3.0 ships them as
``KafkaAdminClient.list_transactions``, ``describe_transactions``,
``describe_producers`` and ``abort_transaction``. Only a COMMIT marker (to
finish a transaction the coordinator already decided to commit) has no
high-level call; for it we build kafka-python's own ``WriteTxnMarkersRequest``
and send it through the admin client's connection manager, the same path its
``abort_transaction`` takes.

Kafka's Java side: clients/.../admin/KafkaAdminClient.java (listTransactions,
describeTransactions, describeProducers, abortTransaction) and
tools/.../TransactionsCommand.java.

Before each call we check the broker's ApiVersions answer so that a broker
without the API (older than Kafka 3.0, or a Kafka-compatible broker that skips
it) gives :class:`UnsupportedApi` naming the API and the release that has it,
instead of kafka-python's generic IncompatibleBrokerVersion.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kafkatx.cluster.backend import (
    API_KEYS,
    ProducerState,
    TopicPartitionKey,
    TransactionListing,
    TransactionState,
)
from kafkatx.errors import ClusterError, UnsupportedApi

logging.getLogger("kafka").addHandler(logging.NullHandler())  # kafka-python logs every reconnect

# Batch size for DescribeProducers, as TransactionsCommand.MAX_BATCH_SIZE: one giant request
# for every partition of a broker would be needlessly large.
MAX_BATCH_SIZE = 500


def _reason(err: BaseException) -> str:
    import kafka.errors as kerr

    if isinstance(err, (kerr.KafkaConnectionError, kerr.BrokerNotAvailableError)):
        return "unreachable (no broker answered)"
    if isinstance(err, kerr.KafkaTimeoutError):
        return "timed out"
    if isinstance(err, kerr.SaslAuthenticationFailedError):
        return "authentication failed"
    if isinstance(err, kerr.ClusterAuthorizationFailedError):
        return "not authorized: the principal needs CLUSTER_ACTION on the cluster (ClusterAuthorizationFailed)"
    if isinstance(err, kerr.TransactionalIdAuthorizationFailedError):
        return "not authorized for the transactional id (needs DESCRIBE on the TransactionalId resource)"
    if isinstance(err, kerr.TopicAuthorizationFailedError):
        return "not authorized for the topic (needs READ on the topic)"
    text = str(err).strip()
    return text or type(err).__name__


class KafkaPythonAdmin:
    """The kafka-python half of a live backend. Connects on first use."""

    def __init__(self, bootstrap_server: str, config: dict[str, Any], *, timeout_s: float) -> None:
        self.bootstrap_server = bootstrap_server
        self.timeout_s = timeout_s
        self._config = dict(config)
        self._client: Any = None

    def _fail(self, what: str, err: BaseException) -> ClusterError:
        import kafka.errors as kerr

        if isinstance(err, (kerr.IncompatibleBrokerVersion, kerr.UnsupportedVersionError)):
            return UnsupportedApi(f"broker {self.bootstrap_server}: {what}: not supported by this broker ({err})")
        return ClusterError(f"broker {self.bootstrap_server}: {what}: {_reason(err)}")

    @property
    def client(self) -> Any:
        if self._client is None:
            import kafka.errors as kerr
            from kafka.admin import KafkaAdminClient

            timeout_ms = max(1, int(self.timeout_s * 1000))
            try:
                self._client = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_server.split(","),
                    client_id=self._config.pop("client_id", "kafkatx"),
                    request_timeout_ms=timeout_ms,
                    bootstrap_timeout_ms=timeout_ms,
                    **self._config,
                )
            except kerr.KafkaTimeoutError as err:
                raise ClusterError(f"broker {self.bootstrap_server}: connect: unreachable "
                                   f"(no answer within {self.timeout_s:g}s)") from err
            except kerr.KafkaError as err:
                raise self._fail("connect", err) from err
            except (OSError, ValueError) as err:
                raise ClusterError(f"broker {self.bootstrap_server}: connect: {err}") from err
        return self._client

    def supports(self, api: str) -> bool:
        return self.api_version(api) is not None

    def api_version(self, api: str) -> int | None:
        """The broker's newest version of ``api`` (its ApiVersions answer), None when it has none."""
        key = API_KEYS[api][0]
        client = self.client  # raises ClusterError itself when the broker cannot be reached
        try:
            versions = client.api_versions()
        except Exception as err:  # noqa: BLE001 - any client failure here is a cluster problem
            raise self._fail("ApiVersions", err) from err
        for k, span in versions.items():
            if int(k) == key:
                return int(span[1]) if isinstance(span, (tuple, list)) and len(span) == 2 else 0
        return None

    def _require(self, api: str) -> None:
        if not self.supports(api):
            key, since = API_KEYS[api]
            raise UnsupportedApi(f"broker {self.bootstrap_server} does not support {api} "
                                 f"(API key {key}; needs {since})")

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import kafka.errors as kerr

        try:
            return fn(*args, **kwargs)
        except kerr.KafkaError as err:
            raise self._fail(what, err) from err
        except (OSError, TimeoutError) as err:
            raise ClusterError(f"broker {self.bootstrap_server}: {what}: {err}") from err

    # -- ListTransactions / DescribeTransactions

    def list_transactions(self, *, states: Sequence[str] | None = None,
                          producer_ids: Sequence[int] | None = None, duration_filter_ms: int | None = None,
                          pattern: str | None = None) -> list[TransactionListing]:
        """ListTransactions with every filter sent to the broker: DurationFilter needs v1 (Kafka 3.8,
        KIP-994), TransactionalIdPattern v2 (Kafka 4.1, KIP-1152); kafka-python refuses to send a
        filter the broker's version would drop (UnsupportedApi here)."""
        self._require("ListTransactions")
        answer = self._call("ListTransactions", self.client.list_transactions,
                            producer_id_filters=list(producer_ids) if producer_ids else None,
                            state_filters=list(states) if states else None,
                            duration_filter_ms=duration_filter_ms, transactional_id_pattern=pattern)
        out = []
        for node_id, listings in answer.items():
            for item in listings:
                out.append(TransactionListing(transactional_id=item.transactional_id,
                                              producer_id=item.producer_id,
                                              state=str(getattr(item.state, "value", item.state)),
                                              coordinator_id=int(node_id)))
        out.sort(key=lambda t: t.transactional_id)
        return out

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionState]:
        import kafka.errors as kerr

        ids = sorted(set(transactional_ids))
        if not ids:
            return {}
        self._require("DescribeTransactions")
        out: dict[str, TransactionState] = {}
        # kafka-python raises on the first per-id error of a response; ask one id at a time so an
        # unknown id (TransactionalIdNotFound, which TransactionsCommand also treats as "none")
        # does not hide the others.
        for tid in ids:
            try:
                answer = self.client.describe_transactions([tid])
            except kerr.TransactionalIdNotFoundError:
                continue
            except kerr.KafkaError as err:
                raise self._fail(f"DescribeTransactions for {tid!r}", err) from err
            for got_id, d in answer.items():
                start = d.transaction_start_time_ms
                out[got_id] = TransactionState(
                    transactional_id=got_id,
                    coordinator_id=int(d.coordinator_id),
                    state=str(getattr(d.state, "value", d.state)),
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    timeout_ms=d.transaction_timeout_ms,
                    start_timestamp=start if start is not None and start >= 0 else None,
                    partitions=frozenset((tp.topic, tp.partition) for tp in d.topic_partitions),
                )
        return out

    # -- DescribeProducers

    def describe_producers(self, partitions: Iterable[TopicPartitionKey]
                           ) -> dict[TopicPartitionKey, list[ProducerState]]:
        from kafka import TopicPartition

        tps = [TopicPartition(t, p) for t, p in partitions]
        if not tps:
            return {}
        self._require("DescribeProducers")
        out: dict[TopicPartitionKey, list[ProducerState]] = {}
        for start in range(0, len(tps), MAX_BATCH_SIZE):
            batch = tps[start:start + MAX_BATCH_SIZE]
            answer = self._call(f"DescribeProducers ({len(batch)} partitions)",
                                self.client.describe_producers, batch)
            for tp, state in answer.items():
                out[(tp.topic, tp.partition)] = [
                    ProducerState(
                        producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch,
                        last_sequence=p.last_sequence,
                        last_timestamp=p.last_timestamp if p.last_timestamp >= 0 else None,
                        coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=(p.current_transaction_start_offset
                                                  if p.current_transaction_start_offset >= 0 else None),
                    )
                    for p in state.active_producers
                ]
        return out

    # -- WriteTxnMarkers

    def write_txn_markers(self, *, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool = False) -> None:
        from kafka import TopicPartition
        from kafka.admin import AbortTransactionSpec

        self._require("WriteTxnMarkers")
        tp = TopicPartition(topic, partition)
        what = f"WriteTxnMarkers ({'COMMIT' if commit else 'ABORT'}) to {topic}-{partition}"
        if not commit:
            spec = AbortTransactionSpec(topic_partition=tp, producer_id=producer_id,
                                        producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch)
            self._call(what, self.client.abort_transaction, spec)
            return
        self._call(what, self._write_commit_marker, tp, producer_id, producer_epoch, coordinator_epoch)

    def _write_commit_marker(self, tp: Any, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Send kafka-python's WriteTxnMarkersRequest with ``transaction_result=True`` (COMMIT) to the
        leader, through the admin client's own manager (as its abort_transaction does)."""
        import kafka.errors as kerr
        from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

        client = self.client
        marker_cls = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[marker_cls(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=True,
            topics=[marker_cls.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
            coordinator_epoch=coordinator_epoch)])

        async def send() -> Any:
            leaders = await client._async_get_leader_for_partitions([tp])
            return await client._manager.send(request, node_id=next(iter(leaders)))

        response = client._manager.run(send)
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    error_type = kerr.for_code(p.error_code)
                    if error_type is not kerr.NoError:
                        raise error_type(f"WriteTxnMarkers (commit) failed for {tp}")

    # -- ListGroups / OffsetFetch (require_stable)

    def list_groups(self) -> list[str]:
        """ListGroups on every broker: every group id the coordinators know, sorted."""
        answer = self._call("ListGroups", self.client.list_groups)
        return sorted({str(g["group_id"] if isinstance(g, dict) else g[0]) for g in answer})

    def unstable_groups(self, groups: Iterable[str]) -> set[str]:
        """The groups whose OffsetFetch with ``require_stable`` (v7+, KIP-447) answers
        UNSTABLE_OFFSET_COMMIT, for the group or any partition: their offsets wait on a pending
        transactional commit (``OffsetMetadataManager.fetchAllOffsets``). kafka-python's
        ``list_group_offsets`` never asks for stable offsets, so the request is built here and sent
        to each group's coordinator through the admin client's own connection manager."""
        wanted = sorted(set(groups))
        if not wanted:
            return set()
        return set(self._call("OffsetFetch (require_stable)", self._unstable, wanted))

    def _unstable(self, groups: list[str]) -> list[str]:
        import kafka.errors as kerr
        from kafka.protocol.consumer import OffsetFetchRequest

        client = self.client
        unstable_code = kerr.UnstableOffsetCommitError.errno

        async def ask() -> list[str]:
            found = []
            coordinators = await client._find_coordinator_ids(groups)
            for group in groups:
                request = OffsetFetchRequest(group_id=group, topics=None, require_stable=True,
                                             min_version=7, max_version=7)
                response = await client._manager.send(request, node_id=coordinators[group])
                codes = {response.error_code} | {p.error_code for t in response.topics for p in t.partitions}
                if unstable_code in codes:
                    found.append(group)
                    continue
                for code in codes:  # any other error: the answer is unknown, never "not blocked"
                    error_type = kerr.for_code(code)
                    if error_type is not kerr.NoError:
                        raise error_type(f"OffsetFetch for group {group!r}")
            return found

        return list(client._manager.run(ask))

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing must not mask the real error
                pass
            self._client = None
