"""Time index (``<base>.timeindex``).

Kafka schema (``storage/src/main/java/org/apache/kafka/storage/internals/log/TimeIndex.java``)::

    entry (12 bytes):
      timestamp       int64   max timestamp seen so far in the segment (epoch ms)
      relativeOffset  int32   offset - segment base offset

Like the offset index it is sparse and the active segment's file is
preallocated with zeros (rounded down to a multiple of 12), so an all-zero
entry after the first one ends the real entries.

Size that is not a multiple of 12: corrupt for Kafka (``AbstractIndex.sanityCheck``).
Strict by default (:class:`Truncated` at the partial entry); ``strict=False`` drops it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kafkatx.format._primitives import Buffer, read_sparse_entries

# timestamp int64, relativeOffset int32
_ENTRY = struct.Struct(">qi")
ENTRY_SIZE = _ENTRY.size  # 12


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeIndexEntry:
    timestamp: int
    offset: int  # absolute offset


def read_time_index(buf: Buffer, base_offset: int, *, strict: bool = True) -> list[TimeIndexEntry]:
    """Decode a time index; stops at the first all-zero entry after the first entry."""
    return [TimeIndexEntry(timestamp=timestamp, offset=base_offset + rel)
            for timestamp, rel in read_sparse_entries(buf, _ENTRY, "time index", strict=strict)]


def encode_time_index(entries: Iterable[TimeIndexEntry], base_offset: int) -> bytes:
    out = bytearray()
    for e in entries:
        rel = e.offset - base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {e.offset} is not within int32 range of base offset {base_offset}")
        out += _ENTRY.pack(e.timestamp, rel)
    return bytes(out)
