"""Mixed-version clusters: markers a coordinator sends to brokers older than itself (KAFKA-20322).

KIP-1228 (Kafka 4.2) gave WriteTxnMarkers a version 2 that carries the transaction version, so that a
partition leader can check a TV2 marker's epoch strictly (``ProducerAppendInfo.checkProducerEpoch``).
During an upgrade to 4.2 the coordinator's marker channel (``TransactionMarkerChannelManager``) sent
version 2 to brokers that did not support it yet, and the markers for their partitions never landed:
transactions stayed in PrepareCommit/PrepareAbort (KAFKA-20322). Offline, an ``incomplete-markers`` row
is such a transaction; where the metadata log says which broker leads the row's partition and which
leads the coordinator's ``__transaction_state`` partition (``PartitionRecord``/``PartitionChangeRecord``),
and what each registered with (``RegisterBrokerRecord``'s supported ``metadata.version`` range: its
maximum is the newest ``MetadataVersion`` the broker's software knows, so its release), a row whose
partition lies on an older broker than the coordinator's is said to be one.

Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkatx.coordinator.rules import HangingKind
from kafkatx.coordinator.versions import KafkaVersion, release_of_metadata_version, version_text
from kafkatx.rows import HangingRow
from kafkatx.storage.cluster_metadata import Broker, ClusterImage

TXN_STATE_TOPIC = "__transaction_state"


def broker_release(broker: Broker) -> tuple[int, KafkaVersion] | None:
    """(newest metadata.version level, its release) the broker registered as supported; None: not said."""
    rng = broker.features.get("metadata.version")
    if rng is None:
        return None
    got = release_of_metadata_version(rng[1])
    return (rng[1], got[0]) if got is not None else None


def older_broker_notices(rows: Sequence[HangingRow], image: ClusterImage,
                         coordinator_partition: dict[str, int]) -> list[str]:
    """One note per ``incomplete-markers`` row whose partition's leader registered an older release than the
    leader of its transactional id's ``__transaction_state`` partition (``coordinator_partition``: id ->
    partition)."""
    out: list[str] = []
    for row in rows:
        if row.kind != HangingKind.INCOMPLETE_MARKERS or row.transactional_id is None:
            continue
        cpart = coordinator_partition.get(row.transactional_id)
        leader = image.leader_of(row.topic, row.partition)
        coord = image.leader_of(TXN_STATE_TOPIC, cpart) if cpart is not None else None
        if leader is None or coord is None or leader.broker_id == coord.broker_id:
            continue
        mine, theirs = broker_release(leader), broker_release(coord)
        if mine is None or theirs is None or mine[0] >= theirs[0]:
            continue
        out.append(f"{row.topic}-{row.partition} ({row.kind}, {row.transactional_id} "
                   f"{row.coordinator_state}): its leader, broker {leader.broker_id}, supports metadata.version "
                   f"up to {mine[0]} (Kafka {version_text(mine[1])}), older than broker {coord.broker_id} "
                   f"({theirs[0]}, Kafka {version_text(theirs[1])}) which leads {TXN_STATE_TOPIC}-{cpart}: in a "
                   "mixed-version cluster the coordinator's markers may not reach an older broker "
                   "(KAFKA-20322: WriteTxnMarkers v2 of KIP-1228 sent to brokers before 4.2)")
    return out


__all__ = ["broker_release", "older_broker_notices"]
