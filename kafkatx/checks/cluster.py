"""What the KRaft metadata log says about the cluster (``describe-cluster``), and what ``verify`` checks
against it: partition folders the broker would call stray, producer ids no block handed out.

Inputs are :class:`kafkatx.storage.cluster_metadata.ClusterImage` (``MetadataLoader``'s replay) and the log
dirs. Rules, each from Kafka's source:

* **Stray partition folders** (Kafka 3.7+, ``LogManager.findStrayReplicas`` at startup, KAFKA-14616): a
  log whose topic id (``partition.metadata``, ``PartitionMetadataFile``) is not the metadata's id for that
  topic name, whose topic the metadata does not have (deleted: ``RemoveTopicRecord``), or whose
  partition number the topic does not have, is stray; the broker renames it ``<name>.<uuid>-stray`` and
  does not serve it. ``__cluster_metadata-0`` is not a topic partition and is never stray.
* **Producer ids above every allocated block**: the controller hands out producer ids in blocks
  (``ProducerIdControlManager``; each ``ProducerIdsRecord`` moves ``nextProducerId`` past the block it
  allocated), so every id a broker gave a producer is below the highest ``nextProducerId``. An id at or
  above it in the logs was not handed out by this cluster's controller (data or metadata from another
  cluster, a restored metadata log).

Pure apart from reading ``partition.metadata`` files and batch headers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from msgspec import Struct, field

from kafkatx.errors import KafkaTxError, MissingFile, ReadFailed
from kafkatx.storage.cluster_metadata import (
    METADATA_TOPIC,
    ClusterImage,
    find_metadata_log,
    read_cluster_image,
)
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.partition import Partition
from kafkatx.storage.replicas import as_log_dirs

STRAY_CHECK = "stray-partition"
PRODUCER_ID_CHECK = "producer-id-block"


class ClusterDescription(Struct, frozen=True):
    """``describe-cluster``'s answer (cli.md keys)."""

    metadata_log: str
    snapshot: str | None
    end_offset: int
    features: dict[str, int]
    brokers: list[dict[str, object]]
    topics: list[dict[str, object]]
    producer_id_blocks: list[dict[str, int]]
    next_producer_id: int | None
    notices: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # records skipped: the answer is incomplete


def describe_cluster(log_dirs: Iterable[str | Path | LogDir], *,
                     metadata_log_dir: Path | None = None) -> ClusterDescription:
    """The metadata image of ``__cluster_metadata-0`` in the log dirs (or ``metadata_log_dir``)."""
    dirs = as_log_dirs(log_dirs)
    folder = find_metadata_log(dirs, metadata_log_dir)
    if folder is None:
        where = metadata_log_dir if metadata_log_dir is not None else ", ".join(str(d.path) for d in dirs)
        raise MissingFile(f"{where}: no __cluster_metadata-0 here (a broker-only node keeps it in its "
                          "metadata.log.dir: give --metadata-log-dir)")
    image = read_cluster_image(folder)
    return ClusterDescription(
        metadata_log=str(image.path), snapshot=str(image.snapshot) if image.snapshot else None,
        end_offset=image.end_offset,
        # kraft.version is not a FeatureLevelRecord: the KRaftVersion control record carries it (0 without one)
        features=dict(sorted({**image.features, "kraft.version": image.kraft_version}.items())),
        brokers=[{"broker_id": b.broker_id, "epoch": b.epoch, "endpoints": b.endpoints, "rack": b.rack,
                  "fenced": b.fenced} for _, b in sorted(image.brokers.items())],
        topics=[{"name": t.name, "topic_id": t.topic_id, "partitions": len(t.partitions)}
                for _, t in sorted(image.topics.items())],
        producer_id_blocks=[{"broker_id": b, "broker_epoch": e, "next_producer_id": n}
                            for b, e, n in image.producer_id_blocks],
        next_producer_id=image.next_producer_id, notices=list(image.notices), unreadable=list(image.unreadable))


def read_topic_id(part: Partition) -> str | None:
    """``partition.metadata``'s ``topic_id`` (``PartitionMetadataFile``: ``version: 0`` / ``topic_id: X``)."""
    path = part.path / "partition.metadata"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "topic_id":
            return value.strip()
    return None


def stray_partitions(image: ClusterImage, dirs: Sequence[LogDir]) -> list[tuple[Partition, str]]:
    """(partition folder, why) for each folder ``LogManager.findStrayReplicas`` would call stray."""
    out = []
    for d in dirs:
        for part in d.partitions():
            if part.topic == METADATA_TOPIC:
                continue
            topic = image.topics.get(part.topic)
            tid = read_topic_id(part)
            if topic is None:
                why = f"the metadata has no topic {part.topic!r} (deleted, or never created in this cluster)"
            elif tid is not None and tid != topic.topic_id:
                why = (f"its partition.metadata topic id {tid} is not the metadata's {topic.topic_id} for "
                       f"{part.topic!r} (a log of an older topic of that name)")
            elif part.partition not in topic.partitions:
                why = f"topic {part.topic!r} has no partition {part.partition} in the metadata"
            else:
                continue
            out.append((part, why))
    return out


def producer_ids_beyond_blocks(image: ClusterImage, dirs: Sequence[LogDir],
                               known: Iterable[int] = ()) -> list[tuple[str, int, str | None]]:
    """(partition name, producer id, file) of the first batch of each producer id at or above every
    allocated block's end; ``known``: ids already seen elsewhere (the coordinator's), checked too."""
    limit = image.next_producer_id
    if limit is None:
        return []
    found: dict[int, tuple[str, str | None]] = {}
    for pid in known:
        if pid >= limit:
            found.setdefault(pid, ("__transaction_state", None))
    for d in dirs:
        for part in d.partitions():
            if part.topic == METADATA_TOPIC:
                continue
            try:
                for seg, header in part.iter_batches():
                    pid = header.producer_id
                    if pid >= limit and pid not in found:
                        found[pid] = (part.name, str(seg.log_path))
            except ReadFailed:
                raise
            except KafkaTxError:
                continue  # verify reports the partition's decode problems itself
    return [(name, pid, path) for pid, (name, path) in sorted(found.items())]


__all__ = ["PRODUCER_ID_CHECK", "STRAY_CHECK", "ClusterDescription", "describe_cluster",
           "producer_ids_beyond_blocks", "read_topic_id", "stray_partitions"]
