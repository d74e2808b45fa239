"""``verify``: integrity across a partition's files, one row per problem.

What is checked, per partition copy (every log dir is checked, replicas too):

* ``.log``: every batch's CRC; offsets only move forward (a batch whose base offset is
  at or below the previous batch's last offset is a problem; gaps are fine, compaction
  leaves them); bytes that do not form a batch (a torn tail); batches below the
  segment's base offset.
* ``.index``: entries in increasing order, each position the start of a batch whose
  base offset is at or below the entry's offset (Kafka indexes the *last* offset of
  the batch appended at that position: ``LogSegment.append``/``recover``), no entry
  past the segment's last offset.
* ``.timeindex``: timestamps and offsets never go back (``TimeIndex.maybeAppend`` refuses
  both); each offset is held by a batch of the segment whose max timestamp is the entry's
  timestamp (the entry is ``maxTimestampSoFar`` and the offset of the batch that set it, as
  ``DumpLogSegments.dumpTimeIndex`` checks).

  These index rules are :class:`SegmentIndexCheck`, the one implementation ``verify`` and
  ``dump-index --verify`` (:func:`verify_index_file`) share.
* ``.txnindex``: entries' last offsets strictly increase; each entry's last offset is an
  ABORT marker of that producer in the same segment; its first offset is where that
  producer's transaction began; its LSO is what ``ProducerStateManager.lastStableOffset``
  gives; and every ABORT marker that ended a transaction with data has its entry (without
  it read_committed consumers see the aborted records: ``collectAbortedTransactions``
  reads only the txnindex).
* ``.snapshot``: CRC, offset not past the log end, and agreement with the log replayed
  up to the snapshot's offset (epoch, last offset, open transaction per producer).
* checkpoints: high watermark and recovery point not past the log end; the log start
  offset inside the log.
* ``__transaction_state``: illegal state moves and ids in the wrong coordinator partition.

Memory: index entries of one segment, ABORT markers of one segment and producer state;
the log itself is only mapped.
"""

from __future__ import annotations

import errno
import os
import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import accumulate
from operator import attrgetter, le
from pathlib import Path
from typing import NamedTuple

from msgspec import Struct

from kafkatx.coordinator.state_manager import CoordinatorState, replay_transaction_log
from kafkatx.errors import DecodeError, KafkaTxError, MissingFile, ReadFailed
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import ENTRY_SIZE as INDEX_ENTRY_SIZE
from kafkatx.format.offset_index import (
    OffsetIndexColumns,
    read_offset_index_columns,
    read_offset_index_relative,
)
from kafkatx.format.producer_snapshot import ProducerSnapshot, read_producer_snapshot
from kafkatx.format.record_batch import BatchHeader, crc_valid, read_batch_header, read_control_record
from kafkatx.format.segment_fold import (
    CRC_FAILS_ONLY,
    TABLE_COLUMNS,
    TABLE_ONLY,
    CrcAhead,
    FoldEvent,
    SegmentFold,
    bisect_many,
    crc_ahead_compiled,
    entries_at_batches,
    increasing,
    time_entries_at_batches,
)
from kafkatx.format.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkatx.format.time_index import TimeIndexColumns, read_time_index_columns
from kafkatx.format.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from kafkatx.format.txn_index import TxnIndexColumns, read_txn_index_columns
from kafkatx.rows import Finding, Progress
from kafkatx.storage import fdio
from kafkatx.storage.fanout import fan_out, jobs_for
from kafkatx.storage.loading import RECOVER_SEGMENT, ValidPrefix, plan_load, valid_prefix
from kafkatx.storage.log_dir import LogDir, collector_paused
from kafkatx.storage.partition import NOTHING_AHEAD, Partition, ReadAhead, log_bytes, segment_reads
from kafkatx.storage.producer_state import (
    FOLD_CHUNK,
    FOLD_END,
    CompletedTxn,
    completed_txn_of,
    finding_of,
    new_producer_state_fold,
    producer_state_of,
)
from kafkatx.storage.replicas import as_log_dirs
from kafkatx.storage.segment import (
    DEFAULT_READ_WINDOW,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    Buffer,
    FileShrank,
    Segment,
    WindowedSnapshot,
    iter_batches_windowed,
    map_file,
    open_windowed,
    read_small_file,
    read_whole,
    small_reads,
)
from kafkatx.storage.tiered import RemoteLogRule

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


def _from_finding(f: Finding) -> Problem:
    return Problem(check=f.check, severity=f.severity, file=f.file, position=f.position, message=f.message,
                   partition=f.partition)


AddProblem = Callable[[str, str, str | None, int | None, str], None]  # check, severity, file, position, message


# A problem found at a batch, with where it sorts among the others of its segment: the batch's
# byte position, then the rank of its rule (see ``_PartitionVerifier._segment``).
BatchRow = tuple[int, int, str, str, "str | None", "int | None", str]
RANK_SNAPSHOT, RANK_ORDER, RANK_INDEX, RANK_TIME, RANK_CRC, RANK_CONTROL = range(6)
_NEVER = 2**63  # past every offset
_INT64 = struct.Struct("q")  # a table value (native int64)
_NO_INDEX = OffsetIndexColumns((), ())
_NO_TIME_INDEX = TimeIndexColumns((), ())
_NO_TXN_INDEX = TxnIndexColumns((), (), (), ())
_PRODUCER_ID = attrgetter("producer_id")
_FIRST_OFFSET = attrgetter("first_offset")
_LSO = attrgetter("last_stable_offset")


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
                 index: OffsetIndexColumns = _NO_INDEX, timeindex_path: Path | None = None,
                 time_index: TimeIndexColumns = _NO_TIME_INDEX, timeindex_zero_first: bool = False,
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
        self.seg_last = _row_value(table, -2)  # the last batch's last offset
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


def _txn_index_is_the_aborts(cols: TxnIndexColumns, aborts: dict[int, CompletedTxn]) -> bool:
    """Does the ``.txnindex`` hold exactly one entry per completed abort, in marker order, each with
    the abort's producer, first offset and last stable offset (a possible one)? Then
    ``_check_txn_index``'s per-entry rules find nothing, and it skips them (no step per entry)."""
    lasts = cols.last_offsets
    if len(lasts) != len(aborts) or not increasing(lasts) or not set(aborts).issuperset(lasts):
        return False
    done = list(map(aborts.__getitem__, lasts))
    lsos = cols.last_stable_offsets
    return (list(map(_PRODUCER_ID, done)) == list(cols.producer_ids)
            and list(map(_FIRST_OFFSET, done)) == list(cols.first_offsets)
            and list(map(_LSO, done)) == list(lsos)
            and (not lsos or min(lsos) >= 0) and all(map(le, lsos, map((1).__add__, lasts))))


def _non_decreasing(values: Sequence[int]) -> bool:
    """Every value at or above the one before (a list compared with its sorted copy: no Python call per pair)."""
    if len(values) < 2:
        return True  # none or one: nothing goes back
    items = values if isinstance(values, list) else list(values)
    return items == sorted(items)


def _row_value(table: bytes | bytearray | array[int], i: int) -> int:
    """The ``i`` th int64 of a chunk's table (native int64 values, as bytes or an ``array('q')``)."""
    if table.__class__ is bytearray:  # the fold's (one unpack, no view cast twice)
        got: int = _INT64.unpack_from(table, (i if i >= 0 else len(table) // _INT64.size + i) * _INT64.size)[0]
        return got
    got = memoryview(table).cast("B").cast("q")[i]
    return got


def _add_row(rows: list[BatchRow], batch_position: int, rank: int, check: str, severity: str, file: str | None,
             position: int | None, message: str) -> None:
    rows.append((batch_position, rank, check, severity, file, position, message))


def _row_key(row: BatchRow) -> tuple[int, int]:
    return row[0], row[1]


def _sorted_rows(rows: list[BatchRow]) -> list[BatchRow]:
    rows.sort(key=_row_key)
    return rows


def _finding_position(f: Finding) -> int:
    return f.position if f.position is not None else -1


def _iter_headers(segment: Segment, buf: Buffer, win: WindowedSnapshot | None) -> Iterator[BatchHeader]:
    """``segment.iter_batches(buf)`` over an :func:`open_windowed` buffer (errors name the ``.log``)."""
    try:
        yield from iter_batches_windowed(buf, win)
    except DecodeError as err:
        raise err.at(segment.log_path) from err


def _log_decode_message(size: int, next_pos: int, err: DecodeError) -> str:
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
                                          index=_NO_INDEX if pre.zero_first else index)
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
            add("log-decode", ERROR, str(log_path), fold.pos, _log_decode_message(len(buf), fold.pos, bad))
        check.finish(len(buf))
    add_index_file_preallocated(add, path, pre, check.timeindex_padding)
    problems.sort(key=lambda p: (p.position if p.position is not None else -1))
    return problems


# A segment of at least this many bytes has its CRCs checked ahead on another thread (format.segment_fold.CrcAhead):
# verify's fold then only frames and tables its batches, and the CRC pass runs on the second core.
CRC_AHEAD_BYTES = 32 << 20


def _crc_ahead(size: int) -> bool:
    """Whether a segment of ``size`` bytes has its CRCs checked ahead: :data:`CRC_AHEAD_BYTES` and more, the
    walk compiled (the GIL released; a mapped segment: ``segment_fold.crc_ahead_compiled``) and a second CPU
    there (``log.fanout.jobs_for``: not with ``KAFKATX_JOBS=1``)."""
    return size >= CRC_AHEAD_BYTES and crc_ahead_compiled() and jobs_for(2, None, at_least=2) > 1


# The collector paused (coordinator.collector_paused): verify makes a few objects per partition and per
# segment and no reference cycle per partition; with it on, each full collection walks every partition's
# objects again (at 10,000 partitions ~10% of verify's CPU).
@collector_paused()
def verify(log_dirs: Iterable[str | Path | LogDir], *, partitions_count: int | None = None,
           progress: Progress | None = None, read_window: int = DEFAULT_READ_WINDOW,
           jobs: int | None = None) -> list[Problem]:
    """Check every partition of every log dir; the problems, in dir/partition/file order.
    ``jobs``: processes that check a log dir's partitions (``log.fanout.jobs_for``; the same answer)."""
    dirs = as_log_dirs(log_dirs)
    problems: list[Problem] = []
    coordinator = replay_transaction_log(dirs, partitions_count=partitions_count, history_for=())
    problems.extend(_from_finding(f) for f in coordinator.findings)
    for failed in coordinator.read_failed[:1]:  # a file that could not be read is no finding: exit 3 naming it
        raise ReadFailed(failed.reason, path=failed.file or failed.partition)
    for skipped, unread in zip(coordinator.skipped, coordinator.incomplete, strict=False):
        problems.append(Problem(check="txn-state-decode", severity=ERROR, file=unread.file, position=unread.position,
                                message=f"__transaction_state partition skipped: {skipped}",
                                partition=unread.partition))
    sizes = log_bytes(p for d in dirs for p in d.partitions()) if progress is not None else {}
    if progress is not None:
        progress.start(sum(sizes.values()), "verifying")
    for log_dir in dirs:
        checkpoints = {}
        for name, attr in (("replication-offset-checkpoint", "high_watermarks"),
                           ("recovery-point-offset-checkpoint", "recovery_points"),
                           ("log-start-offset-checkpoint", "log_start_offsets")):
            try:
                checkpoints[attr] = getattr(log_dir, attr)
            except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
                raise
            except KafkaTxError as err:
                checkpoints[attr] = {}
                problems.append(Problem(check="checkpoint", severity=ERROR, file=str(log_dir.path / name),
                                        position=getattr(err, "position", None), message=str(err)))
        high_watermarks, recovery_points = checkpoints["high_watermarks"], checkpoints["recovery_points"]
        log_start_offsets = checkpoints["log_start_offsets"]
        small = small_reads()  # once per log dir, not per partition (an environment lookup)

        def check(part: Partition) -> list[Problem]:
            key = part.key
            return verify_partition(part, high_watermark=high_watermarks.get(key),  # noqa: B023 - called here
                                    recovery_point=recovery_points.get(key),  # noqa: B023
                                    log_start=log_start_offsets.get(key), read_window=read_window,  # noqa: B023
                                    small=small)  # noqa: B023

        def done(part: Partition) -> None:
            assert progress is not None
            progress.advance(sizes[id(part)])

        parts = log_dir.partitions()
        for found in fan_out(check, parts, list[Problem], jobs=jobs_for(len(parts), jobs),
                             done=done if progress is not None else None):  # no progress: no ticks
            problems.extend(found)
    problems.extend(cluster_problems(dirs, coordinator))
    return problems


def cluster_problems(dirs: Sequence[LogDir], coordinator: CoordinatorState) -> list[Problem]:
    """Checks against a ``__cluster_metadata-0`` in the log dirs (``kafkatx.checks.cluster``): stray
    partition folders and producer ids above every allocated block. None without a metadata log."""
    from kafkatx.checks.cluster import (
        PRODUCER_ID_CHECK,
        STRAY_CHECK,
        producer_ids_beyond_blocks,
        stray_partitions,
    )
    from kafkatx.storage.cluster_metadata import cluster_image

    try:
        image = cluster_image(dirs)
    except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
        raise
    except KafkaTxError as err:
        return [Problem(check="cluster-metadata", severity=ERROR, file=getattr(err, "path", None),
                        position=getattr(err, "position", None), message=str(err))]
    if image is None:
        return []
    out = [Problem(check=STRAY_CHECK, severity=WARNING, file=str(part.path), position=None, partition=part.name,
                   message=f"stray: {why}; Kafka 3.7+ renames it to {part.name}.<uuid>-stray at startup "
                           "and does not serve it") for part, why in stray_partitions(image, dirs)]
    known = coordinator.live_producer_ids()
    limit = image.next_producer_id
    for name, pid, path in producer_ids_beyond_blocks(image, dirs, known):
        out.append(Problem(check=PRODUCER_ID_CHECK, severity=WARNING, file=path, position=None, partition=name,
                           message=f"producer id {pid} is at or above every block the controller allocated "
                                   f"(next producer id {limit}, {image.path.name}): not handed out by this "
                                   "cluster's controller"))
    return out


def verify_partition(part: Partition, *, high_watermark: int | None = None, recovery_point: int | None = None,
                     log_start: int | None = None, read_window: int = DEFAULT_READ_WINDOW,
                     small: bool | None = None) -> list[Problem]:
    """Every check of one partition folder (see the module docstring). ``read_window``: bytes of a
    segment held at most when it is read with pread (a live broker; ``log.segment.WindowedSnapshot``).
    ``small``: :func:`~kafkatx.storage.segment.small_reads` as the caller asked it (None: asked here)."""
    v = _PartitionVerifier(part, read_window, small)
    v.run()
    recovered: set[str] = set()
    remote: RemoteLogRule | None = None
    try:
        plan = plan_load(part, known_prefixes=v.prefixes, known_snapshots=v.decoded, known_files=v.files,
                         small=v.small)
    except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
        raise
    except KafkaTxError as err:
        v.add("startup", ERROR, str(part.path), getattr(err, "position", None),
              f"{part.name}: cannot tell what the broker does with these files on startup: {err}")
    else:
        remote = plan.remote
        # Rows of their own kind: the files the broker deletes, recovers or truncates when it starts.
        # each action once: a segment both loadSegmentFiles and recoverLog recover says its truncation once
        for a in dict.fromkeys(plan.actions):
            v.add(f"startup-{a.action}", INFO, a.file, a.position, a.message)
        if plan.actions:
            recovered = {a.file for a in plan.actions if a.action == RECOVER_SEGMENT}
    for pre in v.preallocated:
        _report_preallocated(v.add, pre, str(pre.segment.log_path) in recovered)
    leo = v.log_end_offset
    # the checkpoint rows name their file (a path joined only for a row: none at 10,000 clean partitions)
    if high_watermark is not None and high_watermark > leo:
        v.add("checkpoint-high-watermark", ERROR, _checkpoint_file(part, "replication-offset-checkpoint"), None,
              f"{part.name}: high watermark {high_watermark} is past the log end offset {leo}")
    if recovery_point is not None and recovery_point > leo:
        v.add("checkpoint-recovery-point", ERROR, _checkpoint_file(part, "recovery-point-offset-checkpoint"), None,
              f"{part.name}: recovery point {recovery_point} is past the log end offset {leo}")
    if log_start is not None:
        first_base = part.segments[0].base_offset if part.segments else 0
        if log_start > leo:
            v.add("checkpoint-log-start", ERROR, _checkpoint_file(part, "log-start-offset-checkpoint"), None,
                  f"{part.name}: log start offset {log_start} is past the log end offset {leo}")
        elif log_start < first_base and remote is not None and remote.enabled:
            # A remote-enabled log (KIP-405): LogLoader keeps the checkpointed start, the offsets below the first
            # local segment are in the remote tier (UnifiedLog.localLogStartOffset is the first local segment).
            v.add("checkpoint-log-start", INFO, _checkpoint_file(part, "log-start-offset-checkpoint"), None,
                  f"{part.name}: log start offset {log_start} is below the first local segment {first_base}: the "
                  f"offsets before it are in the remote tier (tiered storage; {remote.why})")
        elif log_start < first_base:
            why = f"; {remote.why}" if remote is not None else ""
            v.add("checkpoint-log-start", WARNING, _checkpoint_file(part, "log-start-offset-checkpoint"), None,
                  f"{part.name}: log start offset {log_start} is below the first segment's base offset {first_base} "
                  f"(those offsets are gone{why})")
    return v.problems


def _checkpoint_file(part: Partition, name: str) -> str:
    """The log dir's checkpoint file ``name`` beside ``part``'s folder, as a checkpoint row names it."""
    return str(part.path.parent / name)


class Preallocated(Struct, frozen=True, kw_only=True):
    """An ``.index``/``.timeindex`` that runs on past its entries (Kafka's preallocation)."""

    segment: Segment
    path: Path
    size: int  # bytes
    entries: int  # the real entries before the zeros
    entry_size: int


def _report_preallocated(add: AddProblem, pre: Preallocated, recovered: bool) -> None:
    """One row per preallocated index file. ``AbstractIndex`` preallocates the active segment's indexes
    to ``segment.index.bytes`` (zero-filled) and trims them only when the segment rolls or closes
    cleanly, so a broker that crashed leaves them so. ``LogSegment.sanityCheck`` does not check
    offset or time indexes, and ``LogLoader.recoverLog`` recovers the segments from the recovery point
    on after an unclean shutdown: ``LogSegment.recover`` resets both indexes and rebuilds them from the
    batches (``recovered``: ``plan_load`` says the broker recovers this segment). Not a defect then
    (info). A segment the broker does not recover keeps the file as it is (a pre-existing index's
    entry count is its size / the entry size, ``AbstractIndex``): a warning."""
    where = pre.entries * pre.entry_size
    what = (f"{pre.size} bytes, zero-filled after {pre.entries} entr{'y' if pre.entries == 1 else 'ies'}: "
            f"segment.index.bytes, a segment the broker had open")
    if recovered:
        add("startup-rebuild-index", INFO, str(pre.path), where,
            f"index preallocated, rebuilt at startup ({what}): the broker recovers {pre.segment.log_path.name} "
            f"(LogSegment.recover resets {pre.path.name} and rebuilds it from the batches)")
    else:
        add("index-preallocated", WARNING, str(pre.path), where,
            f"index preallocated, not rebuilt ({what}): the broker does not recover this segment on startup, so "
            f"it reads every {pre.entry_size}-byte slot of {pre.path.name} as an entry (AbstractIndex)")


class _PartitionVerifier:
    def __init__(self, part: Partition, read_window: int = DEFAULT_READ_WINDOW, small: bool | None = None) -> None:
        self.part = part
        self.read_window = read_window
        self.problems: list[Problem] = []
        self.findings: list[Finding] = []
        self.aborts: dict[int, CompletedTxn] = {}  # marker offset -> completed abort, current segment
        self._abort_markers: dict[Path, dict[int, int]] = {}  # segment -> ABORT marker offset -> producer
        # ProducerStateManager's replay of the partition, keeping only the aborted transactions (the
        # .txnindex holds only those): taken per chunk (_take_aborts), not handed over one at a time.
        self.replay = new_producer_state_fold(keep_completed=True, aborts_only=True)
        self.prev_last: int | None = None
        self.log_end_offset = part.segments[0].base_offset if part.segments else part.log_start_offset
        self.snapshots: list[tuple[int, Path, ProducerSnapshot]] = []
        # by the path's string (a Path hashes its parts as a tuple: ~3 us the first time, per file)
        self.prefixes: dict[str, ValidPrefix] = {}  # segment -> what recovery keeps of it (plan_load)
        self.decoded: dict[str, ProducerSnapshot | None] = {}  # snapshot -> as plan_load reads it (None: not)
        # the last segment's bytes and its index's when small: what plan_load reads for the log end
        self.files: dict[str, bytes] = {}
        self.small = small_reads() if small is None else small  # read_small_file's ``allowed``
        self.index_sizes: dict[Path, int] = {}  # preallocated .index / .timeindex -> its size in bytes
        self.preallocated: list[Preallocated] = []  # index files that run on past their entries
        self.ahead = NOTHING_AHEAD  # small files read ahead in one call (_read_ahead)

    def add(self, check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        self.problems.append(Problem(check=check, severity=severity, file=file, position=position, message=message,
                                     partition=self.part.name))

    def _take_aborts(self) -> None:
        """The transactions the replay aborted since the last call, into ``aborts``."""
        topic, number = self.part.topic, self.part.partition
        for row in self.replay.take_completed():
            self.aborts[row[5]] = completed_txn_of(topic, number, row)  # by marker offset

    def _take_findings(self) -> None:
        """The replay's findings since the last call, into ``findings`` (in the segment they are about)."""
        got = self.replay.take_findings()
        if got:
            self.findings.extend(finding_of(self.part.name, row) for row in got)

    # ------------------------------------------------------------------ driver
    def run(self) -> None:
        if self.small:
            self._read_ahead()
        self._load_snapshots()
        pending = list(self.snapshots)
        for segment in self.part.segments:
            pending = self._segment(segment, pending)
        for offset, path, snap in pending:
            if offset <= self.log_end_offset:  # one past the log end is a startup-delete-snapshot row
                self._compare_snapshot(offset, path, snap)
        for f in self.findings:
            self.problems.append(Problem(check=f.check, severity=f.severity, file=f.file, position=f.position,
                                         message=f.message, partition=f.partition))

    def _read_ahead(self) -> None:
        """Read the small files every partition's checks read whole (each snapshot, the last segment's
        ``.log``, ``.index`` and ``.timeindex``) in one call (``partition.ReadAhead``), as the loader reads
        ahead (``storage/loading.py``); each is handed to the check that reads it, which judges it as its own
        read (``read_small_file(got=...)``). The ``.index``, empty for a segment under index.interval.bytes
        (most at 10,000 partitions), is asked its size first. A ``.log`` larger than ``SMALL_FILE_BYTES``
        is not read ahead (one read of that many bytes says so): :meth:`_segment` maps it."""
        part = self.part
        paths: list[Path] = [path for _offset, path in part.snapshots]
        stat_first = [False] * len(paths)
        if part.segments:
            segment_reads(part.segments[-1], paths, stat_first, timeindex=True)
        self.ahead = ReadAhead(paths, stat_first)

    def _load_snapshots(self) -> None:
        for offset, path in self.part.snapshots:
            try:
                snap = read_whole(path, read_producer_snapshot, allowed=self.small, got=self.ahead.take(path))
            except DecodeError as err:
                self.decoded[str(path)] = None  # what plan_load takes a snapshot that does not read for
                self.add("snapshot-decode", ERROR, str(path), err.position, str(err.at(path)))
                continue
            except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
                raise
            except KafkaTxError as err:
                self.add("snapshot-decode", ERROR, str(path), None, str(err))
                continue
            self.decoded[str(path)] = snap if snap.crc_valid else None
            if not snap.crc_valid:
                self.add("snapshot-crc", ERROR, str(path), 2,
                         f"{self.part.name}: producer snapshot {path.name} has a bad CRC (stored {snap.crc:#010x}); "
                         f"the broker falls back to an older snapshot or the log")
                continue
            self.snapshots.append((offset, path, snap))

    def _compare_snapshot(self, offset: int, path: Path, snap: ProducerSnapshot,
                          add: AddProblem | None = None) -> None:
        add = self.add if add is None else add
        for e in snap.entries:
            row = self.replay.last_entry(e.producer_id)
            if row is None:
                # only a batch in the local segments can be looked for: on a tiered partition (KIP-405) the
                # offsets below the first local segment are in the remote tier, not in these files
                local = self.part.segments[0].base_offset if self.part.segments else 0
                if self.part.log_start_offset == 0 and e.last_offset >= local:
                    add("snapshot-log-mismatch", WARNING, str(path), None,
                        f"{self.part.name}: snapshot {offset} has producer {e.producer_id} (last offset "
                        f"{e.last_offset}) that the log before {offset} never mentions")
                continue
            r = producer_state_of(row)
            diffs = []
            if r.producer_epoch != e.producer_epoch:
                diffs.append(f"epoch {e.producer_epoch} vs log {r.producer_epoch}")
            if r.last_offset >= 0 and e.last_offset != r.last_offset:
                diffs.append(f"last offset {e.last_offset} vs log {r.last_offset}")
            log_first = r.current_txn_first_offset if r.current_txn_first_offset is not None else -1
            if e.current_txn_first_offset != log_first:
                diffs.append(f"open transaction from {e.current_txn_first_offset} vs log {log_first}")
            if diffs:
                add("snapshot-log-mismatch", WARNING, str(path), None,
                    f"{self.part.name}: snapshot {offset} disagrees with the log for producer "
                    f"{e.producer_id}: {'; '.join(diffs)}")

    # ------------------------------------------------------------------ one segment
    # Chunk size of the segment fold (tests make it small to cross chunk boundaries). Each chunk is
    # folded (every CRC read) and then replayed: at 4 MiB the replay finds the chunk's headers
    # still in the CPU cache (at 16 MiB it reads them from memory again: ~10 ms per 100 MB more,
    # measured), and the Python per chunk (~25 per 100 MB, ~13 us each) stays small: on the 2 GB
    # benchmark segment, 4 MiB took ~3% less CPU than 1 MiB (512 chunks, not 2,048), 8 MiB and
    # 16 MiB ~7% more (a 2 MiB L2, a 32 MiB L3 shared by 2 cores; process CPU time, best of 4).
    chunk_bytes = 4 << 20

    def _segment(self, segment: Segment, pending: list[tuple[int, Path, ProducerSnapshot]]
                 ) -> list[tuple[int, Path, ProducerSnapshot]]:
        """One segment, folded in compiled code chunk by chunk (``format/segment_fold.py``,
        ``CRC_FAILS_ONLY``: every batch's CRC checked, an event only for a batch whose CRC fails),
        each chunk then replayed (``_replay_chunk``): Python works per chunk, per bad batch and per
        index entry, not per batch. The problems come out in log order, per batch: snapshot
        comparisons before it, offset order, index entries at it, time index entries, CRC,
        control record (``RANK_*``); then the bytes that do not form a batch, the index entries
        no batch matches, the ``.txnindex``; the replay's findings at the end of the partition."""
        log = str(segment.log_path)
        index, time_index, time_zero_first = self._index_inputs(segment)
        indexes = SegmentIndexCheck(
            log_path=segment.log_path, add=self.add, index_path=segment.index_path, index=index,
            timeindex_path=segment.timeindex_path, time_index=time_index, timeindex_zero_first=time_zero_first,
            index_base=segment.base_offset)
        self.aborts = {}
        rows: list[BatchRow] = []
        found = len(self.findings)
        # every byte is read (the CRCs), forward only: on the pread path (a live broker) in windows of at
        # most read_window bytes, so memory does not grow with the segment
        # A small segment (most at 10,000 partitions) in one read, as open_windowed would read it, without
        # its context manager's steps. Tried only when the offset index has no entry: Kafka indexes a
        # batch once index.interval.bytes (4 KiB) were appended since the last entry, so a segment
        # without one is most likely small; a larger one would be opened once more for nothing (the
        # answers are the same either way).
        got = self.ahead.take(segment.log_path)  # the last segment's, read ahead when small (_read_ahead)
        small = (read_small_file(segment.log_path, allowed=self.small, got=got) if got is not None or not index[0]
                 else None)
        if small is not None:
            end, size, bad, first_bad, next_offset = self._walk(segment, log, small, None, pending, indexes, rows,
                                                                crc_ahead=_crc_ahead(len(small)))
        else:
            # mapped whole at once (MAP_POPULATE), unless the CRC walk ahead (_walk) maps it in on its core
            ahead = _crc_ahead(segment.size)
            with open_windowed(segment.log_path, window=self.read_window, populate=not ahead) as (buf, win):
                end, size, bad, first_bad, next_offset = self._walk(segment, log, buf, win, pending, indexes, rows,
                                                                    crc_ahead=ahead)
        # What LogSegment.recover keeps of these bytes: the fold framed them as iter_batches does and
        # checked every CRC (plan_load's _valid_prefix need not walk them again).
        if first_bad is not None:
            self.prefixes[log] = valid_prefix(first_bad.position, next_offset, first_bad, size)
        else:
            self.prefixes[log] = valid_prefix(end, next_offset, bad[1] if bad else None, size)
        if self.prev_last is not None:
            self.log_end_offset = max(self.log_end_offset, self.prev_last + 1)
        if rows:
            rows.sort(key=_row_key)
            for row in rows:
                self.add(*row[2:])
        if bad is not None:
            self.add("log-decode", ERROR, log, bad[0], _log_decode_message(size, bad[0], bad[1]))
        indexes.finish(size)
        if self.index_sizes:  # an index file runs on past its entries
            self._note_preallocated(segment, len(index[0]), len(time_index[0]), indexes.timeindex_padding)
        self._check_txn_index(segment)
        # in log order (a run replayed batch by batch reports each of its batches after the run's end)
        if len(self.findings) > found + 1:
            self.findings[found:] = sorted(self.findings[found:], key=_finding_position)
        return pending

    def _walk(self, segment: Segment, log: str, buf: Buffer, win: WindowedSnapshot | None,
              pending: list[tuple[int, Path, ProducerSnapshot]], indexes: SegmentIndexCheck, rows: list[BatchRow],
              crc_ahead: bool) -> tuple[int, int, tuple[int, DecodeError] | None, BatchHeader | None, int]:
        """:meth:`_segment`'s fold of the segment's bytes ``buf`` (``log``: its path's string): where the
        last whole batch ends, the size of ``buf``, the bytes that do not form a batch (where they begin, the
        error), the first batch whose CRC fails and the offset after the last batch before it (or before the
        end). ``crc_ahead``: :func:`_crc_ahead` said yes for this segment (its CRCs walked on another thread)."""
        bad: tuple[int, DecodeError] | None = None
        first_bad: BatchHeader | None = None  # the first batch whose CRC fails
        next_offset = segment.base_offset  # after the last batch before it (or before the end)
        if isinstance(buf, bytes) and segment is self.part.segments[-1]:
            self.files[log] = buf
        ahead = CrcAhead(buf) if crc_ahead and win is None and crc_ahead_compiled(buf) else None
        fold = SegmentFold(buf, crc_mode=CRC_FAILS_ONLY, breaks=[p[0] for p in pending],
                           seg_base=segment.base_offset, prev_last=self.prev_last, want_table=True,
                           max_bytes=self.chunk_bytes, window=win.prepare if win is not None else None, clean=ahead)
        lo = 0  # where the chunk begins (each ends where the next begins)
        try:
            for chunk in fold.chunks():
                assert chunk.table is not None
                table = chunk.table
                if first_bad is None:
                    if chunk.events:  # the fold's events are the batches whose CRC fails
                        first_bad = chunk.events[0].first
                        cols = array("q", table)
                        k = bisect_left(cols[0::TABLE_COLUMNS], first_bad.position)
                        if k:
                            next_offset = cols[(k - 1) * TABLE_COLUMNS + 2] + 1
                    elif table:
                        next_offset = _row_value(table, -2) + 1  # the last batch's last offset + 1
                for kind, pos, base, prev in chunk.order:
                    if kind == 0:
                        rows.append((pos, RANK_ORDER, "offset-order", ERROR, log, pos,
                                     f"batch at offset {base} is below its segment's base offset "
                                     f"{segment.base_offset}"))
                    if prev is not None and base <= prev:
                        rows.append((pos, RANK_ORDER, "offset-order", ERROR, log, pos,
                                     f"batch base offset {base} is not after the previous batch's last "
                                     f"offset {prev}"))
                rows += indexes.table(table, chunk.pos)
                self._replay_chunk(segment, log, buf, lo, chunk.pos, chunk.events, pending, rows)
                lo = chunk.pos
        except DecodeError as err:
            bad = (fold.pos, err)
        finally:
            self.prev_last = fold.prev_last
            if ahead is not None:
                ahead.close()  # stopped and waited for: the buffer is released after this
        return fold.pos, len(buf), bad, first_bad, next_offset

    def _replay_chunk(self, segment: Segment, log: str, buf: Buffer, lo: int, hi: int, events: list[FoldEvent],
                      pending: list[tuple[int, Path, ProducerSnapshot]], rows: list[BatchRow]) -> None:
        """The replay step for the chunk ``buf[lo:hi]``: producer state through its batches in compiled
        code where it is built (``ProducerStateFold.fold``, as ``storage/replay.py`` does), Python reading
        only the batches the fold leaves to it (a bad CRC, a control record not in the plain layout, magic 0/1) and
        where the log reaches a snapshot's offset (compared there: the fold stops at it). Bad CRCs
        come as rows from the chunk's fold events (every CRC was checked there). ``log``: the segment's
        path's string."""
        try:
            bad_crc = False
            for ev in events:
                if not ev.crc_ok:
                    h = ev.first
                    bad_crc = True
                    rows.append((h.position, RANK_CRC, "crc", ERROR, log, h.position,
                                 f"batch at offset {h.base_offset} (size {h.size}) has a bad CRC (stored {h.crc:#010x})"))
            replay = self.replay
            pos = lo
            while pos < hi:
                stop = pending[0][0] if pending else None
                # Every CRC of the chunk was checked by its fold: none again while all hold; where one failed,
                # every data batch again (the replay stops at each that fails).
                pos, _batches, _seen, reason = replay.fold(buf, pos, hi, stop=stop, verify_crc=bad_crc,
                                                           crcs_hold=not bad_crc, log_path=log)
                if reason == FOLD_END:
                    break
                if reason == FOLD_CHUNK:
                    continue
                h = read_batch_header(buf, pos, hi)
                if pending and h.base_offset >= pending[0][0]:
                    while pending and pending[0][0] <= h.base_offset:
                        off, path, snap = pending.pop(0)
                        self._compare_snapshot(off, path, snap, partial(_add_row, rows, h.position, RANK_SNAPSHOT))
                    continue  # fold on from this batch, up to the next snapshot
                pos += h.size
                if not crc_valid(buf, h) or h.producer_id < 0:
                    continue  # a bad CRC is a row already; no producer state (magic 0/1 included)
                if h.is_control:
                    if h.records_count == 0:
                        continue  # the cleaner emptied it
                    try:
                        control = read_control_record(buf, h)
                    except DecodeError as err:
                        rows.append((h.position, RANK_CONTROL, "control-record", ERROR, log, err.position,
                                     str(err.at(segment.log_path))))
                        continue
                    replay.append_end_txn_marker(h, control.type_id, control.coordinator_epoch, log)
                else:
                    replay.append(h, log)
            self._take_aborts()
        finally:
            self._take_findings()

    def _abort_without_data(self, segment: Segment, offset: int, producer_id: int) -> bool:
        """Is the batch at ``offset`` an ABORT marker of ``producer_id`` that the replay took (valid CRC,
        readable control record) but that ended no transaction it saw: its data lies before where
        the log starts. Asked only for a ``.txnindex`` entry no completed abort matches; the first
        question reads the segment's headers once (not through its index: the index may be what
        is wrong) and keeps its ABORT markers for the others."""
        markers = self._abort_markers.get(segment.log_path)
        if markers is None:
            markers = self._abort_markers[segment.log_path] = {}
            try:
                with open_windowed(segment.log_path, window=self.read_window) as (buf, win):
                    for h in _iter_headers(segment, buf, win):
                        if h.is_control and h.producer_id >= 0 and h.records_count != 0 and crc_valid(buf, h):
                            try:
                                if read_control_record(buf, h).type_id == ControlType.ABORT:
                                    markers[h.base_offset] = h.producer_id
                            except DecodeError:
                                continue
            except FileShrank:  # changed size while being read: never taken for damage
                raise
            except (DecodeError, MissingFile):
                pass  # the markers before the bad bytes are kept
        return markers.get(offset) == producer_id

    def _index_inputs(self, segment: Segment) -> tuple[OffsetIndexColumns, TimeIndexColumns, bool]:
        """The segment's offset index (offsets relative to its base offset, native arrays:
        ``read_offset_index_relative``; an all-zero first entry of a preallocated one left out:
        :func:`offset_index_padding`), its time index, and whether the time index is preallocated
        past an all-zero first entry (``SegmentIndexCheck``'s ``timeindex_zero_first``)."""
        index, time_index = self._read_index(segment), self._read_time_index(segment)
        sizes = self.index_sizes  # empty unless an index file is preallocated
        if not sizes:
            return index, time_index, False  # no index file runs on past its entries: both rules say no (size 0)
        base = segment.base_offset
        isize = sizes.get(segment.index_path, 0) if segment.index_path is not None else 0
        tsize = sizes.get(segment.timeindex_path, 0) if segment.timeindex_path is not None else 0
        if offset_index_padding(isize, (base + index[0][0], index[1][0]) if index[0] else None, base):
            index = _NO_INDEX  # the preallocation, not an entry
        zero_first = zero_first_entry_of_preallocated(
            tsize, TIME_ENTRY_SIZE, (time_index[0][0], time_index[1][0]) if time_index[0] else None, (0, base))
        return index, time_index, zero_first

    def _note_preallocated(self, segment: Segment, index_entries: int, time_entries: int,
                           time_padding: bool) -> None:
        """Keep the segment's preallocated index files (reported by ``verify_partition``, which knows
        whether the broker recovers the segment); ``time_padding``: the time index's all-zero first
        entry was the preallocation."""
        if not self.index_sizes:
            return  # no index file runs on past its entries
        for path, entries, entry_size in ((segment.index_path, index_entries, INDEX_ENTRY_SIZE),
                                          (segment.timeindex_path, time_entries - time_padding, TIME_ENTRY_SIZE)):
            size = self.index_sizes.get(path, 0) if path is not None else 0
            if path is not None and size > entries * entry_size:  # zero-filled past its entries
                self.preallocated.append(Preallocated(segment=segment, path=path, size=size, entries=entries,
                                                      entry_size=entry_size))

    def _preallocation(self, path: Path, buf: Buffer, end: int) -> None:
        """Keep the size of an index file that is zero-filled from the end of its entries ``end``
        (AbstractIndex's preallocation); one that is not runs on with other bytes (not kept)."""
        if len(buf) > end and zero_filled_from(path, end):
            self.index_sizes[path] = len(buf)

    def _read_index(self, segment: Segment) -> OffsetIndexColumns:
        path = segment.index_path
        if path is None:
            return _NO_INDEX
        keep = self.files if segment is self.part.segments[-1] else None
        got = self.ahead.take(path)
        if got is not None and not got[0]:  # read ahead empty (most at 10,000 partitions): what read_whole gives
            if keep is not None:
                keep[str(path)] = b""
            return _NO_INDEX
        try:
            return read_whole(path, self._index_columns, path, keep=keep, allowed=self.small, got=got)
        except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
            raise
        except KafkaTxError as err:
            self.add("index-decode", ERROR, str(path), getattr(err, "position", None), str(err))
            return _NO_INDEX

    def _index_columns(self, buf: Buffer, path: Path) -> OffsetIndexColumns:
        if not buf:
            return _NO_INDEX  # an empty file: no entry, nothing to decode
        entries = read_offset_index_relative(buf)  # offsets relative to the base: SegmentIndexCheck(index_base)
        self._preallocation(path, buf, len(entries[0]) * INDEX_ENTRY_SIZE)
        return entries

    def _read_time_index(self, segment: Segment) -> TimeIndexColumns:
        path = segment.timeindex_path
        if path is None:
            return _NO_TIME_INDEX
        try:
            return read_whole(path, self._time_index_columns, path, segment.base_offset, allowed=self.small,
                              got=self.ahead.take(path))
        except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
            raise
        except KafkaTxError as err:
            self.add("timeindex-decode", ERROR, str(path), getattr(err, "position", None), str(err))
            return _NO_TIME_INDEX

    def _time_index_columns(self, buf: Buffer, path: Path, base_offset: int) -> TimeIndexColumns:
        if not buf:
            return _NO_TIME_INDEX  # an empty file: no entry, nothing to decode
        entries = read_time_index_columns(buf, base_offset)
        self._preallocation(path, buf, len(entries[0]) * TIME_ENTRY_SIZE)
        return entries

    def _check_txn_index(self, segment: Segment,
                         abort_without_data: Callable[[Segment, int, int], bool] | None = None) -> None:
        """The ``.txnindex`` against the ABORT markers the replay completed in this segment
        (``self.aborts``); ``abort_without_data(segment, offset, producer id)`` says whether an entry
        no completed abort matches is an ABORT marker whose data lies before the log start
        (default :meth:`_abort_without_data`)."""
        path = segment.txnindex_path
        if path is None and not self.aborts:
            return  # no entry and no abort: what _txn_index_is_the_aborts says of them, without its steps
        if abort_without_data is None:
            abort_without_data = self._abort_without_data
        cols = _NO_TXN_INDEX
        if path is not None:
            try:
                cols = read_whole(path, read_txn_index_columns, allowed=self.small)
            except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
                raise
            except KafkaTxError as err:
                self.add("txnindex-decode", ERROR, str(path), getattr(err, "position", None), str(err))
        if _txn_index_is_the_aborts(cols, self.aborts):
            return  # one entry per completed abort, each as the log gives it: no row (the loop's verdict)
        where = str(path) if path is not None else str(segment.log_path.with_suffix(".txnindex"))
        prev_last = None
        matched: set[int] = set()
        for i, (producer_id, first_offset, last_offset, lso) in enumerate(zip(*cols, strict=True)):
            pos = i * TXN_ENTRY_SIZE
            if prev_last is not None and last_offset <= prev_last:
                self.add("txnindex-order", ERROR, where, pos,
                         f"entry {i} last offset {last_offset} does not increase (previous {prev_last})")
            prev_last = last_offset
            done = self.aborts.get(last_offset)
            if done is None:
                if abort_without_data(segment, last_offset, producer_id):
                    continue  # its data lies before where we could replay from: cannot check more
                self.add("txnindex-no-marker", ERROR, where, pos,
                         f"entry {i} (producer {producer_id}, offsets {first_offset}..{last_offset}) matches "
                         f"no ABORT marker of that producer in {segment.log_path.name}")
                continue
            if done.producer_id != producer_id:
                self.add("txnindex-no-marker", ERROR, where, pos,
                         f"entry {i} names producer {producer_id} but the ABORT marker at {last_offset} is "
                         f"producer {done.producer_id}'s")
                continue
            matched.add(last_offset)
            if done.first_offset is not None and done.first_offset != first_offset:
                self.add("txnindex-first-offset", ERROR, where, pos,
                         f"entry {i} (producer {producer_id}) starts at {first_offset} but the aborted "
                         f"transaction began at offset {done.first_offset}")
            if lso > last_offset + 1 or lso < 0:
                self.add("txnindex-lso", ERROR, where, pos,
                         f"entry {i} last stable offset {lso} is impossible for a marker at {last_offset}")
            elif lso != done.last_stable_offset:
                self.add("txnindex-lso", WARNING, where, pos,
                         f"entry {i} last stable offset {lso}; the log gives "
                         f"{done.last_stable_offset} (ProducerStateManager.lastStableOffset)")
        for marker, done in sorted(self.aborts.items()):
            if marker not in matched:
                self.add("txnindex-missing", ERROR, where, None,
                         f"ABORT marker at offset {marker} (producer {done.producer_id}, data from "
                         f"{done.first_offset}) has no .txnindex entry: read_committed consumers will see the "
                         f"aborted records")
