"""An in-memory :class:`ClusterBackend` for the KIP-664 paths Tansu lacks.

It models just enough of Kafka's behaviour to answer each call the way a Kafka
3.x broker would: the coordinator's transactions (DescribeTransactions lists an
Ongoing transaction's partitions, a Prepare* one's partitions still missing a
marker), the partition leaders' producer state (DescribeProducers), ListOffsets
derived from the log end and the open transactions (LSO = first offset of the
oldest open transaction, Kafka's ``UnifiedLog.lastStableOffset``), and the
side effects of WriteTxnMarkers and InitProducerId.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from msgspec.structs import replace

from kafkatx.cluster.backend import (
    API_KEYS,
    BrokerInfo,
    ClusterMetadata,
    PartitionInfo,
    ProducerState,
    TopicPartitionKey,
    TransactionListing,
    TransactionState,
)
from kafkatx.coordinator.rules import listed
from kafkatx.errors import ClusterError, UnsupportedApi


@dataclass
class FakePartition:
    log_start: int = 0
    log_end: int = 0
    producers: dict[int, ProducerState] = field(default_factory=dict)
    timestamps: dict[int, int] = field(default_factory=dict)  # offset -> the record's timestamp (Fetch)


class FakeCluster:
    bootstrap_server = "fake:9092"

    def __init__(self, *, missing_apis: Iterable[str] = (), deny_cluster_action: bool = False,
                 list_transactions_version: int = 0, now_ms: int | None = None) -> None:
        self.partitions: dict[TopicPartitionKey, FakePartition] = {}
        # ListTransactions' newest version: 0 (Kafka 3.0-3.7), 1 (3.8+: DurationFilter), 2 (4.1+: pattern)
        self.list_transactions_version = list_transactions_version
        self.now_ms = now_ms  # the broker's clock for DurationFilter (None: the wall clock)
        self.list_requests: list[dict[str, object]] = []
        self.transactions: dict[str, TransactionState] = {}
        self.missing = set(missing_apis)
        self.deny_cluster_action = deny_cluster_action
        self.calls: list[str] = []
        self.closed = False
        self.groups: set[str] = set()
        # the group coordinator's pending transactional offsets (OffsetMetadataManager): producer id ->
        # (__consumer_offsets partition, groups); a marker of the producer on that partition ends them
        self.pending_offsets: dict[int, tuple[TopicPartitionKey, set[str]]] = {}
        # what does not answer, as kafka-python raises it: the first partition (id) of a request whose
        # leader (coordinator) answers with an error fails the whole request
        self.unanswered: dict[TopicPartitionKey, str] = {}  # DescribeProducers: partition -> error
        self.coordinators_down: dict[str, str] = {}  # DescribeTransactions: transactional id -> error
        self.list_transactions_error: str | None = None
        self.groups_error: str | None = None  # ListGroups

    # -- building the scenario

    def add_topic(self, topic: str, partitions: int = 1) -> None:
        for p in range(partitions):
            self.partitions[(topic, p)] = FakePartition()

    def append(self, tp: TopicPartitionKey, count: int, *, producer_id: int = -1, producer_epoch: int = 0,
               transactional: bool = False, timestamp: int = 0, coordinator_epoch: int = 0) -> int:
        part = self.partitions[tp]
        first = part.log_end
        part.log_end += count
        for offset in range(first, part.log_end):
            part.timestamps[offset] = timestamp
        if producer_id >= 0:
            prev = part.producers.get(producer_id)
            start = prev.current_txn_start_offset if prev is not None else None
            if transactional and start is None:
                start = first
            part.producers[producer_id] = ProducerState(
                producer_id=producer_id, producer_epoch=producer_epoch, last_sequence=count - 1,
                last_timestamp=timestamp, coordinator_epoch=coordinator_epoch, current_txn_start_offset=start)
        return first

    def txn_offset_commit(self, group: str, *, producer_id: int, producer_epoch: int = 0, timestamp: int = 0,
                          partitions: int = 50) -> TopicPartitionKey:
        """TxnOffsetCommit (``sendOffsetsToTransaction``): a transactional OffsetCommit record on the group's
        ``__consumer_offsets`` partition (``GroupCoordinator.partitionFor``), pending until the producer's
        marker there."""
        from kafkatx.format.txn_log import coordinator_partition

        tp = ("__consumer_offsets", coordinator_partition(group, partitions))
        self.append(tp, 1, producer_id=producer_id, producer_epoch=producer_epoch, transactional=True,
                    timestamp=timestamp)
        self.groups.add(group)
        self.pending_offsets.setdefault(producer_id, (tp, set()))[1].add(group)
        return tp

    def delete_records(self, tp: TopicPartitionKey, before: int) -> None:
        """Raise the log start to ``before`` (retention or DeleteRecords; bounded by the log end
        as Kafka bounds it by the high watermark). The producer state is kept: a transaction
        whose first offset is now below the log start becomes a ghost, as after a broker loads a
        ``.snapshot`` whose data retention deleted."""
        part = self.partitions[tp]
        if not part.log_start <= before <= part.log_end:
            raise ValueError(f"log start {before} outside [{part.log_start}, {part.log_end}]")
        part.log_start = before

    def set_txn(self, transactional_id: str, *, producer_id: int, producer_epoch: int = 0, state: str,
                partitions: Iterable[TopicPartitionKey] = (), start: int | None = 0, timeout_ms: int = 60_000,
                coordinator_id: int = 1) -> None:
        self.transactions[transactional_id] = TransactionState(
            transactional_id=transactional_id, coordinator_id=coordinator_id, state=state,
            producer_id=producer_id, producer_epoch=producer_epoch, timeout_ms=timeout_ms,
            start_timestamp=start, partitions=frozenset(partitions))

    def _end_txn(self, tp: TopicPartitionKey, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        part = self.partitions[tp]
        state = part.producers.get(producer_id)
        if state is not None and epoch < state.producer_epoch:
            raise ClusterError(f"broker {self.bootstrap_server}: PRODUCER_FENCED")
        part.log_end += 1  # the marker
        pending = self.pending_offsets.get(producer_id)
        if pending is not None and pending[0] == tp:  # replayEndTransactionMarker
            del self.pending_offsets[producer_id]
        if state is not None:
            part.producers[producer_id] = replace(state, producer_epoch=epoch, current_txn_start_offset=None,
                                                  coordinator_epoch=coordinator_epoch)

    # -- ClusterBackend

    def _need(self, api: str) -> None:
        self.calls.append(api)
        if api in self.missing:
            raise UnsupportedApi(f"broker {self.bootstrap_server} does not support {api} "
                                 f"(API key {API_KEYS[api][0]}; needs {API_KEYS[api][1]})")

    def supports(self, api: str) -> bool:
        return api not in self.missing

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        self.calls.append("Metadata")
        known = {t for t, _ in self.partitions}
        for t in topics or ():
            if t not in known:
                raise ClusterError(f"broker {self.bootstrap_server}: topic {t!r} does not exist")
        parts = tuple(PartitionInfo(topic=t, partition=p, leader=1, replicas=(1,), internal=t.startswith("__"))
                      for (t, p) in sorted(self.partitions) if topics is None or t in topics)
        return ClusterMetadata(brokers=(BrokerInfo(node_id=1, host="fake", port=9092),), partitions=parts)

    def list_offsets(self, partitions, *, isolation, spec):
        self._need("ListOffsets")
        out = {}
        for tp in partitions:
            part = self.partitions[tp]
            if spec == "earliest":
                out[tp] = part.log_start
            elif isolation == "read_uncommitted":
                out[tp] = part.log_end
            else:
                starts = [p.current_txn_start_offset for p in part.producers.values()
                          if p.current_txn_start_offset is not None]
                # UnifiedLog.maybeIncrementFirstUnstableOffset clamps the first unstable offset to
                # the log start, so a ghost holds the LSO at the log start, not below it.
                out[tp] = max(min([*starts, part.log_end]), part.log_start)
        return out

    def api_version(self, api):
        if api in self.missing:
            return None
        return self.list_transactions_version if api == "ListTransactions" else 0

    def list_transactions(self, *, states=None, producer_ids=None, duration_filter_ms=None, pattern=None):
        """As TransactionStateManager.listTransactionStates (kafkatx.coordinator.rules.listed states it); like
        kafka-python, a filter the broker's version lacks is refused, never dropped."""
        self._need("ListTransactions")
        if self.list_transactions_error is not None:
            raise ClusterError(f"broker {self.bootstrap_server}: ListTransactions: {self.list_transactions_error}")
        self.list_requests.append({"states": states, "producer_ids": producer_ids,
                                   "duration_filter_ms": duration_filter_ms, "pattern": pattern})
        if (duration_filter_ms is not None and self.list_transactions_version < 1) or \
                (pattern is not None and self.list_transactions_version < 2):
            raise UnsupportedApi(f"broker {self.bootstrap_server}: ListTransactions: not supported by this broker")
        now = int(time.time() * 1000) if self.now_ms is None else self.now_ms
        regex = re.compile(pattern) if pattern is not None else None
        return [TransactionListing(transactional_id=t.transactional_id, producer_id=t.producer_id, state=t.state,
                                   coordinator_id=t.coordinator_id)
                for t in self.transactions.values()
                if (not states or t.state in states)
                and listed(transactional_id=t.transactional_id, producer_id=t.producer_id, state=t.state,
                           start_ms=t.start_timestamp, pattern=regex, producer_ids=producer_ids or None,
                           duration_ms=duration_filter_ms, now=now)]

    def record_timestamps(self, offsets):
        """Fetch at each offset: the record's timestamp; an offset outside [log start, log end) is left out."""
        self._need("Fetch")
        out = {}
        for tp, offset in offsets.items():
            part = self.partitions[tp]
            if part.log_start <= offset < part.log_end and offset in part.timestamps:
                out[tp] = part.timestamps[offset]
        return out

    def describe_transactions(self, transactional_ids):
        ids = list(transactional_ids)
        if not ids:
            return {}
        self._need("DescribeTransactions")
        for i in ids:
            if i in self.coordinators_down:
                raise ClusterError(f"broker {self.bootstrap_server}: DescribeTransactions for {i!r}: "
                                   f"{self.coordinators_down[i]}")
        return {i: self.transactions[i] for i in ids if i in self.transactions}

    def describe_producers(self, partitions):
        self._need("DescribeProducers")
        tps = list(partitions)
        for tp in tps:
            if tp in self.unanswered:
                raise ClusterError(f"broker {self.bootstrap_server}: DescribeProducers ({len(tps)} partitions): "
                                   f"{tp[0]}-{tp[1]}: {self.unanswered[tp]}")
        return {tp: list(self.partitions[tp].producers.values()) for tp in tps}

    def write_txn_markers(self, *, topic, partition, producer_id, producer_epoch, coordinator_epoch, commit=False):
        self._need("WriteTxnMarkers")
        if self.deny_cluster_action:
            raise ClusterError(f"broker {self.bootstrap_server}: WriteTxnMarkers to {topic}-{partition}: "
                               "not authorized: the principal needs CLUSTER_ACTION on the cluster")
        self.calls.append(f"marker:{'COMMIT' if commit else 'ABORT'}:{topic}-{partition}:{producer_id}")
        self._end_txn((topic, partition), producer_id, producer_epoch, coordinator_epoch)

    fence_timeouts: list[int | None]  # the transactionTimeoutMs of each InitProducerId sent

    def fence_transactional_id(self, transactional_id, *, transaction_timeout_ms=None):
        """InitProducerId as TransactionCoordinator.prepareInitProducerIdTransit answers it: an Ongoing
        transaction is aborted first at epoch E+1 (prepareFenceProducerEpoch: markers with E+1 to each
        partition, CompleteAbort) and CONCURRENT_TRANSACTIONS sent back; the client's retry then bumps
        again (prepareIncrementProducerEpoch): Empty at E+2 with the request's transactionTimeoutMs
        (the client default, 60000, when the caller gave none). Empty/Complete*: Empty at E+1."""
        self._need("InitProducerId")
        self.__dict__.setdefault("fence_timeouts", []).append(transaction_timeout_ms)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return
        epoch = txn.producer_epoch
        if txn.state == "Ongoing":
            epoch += 1
            for tp in sorted(txn.partitions):
                self._end_txn(tp, txn.producer_id, epoch, 0)
        if txn.state in ("Ongoing", "Empty", "CompleteAbort", "CompleteCommit"):
            epoch += 1
            # the start time is left as it was: TransactionMetadata.completeTransitionTo's Empty case does
            # not copy the transit's -1 (DescribeTransactions keeps showing the last transaction's start)
            self.transactions[transactional_id] = replace(
                txn, producer_epoch=epoch, state="Empty", partitions=frozenset(),
                timeout_ms=60_000 if transaction_timeout_ms is None else transaction_timeout_ms)

    def force_terminate_transaction(self, transactional_id, *, transaction_timeout_ms=60_000):
        """Admin.forceTerminateTransaction as Kafka's coordinator answers it: an InitProducerId with
        keepPreparedTxn=false fences and aborts the transaction (2PC too), then the retry after
        CONCURRENT_TRANSACTIONS moves CompleteAbort to Empty at the next epoch with the request's
        transaction timeout (TransactionMetadata.prepareIncrementProducerEpoch)."""
        self.calls.append(f"force-terminate:{transactional_id}:{transaction_timeout_ms}")
        self.fence_transactional_id(transactional_id, transaction_timeout_ms=transaction_timeout_ms)

    def list_groups(self):
        self._need("ListGroups")
        if self.groups_error is not None:
            raise ClusterError(f"broker {self.bootstrap_server}: ListGroups: {self.groups_error}")
        return sorted(self.groups)

    def unstable_groups(self, groups):
        """OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT while any producer's commit of the
        group is pending (OffsetMetadataManager.fetchAllOffsets)."""
        self._need("OffsetFetch")
        waiting = {g for _tp, gs in self.pending_offsets.values() for g in gs}
        return {g for g in groups if g in waiting}

    def close(self):
        self.closed = True
