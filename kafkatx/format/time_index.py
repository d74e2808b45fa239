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
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from msgspec import Struct

from kafkatx.format._primitives import Buffer, read_sparse_columns, read_sparse_entries

# timestamp int64, relativeOffset int32
_ENTRY = struct.Struct(">qi")
ENTRY_SIZE = _ENTRY.size  # 12


class TimeIndexEntry(Struct, frozen=True, kw_only=True):
    timestamp: int
    offset: int  # absolute offset


def read_time_index(buf: Buffer, base_offset: int, *, strict: bool = True) -> list[TimeIndexEntry]:
    """Decode a time index; stops at the first all-zero entry after the first entry."""
    return [TimeIndexEntry(timestamp=timestamp, offset=base_offset + rel)
            for timestamp, rel in read_sparse_entries(buf, _ENTRY, "time index", strict=strict)]


class TimeIndexColumns(NamedTuple):
    """A time index by column (entry ``i``: ``timestamps[i]``, ``offsets[i]``): no object per entry."""

    timestamps: Sequence[int]
    offsets: Sequence[int]  # absolute

    @classmethod
    def of(cls, entries: Iterable[TimeIndexEntry]) -> TimeIndexColumns:
        items = list(entries)
        return cls([e.timestamp for e in items], [e.offset for e in items])


def read_time_index_columns(buf: Buffer, base_offset: int, *, strict: bool = True) -> TimeIndexColumns:
    """:func:`read_time_index` by column (the same entries, the same errors)."""
    timestamps, rel = read_sparse_columns(buf, _ENTRY, "time index", strict=strict)
    return TimeIndexColumns(timestamps, list(map(base_offset.__add__, rel)))


def encode_time_index(entries: Iterable[TimeIndexEntry], base_offset: int) -> bytes:
    out = bytearray()
    for e in entries:
        rel = e.offset - base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {e.offset} is not within int32 range of base offset {base_offset}")
        out += _ENTRY.pack(e.timestamp, rel)
    return bytes(out)
