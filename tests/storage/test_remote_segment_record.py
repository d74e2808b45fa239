"""A remote segment is one record type from ``__remote_log_metadata`` to ``lag``'s rows: the segments
``RemoteLogMetadataCache``'s fold leaves (``storage.remote_log_metadata.fold_records``) are the very
``rows.RemoteSegmentRow`` values ``lag`` shows, in its JSON key order, not copied into a second type."""

from __future__ import annotations

import uuid

import msgspec

from kafkatx.format.remote_log_metadata import RemoteLogMetadataRecord
from kafkatx.rows import LagRow, RemoteSegmentRow
from kafkatx.storage import remote_log_metadata as rlm


def _segment_id(topic: str, partition: int, sid: uuid.UUID) -> dict[str, object]:
    return {"topicIdPartition": {"topicId": uuid.UUID(int=7), "name": topic, "partition": partition}, "id": sid}


def test_the_fold_leaves_the_row_lag_shows() -> None:
    sid = uuid.UUID(int=42)
    # RemoteLogSegmentMetadataRecord (COPY_SEGMENT_STARTED = 0), then its update to COPY_SEGMENT_FINISHED (1)
    started = RemoteLogMetadataRecord(type="RemoteLogSegmentMetadataRecord", api_key=0, version=0, data={
        "remoteLogSegmentId": _segment_id("orders", 3, sid), "startOffset": 0, "endOffset": 99,
        "segmentSizeInBytes": 4096, "remoteLogSegmentState": 0})
    finished = RemoteLogMetadataRecord(type="RemoteLogSegmentMetadataUpdateRecord", api_key=1, version=0, data={
        "remoteLogSegmentId": _segment_id("orders", 3, sid), "remoteLogSegmentState": 1})
    into = rlm.RemoteMetadata()
    rlm.fold_records([started, finished], into)
    (segment,) = into.partitions[("orders", 3)].segments
    assert type(segment) is RemoteSegmentRow
    assert segment == RemoteSegmentRow(start_offset=0, end_offset=99, state="COPY_SEGMENT_FINISHED",
                                       size_bytes=4096, segment_id=str(sid))
    assert not hasattr(rlm, "RemoteSegment")  # no second record type for the same value
    # LagRow's remote_segments field holds that type: the fold's values go into the row as they are
    hints = msgspec.structs.fields(LagRow)
    (field,) = [f for f in hints if f.name == "remote_segments"]
    assert field.type == list[RemoteSegmentRow] | None
    assert list(msgspec.to_builtins(segment)) == ["start_offset", "end_offset", "state", "size_bytes", "segment_id"]
