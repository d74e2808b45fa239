"""What ``kafka-dump-log.sh`` checks when it dumps an index (Kafka 3.8 ``DumpLogSegments``).

``DumpLogSegments.dumpIndex`` and ``dumpTimeIndex`` walk an offset or time index the way the tool
reads it (every whole entry of the file, ``AbstractIndex`` opened read-only) and stop at the first
entry after the first whose offset is the segment's base offset ("since it is a sparse file, in
the event of a crash there may be many zero entries"). For each entry they look at the ``.log``
beside the index:

- offset index: the batch at the entry's position must end at the entry's offset; otherwise the
  pair (index offset, log offset) is a mismatch (``misMatchesForIndexFilesMap``, kept newest first:
  Scala's ``list ::= pair``);
- time index: the batch holding the entry's offset is found from the offset index's
  ``lookup`` position; an entry whose offset is not a batch's last offset is "not found"
  (``recordShallowOffsetNotFound``, log offset -1 when no batch reaches it), otherwise the
  largest record timestamp of that batch must equal the entry's timestamp
  (``recordMismatchTimeIndex``) and timestamps must grow (``recordOutOfOrderIndexTimestamp``).

``--index-sanity-check`` runs ``OffsetIndex.sanityCheck`` / ``TimeIndex.sanityCheck`` instead: the
check the broker uses to decide whether an index must be rebuilt. These are the tool's rules, not
the broker's recovery (``kafkatx.checks.verify`` judges the files as the broker loads them): a crashed
broker's zero-filled index tail shows up here exactly as Kafka's tool shows it.
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

from msgspec import Struct, field

from kafkatx.errors import DecodeError
from kafkatx.format.record_batch import iter_records, read_batch_header, records_in_place
from kafkatx.storage import fdio
from kafkatx.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    Buffer,
    WindowedSnapshot,
    iter_batches_windowed,
    map_file,
    offset_from_file_name,
    open_windowed,
)

_OFFSET_ENTRY = struct.Struct(">ii")  # relativeOffset, position (OffsetIndex)
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relativeOffset (TimeIndex)
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # kafka-dump-log.sh --max-message-size default
_HEADER_BYTES = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD: the most read_batch_header reads


class OffsetIndexDump(Struct):
    """``dumpIndex``'s result: the entries it prints and the mismatches it reports on stderr."""

    entries: list[tuple[int, int]] = field(default_factory=list)  # (offset, position)
    empty: bool = False  # "<file> is empty."
    mismatches: list[tuple[int, int]] = field(default_factory=list)  # (index offset, log offset), newest first
    error: str | None = None  # where Kafka's tool stops with an exception (no batch at an entry's position)


class TimeIndexDump(Struct):
    """``dumpTimeIndex``'s result (``TimeIndexDumpErrors``)."""

    entries: list[tuple[int, int]] = field(default_factory=list)  # (timestamp, offset)
    mismatches: list[tuple[int, int]] = field(default_factory=list)  # (index timestamp, log timestamp)
    out_of_order: list[tuple[int, int]] = field(default_factory=list)  # (timestamp, previous timestamp)
    not_found: list[tuple[int, int]] = field(default_factory=list)  # (indexed offset, found log offset)


def _base_offset(path: Path) -> int:
    base = offset_from_file_name(path.name)
    if base is None:
        raise DecodeError(f"{path.name}: index file names start with the segment's base offset", position=0)
    return base


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name.split(".")[0] + suffix)


def _whole_entries(buf: Buffer, entry: struct.Struct) -> list[tuple[int, ...]]:
    """Every whole entry, up to the first after the first whose relative offset is 0 (excluded)."""
    size = len(buf)
    out: list[tuple[int, ...]] = []
    rel_field = 0 if entry is _OFFSET_ENTRY else 1
    for pos in range(0, size - size % entry.size, entry.size):
        values = entry.unpack_from(buf, pos)
        if pos and values[rel_field] == 0:
            break
        out.append(values)
    return out


def dump_offset_index(path: Path, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> OffsetIndexDump:
    """``DumpLogSegments.dumpIndex`` (Kafka 3.8) of the ``.index`` at ``path``."""
    base = _base_offset(path)
    result = OffsetIndexDump()
    with map_file(path) as ibuf:
        if len(ibuf) < _OFFSET_ENTRY.size:  # index.entries == 0
            result.empty = True
            return result
        entries = _whole_entries(ibuf, _OFFSET_ENTRY)
    # on the pread path (a live broker) only the batch at each entry's position is read (log.segment.WindowedSnapshot)
    with open_windowed(_sibling(path, LOG_SUFFIX)) as (log, win):
        size = len(log)
        for rel, position in entries:
            offset = base + rel
            # fileRecords.slice(position, maxMessageSize).batches.iterator.next(): a whole batch there
            try:
                if not 0 <= position < size:  # FileRecords.slice (availableBytes): "Invalid position" /
                    # "Slice from position ... exceeds end position"; no batch there to compare with
                    raise DecodeError(f"position {position} is outside the log", position=position)
                _seek(win, position)
                header = read_batch_header(log, position, min(size, position + max_message_size))
                if position + header.size > min(size, position + max_message_size):
                    raise DecodeError("batch runs past the end of the slice", position=position)
            except (DecodeError, ValueError):
                result.error = (f"no whole batch at position {position} of the log "
                                f"(index entry for offset {offset})")
                return result
            if header.last_offset != offset:
                result.mismatches.insert(0, (offset, header.last_offset))
            result.entries.append((offset, position))
    return result


def _seek(win: WindowedSnapshot | None, position: int) -> None:
    """Make the batch header at ``position`` (and the whole batch, when its length is sane) readable in
    ``win``; positions may go back (an index out of order): the window is read again from there."""
    if win is None or not 0 <= position < win.size:
        return
    if position < win.released:
        win.rewind()
    win.prepare(position, _HEADER_BYTES)


def _lookup(offsets: list[int], positions: list[int], target: int) -> int:
    """``OffsetIndex.lookup(target).position``: the position of the last entry at or before
    ``target`` (a binary search, as ``largestLowerBoundSlotFor``), else 0 (the segment's start)."""
    slot = bisect.bisect_right(offsets, target) - 1
    return positions[slot] if slot >= 0 else 0


def dump_time_index(path: Path) -> TimeIndexDump:
    """``DumpLogSegments.dumpTimeIndex`` (Kafka 3.8) of the ``.timeindex`` at ``path``."""
    base = _base_offset(path)
    result = TimeIndexDump()
    with map_file(path) as tbuf:
        entries = _whole_entries(tbuf, _TIME_ENTRY)
    index_path = _sibling(path, INDEX_SUFFIX)
    offsets: list[int] = []
    positions: list[int] = []
    if fdio.stat_or_none(index_path) is not None:
        with map_file(index_path) as ibuf:
            for rel, pos in _whole_entries(ibuf, _OFFSET_ENTRY):
                offsets.append(base + rel)
                positions.append(pos)
    # on the pread path (a live broker) read forward from each lookup position in windows
    with open_windowed(_sibling(path, LOG_SUFFIX)) as (log, win):
        previous = NO_TIMESTAMP
        for timestamp, rel in entries:
            offset = base + rel
            found = None
            start = _lookup(offsets, positions, offset)
            try:
                if win is not None and start < win.released:
                    win.rewind()  # an entry before the bytes already released: read them again
                for header in iter_batches_windowed(log, win, start):
                    if header.last_offset >= offset:
                        found = header
                        break
            except DecodeError:
                pass  # FileRecords.batches stops at bytes that are no batch
            if found is None:
                result.not_found.append((offset, -1))
            elif found.last_offset != offset:
                result.not_found.append((offset, found.last_offset))
            else:
                largest = NO_TIMESTAMP
                try:
                    for record in iter_records(log, found):
                        largest = max(largest, record.timestamp)
                except DecodeError:
                    pass
                if largest != timestamp:
                    result.mismatches.append((timestamp, largest))
                if previous >= timestamp:
                    result.out_of_order.append((timestamp, previous))
            result.entries.append((timestamp, offset))
            previous = timestamp
    return result


def non_consecutive_offsets(path: Path, max_bytes: int | None = None) -> list[tuple[int, int]]:
    """``dumpLog``'s deep-iteration check of the ``.log`` at ``path`` (``nonConsecutivePairsForLogFilesMap``):
    each (offset, next record's offset) where the next is not offset + 1, newest first (Scala's
    ``list ::= pair``). Records of every batch count, control records too; a compacted log has gaps.
    The walk stops where the bytes stop forming batches, or at ``max_bytes``."""
    pairs: list[tuple[int, int]] = []
    last = -1
    with open_windowed(path) as (log, win):  # forward only: windows on the pread path (a live broker)
        end = len(log) if max_bytes is None else min(len(log), max_bytes)
        try:
            for header in iter_batches_windowed(log, win, 0, end=end):
                if header.position + header.size > end:
                    break
                if header.magic >= 2 and header.records_count == header.last_offset_delta + 1:
                    # deltas 0..count-1, strictly increasing: the records are base..last, no gap inside
                    if last != -1 and header.base_offset != last + 1:
                        pairs.append((last, header.base_offset))
                    last = header.last_offset
                    continue
                for record in records_in_place(log, header):  # a big batch's values not copied
                    if last != -1 and record.offset != last + 1:
                        pairs.append((last, record.offset))
                    last = record.offset
        except DecodeError:
            pass  # the dump itself reports the bytes that are no batch
    pairs.reverse()
    return pairs


def offset_index_sanity(path: Path) -> str | None:
    """``OffsetIndex.sanityCheck``: Kafka's ``CorruptIndexException`` message, or None when it passes."""
    base = _base_offset(path)
    absolute = path.absolute()
    with map_file(path) as buf:
        length = len(buf)
        n = length // _OFFSET_ENTRY.size
        last = base + _OFFSET_ENTRY.unpack_from(buf, (n - 1) * _OFFSET_ENTRY.size)[0] if n else base
    if n and last < base:
        return (f"Corrupt index found, index file ({absolute}) has non-zero size but the last offset is "
                f"{last} which is less than the base offset {base}.")
    if length % _OFFSET_ENTRY.size:
        return (f"Index file {absolute} is corrupt, found {length} bytes which is neither positive nor a "
                f"multiple of {_OFFSET_ENTRY.size}.")
    return None


def time_index_sanity(path: Path) -> str | None:
    """``TimeIndex.sanityCheck``: Kafka's ``CorruptIndexException`` message, or None when it passes."""
    base = _base_offset(path)
    absolute = path.absolute()
    with map_file(path) as buf:
        length = len(buf)
        n = length // _TIME_ENTRY.size
        first_ts = _TIME_ENTRY.unpack_from(buf, 0)[0] if n else NO_TIMESTAMP
        last_ts, last_rel = _TIME_ENTRY.unpack_from(buf, (n - 1) * _TIME_ENTRY.size) if n else (NO_TIMESTAMP, 0)
    if n and last_ts < first_ts:
        return (f"Corrupt time index found, time index file ({absolute}) has non-zero size but the last "
                f"timestamp is {last_ts} which is less than the first timestamp {first_ts}")
    if n and base + last_rel < base:
        return (f"Corrupt time index found, time index file ({absolute}) has non-zero size but the last "
                f"offset is {base + last_rel} which is less than the first offset {base}")
    if length % _TIME_ENTRY.size:
        return (f"Time index file {absolute} is corrupt, found {length} bytes which is neither positive nor a "
                f"multiple of {_TIME_ENTRY.size}")
    return None


__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "OffsetIndexDump",
    "TimeIndexDump",
    "dump_offset_index",
    "dump_time_index",
    "non_consecutive_offsets",
    "offset_index_sanity",
    "time_index_sanity",
]
