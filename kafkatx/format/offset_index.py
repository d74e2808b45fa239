"""Offset index (``<base>.index``).

Kafka schema (``storage/src/main/java/org/apache/kafka/storage/internals/log/OffsetIndex.java``)::

    entry (8 bytes):
      relativeOffset  int32   offset - segment base offset
      position        int32   byte position in the .log of the batch holding that offset

The index is sparse (one entry per ``index.interval.bytes``) and the active
segment's index is preallocated to ``segment.index.bytes`` (rounded down to a
multiple of 8) and filled with zeros; Kafka only trims it on roll or clean
shutdown. So an all-zero entry after the first one marks the end of the real
entries (the first entry may legitimately be relative offset 0 at position 0).

Size that is not a multiple of 8: Kafka's ``AbstractIndex.sanityCheck`` calls
such a file corrupt (``CorruptIndexException``). We are strict by default and
raise :class:`Truncated` at the position of the partial entry; ``strict=False``
drops the partial tail instead (useful when salvaging). A partial tail after
the zero padding is never reached and never reported.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from msgspec import Struct

from kafkatx.format._primitives import Buffer, iter_sparse_entries, read_sparse_columns, read_sparse_entries

# relativeOffset int32, position int32
_ENTRY = struct.Struct(">ii")
ENTRY_SIZE = _ENTRY.size  # 8


class OffsetIndexEntry(Struct, frozen=True, kw_only=True):
    offset: int  # absolute offset (segment base + relative offset)
    position: int


def read_offset_index(buf: Buffer, base_offset: int, *, strict: bool = True) -> list[OffsetIndexEntry]:
    """Decode an offset index; stops at the first all-zero entry after the first entry."""
    return [OffsetIndexEntry(offset=base_offset + rel, position=position)
            for rel, position in read_sparse_entries(buf, _ENTRY, "offset index", strict=strict)]


class OffsetIndexColumns(NamedTuple):
    """An offset index by column (entry ``i``: ``offsets[i]``, ``positions[i]``): no object per entry."""

    offsets: Sequence[int]  # absolute
    positions: Sequence[int]

    @classmethod
    def of(cls, entries: Iterable[OffsetIndexEntry]) -> OffsetIndexColumns:
        items = list(entries)
        return cls([e.offset for e in items], [e.position for e in items])


def read_offset_index_columns(buf: Buffer, base_offset: int, *, strict: bool = True) -> OffsetIndexColumns:
    """:func:`read_offset_index` by column (the same entries, the same errors)."""
    rel, positions = read_sparse_columns(buf, _ENTRY, "offset index", strict=strict)
    return OffsetIndexColumns(list(map(base_offset.__add__, rel)), positions)


def read_offset_index_relative(buf: Buffer, *, strict: bool = True) -> OffsetIndexColumns:
    """:func:`read_offset_index_columns` with the offsets relative to the segment's base offset, as
    they are stored, both columns native ``array('i')`` s: no int object per entry (``verify`` reads
    an index of hundreds of thousands of entries so; ``SegmentIndexCheck(index_base=...)``)."""
    rel, positions = read_sparse_columns(buf, _ENTRY, "offset index", strict=strict, arrays=True)
    return OffsetIndexColumns(rel, positions)


def iter_offset_index(view: Buffer, base_offset: int) -> Iterator[tuple[int, int]]:
    """``(absolute offset, position)`` of each entry, lazily (a lookup stops early). A partial trailing
    entry is not reported: a caller that must refuse one checks ``len(view) % ENTRY_SIZE``."""
    for rel, position in iter_sparse_entries(view, _ENTRY):
        yield base_offset + rel, position


def encode_offset_index(entries: Iterable[OffsetIndexEntry], base_offset: int) -> bytes:
    """Encode entries as Kafka writes them (relative offsets must fit in an int32)."""
    out = bytearray()
    for e in entries:
        rel = e.offset - base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {e.offset} is not within int32 range of base offset {base_offset}")
        if not 0 <= e.position <= 0x7FFFFFFF:
            raise ValueError(f"position {e.position} out of int32 range")
        out += _ENTRY.pack(rel, e.position)
    return bytes(out)
