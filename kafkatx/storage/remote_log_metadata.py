"""What ``__remote_log_metadata`` says each tiered partition has in the remote tier.

``TopicBasedRemoteLogMetadataManager`` writes, for every segment ``RemoteLogManager`` copies, a
``RemoteLogSegmentMetadataRecord`` (``COPY_SEGMENT_STARTED``) and then updates
(``COPY_SEGMENT_FINISHED``; later ``DELETE_SEGMENT_STARTED``/``FINISHED`` when remote retention deletes it);
``RemoteLogMetadataCache`` folds them per segment id into the segment's current state. A segment
counts as in the remote tier once its copy finished and until its deletion starts
(``RemoteLogMetadataCache.remoteLogSegmentMetadata`` serves only ``COPY_SEGMENT_FINISHED``); the
highest such end offset is what ``RemoteLogManager`` resumes copying after
(``findHighestRemoteOffset``: ``copiedOffset``, ListOffsets ``LATEST_TIERED``).

Every ``__remote_log_metadata-N`` folder of the log dirs is read (they are small), once per group of
log dirs opened together, on the first question. Reads only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec import Struct, field

from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format.record_batch import iter_records
from kafkatx.format.remote_log_metadata import (
    REMOTE_LOG_METADATA_TOPIC,
    RemoteLogMetadataRecord,
    decode_remote_log_metadata,
)
from kafkatx.rows import RemoteSegmentRow
from kafkatx.storage.log_dir import log_dir_group, remember_in_group
from kafkatx.storage.segment import iter_batches_windowed, open_windowed

IN_REMOTE_TIER = "COPY_SEGMENT_FINISHED"


class RemotePartition(Struct, kw_only=True):
    """A tiered partition's remote segments (oldest first; :class:`kafkatx.rows.RemoteSegmentRow`, the one
    record of a remote segment: what ``lag`` shows is what was read) and its partition-delete state."""

    segments: list[RemoteSegmentRow] = field(default_factory=list)
    delete_state: str | None = None  # RemotePartitionDeleteState's name, None when never deleted

    @property
    def copied_offset(self) -> int | None:
        """The highest offset whose segment's copy finished (``RemoteLogManager``'s ``copiedOffset``)."""
        ends = [s.end_offset for s in self.segments if s.state == IN_REMOTE_TIER]
        return max(ends) if ends else None


class RemoteMetadata(Struct, kw_only=True):
    """Every partition ``__remote_log_metadata`` names; ``unreadable``: the files that did not read whole."""

    partitions: dict[tuple[str, int], RemotePartition] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    folders: int = 0


def fold_records(records: Iterable[RemoteLogMetadataRecord], into: RemoteMetadata) -> None:
    """Apply records in log order (``RemoteLogMetadataCache``): a segment's metadata, then its updates."""
    by_id: dict[str, tuple[tuple[str, int], dict[str, Any]]] = {}
    for rec in records:
        tp = rec.topic_partition
        state = rec.state
        if tp is None or state is None:
            continue  # a snapshot record (consumer-side state) or a state Kafka does not know
        part = into.partitions.setdefault(tp, RemotePartition())
        if rec.api_key == 2:
            part.delete_state = state
        elif rec.api_key == 0:
            sid = str(rec.segment_id)
            by_id[sid] = (tp, {"segment_id": sid, "start_offset": rec.data["startOffset"],
                               "end_offset": rec.data["endOffset"], "size_bytes": rec.data["segmentSizeInBytes"],
                               "state": state})
        elif rec.api_key == 1:
            known = by_id.get(str(rec.segment_id))
            if known is not None:
                known[1]["state"] = state
    for tp, seg in by_id.values():
        into.partitions[tp].segments.append(RemoteSegmentRow(**seg))
    for part in into.partitions.values():
        part.segments.sort(key=lambda s: (s.start_offset, s.end_offset))


def _records(path: Any) -> Iterable[RemoteLogMetadataRecord]:
    with open_windowed(path) as (buf, win):
        try:
            for header in iter_batches_windowed(buf, win):
                if header.is_control:
                    continue
                for rec in iter_records(buf, header):
                    if rec.value is not None:
                        yield decode_remote_log_metadata(rec.value)
        except DecodeError as err:
            raise err.at(path) from err


def read_remote_metadata(dirs: Iterable[Any]) -> RemoteMetadata | None:
    """The remote segments ``__remote_log_metadata`` records for every partition, from the log dirs'
    folders of that topic; None when they hold none."""
    out = RemoteMetadata()
    records: list[RemoteLogMetadataRecord] = []
    for d in dirs:
        for part in d.partitions():
            if part.topic != REMOTE_LOG_METADATA_TOPIC:
                continue
            out.folders += 1
            for seg in part.segments:
                try:
                    records.extend(_records(seg.log_path))
                except (KafkaTxError, OSError) as err:
                    out.unreadable.append(f"{seg.log_path}: {err}")
    if not out.folders:
        return None
    fold_records(records, out)
    return out


def remote_metadata_of(log_dir: Any) -> RemoteMetadata | None:
    """:func:`read_remote_metadata` of ``log_dir`` and the log dirs opened with it, read once."""
    cached = getattr(log_dir, "remote_metadata", False)
    if cached is None or isinstance(cached, RemoteMetadata):
        return cached
    got = read_remote_metadata(log_dir_group(log_dir))
    remember_in_group(log_dir, "remote_metadata", got)
    return got


__all__ = ["IN_REMOTE_TIER", "RemoteMetadata", "RemotePartition", "fold_records",
           "read_remote_metadata", "remote_metadata_of"]
