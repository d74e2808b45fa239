"""A segment's batches as the producer-state events a fold needs, in one call per chunk.

The replays (``storage/replay.py``, ``checks/verify.py``) need, per batch, only: its header, whether
its CRC holds, and for a control batch its type and coordinator epoch. Asking for that one
batch at a time costs a Python call (and a ``BatchHeader``) per batch; :func:`iter_fold`
hands out *events* instead, each standing for one batch or a *run* of batches:

* a run: consecutive data batches of one producer with one epoch and one transactional flag,
  no control batch of that producer and no *break* offset between them (non-idempotent
  batches, producer id -1, are one run whatever their flags). Only its first and last header
  are materialised: the batches between set nothing the last one does not set again
  (``txn.events.BatchEvent`` says why the fold may skip them). A run sits in the event list at
  its first batch;
* a single: a control batch of an idempotent producer (its CRC always checked, its control
  record read when the CRC holds), or a batch whose CRC was checked (``crc_mode``) and does
  not hold.

``breaks`` are offsets no run may span (where the caller inspects state between batches:
the replay start, the offsets where the broker reloads a snapshot, verify's snapshot
offsets). Runs also restart at every chunk (``max_bytes``) and around batches the compiled
fast path leaves to Python (magic 0/1), which changes no fold's result.

``crc_mode``: 0 checks control batches of idempotent producers only, 1 also data batches,
2 every batch; :data:`CRC_FAILS_ONLY` (3) every batch, and the events are only the batches
whose CRC fails (``verify``'s pass: it replays the producer state with its own fold and needs
from this one the CRCs, the table and the order problems, not a run or marker per producer);
:data:`TABLE_ONLY` (4) no CRC and no event, only the table and the order problems
(``dump-index --verify``: an index checked against the batches it points at).
With ``want_table`` each chunk also carries ``(position, base offset, last offset, max
timestamp)`` of every batch as native int64 rows (:data:`TABLE_COLUMNS` values each, the
bytes of an ``array('q')``, in a ``bytearray``: the compiled fold writes it in place), for
verify's index checks (:func:`bisect_many` looks values up in a column).
Offsets that go back (``base < seg_base``, or ``base <= `` the previous batch's last offset)
are reported per chunk in ``order``.

``kafkatx/format/_fold.c`` (``fold_segment``) walks the clean magic-2 batches of a chunk
in C; the pure-Python loop below does the very same (``KAFKATX_PURE_PYTHON=1``), and
``tests/format/test_segment_fold.py`` holds the two to each other.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, islice, repeat
from operator import lt
from typing import Any, NamedTuple

import kafkatx.format.record_batch as record_batch
from kafkatx.format import compiled
from kafkatx.format._primitives import Buffer
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    crc_valid,
    frame_batch,
    read_batch_header,
)

CHUNK_BYTES = 16 << 20  # bytes folded per call: bounds the events (and table) one chunk holds
TABLE_COLUMNS = 4  # a table row: position, base offset, last offset, max timestamp
CRC_FAILS_ONLY = 3  # crc_mode: every CRC checked, an event only for each batch whose CRC fails
TABLE_ONLY = 4  # crc_mode: no CRC checked, no event: the table and the order problems only

_END_TXN = (ControlType.ABORT, ControlType.COMMIT)


class FoldEvent(NamedTuple):
    first: BatchHeader
    last: BatchHeader | None  # a run of more than one batch: its last batch
    batches: int  # how many batches it stands for
    crc_ok: bool  # False only for a batch whose CRC was checked and does not hold
    control_type: int | None  # a control batch whose record the fold read (parsed=True)
    coordinator_epoch: int | None  # ABORT/COMMIT markers
    parsed: bool  # False for a control batch whose record is left to read_control_record


try:  # the compiled fold (kafkatx/format/_fold.c): it makes BatchHeaders and FoldEvents itself
    from kafkatx.format import _fold
except ImportError:  # pragma: no cover - depends on the build
    _fold = None  # type: ignore[assignment]
_fold = compiled.bind(__name__, "_fold", _fold, lambda m: m.setup(BatchHeader, FoldEvent))  # type: ignore[assignment]


class FoldChunk(NamedTuple):
    events: list[FoldEvent]
    pos: int  # where the chunk stopped: ``end``, or a batch the fast loop leaves to the caller
    batches: int
    prev_last: int | None  # the highest last offset so far (carried into the next chunk)
    order: list[tuple[int, int, int, int | None]]  # (0 below seg base | 1 not after prev, position, base, prev)
    table: bytearray | None  # TABLE_COLUMNS native int64 per batch


def _plain_control(buf: Buffer, pos: int, size: int) -> tuple[int, int | None] | None:
    """``(type, coordinator epoch)`` of an uncompressed control batch's first record in Kafka's plain
    layout, else None (the caller then uses ``read_control_record``, which reports what is unusual)."""
    from kafkatx.format.varint import read_zigzag

    try:
        d = bytes(buf[pos + HEADER_SIZE:pos + size])
        n = len(d)
        length, p = read_zigzag(d, 0, 5)
        if length < 6 or p + length > n:
            return None
        rec_end = p + length
        p += 1
        _, p = read_zigzag(d[:rec_end], p, 10)
        _, p = read_zigzag(d[:rec_end], p, 5)
        klen, p = read_zigzag(d[:rec_end], p, 5)
        if klen < 4 or p + klen > rec_end:
            return None
        key = d[p:p + klen]
        p += klen
        vlen, p = read_zigzag(d[:rec_end], p, 5)
        if vlen < -1 or p + max(vlen, 0) > rec_end:
            return None
        value = d[p:p + max(vlen, 0)]
        p += max(vlen, 0)
        nh, p = read_zigzag(d[:rec_end], p, 5)
    except Exception:  # noqa: BLE001 - any irregularity goes to read_control_record
        return None
    if nh != 0 or p != rec_end:
        return None
    version, type_id = struct.unpack_from(">hh", key, 0)
    if version < 0:
        return None
    if type_id in _END_TXN:
        if vlen < 6:
            return None
        vv, epoch = struct.unpack_from(">hi", value, 0)
        if vv < 0:
            return None
        return type_id, epoch
    return type_id, None


def plain_control(buf: Buffer, h: BatchHeader) -> tuple[int, int | None] | None:
    """``(type, coordinator epoch)`` of the control batch ``h`` when it is uncompressed, has records and
    its first record has Kafka's plain layout (what ``fold_segment`` reads in C), else None."""
    if h.records_count < 1 or h.attributes & COMPRESSION_CODEC_MASK:
        return None
    return _plain_control(buf, h.position, h.batch_length + LOG_OVERHEAD)


def fold_chunk_py(buf: Buffer, start: int, end: int, crc_mode: int, breaks: Sequence[int], seg_base: int,
                  prev_last: int | None, want_table: bool, max_bytes: int, clean_until: int = 0) -> FoldChunk:
    """The pure-Python twin of ``_fold.fold_segment``: same events, same stopping point. ``clean_until``
    (``CRC_FAILS_ONLY``): a batch ending at or before it had its CRC checked by :func:`crc_clean_walk`,
    which held: not computed again."""
    events: list[Any] = []  # FoldEvent, or [first, last, count, key, epoch, txn] while a run is open
    open_runs: dict[int, list[Any]] = {}
    order: list[tuple[int, int, int, int | None]] = []
    table = array("q") if want_table else None
    bi = 0
    pos = start
    scanned = 0
    batches = 0
    nbreaks = len(breaks)
    while pos < end and scanned < max_bytes:
        h = frame_batch(buf, pos, end)
        if h is None:
            break
        size = h.size
        base, last = h.base_offset, h.last_offset
        batches += 1
        if base < seg_base or (prev_last is not None and base <= prev_last):
            order.append((0 if base < seg_base else 1, pos, base, prev_last))
        prev_last = last if prev_last is None or last > prev_last else prev_last
        if table is not None:
            table.extend((pos, base, last, h.max_timestamp))
        while bi < nbreaks and base >= breaks[bi]:
            bi += 1
            open_runs = {}
        if crc_mode == TABLE_ONLY:
            pos += size
            scanned += size
            continue
        pid = h.producer_id
        is_control = h.is_control
        single = False
        crc_ok = True
        ctype: int | None = None
        cepoch: int | None = None
        parsed = False
        if crc_mode == CRC_FAILS_ONLY:
            if pos + size <= clean_until or crc_valid(buf, h):
                pos += size
                scanned += size
                continue
            single = True
            crc_ok = False
        elif is_control and pid >= 0:
            single = True
            crc_ok = crc_valid(buf, h)
            if crc_ok:
                got = plain_control(buf, h)
                if got is not None:
                    ctype, cepoch = got
                    parsed = True
        elif crc_mode >= 2 or (crc_mode == 1 and not is_control):
            crc_ok = crc_valid(buf, h)
            single = not crc_ok
        key = pid if pid >= 0 else -1
        if not single:
            run = open_runs.get(key)
            if run is not None and (key < 0 or (run[4] == h.producer_epoch and run[5] == h.is_transactional)):
                run[1] = h
                run[2] += 1
                pos += size
                scanned += size
                continue
            run = [h, h, 1, key, h.producer_epoch, h.is_transactional]
            open_runs[key] = run
            events.append(run)
        else:
            open_runs.pop(key, None)
            events.append(FoldEvent(h, None, 1, crc_ok, ctype, cepoch, parsed))
        pos += size
        scanned += size
    out = [e if isinstance(e, FoldEvent) else FoldEvent(e[0], e[1] if e[2] > 1 else None, e[2], True, None, None,
                                                         False)
           for e in events]
    return FoldChunk(out, pos, batches, prev_last, order, bytearray(table) if table is not None else None)


def _fold_chunk(buf: Buffer, start: int, end: int, crc_mode: int, breaks: Sequence[int], seg_base: int,
                prev_last: int | None, want_table: bool, max_bytes: int, clean_until: int = 0) -> FoldChunk:
    sp = _fold
    if sp is not None and record_batch._direct(buf):
        # (events, pos, batches, prev_last, order, table): the events FoldEvents (setup's event class)
        return FoldChunk._make(sp.fold_segment(buf, start, end, crc_mode, breaks, seg_base, prev_last, want_table,
                                               max_bytes, clean_until))
    return fold_chunk_py(buf, start, end, crc_mode, breaks, seg_base, prev_last, want_table, max_bytes, clean_until)


def crc_clean_walk_py(buf: Buffer, start: int, end: int, cell: array[int]) -> int:
    """The pure-Python twin of ``_fold.crc_clean_walk``: from ``start``, the whole magic-2 batches (framed as
    :func:`fold_chunk_py` frames them, within ``end``) whose CRC holds; where the walk stopped. ``cell[0]``:
    where the clean batches end so far (stored after each); the walk stops early once ``cell[1]`` is set."""
    pos = start
    while pos < end and not cell[1]:
        h = frame_batch(buf, pos, end)
        if h is None or not crc_valid(buf, h):
            break
        pos += h.size
        cell[0] = pos
    return pos


def crc_clean_walk(buf: Buffer, start: int, end: int, cell: array[int]) -> int:
    """:func:`crc_clean_walk_py`, compiled when the C extension is built (the GIL released while it walks)."""
    sp = _fold
    if sp is not None and record_batch._direct(buf):
        return sp.crc_clean_walk(buf, start, end, cell)
    return crc_clean_walk_py(buf, start, end, cell)


def crc_ahead_compiled(buf: Buffer | None = None) -> bool:
    """Whether :class:`CrcAhead` would walk ``buf`` (None: a mapped segment) in compiled code, the GIL
    released (else it only competes with the fold for the GIL)."""
    return _fold is not None and (buf is None or record_batch._direct(buf))


class CrcAhead:
    """A segment's CRCs checked ahead of its fold, on another thread (:func:`crc_clean_walk`, one call, the GIL
    released): :attr:`clean` is where the batches from ``start`` whose CRC holds end so far (it only grows).
    :class:`SegmentFold` (``clean=``) leaves the CRCs before it alone, so verify's fold and this walk share
    two cores with the same answer: every batch's CRC is still checked once (a batch whose CRC fails stops
    the walk, and the fold checks it and what follows). :meth:`close` stops the walk and waits for it, before
    the buffer is released. A context manager."""

    def __init__(self, buf: Buffer, start: int = 0, end: int | None = None) -> None:
        import threading

        self._cell = array("q", (start, 0))  # where the clean batches end so far; the stop flag
        self._thread = threading.Thread(target=crc_clean_walk, name="kafkatx-crc-ahead", daemon=True,
                                        args=(buf, start, len(buf) if end is None else end, self._cell))
        self._thread.start()

    @property
    def clean(self) -> int:
        return self._cell[0]

    def close(self) -> None:
        self._cell[1] = 1
        self._thread.join()

    def __enter__(self) -> CrcAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SegmentFold:
    """Iterates one buffer's events chunk by chunk (:meth:`chunks`); state carried between chunks.

    After iteration, :attr:`pos` is where the last whole batch ends, :attr:`batches` counts the
    batches seen and :attr:`prev_last` is the highest last offset. Bytes that do not form a batch
    raise :class:`~kafkatx.errors.DecodeError` (from ``read_batch_header``) once every event
    before them was handed out, with :attr:`pos` at their start.
    """

    def __init__(self, buf: Buffer, start: int = 0, end: int | None = None, *, crc_mode: int = 0,
                 breaks: Sequence[int] = (), seg_base: int = -(2**63), prev_last: int | None = None,
                 want_table: bool = False, max_bytes: int = CHUNK_BYTES,
                 window: Callable[[int, int], int] | None = None, clean: CrcAhead | None = None) -> None:
        """``window(pos, ahead)``: called before each chunk with its start; makes ``buf[pos:pos+ahead]``
        and the whole batch at ``pos`` readable and returns the end of what is readable (a windowed
        pread read, ``log.segment.WindowedSnapshot.prepare``); a chunk never reads past it. ``clean``:
        the CRCs checked ahead from this fold's start (:class:`CrcAhead`; ``CRC_FAILS_ONLY``)."""
        self.window = window
        self.clean = clean
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else min(end, len(buf))
        self.crc_mode = crc_mode
        self.breaks = sorted(breaks)
        self.seg_base = seg_base
        self.prev_last = prev_last
        self.want_table = want_table
        self.max_bytes = max_bytes
        self.batches = 0

    def chunks(self) -> Iterator[FoldChunk]:
        buf, full = self.buf, self.end
        while self.pos < full:
            end = full if self.window is None else min(full, self.window(self.pos, self.max_bytes))
            chunk = _fold_chunk(buf, self.pos, end, self.crc_mode, self.breaks, self.seg_base, self.prev_last,
                                self.want_table, self.max_bytes, self.clean.clean if self.clean is not None else 0)
            self.pos, self.prev_last = chunk.pos, chunk.prev_last
            self.batches += chunk.batches
            if chunk.batches:
                yield chunk
            if self.pos >= end or chunk.batches:
                continue
            # A batch the fast loop does not take (magic 0/1, or bytes that do not form a batch).
            yield self._one(read_batch_header(buf, self.pos, end))

    def _one(self, h: BatchHeader) -> FoldChunk:
        pos = h.position
        base, last = h.base_offset, h.last_offset
        order: list[tuple[int, int, int, int | None]] = []
        prev = self.prev_last
        if base < self.seg_base or (prev is not None and base <= prev):
            order.append((0 if base < self.seg_base else 1, pos, base, prev))
        self.prev_last = last if prev is None or last > prev else prev
        self.pos = pos + h.batch_length + LOG_OVERHEAD
        self.batches += 1
        table = bytearray(array("q", (pos, base, last, h.max_timestamp))) if self.want_table else None
        if self.crc_mode == TABLE_ONLY:
            return FoldChunk([], self.pos, 1, self.prev_last, order, table)
        crc_ok = True
        if (h.is_control and h.producer_id >= 0) or self.crc_mode >= 2 or (self.crc_mode == 1
                                                                            and not h.is_control):
            crc_ok = crc_valid(self.buf, h)
        events = [] if crc_ok and self.crc_mode == CRC_FAILS_ONLY else [FoldEvent(h, None, 1, crc_ok, None, None,
                                                                                  False)]
        return FoldChunk(events, self.pos, 1, self.prev_last, order, table)


def bisect_many(a: array[int], xs: Sequence[int], exact: bool = False) -> list[int]:
    """``[bisect_left(a, x) for x in xs]`` over ``a``, an ``array('q')`` in non-decreasing order (a column
    of a chunk's table), in one compiled call when the C extension is built (``_fold.bisect_many``);
    ``exact``: ``-k - 1`` where ``a[k]`` is not ``x`` (``x`` is not in ``a``)."""
    sp = _fold
    if sp is not None:
        got: list[int] = sp.bisect_many(a, xs, exact)
        return got
    ks = list(map(bisect_left, repeat(a), xs))
    if exact:
        n = len(a)
        ks = [k if k < n and a[k] == x else -k - 1 for k, x in zip(ks, xs, strict=True)]
    return ks


def increasing(values: Sequence[int]) -> bool:
    """Every value strictly above the one before (an index file's offsets and positions), in one
    compiled call when the C extension is built (``_fold.increasing``: no Python call per pair)."""
    sp = _fold
    if sp is not None:
        got: bool = sp.increasing(values)
        return got
    return all(map(lt, values, islice(values, 1, None)))


def entries_at_batches(table: bytes | bytearray | array[int], positions: Sequence[int], offsets: Sequence[int],
                       lo: int, hi: int, base: int = 0) -> bool:
    """Does every index entry ``j`` in ``[lo, hi)`` (``positions[j]``, offset ``base + offsets[j]``;
    positions in increasing order) name the position where a batch of ``table`` (a chunk's table)
    starts, one whose base offset is at or below the entry's offset? In one compiled call when the C
    extension is built (``_fold.entries_at_batches``, which reads native int arrays in place):
    verify's ``SegmentIndexCheck.table`` asks it per chunk and goes through the entries one by one
    (its rows) only when the answer is no."""
    sp = _fold
    if sp is not None and -(2**63) <= base < 2**63:
        got: bool = sp.entries_at_batches(table, positions, offsets, lo, hi, base)
        return got
    if hi <= lo:
        return True
    rows = table if isinstance(table, array) else array("q", table)
    ks = bisect_many(rows[0::TABLE_COLUMNS], positions[lo:hi], exact=True)
    bases = rows[1::TABLE_COLUMNS]
    entry_offsets = map(base.__add__, offsets[lo:hi])
    return not ks or (min(ks) >= 0 and not any(map(lt, entry_offsets, map(bases.__getitem__, ks))))


def time_entries_at_batches(table: bytes | bytearray | array[int], offsets: Sequence[int], stamps: Sequence[int],
                            lo: int) -> tuple[int, bool]:
    """The time index entries a chunk's batches reach and whether each sits where Kafka put it.

    ``offsets``/``stamps``: time index entries by offset (non-decreasing from ``lo``); ``table``: a
    chunk's table. Returns ``(hi, holds)``: ``hi`` is ``bisect_right(offsets, highest last offset of
    the table, lo)``, and ``holds`` whether every entry ``j`` in ``[lo, hi)`` is at the batch where
    ``TimeIndex.maybeAppend`` (called by ``LogSegment.append`` with ``maxTimestampSoFar`` and the offset
    of the batch that set it) put it: the first batch whose last offset, or one before it, reaches
    ``offsets[j]`` (``bisect_left`` over the running maximum: the order ``maybeAppend`` sees when the
    log's offsets only move forward), a batch holding the offset (base offset at or below it) whose max
    timestamp is ``stamps[j]``. In one compiled call when the C extension is built
    (``_fold.time_entries_at_batches``): verify's ``SegmentIndexCheck.table`` asks it per chunk and goes
    through the entries one by one (its rows) only when the answer is no."""
    sp = _fold
    if sp is not None:
        got: tuple[int, bool] = sp.time_entries_at_batches(table, offsets, stamps, lo)
        return got
    if len(offsets) != len(stamps):
        raise ValueError("time_entries_at_batches(): offsets and stamps differ in length")
    if not 0 <= lo <= len(offsets):
        raise ValueError("time_entries_at_batches(): bad entry range")
    rows = table if isinstance(table, array) else array("q", table)
    if not rows:
        return lo, True
    lasts = rows[2::TABLE_COLUMNS]
    hi = bisect_right(offsets, max(lasts), lo)
    reach = array("q", accumulate(lasts, max))
    bases, maxts = rows[1::TABLE_COLUMNS], rows[3::TABLE_COLUMNS]
    n = len(reach)
    for off, ts in zip(offsets[lo:hi], stamps[lo:hi], strict=True):
        k = bisect_left(reach, off)
        if k >= n or off < bases[k] or maxts[k] != ts:
            return hi, False
    return hi, True


def iter_fold(buf: Buffer, start: int = 0, end: int | None = None, **kwargs: Any) -> Iterator[FoldEvent]:
    """The events of ``buf[start:end]`` (see the module docstring); :class:`SegmentFold` for the state."""
    for chunk in SegmentFold(buf, start, end, **kwargs).chunks():
        yield from chunk.events


__all__ = ["CHUNK_BYTES", "CRC_FAILS_ONLY", "TABLE_COLUMNS", "TABLE_ONLY", "CrcAhead", "FoldChunk", "FoldEvent",
           "SegmentFold", "bisect_many", "crc_ahead_compiled", "crc_clean_walk", "crc_clean_walk_py",
           "entries_at_batches", "fold_chunk_py", "increasing", "iter_fold", "plain_control", "time_entries_at_batches"]
