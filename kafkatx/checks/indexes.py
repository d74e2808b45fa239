"""The index rules ``verify`` and ``dump-index --verify`` share, and the row they report.

* ``.index``: entries in increasing order, each position the start of a batch whose base offset is at or below
  the entry's offset (Kafka indexes the *last* offset of the batch appended at that position:
  ``LogSegment.append``/``recover``), no entry past the segment's last offset.
* ``.timeindex``: timestamps and offsets never go back (``TimeIndex.maybeAppend`` refuses both); each offset is
  held by a batch of the segment whose max timestamp is the entry's timestamp (the entry is
  ``maxTimestampSoFar`` and the offset of the batch that set it, as ``DumpLogSegments.dumpTimeIndex`` checks).
* Preallocated index files: ``AbstractIndex`` preallocates ``segment.index.bytes`` of zeros and trims them
  on a clean close; a crashed broker leaves the zeros (``LogSegment.recover`` rebuilds the indexes).
"""

from __future__ import annotations

import errno
import os
import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

from msgspec import Struct

from kafkatx.errors import DecodeError, MissingFile
from kafkatx.format.offset_index import ENTRY_SIZE as INDEX_ENTRY_SIZE
from kafkatx.format.offset_index import (
    OffsetIndexColumns,
    read_offset_index_columns,
)
from kafkatx.format.segment_fold import (
    TABLE_COLUMNS,
    TABLE_ONLY,
    SegmentFold,
    bisect_many,
    entries_at_batches,
    increasing,
    time_entries_at_batches,
)
from kafkatx.format.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkatx.format.time_index import TimeIndexColumns, read_time_index_columns
from kafkatx.rows import Finding
from kafkatx.storage import fdio
from kafkatx.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    FileShrank,
    Segment,
    map_file,
    open_windowed,
)

ERROR = "error"


WARNING = "warning"


INFO = "info"  # not a defect: what the broker will do to the files when it starts (storage/loading.py)


class Problem(Struct, frozen=True, kw_only=True):
    """One integrity problem (a ``verify`` row)."""

    check: str
    severity: str  # error | warning | info
    file: str | None
    position: int | None
    message: str
    partition: str | None = None


def problem_of_finding(f: Finding) -> Problem:
    return Problem(check=f.check, severity=f.severity, file=f.file, position=f.position, message=f.message,
                   partition=f.partition)


AddProblem = Callable[[str, str, str | None, int | None, str], None]  # check, severity, file, position, message


# A problem found at a batch, with where it sorts among the others of its segment: the batch's
# byte position, then the rank of its rule (see ``_PartitionVerifier._segment``).
BatchRow = tuple[int, int, str, str, "str | None", "int | None", str]


RANK_SNAPSHOT, RANK_ORDER, RANK_INDEX, RANK_TIME, RANK_CRC, RANK_CONTROL = range(6)


_INT64 = struct.Struct("q")  # a table value (native int64)


NO_INDEX = OffsetIndexColumns((), ())


NO_TIME_INDEX = TimeIndexColumns((), ())


class SegmentIndexCheck:
    """The ``.index`` and ``.timeindex`` rules of one segment (module docstring), from its batch table.

    Feed the ``want_table`` tables of the segment's fold (``format/segment_fold.py``: position,
    base offset, last offset and max timestamp of every batch), chunk by chunk in log order, to
    :meth:`table`, then call :meth:`finish` with the log's size. The rules look at the index
    entries, not at every batch: each chunk costs a bisect per entry that falls in it, in C
    (``map``) while nothing is wrong. Problems found at a batch are returned as
    :data:`BatchRow` s (the caller orders them among its own); the others (entry order, at
    construction; entries no batch matches, at :meth:`finish`) go to ``add``. Positions are
    the entry's byte position in its index file. ``verify`` runs it over its own fold of the
    log; :func:`verify_index_file` for ``dump-index --verify``.
    """

    def __init__(self, *, log_path: Path, add: AddProblem, index_path: Path | None = None,
                 index: OffsetIndexColumns = NO_INDEX, timeindex_path: Path | None = None,
                 time_index: TimeIndexColumns = NO_TIME_INDEX, timeindex_zero_first: bool = False,
                 index_base: int = 0) -> None:
        self.log_path = log_path  # its name is in the rows' messages (made only for a row)
        self._index_path = index_path  # their strings (index_file, time_file) made for a row
        self._timeindex_path = timeindex_path
        # ``timeindex_zero_first``: the time index is preallocated past an all-zero first entry
        # (:func:`zero_first_entry_of_preallocated`): a real entry (timestamp 0 at the base offset) or
        # none at all. When that entry fails a rule it is the preallocation: no row, and
        # ``timeindex_padding`` says so. (An offset index's all-zero first entry is always the
        # preallocation: the caller leaves it out, :func:`offset_index_padding`.)
        self._ambiguous = self.time_file if timeindex_zero_first and len(time_index[0]) == 1 else None
        self.timeindex_padding = False
        self._add = add  # through :meth:`add` (a method, not a closure kept on self: no reference cycle)
        # ``index_base``: the offset index's offsets are relative to it (as the file stores them:
        # ``read_offset_index_relative``), else absolute (0)
        self._base = index_base
        offsets, positions = index
        self._index_offsets = offsets
        # The entry naming each position first, by position: (position, entry number, offset) columns.
        self._pos: Sequence[int] = positions
        self._pos_id: Sequence[int] = range(len(positions))
        self._pos_off: Sequence[int] = offsets
        # (none or one entry: in order, no compiled call to say so: most indexes at 10,000 partitions)
        self._offsets_increasing = len(offsets) < 2 or increasing(offsets)  # then the highest offset is the last
        if not (self._offsets_increasing and (len(positions) < 2 or increasing(positions))):
            for i in range(1, len(offsets)):
                if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]:
                    add("index-order", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                        f"index entry {i} (offset {index_base + offsets[i]}, position {positions[i]}) does not "
                        f"come after (offset {index_base + offsets[i - 1]}, position {positions[i - 1]})")
            first: dict[int, int] = {}
            for i, pos in enumerate(positions):
                first.setdefault(pos, i)
            self._pos = sorted(first)
            self._pos_id = [first[pos] for pos in self._pos]
            self._pos_off = [offsets[i] for i in self._pos_id]
        self._pi = 0  # entries before it were matched against the batches (or missed: in _unmatched)
        self._unmatched: list[tuple[int, int, int]] = []  # (position, entry number, offset)
        stamps, toffsets = time_index
        if len(stamps) > 1 and not (_non_decreasing(stamps) and _non_decreasing(toffsets)):
            for i in range(1, len(stamps)):
                if stamps[i] < stamps[i - 1] or toffsets[i] < toffsets[i - 1]:
                    add("timeindex-order", ERROR, self.time_file, i * TIME_ENTRY_SIZE,
                        f"time index entry {i} (timestamp {stamps[i]}, offset {toffsets[i]}) goes back from "
                        f"(timestamp {stamps[i - 1]}, offset {toffsets[i - 1]})")
        # Time entries by offset (then entry number): offset, entry number, timestamp columns.
        self._t_off: Sequence[int] = toffsets
        self._t_id: Sequence[int] = range(len(toffsets))
        self._t_ts: Sequence[int] = stamps
        if len(toffsets) > 1 and not _non_decreasing(toffsets):
            self._t_id = sorted(self._t_id, key=toffsets.__getitem__)
            self._t_off = [toffsets[i] for i in self._t_id]
            self._t_ts = [stamps[i] for i in self._t_id]
        self._ti = 0  # time entries before it were placed at a batch
        self.seg_last: int | None = None  # the last batch's last offset

    @property
    def index_file(self) -> str | None:
        return str(self._index_path) if self._index_path is not None else None

    @property
    def time_file(self) -> str | None:
        return str(self._timeindex_path) if self._timeindex_path is not None else None

    def add(self, check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        """``add`` given at construction, except a row of the ambiguous all-zero first time index entry
        (the preallocation: ``timeindex_padding`` says so instead)."""
        if position == 0 and file is not None and file == self._ambiguous:
            self.timeindex_padding = True
            return
        self._add(check, severity, file, position, message)

    def _rows(self, rows: list[BatchRow]) -> list[BatchRow]:
        """``rows`` without those of an ambiguous all-zero first entry (the preallocation), sorted."""
        if not rows:
            return rows  # a chunk whose entries all sit where Kafka put them (most): nothing to sort
        if self._ambiguous is not None:
            kept = [row for row in rows if not (row[5] == 0 and row[4] == self._ambiguous)]
            self.timeindex_padding = self.timeindex_padding or len(kept) < len(rows)
            rows = kept
        return _sorted_rows(rows)

    def table(self, table: bytes | bytearray | array[int], end: int) -> list[BatchRow]:
        """The rules at the batches of one chunk's table (``end``: where its last batch ends), in
        batch order: an index entry at a batch that starts after the entry's offset; a time index
        entry placed at the first batch whose last offset reaches it (Kafka's ``maybeAppend`` order:
        the batch holding it, when the log's offsets only move forward) that does not hold it or
        has another max timestamp."""
        if not table:
            return []
        out: list[BatchRow] = []
        self.seg_last = row_value(table, -2)  # the last batch's last offset
        pi = self._pi
        pj = bisect_left(self._pos, end, pi)  # the entries whose position lies in this chunk
        rows = table if isinstance(table, array) else None
        if pj > pi:
            if not entries_at_batches(table, self._pos, self._pos_off, pi, pj, self._base):
                rows = rows if rows is not None else array("q", table)
                bases = rows[1::TABLE_COLUMNS]
                ks = bisect_many(rows[0::TABLE_COLUMNS], self._pos[pi:pj], exact=True)  # -1 - k: none there
                for j, k in enumerate(ks, pi):
                    pos, i, off = self._pos[j], self._pos_id[j], self._base + self._pos_off[j]
                    if k < 0:
                        self._unmatched.append((pos, i, off))
                    elif off < bases[k]:
                        out.append((pos, RANK_INDEX, "index-offset", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                                    f"index entry (offset {off}, position {pos}): the batch there starts at offset "
                                    f"{bases[k]}, after the indexed offset"))
            self._pi = pj
        ti = self._ti
        if ti == len(self._t_off):
            return self._rows(out) if out else out  # no time entry left
        # the time entries this chunk's batches reach (tj), placed where the highest last offset so far
        # first reaches them (entries left from the chunks before lie above every last offset of those
        # chunks): one compiled call says whether each is at its batch
        tj, placed = time_entries_at_batches(table, self._t_off, self._t_ts, ti)
        if tj > ti and not placed:
            rows = rows if rows is not None else array("q", table)
            positions = rows[0::TABLE_COLUMNS]
            bases = rows[1::TABLE_COLUMNS]
            last_list = rows[2::TABLE_COLUMNS].tolist()
            reach = array("q", accumulate(last_list, max))
            maxts = rows[3::TABLE_COLUMNS]
            ks = bisect_many(reach, self._t_off[ti:tj])
            for j, k in enumerate(ks, ti):
                off, i, ts = self._t_off[j], self._t_id[j], self._t_ts[j]
                if off < bases[k]:
                    out.append((positions[k], RANK_TIME, "timeindex-offset", ERROR, self.time_file,
                                i * TIME_ENTRY_SIZE,
                                f"time index entry offset {off} is held by no batch of {self.log_path.name}"))
                elif maxts[k] != ts:
                    out.append((positions[k], RANK_TIME, "timeindex-timestamp", ERROR, self.time_file,
                                i * TIME_ENTRY_SIZE,
                                f"time index entry (timestamp {ts}, offset {off}): the batch holding the offset "
                                f"(at byte {positions[k]} of {self.log_path.name}) has max timestamp {maxts[k]}"))
        self._ti = tj
        return self._rows(out) if out else out

    def finish(self, log_size: int) -> None:
        if (not self._unmatched and self._pi == len(self._pos) and self._ti == len(self._t_off)
                and (self.seg_last is None or not self._index_offsets)):
            return  # every entry was placed at a batch, and none is checked against the last offset below
        rest = zip(self._pos[self._pi:], self._pos_id[self._pi:], map(self._base.__add__, self._pos_off[self._pi:]),
                   strict=True)
        for pos, i, off in [*self._unmatched, *rest]:
            where = "past the end of" if pos >= log_size else "inside a batch of"
            self.add("index-position", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                     f"index entry (offset {off}, position {pos}) does not point at a batch start "
                     f"({where} {self.log_path.name})")
        offsets, base = self._index_offsets, self._base
        if self.seg_last is not None and offsets and base + (offsets[-1] if self._offsets_increasing
                                                            else max(offsets)) > self.seg_last:
            for i, rel in enumerate(offsets):
                if base + rel > self.seg_last:
                    self.add("index-offset", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                             f"index entry offset {base + rel} is past the segment's last offset {self.seg_last}")
        for off, i in zip(self._t_off[self._ti:], self._t_id[self._ti:], strict=True):
            self.add("timeindex-offset", ERROR, self.time_file, i * TIME_ENTRY_SIZE,
                     f"time index entry offset {off} is past the segment's last offset "
                     f"{self.seg_last if self.seg_last is not None else '(empty segment)'}")


def zero_first_entry_of_preallocated(size: int, entry_size: int, first: tuple[int, int] | None,
                                     zero: tuple[int, int]) -> bool:
    """Does an index file of ``size`` bytes run on past an all-zero first entry? ``first``: its first
    entry (``None``: no entry), ``zero``: that entry when every byte is 0 (offset index: the segment's
    base offset and position 0; time index: timestamp 0 and the base offset). Kafka preallocates the
    active segment's indexes (``AbstractIndex``: ``segment.index.bytes`` of zeros, trimmed only when
    the segment rolls or the broker closes it cleanly), so such a file holds one real entry that
    happens to be all zeros, or none. The readers stop at the first all-zero entry after the first."""
    return first is not None and first == zero and size > entry_size


_ZEROS = bytes(1 << 20)


def zero_filled_from(path: Path, start: int) -> bool:
    """Is every byte of the file at ``path`` from ``start`` on zero (and is there one)? Holes of a
    sparse file (a preallocated index copied with ``--sparse``) are skipped unread (``SEEK_DATA``);
    the data parts are read 1 MiB at a time and compared. A file that cannot be read is
    :class:`~kafkatx.errors.ReadFailed` (``storage/fdio.py``): never an answer either way."""
    fd = fdio.open_read(path)
    try:
        end = fdio.fstat(fd, path).st_size
        if start >= end:
            return False
        buf = bytearray(len(_ZEROS))
        pos = start
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA) if hasattr(os, "SEEK_DATA") else pos
                hole = os.lseek(fd, data, os.SEEK_HOLE) if hasattr(os, "SEEK_HOLE") else end
            except OSError as err:
                if err.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                    return True
                data, hole = pos, end  # no hole support on this file system: read it all
            while data < hole:
                n = fdio.preadv(fd, [memoryview(buf)[:min(len(buf), hole - data)]], data, path)
                if n <= 0:
                    raise FileShrank(f"file shrank while being read: {end} bytes at open, it now ends at byte {data}",
                                     path=path, position=data)
                if buf[:n] != _ZEROS[:n]:
                    return False
                data += n
            pos = hole
        return True
    finally:
        os.close(fd)


class IndexFilePreallocation(NamedTuple):
    """What ``dump-index --verify`` knows of one index file's preallocation."""

    size: int  # the file's size when it is zero-filled past its entries, else 0
    entries: int  # the entries the reader found (the all-zero first one included)
    entry_size: int
    zero_first: bool  # preallocated past an all-zero first entry (offset index: left out; time index: ambiguous)


def index_file_preallocation(path: Path, size: int, base_offset: int,
                             cols: OffsetIndexColumns | TimeIndexColumns, entry_size: int) -> IndexFilePreallocation:
    """``size``: the file's size."""
    n = len(cols[0])
    size = size if zero_filled_from(path, n * entry_size) else 0
    first = (cols[0][0], cols[1][0]) if n else None
    zero = (base_offset, 0) if entry_size == INDEX_ENTRY_SIZE else (0, base_offset)
    return IndexFilePreallocation(size=size, entries=n, entry_size=entry_size,
                                  zero_first=zero_first_entry_of_preallocated(size, entry_size, first, zero))


def add_index_file_preallocated(add: AddProblem, path: Path, pre: IndexFilePreallocation, time_padding: bool) -> None:
    """``dump-index --verify``'s info row for a preallocated index file (no startup context: ``verify``
    says whether the broker recovers the segment)."""
    real = pre.entries - (pre.zero_first if pre.entry_size == INDEX_ENTRY_SIZE else time_padding)
    if pre.size > real * pre.entry_size:
        add("index-preallocated", INFO, str(path), real * pre.entry_size,
            f"{path.name}: index preallocated ({pre.size} bytes, zero-filled after {real} "
            f"entr{'y' if real == 1 else 'ies'}: segment.index.bytes, a segment the broker had open, as a crash "
            f"leaves it); a broker that recovers the segment on startup rebuilds it (LogSegment.recover; "
            f"`verify` says whether it does)")


def offset_index_padding(size: int, first: tuple[int, int] | None, base_offset: int) -> bool:
    """Is an offset index's all-zero first entry the preallocation? Always, in a preallocated file:
    Kafka never indexes position 0 (``LogSegment.append`` adds an entry only once more than
    ``index.interval.bytes`` were appended since the last one, counting from 0 before the batch;
    ``LogSegment.recover`` only when ``validBytes - lastIndexEntry > indexIntervalBytes``)."""
    return zero_first_entry_of_preallocated(size, INDEX_ENTRY_SIZE, first, (base_offset, 0))


def _non_decreasing(values: Sequence[int]) -> bool:
    """Every value at or above the one before (a list compared with its sorted copy: no Python call per pair)."""
    if len(values) < 2:
        return True  # none or one: nothing goes back
    items = values if isinstance(values, list) else list(values)
    return items == sorted(items)


def row_value(table: bytes | bytearray | array[int], i: int) -> int:
    """The ``i`` th int64 of a chunk's table (native int64 values, as bytes or an ``array('q')``)."""
    if table.__class__ is bytearray:  # the fold's (one unpack, no view cast twice)
        got: int = _INT64.unpack_from(table, (i if i >= 0 else len(table) // _INT64.size + i) * _INT64.size)[0]
        return got
    got = memoryview(table).cast("B").cast("q")[i]
    return got


def add_row(rows: list[BatchRow], batch_position: int, rank: int, check: str, severity: str, file: str | None,
             position: int | None, message: str) -> None:
    rows.append((batch_position, rank, check, severity, file, position, message))


def row_key(row: BatchRow) -> tuple[int, int]:
    return row[0], row[1]


def _sorted_rows(rows: list[BatchRow]) -> list[BatchRow]:
    rows.sort(key=row_key)
    return rows


def log_decode_message(size: int, next_pos: int, err: DecodeError) -> str:
    # Where the bad bytes begin (the end of the last whole batch) is what recovery would truncate
    # to; the decoder's own position says what exactly is wrong.
    return (f"{size - next_pos} bytes from position {next_pos} do not form a batch ({err.message} at byte "
            f"{err.position}); Kafka's recovery truncates them")


def log_beside(index_path: Path) -> Path:
    """The ``.log`` an index file belongs to: the file name up to its first dot, plus ``.log``
    (as ``DumpLogSegments`` finds it)."""
    return index_path.with_name(index_path.name.split(".", 1)[0] + LOG_SUFFIX)


def verify_index_file(path: Path, base_offset: int) -> list[Problem]:
    """``dump-index --verify``: :class:`SegmentIndexCheck` for one ``.index`` or ``.timeindex`` file
    against the ``.log`` beside it, the rules ``verify`` applies to every segment.

    Raises DecodeError naming the file and byte position when the index does not decode,
    MissingFile when the ``.log`` is absent. Bytes of the ``.log`` that do not form a batch (a torn
    tail) are what ``verify`` says of them: a ``log-decode`` problem naming the ``.log`` and the byte
    where they begin; the entries are checked against the batches before it (an entry past them
    is a problem of its own).
    """
    problems: list[Problem] = []

    def add(check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        problems.append(Problem(check=check, severity=severity, file=file, position=position, message=message))

    with map_file(path) as ibuf:
        try:
            if path.name.endswith(TIMEINDEX_SUFFIX):
                times = read_time_index_columns(ibuf, base_offset)
                pre = index_file_preallocation(path, len(ibuf), base_offset, times, TIME_ENTRY_SIZE)
                check = SegmentIndexCheck(log_path=log_beside(path), add=add, timeindex_path=path, time_index=times,
                                          timeindex_zero_first=pre.zero_first)
            elif path.name.endswith(INDEX_SUFFIX):
                index = read_offset_index_columns(ibuf, base_offset)
                pre = index_file_preallocation(path, len(ibuf), base_offset, index, INDEX_ENTRY_SIZE)
                check = SegmentIndexCheck(log_path=log_beside(path), add=add, index_path=path,
                                          index=NO_INDEX if pre.zero_first else index)
            else:
                raise MissingFile(f"{path}: not an .index or .timeindex file")
        except DecodeError as err:
            raise err.at(path) from err
    log_path = log_beside(path)
    if not fdio.is_file(log_path):
        raise MissingFile(f"{path}: no {log_path.name} beside it to verify the entries against")
    segment = Segment(base_offset=base_offset, log_path=log_path)
    with open_windowed(segment.log_path) as (buf, win):  # forward only: windows on the pread path
        fold = SegmentFold(buf, crc_mode=TABLE_ONLY, want_table=True,  # the entries' targets: no CRC, no event
                           window=win.prepare if win is not None else None)
        rows: list[BatchRow] = []
        bad: DecodeError | None = None
        try:
            for chunk in fold.chunks():
                assert chunk.table is not None
                rows += check.table(chunk.table, chunk.pos)
        except DecodeError as err:
            bad = err
        for row in rows:
            add(*row[2:])
        if bad is not None:
            add("log-decode", ERROR, str(log_path), fold.pos, log_decode_message(len(buf), fold.pos, bad))
        check.finish(len(buf))
    add_index_file_preallocated(add, path, pre, check.timeindex_padding)
    problems.sort(key=lambda p: (p.position if p.position is not None else -1))
    return problems
