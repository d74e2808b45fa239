"""The KRaft metadata log of a log dir (``__cluster_metadata-0``): what the controller finalized.

A combined broker/controller (or a controller) keeps the metadata log in its metadata log dir
as ``__cluster_metadata-0``: ``.log`` segments and KRaft snapshots ``<offset>-<epoch>.checkpoint``
(``Snapshots.filenameFromSnapshotId``: 20-digit end offset, 10-digit epoch). The image is what
``MetadataLoader`` builds: the newest snapshot, then every record of the log from the snapshot's
end offset on (``KafkaMetadataLog``), each applied in order:

* ``FeatureLevelRecord`` sets a finalized feature (``FeaturesImage``; level 0 removes it) and
  ``RemoveFeatureLevelRecord`` removes it;
* ``TopicRecord`` creates a topic (name, id), ``PartitionRecord`` adds a partition to it,
  ``RemoveTopicRecord`` deletes it;
* ``RegisterBrokerRecord``/``UnregisterBrokerRecord``/``FenceBrokerRecord``/``UnfenceBrokerRecord``/
  ``BrokerRegistrationChangeRecord`` keep the broker registrations;
* ``ConfigRecord`` of a topic (``resourceType`` 2, ``ConfigResource.Type.TOPIC``) sets one of its
  configs (``ConfigurationControlManager``; a null value deletes it), e.g. ``remote.storage.enable``;
* ``ProducerIdsRecord`` allocates a producer-id block (``ProducerIdControlManager``): ids below its
  ``nextProducerId`` are handed out.

A metadata transaction (``BeginTransactionRecord`` ... ``EndTransactionRecord``) is applied at its end;
one aborted (``AbortTransactionRecord``) or left open at the log end is not applied.

A record of a newer version than kafkatx knows is applied as far as its known fields go, with one note
per record type and version (``format.cluster_metadata``); a record that cannot be read at all (an
unknown api key, a newer version that does not frame with the known fields) is skipped and named in
``ClusterImage.unreadable``: the image is then incomplete, never silently short.

Reads only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from msgspec import Struct, field

from kafkatx.errors import DecodeError
from kafkatx.format.cluster_metadata import (
    SCHEMAS,
    MetadataRecord,
    decode_control_record,
    decode_metadata_record,
)
from kafkatx.format.record_batch import iter_records
from kafkatx.storage import fdio
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.partition import METADATA_TOPIC  # KafkaRaftServer.MetadataTopic, stated once
from kafkatx.storage.segment import iter_batches_windowed, open_windowed

METADATA_FOLDER = f"{METADATA_TOPIC}-0"
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC's id in a ConfigRecord
SCHEMAS_BY_NAME = {name: highest for name, highest, _fields in SCHEMAS.values()}  # record type -> newest known
CHECKPOINT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class MetadataEntry(Struct, frozen=True):
    """One record of the metadata log or a snapshot: where it is and what it says."""

    path: Path
    offset: int
    position: int  # of its batch in the file
    timestamp: int
    record: MetadataRecord
    control: bool = False


class Broker(Struct):
    broker_id: int
    epoch: int
    endpoints: list[str]
    rack: str | None
    fenced: bool
    features: dict[str, tuple[int, int]]


class Topic(Struct):
    name: str
    topic_id: str
    partitions: set[int] = field(default_factory=set)
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader broker (PartitionRecord/-Change)


class ClusterImage(Struct):
    """What the metadata says (``MetadataImage``), plus where each fact came from."""

    path: Path
    features: dict[str, int] = field(default_factory=dict)
    feature_offsets: dict[str, int] = field(default_factory=dict)  # offset in the log, or in the snapshot
    feature_files: dict[str, Path] = field(default_factory=dict)  # the file each feature was read from
    topics: dict[str, Topic] = field(default_factory=dict)  # by name
    brokers: dict[int, Broker] = field(default_factory=dict)
    producer_id_blocks: list[tuple[int, int, int]] = field(default_factory=list)  # (broker, epoch, next id)
    # topic -> config name -> (value, offset of the ConfigRecord that set it)
    topic_configs: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)
    snapshot: Path | None = None
    kraft_version: int = 0  # the last KRaftVersion control record's (none: 0, static voters)
    records: int = 0
    end_offset: int = 0
    notices: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # records skipped: "<file>: offset N: why"
    newer: dict[tuple[str, int], int] = field(default_factory=dict)  # (type, version) read as older -> count

    @property
    def transaction_version(self) -> int:
        """The finalized ``transaction.version``; 0 when the metadata finalizes none (TV0)."""
        return self.features.get("transaction.version", 0)

    @property
    def next_producer_id(self) -> int | None:
        """The first producer id no block has handed out (None: no block allocated)."""
        return max(b[2] for b in self.producer_id_blocks) if self.producer_id_blocks else None

    def leader_of(self, topic: str, partition: int) -> Broker | None:
        """The registered broker leading ``topic-partition`` (None: unknown, or no leader)."""
        t = self.topics.get(topic)
        leader = t.leaders.get(partition) if t is not None else None
        return self.brokers.get(leader) if leader is not None else None

    def topic_by_id(self, topic_id: str) -> Topic | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def partition_count(self, topic: str) -> int | None:
        t = self.topics.get(topic)
        return len(t.partitions) if t is not None else None

    def source(self, what: str) -> str:
        """Where feature ``what`` was read: the log's offset, or the snapshot file."""
        offset = self.feature_offsets.get(what)
        if offset is None:
            return f"{self.path.name}, which has no FeatureLevelRecord for it, so level 0"
        path = self.feature_files.get(what)
        if path is not None and path == self.snapshot:
            return f"{self.path.name} snapshot {path.name}"
        return f"{self.path.name} at offset {offset}"


def checkpoints(folder: Path) -> list[tuple[int, int, Path]]:
    """KRaft snapshots of a metadata log folder: (end offset, epoch, path), oldest first."""
    out = []
    for name, _d, _f in fdio.list_entries(folder) if fdio.is_dir(folder) else ():
        m = CHECKPOINT_RE.match(name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), folder / name))
    return sorted(out)


def iter_metadata_file(path: Path, *, start_offset: int = 0,
                       unreadable: list[str] | None = None) -> Iterator[MetadataEntry]:
    """Every record of one ``.log`` segment or ``.checkpoint`` snapshot, decoded; errors name the file.

    ``unreadable``: where a record whose value cannot be decoded is named (``<file>: offset N: why``) and
    skipped, the batches around it still read; without it such a record raises."""
    with open_windowed(path) as (buf, win):  # forward only: windows on the pread path (a live broker)
        try:
            for header in iter_batches_windowed(buf, win):
                if header.last_offset < start_offset:
                    continue
                for rec in iter_records(buf, header):
                    if rec.offset < start_offset or rec.value is None:
                        continue
                    if header.is_control:
                        key = bytes(rec.key or b"")
                        ctype = int.from_bytes(key[2:4], "big") if len(key) >= 4 else -1
                        decoded = decode_control_record(ctype, rec.value)
                        if decoded is not None:
                            yield MetadataEntry(path, rec.offset, header.position, rec.timestamp, decoded, True)
                        continue
                    try:
                        decoded = decode_metadata_record(rec.value)
                    except DecodeError as err:
                        if unreadable is None:
                            raise
                        unreadable.append(f"{path}: offset {rec.offset}: {err}")
                        continue
                    yield MetadataEntry(path, rec.offset, header.position, rec.timestamp, decoded)
        except DecodeError as err:
            raise err.at(path) from err


def find_metadata_log(dirs: Sequence[LogDir], metadata_log_dir: Path | None = None) -> Path | None:
    """The ``__cluster_metadata-0`` folder: in ``metadata_log_dir`` (``--metadata-log-dir``) or a log dir."""
    candidates = [metadata_log_dir] if metadata_log_dir is not None else [d.path for d in dirs]
    for base in candidates:
        if base is None:
            continue
        folder = base if base.name == METADATA_FOLDER else base / METADATA_FOLDER
        if fdio.is_dir(folder):
            return folder
    return None


def _apply(image: ClusterImage, e: MetadataEntry) -> None:
    r, d = e.record, e.record.data
    if r.type == "FEATURE_LEVEL_RECORD":
        if d["featureLevel"] == 0:
            image.features.pop(d["name"], None)
        else:
            image.features[d["name"]] = d["featureLevel"]
        image.feature_offsets[d["name"]] = e.offset
        image.feature_files[d["name"]] = e.path
    elif r.type == "REMOVE_FEATURE_LEVEL_RECORD":
        image.features.pop(d["name"], None)
        image.feature_offsets[d["name"]] = e.offset
        image.feature_files[d["name"]] = e.path
    elif r.type == "TOPIC_RECORD":
        image.topics[d["name"]] = Topic(d["name"], d["topicId"])
    elif r.type == "PARTITION_RECORD":
        t = image.topic_by_id(d["topicId"])
        if t is not None:
            t.partitions.add(d["partitionId"])
            t.leaders[d["partitionId"]] = d["leader"]
    elif r.type == "PARTITION_CHANGE_RECORD":
        t = image.topic_by_id(d["topicId"])
        if t is not None and "leader" in d:  # the tagged leader is written only when it changes (default -2)
            t.leaders[d["partitionId"]] = d["leader"]
    elif r.type == "REMOVE_TOPIC_RECORD":
        t = image.topic_by_id(d["topicId"])
        if t is not None:
            del image.topics[t.name]
            image.topic_configs.pop(t.name, None)
    elif r.type == "CONFIG_RECORD" and d["resourceType"] == TOPIC_RESOURCE:
        configs = image.topic_configs.setdefault(d["resourceName"], {})
        if d["value"] is None:
            configs.pop(d["name"], None)
        else:
            configs[d["name"]] = (d["value"], e.offset)
    elif r.type == "REGISTER_BROKER_RECORD":
        image.brokers[d["brokerId"]] = Broker(
            d["brokerId"], d["brokerEpoch"], [f"{p['name']}://{p['host']}:{p['port']}" for p in d["endPoints"]],
            d["rack"], d["fenced"], {f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"])
                                      for f in d["features"]})
    elif r.type == "UNREGISTER_BROKER_RECORD":
        image.brokers.pop(d["brokerId"], None)
    elif r.type in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD"):
        b = image.brokers.get(d["id"])
        if b is not None:
            b.fenced = r.type == "FENCE_BROKER_RECORD"
    elif r.type == "BROKER_REGISTRATION_CHANGE_RECORD":
        b = image.brokers.get(d["brokerId"])
        if b is not None and d.get("fenced", 0) != 0:
            b.fenced = d["fenced"] == 1
    elif r.type == "PRODUCER_IDS_RECORD":
        image.producer_id_blocks.append((d["brokerId"], d["brokerEpoch"], d["nextProducerId"]))


def read_cluster_image(folder: Path) -> ClusterImage:
    """Replay the newest snapshot and the log after it into a :class:`ClusterImage`."""
    image = ClusterImage(path=folder)
    start = 0
    snaps = checkpoints(folder)
    entries: list[MetadataEntry] = []
    if snaps:
        end, _epoch, path = snaps[-1]
        image.snapshot = path
        entries.extend(iter_metadata_file(path, unreadable=image.unreadable))
        start = end
    logs = sorted(folder / name for name, _d, _f in fdio.list_entries(folder)
                  if name.endswith(".log") and name[:20].isdigit())
    for path in logs:
        entries.extend(iter_metadata_file(path, start_offset=start, unreadable=image.unreadable))
    pending: list[MetadataEntry] | None = None
    for e in entries:
        image.records += 1
        if e.record.read_as is not None:
            key = (e.record.type, e.record.version)
            image.newer[key] = image.newer.get(key, 0) + 1
        image.end_offset = max(image.end_offset, e.offset + 1)
        if e.control:
            if e.record.type == "KRAFT_VERSION":
                image.kraft_version = e.record.data["kRaftVersion"]
            continue
        if e.record.type == "BEGIN_TRANSACTION_RECORD":
            pending = []
        elif e.record.type == "END_TRANSACTION_RECORD":
            for p in pending or []:
                _apply(image, p)
            pending = None
        elif e.record.type == "ABORT_TRANSACTION_RECORD":
            pending = None
        elif pending is not None:
            pending.append(e)
        else:
            _apply(image, e)
    if pending:
        image.notices.append(f"{folder}: a metadata transaction is still open at the log end; "
                             f"its {len(pending)} record(s) are not applied")
    for (kind, version), count in sorted(image.newer.items()):
        known = SCHEMAS_BY_NAME[kind]
        image.notices.append(f"{folder}: {count} {kind} record(s) of version {version}, newer than kafkatx "
                             f"knows ({known}): read with version {known}'s fields, their unknown tagged fields "
                             "skipped")
    if image.unreadable:
        image.notices.append(f"{folder}: {len(image.unreadable)} record(s) could not be read and were skipped "
                             f"(the image may be incomplete): {image.unreadable[0]}"
                             + (f" and {len(image.unreadable) - 1} more" if len(image.unreadable) > 1 else ""))
    return image


def cluster_image(dirs: Sequence[LogDir], metadata_log_dir: Path | None = None) -> ClusterImage | None:
    """The image of the metadata log these log dirs (or ``metadata_log_dir``) hold; None without one."""
    folder = find_metadata_log(dirs, metadata_log_dir)
    return read_cluster_image(folder) if folder is not None else None


__all__ = ["CHECKPOINT_RE", "METADATA_FOLDER", "METADATA_TOPIC", "Broker", "ClusterImage", "MetadataEntry",
           "Topic", "checkpoints", "cluster_image", "find_metadata_log", "iter_metadata_file",
           "read_cluster_image"]
