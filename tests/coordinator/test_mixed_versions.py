"""incomplete-markers rows on brokers older than the coordinator's (KAFKA-20322), from the metadata image.

Reasoned from Kafka's sources: a broker registers (``RegisterBrokerRecord.features``) the ``metadata.version``
range its software supports, whose maximum names its release (``MetadataVersion``: 27 is 4.1-IV1, 29 4.2-IV1);
``PartitionRecord.leader`` / ``PartitionChangeRecord``'s tagged leader say which broker leads a partition. A
4.2 coordinator's WriteTxnMarkers v2 (KIP-1228) to a pre-4.2 leader is KAFKA-20322's stuck Prepare* state.
"""

from __future__ import annotations

from pathlib import Path

from kafkatx.coordinator.mixed import older_broker_notices
from kafkatx.rows import HangingRow
from kafkatx.storage.cluster_metadata import Broker, ClusterImage, Topic


def _broker(bid: int, max_mv: int) -> Broker:
    return Broker(bid, 1, [f"PLAINTEXT://b{bid}:9092"], None, False, {"metadata.version": (1, max_mv)})


def _row(kind: str, partition: int) -> HangingRow:
    return HangingRow(kind=kind, topic="orders", partition=partition, producer_id=7, producer_epoch=3,
                      transactional_id="tx-a", coordinator_state="PrepareCommit", first_offset=10, start_ms=0,
                      duration_ms=1)


def test_only_rows_on_an_older_broker_than_the_coordinators_are_named() -> None:
    image = ClusterImage(path=Path("__cluster_metadata-0"))
    image.brokers = {1: _broker(1, 29), 2: _broker(2, 27)}
    image.topics = {"orders": Topic("orders", "o", {0, 1}, {0: 1, 1: 2}),
                    "__transaction_state": Topic("__transaction_state", "t", {0}, {0: 1})}
    rows = [_row("incomplete-markers", 0), _row("incomplete-markers", 1), _row("orphaned", 1)]
    notes = older_broker_notices(rows, image, {"tx-a": 0})
    assert len(notes) == 1
    assert notes[0].startswith("orders-1 (incomplete-markers, tx-a PrepareCommit): its leader, broker 2, supports "
                               "metadata.version up to 27 (Kafka 4.1), older than broker 1 (29, Kafka 4.2) which "
                               "leads __transaction_state-0")
    assert "KAFKA-20322" in notes[0]
    # the same release on both sides, or no registration: nothing said
    image.brokers[2] = _broker(2, 29)
    assert older_broker_notices(rows, image, {"tx-a": 0}) == []
    del image.brokers[2]
    assert older_broker_notices(rows, image, {"tx-a": 0}) == []


def test_the_image_follows_partition_leaders() -> None:
    """fixtures/kraft (fixtures/build_kraft.py): __transaction_state-3 is created on broker 2 (offset 12), the
    others on broker 1; the PartitionChangeRecord at 24 names orders-1's leader (1) in its tagged field."""
    from kafkatx.storage.cluster_metadata import read_cluster_image

    image = read_cluster_image(Path(__file__).resolve().parents[2] / "fixtures" / "kraft" / "__cluster_metadata-0")
    assert image.topics["__transaction_state"].leaders[3] == 2
    assert image.topics["orders"].leaders == {0: 1, 1: 1}
    assert image.leader_of("__transaction_state", 3).broker_id == 2
