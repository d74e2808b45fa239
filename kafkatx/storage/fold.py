"""The producer-state fold of a segment's bytes: compiled (``_replay.replay_fold``,
kafkatx/storage/_replay.c) or its Python twin.

:func:`fold_batches` applies a run of plain batches to a :class:`~kafkatx.storage.producer_state.ProducerReplay`
in one call and stops at the first batch the replay loop must see (a finding, a magic 0/1 batch, a
control record not in the plain layout, a failed CRC, a snapshot reload offset). :class:`FileFold` drives
it over a partition's files for ``storage/replay.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import kafkatx.format.record_batch as record_batch
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_BATCH_SIZE,
    BatchHeader,
    crc_valid,
    read_batch_header,
)
from kafkatx.format.segment_fold import SegmentFold, plain_control
from kafkatx.rows import Progress
from kafkatx.storage.events import BatchEvent, FileEvents, _batch_event, _range_events
from kafkatx.storage.partition import seek_position
from kafkatx.storage.producer_state import (
    NO_COORDINATOR_EPOCH,
    NO_PRODUCER_EPOCH,
    CompletedTxn,
    ProducerReplay,
    _Entry,
    begins_txn,
    check_end_txn_marker,
    check_producer_epoch,
    check_txn_state,
    ongoing_in_order,
)
from kafkatx.storage.segment import Buffer, open_windowed

# fold_batches: why it stopped (see its docstring), and the bytes it folds per call at most.
FOLD_END = 0
FOLD_CHUNK = 1
FOLD_SLOW = 2
FOLD_BYTES = 64 << 20
_LENGTH = struct.Struct(">i")
_BASE_DELTA = struct.Struct(">q15xi")  # base offset (byte 0), last offset delta (byte 23)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def fold_batches(replay: ProducerReplay, buf: Buffer, pos: int, hi: int, *, start: int = -(2**63),
                 end: int = 2**63 - 1, stop: int | None = None, verify_crc: bool = False, log_path: str = "",
                 max_bytes: int | None = None, crcs_hold: bool = False) -> tuple[int, int, int, int]:
    """Apply the batches of ``buf[pos:hi]`` (one segment's bytes) as the replay loop would.

    Returns ``(pos, batches, seen, reason)``: where it stopped, how many batches it applied
    (a batch below ``start`` -- base and last offset both below it -- or at or past ``end``
    is skipped and not counted), how many it passed at or past ``start``, and why it stopped:
    :data:`FOLD_END` (``hi``), :data:`FOLD_CHUNK` (``max_bytes``, default :data:`FOLD_BYTES`,
    folded: call again) or
    :data:`FOLD_SLOW`: the batch at ``pos`` is left to the caller, unapplied, because it is
    not a plain magic-2 batch (magic 0/1, or bytes that do not frame: ``read_batch_header``
    says what), its checked CRC fails (``verify_crc`` for data batches; control batches of
    idempotent producers always), its control record is not in Kafka's plain layout
    (``read_control_record``), it would be a finding (a producer epoch going back, a
    non-transactional batch in an open transaction, a stale marker), it begins a transaction
    below the first offset of the last one in ``replay.ongoing`` (offsets that go back:
    ``ProducerReplay.begin_txn`` re-sorts), or its base offset is at or past ``stop`` (where the caller looks at the state between batches: a snapshot
    reload, a snapshot to compare with). A control batch at or past ``end`` whose record
    is not plain is left to the caller too (the event source reads it).
    ``crcs_hold``: the caller checked the CRC of every batch of ``buf[pos:hi]`` and each holds
    (``verify``'s segment fold did): none is computed again, as if each were checked and held.
    ``on_completed`` is called (and ``completed`` extended) for the markers folded, in
    order, before this returns. The compiled ``_replay.replay_fold`` and
    :func:`_fold_py` stop at the same batches with the same state.
    """
    if max_bytes is None:
        max_bytes = FOLD_BYTES
    sp = _replay
    # offsets past int64 (a log ending at 2^63-1 has its end at 2^63): Python's ints, not the C longs
    if (sp is not None and record_batch._direct(buf) and start >= _INT64_MIN and end <= _INT64_MAX
            and (stop is None or _INT64_MIN <= stop <= _INT64_MAX)):
        want = replay.keep or replay.on_completed is not None
        sink: list[CompletedTxn] | None = [] if want else None
        got: tuple[int, int, int, int] = sp.replay_fold(
            buf, pos, hi, replay.producers, start, end, stop, verify_crc, replay.spans, replay.span_floor, sink,
            replay.partition.topic, replay.partition.partition, max_bytes, replay.ongoing,
            replay.keep_aborts_only and replay.on_completed is None, crcs_hold)
        if sink:
            if replay.keep:
                replay.completed.extend(sink)
            if replay.on_completed is not None:
                for done in sink:
                    replay.on_completed(done)
        return got
    return _fold_py(replay, buf, pos, hi, start, end, stop, verify_crc, log_path, max_bytes, crcs_hold)


def _fold_py(replay: ProducerReplay, buf: Buffer, pos: int, hi: int, start: int, end: int, stop: int | None,
             verify_crc: bool, log_path: str, max_bytes: int, crcs_hold: bool = False) -> tuple[int, int, int, int]:
    """The pure-Python twin of ``_replay.replay_fold`` (see :func:`fold_batches`)."""

    def crc_ok(h: BatchHeader) -> bool:
        return crcs_hold or crc_valid(buf, h)

    producers = replay.producers
    ongoing = replay.ongoing
    batches = seen = scanned = 0
    while pos < hi:
        if scanned >= max_bytes:
            return pos, batches, seen, FOLD_CHUNK
        left = hi - pos
        if left < HEADER_SIZE or buf[pos + 16] != 2:
            return pos, batches, seen, FOLD_SLOW
        (length,) = _LENGTH.unpack_from(buf, pos + 8)
        if length < HEADER_SIZE - LOG_OVERHEAD or length > MAX_BATCH_SIZE or length + LOG_OVERHEAD > left:
            return pos, batches, seen, FOLD_SLOW
        size = length + LOG_OVERHEAD
        if record_batch.last_offset_overflows(*_BASE_DELTA.unpack_from(buf, pos)):
            # v2_batch_size's rule in C: a last offset outside int64 (LogSegment.recover rejects the batch)
            # is left to the caller, whose read_batch_header raises the DecodeError
            return pos, batches, seen, FOLD_SLOW
        h = read_batch_header(buf, pos, hi)
        base = h.base_offset
        pid = h.producer_id
        if base >= end:
            if (h.is_control and pid >= 0 and h.records_count != 0 and crc_ok(h)
                    and plain_control(buf, h) is None):
                return pos, batches, seen, FOLD_SLOW
            seen += 1
        elif stop is not None and base >= stop:
            return pos, batches, seen, FOLD_SLOW
        elif base < start and h.last_offset < start:
            pass
        else:
            if verify_crc and not h.is_control and not crc_ok(h):
                return pos, batches, seen, FOLD_SLOW
            if pid >= 0 and h.is_control:
                if not crc_ok(h):
                    return pos, batches, seen, FOLD_SLOW
                if h.records_count != 0:
                    control = plain_control(buf, h)
                    if control is None:
                        return pos, batches, seen, FOLD_SLOW
                    type_id, coordinator_epoch = control
                    if type_id in (ControlType.COMMIT, ControlType.ABORT):
                        entry = producers.get(pid)
                        epoch, coord = ((entry.epoch, entry.coord_epoch) if entry is not None
                                        else (NO_PRODUCER_EPOCH, NO_COORDINATOR_EPOCH))
                        assert coordinator_epoch is not None
                        if not check_end_txn_marker(h.producer_epoch, coordinator_epoch, epoch, coord):
                            return pos, batches, seen, FOLD_SLOW  # a stale marker: its finding is built in Python
                        replay.marker(log_path, h, type_id, coordinator_epoch)
            elif pid >= 0:
                entry = producers.get(pid)
                epoch, txn_open = ((entry.epoch, entry.txn_first is not None) if entry is not None
                                   else (NO_PRODUCER_EPOCH, False))
                txn = h.is_transactional
                if not check_producer_epoch(h.producer_epoch, epoch) or not check_txn_state(txn_open, txn):
                    return pos, batches, seen, FOLD_SLOW  # a producer-epoch / non-transactional-in-txn finding
                if ongoing is not None and begins_txn(txn_open, txn) and not ongoing_in_order(ongoing, base):
                    return pos, batches, seen, FOLD_SLOW  # offsets that go back: begin_txn re-sorts
                replay.data(h)
            batches += 1
            seen += 1
        pos += size
        scanned += size
    return pos, batches, seen, FOLD_END


class FileFold:
    """The files' batches from ``start`` folded by :func:`fold_batches`, segment by segment;
    :meth:`events` yields only the batches that need the replay loop of ``_replay``.

    The fold stops at every batch it leaves to Python (a finding to build, a magic 0/1 batch,
    a control record not in the plain layout, a CRC that fails) and at the next snapshot
    reload offset (the loop pops it and expires producers there, then applies the batch); the
    bytes a recovery cut truncates go through :func:`_range_events` unchanged. Progress is
    reported per file, for every file that had a batch at or past ``start``, when the next file
    starts or the replay ends (as the event loop reports it).
    """

    def __init__(self, source: FileEvents, ctx: ProducerReplay, start: int, end: int, reloads: list[int],
                 verify_crc: bool, progress: Progress | None) -> None:
        self.source = source
        self.ctx = ctx
        self.start = start
        self.end = end
        self.reloads = reloads  # shared with the loop, which pops the reloads it passes
        self.verify_crc = verify_crc
        self.progress = progress
        self.batches = 0  # batches the fold applied (the loop counts the events it gets)
        self.pending: int | None = None  # size of the file being read, once it had a batch at or past start

    def events(self) -> Iterator[BatchEvent]:
        partition, start, ctx = self.source.partition, self.start, self.ctx
        if not partition.segments:
            return
        cuts = self.source.cuts
        stops = sorted({start, *self.source.breaks})
        crc_mode = 1 if self.verify_crc else 0
        first = partition.segment_for(start)
        for segment in partition.segments[first:]:
            self.finish()
            log_path = str(segment.log_path)
            # forward only: on the pread path (a live broker) in --read-window windows (log.segment.WindowedSnapshot)
            with open_windowed(segment.log_path) as (buf, win):
                pos = seek_position(segment, start, len(buf)) if segment is partition.segments[first] else 0
                cut = cuts.get(log_path) if cuts else None
                hi = len(buf) if cut is None else min(cut, len(buf))
                while pos < hi:
                    lim = hi if win is None else min(hi, win.prepare(pos, win.window))
                    pos, n, seen, reason = fold_batches(ctx, buf, pos, lim, start=start, end=self.end,
                                                    stop=self.reloads[0] if self.reloads else None,
                                                    verify_crc=self.verify_crc, log_path=log_path)
                    self.batches += n
                    if seen:
                        self.pending = segment.size
                    if win is not None and lim < hi and reason != FOLD_CHUNK and min(hi, win.prepare(
                            pos, win.window)) > lim:
                        continue  # the window ended (inside the batch at pos, read whole now): fold on
                    if reason == FOLD_SLOW:
                        try:
                            one = SegmentFold(buf, pos, hi, crc_mode=crc_mode, max_bytes=1)
                            ev = next(one.chunks()).events[0]
                        except DecodeError as err:
                            raise err.at(segment.log_path) from err
                        pos = one.pos
                        got = _batch_event(segment, buf, ev, start)
                        if got is not None:
                            self.pending = segment.size
                            yield got
                if cut is not None:  # the bytes recovery truncates: read on in windows too
                    for got in _range_events(segment, buf, max(cut, pos), None, start, crc_mode, stops, win):
                        self.pending = segment.size
                        yield got
        self.finish()

    def finish(self) -> None:
        """Report the file read last (the replay calls this also when bytes recovery truncates
        ended the events early, as its loop reports the file of its last event)."""
        if self.progress is not None and self.pending is not None:
            self.progress.advance(self.pending)
        self.pending = None



# The compiled fold (kafkatx/storage/_replay.c) writes _Entry's slots and makes CompletedTxn instances
# directly: it learns their slot offsets here, once (record_batch does the same for BatchHeader and Record).
try:
    from kafkatx.storage import _replay
except ImportError:  # pragma: no cover - depends on the build
    _replay = None  # type: ignore[assignment]
_replay = compiled.bind(__name__, "_replay", _replay,  # type: ignore[assignment]
                        lambda m: m.replay_setup(_Entry, CompletedTxn, "ABORT", "COMMIT"))


def fold_compiled() -> bool:
    """Whether :func:`fold_batches` runs in C (``_replay`` built, the compiled paths on)."""
    return _replay is not None
