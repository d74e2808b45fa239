"""Where a segment's log ends, as Kafka's recovery sees it: the valid prefix ``LogSegment.recover`` keeps
(whole batches with valid CRCs from the start, :func:`segment_valid_prefix`) and the offset after the last
whole batch (:func:`next_offset_of`, read from the last offset index entry on rather than from the start
when the index can be trusted). :mod:`kafkatx.storage.loading` asks them while it plans a load."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from kafkatx.errors import CrcMismatch, DecodeError, MissingFile
from kafkatx.format.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from kafkatx.format.offset_index import OffsetIndexEntry, read_offset_index
from kafkatx.format.record_batch import BatchHeader, read_batch_header
from kafkatx.storage.segment import (
    Buffer,
    FileShrank,
    Segment,
    WindowedSnapshot,
    iter_batches_windowed,
    open_windowed,
    read_small_file,
    read_whole,
    small_reads,
)


class ValidPrefix(NamedTuple):
    """What ``LogSegment.recover`` keeps of a segment (:func:`valid_prefix`)."""

    valid: int  # bytes of whole batches with valid CRCs from the start
    next_offset: int  # the last of them's last offset + 1 (the segment base when none)
    bad: str  # what the rest is
    size: int  # the bytes looked at (the segment's size then)


def valid_prefix(valid: int, next_offset: int, stop: BatchHeader | DecodeError | None, size: int) -> ValidPrefix:
    """The :class:`ValidPrefix` of a strict walk of a segment's ``size`` bytes from its start (every batch
    framed by ``record_batch.read_batch_header``'s rules, every CRC checked by ``crc_valid``) that
    stopped at byte ``valid`` with ``next_offset`` after the batches before it, at ``stop``: the first
    batch whose CRC fails, the error where the bytes stop forming a batch, or None (all valid)."""
    if isinstance(stop, DecodeError):
        bad = f"not a whole valid batch ({stop.message})"
    elif stop is not None:
        bad = f"a batch at offset {stop.base_offset} with a bad CRC and what follows"
    else:
        bad = "a partial batch"
    return ValidPrefix(valid, next_offset, bad, size)


def segment_valid_prefix(seg: Segment) -> ValidPrefix:
    """Bytes of whole batches with valid CRCs from the start (``LogSegment.recover``), the offset after
    them (the segment base when none) and what the rest is."""
    last: deque[BatchHeader] = deque(maxlen=1)  # the strict reader frames and checks CRCs in C
    stop: BatchHeader | DecodeError | None = None
    size = 0
    try:
        # every byte is read (the CRCs), forward only: on the pread path in --read-window windows
        with open_windowed(seg.log_path) as (buf, win):
            size = len(buf)
            try:
                last.extend(iter_batches_windowed(buf, win, verify_crc=True, last_only=True))
            except CrcMismatch:
                try:
                    stop = read_batch_header(buf, last[0].position + last[0].size if last else 0)
                except DecodeError as err:  # pragma: no cover - the strict reader framed it already
                    stop = err
            except DecodeError as err:
                stop = err
    except FileShrank:  # changed size while being read: never taken for damage
        raise
    except MissingFile:
        pass
    if not last:
        return valid_prefix(0, seg.base_offset, stop, size)
    return valid_prefix(last[0].position + last[0].size, last[0].last_offset + 1, stop, size)


def next_offset_of(seg: Segment, known_files: Mapping[str, bytes] | None = None, small: bool | None = None,
                 take: Callable[[Path | None], tuple[bytes, int] | None] | None = None,
                 read: dict[str, bytes] | None = None) -> tuple[int, DecodeError | None]:
    """The offset after the last whole batch of ``seg`` (its base when it has none), and the
    error where its bytes stop forming batches (None when they all do).

    ``LogSegment.readNextOffset``: read from the last offset index entry's batch to the end, not
    the whole segment. Where that entry does not point at the start of the batch holding its
    offset (a stale or damaged index), the whole segment is read instead. ``take``: the loader's
    read-ahead (``_Loader.ahead``) of the segment and its index. ``read``: given, a small segment read
    whole here is put there by its path's string (the bytes ``open_windowed`` would hand out for it, for a
    replay that folds them next instead of reading the file again).
    """
    known = known_files if known_files is not None else {}
    data = known.get(str(seg.log_path)) if known else None
    if small is None:
        small = small_reads()
    if data is None:
        data = read_small_file(seg.log_path, allowed=small, got=take(seg.log_path) if take is not None else None)
    if data is not None:  # a small segment, read whole (what open_windowed hands out for it)
        if read is not None:
            read[str(seg.log_path)] = data
        return _next_offset_in(seg, data, None, known, small, take)
    with open_windowed(seg.log_path) as (buf, win):  # forward only: windows on the pread path
        return _next_offset_in(seg, buf, win, known, small, take)


def known_next_offset(seg: Segment, known_prefixes: Mapping[str, ValidPrefix],
                       known_files: Mapping[str, bytes]) -> int | None:
    """:func:`next_offset_of` of ``seg`` from what a caller walked already, when that says it: a known
    prefix of the whole bytes in ``known_files`` that are all whole batches (then every batch frames
    from byte 0, and its ``next_offset`` is the last one's last offset + 1), and an offset index with
    no entry in ``known_files`` (or none at all), so ``readNextOffset`` reads from byte 0 too. None:
    not known (read it)."""
    log = str(seg.log_path)
    prefix = known_prefixes.get(log)
    if prefix is None or prefix.valid != prefix.size:
        return None
    data = known_files.get(log)
    if data is None or len(data) != prefix.size:
        return None
    if seg.index_path is not None:
        index = known_files.get(str(seg.index_path))
        if index is None or len(index) >= OFFSET_ENTRY_SIZE:
            return None
    return prefix.next_offset


def _next_offset_in(seg: Segment, buf: Buffer, win: WindowedSnapshot | None, known_files: Mapping[str, bytes],
                    small: bool, take: Callable[[Path | None], tuple[bytes, int] | None] | None,
                    ) -> tuple[int, DecodeError | None]:
    last: deque[BatchHeader] = deque(maxlen=1)
    err: DecodeError | None = None
    try:
        start = _last_indexed_batch(seg, buf, win, known_files, small, take)
        if win is not None and start == 0:
            win.rewind()  # the index entry did not check out: the whole segment, from its first byte
        last.extend(iter_batches_windowed(buf, win, start, last_only=True))
    except DecodeError as e:
        err = e.at(seg.log_path)
    return (last[0].last_offset + 1 if last else seg.base_offset), err


def _last_indexed_batch(seg: Segment, buf: Buffer, win: WindowedSnapshot | None = None,
                        known_files: Mapping[str, bytes] | None = None, small: bool | None = None,
                        take: Callable[[Path | None], tuple[bytes, int] | None] | None = None) -> int:
    """The position of the batch the last ``.index`` entry names, when it checks out; else 0."""
    if seg.index_path is None:
        return 0
    try:
        data = known_files.get(str(seg.index_path)) if known_files else None
        entry = (_last_index_entry(data, seg.base_offset) if data is not None else
                 read_whole(seg.index_path, _last_index_entry, seg.base_offset, allowed=small,
                            got=take(seg.index_path) if take is not None else None))
        if entry is None:
            return 0
        pos = entry.position
        if pos <= 0 or pos >= len(buf):
            return 0
        if win is not None:
            win.prepare(pos, win.window)
        h = read_batch_header(buf, pos)
    except FileShrank:  # changed size while being read: never taken for damage
        raise
    except (DecodeError, MissingFile):
        return 0
    return pos if h.base_offset <= entry.offset <= h.last_offset else 0


def _last_index_entry(ibuf: Buffer, base_offset: int) -> OffsetIndexEntry | None:
    n = len(ibuf) // OFFSET_ENTRY_SIZE
    if n == 0:
        return None
    (entry,) = read_offset_index(ibuf[(n - 1) * OFFSET_ENTRY_SIZE:n * OFFSET_ENTRY_SIZE], base_offset)
    return entry
