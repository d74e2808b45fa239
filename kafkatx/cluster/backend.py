"""The primitive operations kafkatx asks of a live cluster, as a Protocol.

``service.py`` builds every online command out of these calls only, so the
same command logic runs against a real cluster (``LiveCluster``: confluent-kafka
for metadata, ListOffsets and InitProducerId; kafka-python for the KIP-664
admin APIs) and against an in-memory fake in the tests.

The result types use Kafka's admin-API names in snake_case
(``DescribeProducersResponse``, ``DescribeTransactionsResponse``,
``ListTransactionsResponse`` in clients/src/main/resources/common/message/).
Kafka's "absent" sentinels (-1 for a start offset or timestamp) are turned into
``None`` here, once, so nothing above has to remember them.

Every method raises only :class:`kafkatx.errors.ClusterError` (or its
:class:`~kafkatx.errors.UnsupportedApi`), with a message that names the broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

from msgspec import Struct

Isolation = Literal["read_committed", "read_uncommitted"]
OffsetSpecName = Literal["latest", "earliest"]
TopicPartitionKey = tuple[str, int]

# API keys and the Kafka release that introduced them, for UnsupportedApi messages.
# (clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java)
API_KEYS: dict[str, tuple[int, str]] = {
    "Fetch": (1, "Kafka 0.8"),
    "ListOffsets": (2, "Kafka 0.10.1 (read_committed isolation: Kafka 0.11, KIP-98)"),
    "InitProducerId": (22, "Kafka 0.11 (KIP-98)"),
    "WriteTxnMarkers": (27, "Kafka 0.11; admin abort from Kafka 3.0 (KIP-664)"),
    "DescribeProducers": (61, "Kafka 3.0 (KIP-664)"),
    "DescribeTransactions": (65, "Kafka 3.0 (KIP-664)"),
    "ListTransactions": (66, "Kafka 3.0 (KIP-664)"),
    "OffsetFetch": (9, "Kafka 0.8.2 (require_stable: OffsetFetch v7, Kafka 2.5, KIP-447)"),
    "ListGroups": (16, "Kafka 0.9"),
}


class BrokerInfo(Struct, frozen=True, kw_only=True):
    node_id: int
    host: str
    port: int


class PartitionInfo(Struct, frozen=True, kw_only=True):
    topic: str
    partition: int
    leader: int | None  # None while the partition has no leader (-1 on the wire)
    replicas: tuple[int, ...] = ()
    internal: bool = False  # __consumer_offsets, __transaction_state


class ClusterMetadata(Struct, frozen=True, kw_only=True):
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionInfo, ...]  # sorted by (topic, partition)
    cluster_id: str | None = None
    controller_id: int | None = None

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})


class TransactionListing(Struct, frozen=True, kw_only=True):
    """One ListTransactions entry: which coordinator knows the id, and its state."""

    transactional_id: str
    producer_id: int
    state: str  # Kafka's name: Empty, Ongoing, PrepareCommit, ...
    coordinator_id: int


class TransactionState(Struct, frozen=True, kw_only=True):
    """One DescribeTransactions answer.

    ``partitions`` is what the coordinator still waits on: every partition of an
    Ongoing transaction, and in PrepareCommit/PrepareAbort the partitions that
    have not yet acknowledged their marker (TransactionsCommand relies on this).
    """

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_timestamp: int | None  # None when the coordinator answers -1 (no transaction)
    partitions: frozenset[TopicPartitionKey]


class ProducerState(Struct, frozen=True, kw_only=True):
    """One active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int | None
    coordinator_epoch: int
    current_txn_start_offset: int | None  # first offset of its open transaction, None when none


@runtime_checkable
class ClusterBackend(Protocol):
    """What kafkatx needs from a cluster. ``bootstrap_server`` names it in errors."""

    bootstrap_server: str

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        """Brokers and partitions (all topics, internal ones included, when ``topics`` is None).

        An unknown topic in ``topics`` raises ClusterError.
        """
        ...

    def list_offsets(self, partitions: Iterable[TopicPartitionKey], *, isolation: Isolation,
                     spec: OffsetSpecName) -> dict[TopicPartitionKey, int]:
        """ListOffsets: ``latest`` is the high watermark (read_uncommitted) or the LSO
        (read_committed); ``earliest`` is the log start offset."""
        ...

    def list_transactions(self, *, states: Sequence[str] | None = None,
                          producer_ids: Sequence[int] | None = None, duration_filter_ms: int | None = None,
                          pattern: str | None = None) -> list[TransactionListing]:
        """ListTransactions on every broker (each coordinates a slice of __transaction_state).

        ``duration_filter_ms`` needs ListTransactions v1 (Kafka 3.8, KIP-994) and ``pattern`` v2
        (Kafka 4.1, KIP-1152): the caller asks :meth:`api_version` first; a broker without the
        version raises UnsupportedApi rather than silently dropping the filter.
        """
        ...

    def api_version(self, api: str) -> int | None:
        """The newest version of ``api`` (a key of :data:`API_KEYS`) the broker takes (ApiVersions),
        None when it has none."""
        ...

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionState]:
        """DescribeTransactions through each id's coordinator; unknown ids are left out."""
        ...

    def describe_producers(self, partitions: Iterable[TopicPartitionKey]
                           ) -> dict[TopicPartitionKey, list[ProducerState]]:
        """DescribeProducers on each partition's leader."""
        ...

    def write_txn_markers(self, *, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool = False) -> None:
        """WriteTxnMarkers to the partition leader (needs CLUSTER_ACTION on the cluster)."""
        ...

    def fence_transactional_id(self, transactional_id: str, *, transaction_timeout_ms: int | None = None) -> None:
        """InitProducerId for the id (a transactional producer's init_transactions): bumps the
        epoch, and the coordinator aborts an Ongoing transaction first. ``transaction_timeout_ms``
        is the request's transactionTimeoutMs, which the coordinator stores for the id
        (``TransactionMetadata.prepareIncrementProducerEpoch``); None: the client's default."""
        ...

    def record_timestamps(self, offsets: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Fetch (read_uncommitted) at each partition's offset: the timestamp of the record found
        there (its batch's CreateTime or LogAppendTime). A partition whose offset is no longer in
        the log (below the log start: a ghost) or that did not answer is left out."""
        ...

    def force_terminate_transaction(self, transactional_id: str, *, transaction_timeout_ms: int = 60_000) -> None:
        """``Admin.forceTerminateTransaction`` (KIP-939): abort the id's transaction, 2PC ones too.

        Kafka's admin call is an ``InitProducerId`` with ``keepPreparedTxn=false`` (``FenceProducersHandler``):
        the coordinator fences and aborts the transaction (``TransactionCoordinator.handleInitProducerId``),
        answers CONCURRENT_TRANSACTIONS, and the retry writes ``Empty`` at the next epoch with the request's
        ``transaction_timeout_ms``. Any client that sends that InitProducerId does the same."""
        ...

    def list_groups(self) -> list[str]:
        """ListGroups on every broker: the group ids, sorted."""
        ...

    def unstable_groups(self, groups: Iterable[str]) -> set[str]:
        """Of ``groups``, those whose OffsetFetch with ``require_stable`` (KIP-447) answers
        UNSTABLE_OFFSET_COMMIT: a pending transactional offset commit holds their offsets."""
        ...

    def supports(self, api: str) -> bool:
        """Whether the broker advertises ``api`` (a key of :data:`API_KEYS`)."""
        ...

    def close(self) -> None:
        ...
