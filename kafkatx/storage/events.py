"""A partition's producer-state events: batches, runs of batches, and bytes that do not decode.

The partition replay (``storage/replay.py``) folds these; ``replay_partition`` makes them from the
files (:func:`file_events`), ``kafkatx scan`` on its executors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kafkatx.errors import DecodeError
from kafkatx.format.record_batch import BatchHeader, read_control_record
from kafkatx.format.segment_fold import FoldEvent, iter_fold
from kafkatx.storage.partition import Partition, seek_position
from kafkatx.storage.segment import Buffer, Segment, WindowedSnapshot, iter_batches_windowed, open_windowed

if TYPE_CHECKING:
    from kafkatx.storage.loading import LoadPlan


class BatchEvent(NamedTuple):
    """One step of a partition's producer-state replay: a batch, a run of batches, or bytes that do not decode.

    The replay (:func:`replay_partition_events`) needs only batch headers, the control
    record of control batches, and where the bytes stop forming batches. ``replay_partition``
    makes one event per batch from the files; ``kafkatx scan`` makes them on executors and
    collapses each producer's consecutive data batches of one epoch and transactional flag
    into one *run* (``header`` = first batch, ``last`` = last batch, ``count`` batches):
    the batches between only overwrite what the last one sets, so the fold applies the first
    and the last and re-reads the middle from ``log_path`` only when they matter (see
    :func:`replay_partition_events`). A NamedTuple, not a dataclass: one is built per batch
    on the offline hot path and executors pickle them by the thousand.
    """

    log_path: str
    header: BatchHeader | None  # None only for an error event with no batch
    last: BatchHeader | None = None  # a run's last batch (same producer, epoch, transactional flag)
    batch_count: int = 1  # batches this event stands for
    crc_valid: bool = True  # checked for control batches always, for data batches with verify_crc
    control_type: int | None = None  # a control batch with a record: its type (ControlType)
    coordinator_epoch: int | None = None
    error: str | None = None  # the bytes here do not decode: the partition cannot be replayed
    error_offset: int = -1  # an error event: the offset the bad bytes would have held


# An event source: given the replay's start offset, the partition's events in offset order from
# (at least) the batch holding that offset. Events below the start are skipped by the fold, so a
# source may also hand out the whole partition. Called a second time when the chosen snapshot
# turns out to lie past the log end.
EventSource = Callable[[int], Iterable[BatchEvent]]


def file_events(partition: Partition, start: int, *, verify_crc: bool = False, breaks: Sequence[int] = (),
                cuts: dict[str, int] | None = None) -> Iterator[BatchEvent]:
    """The :class:`BatchEvent` s of ``partition`` from ``start``, read from its files.

    Each producer's consecutive data batches are one *run* event (``format/segment_fold.py``,
    folded in compiled code when it is built): the fold does Python work per event, not per
    batch. No run spans ``start`` or an offset in ``breaks`` (where the fold looks at the
    state between batches) or a position in ``cuts`` (``LoadPlan.cuts``: where recovery
    truncates a segment). Decode errors (torn tail, garbage, an unreadable control record)
    raise, naming file and byte.
    """
    if not partition.segments:
        return
    stops = sorted({start, *breaks})
    crc_mode = 1 if verify_crc else 0
    first = partition.segment_for(start)
    for segment in partition.segments[first:]:
        log_path = str(segment.log_path)
        # forward only: on the pread path (a live broker) in --read-window windows (log.segment.WindowedSnapshot)
        with open_windowed(segment.log_path) as (buf, win):
            pos = seek_position(segment, start, len(buf)) if segment is partition.segments[first] else 0
            cut = cuts.get(log_path) if cuts else None
            ranges = [(pos, cut), (cut, None)] if cut is not None and cut > pos else [(pos, None)]
            for lo, hi in ranges:
                yield from _range_events(segment, buf, lo, hi, start, crc_mode, stops, win)


class FileEvents:
    """:func:`file_events` as an :data:`EventSource` the replay recognises: ``replay_partition_events``
    then folds the files' common batches straight into the producer state in compiled code
    (``ProducerStateFold.fold``) and sees events only for the batches whose bytes need reading in Python."""

    def __init__(self, partition: Partition, *, verify_crc: bool = False, breaks: Sequence[int] = (),
                 cuts: dict[str, int] | None = None, known: dict[str, bytes] | None = None) -> None:
        self.partition = partition
        self.verify_crc = verify_crc
        self.breaks = tuple(breaks)
        self.cuts = cuts
        # segment .log path -> its whole bytes as plan_load's log end read them (plan_load's ``read``): the
        # fold reads these instead of opening the file again (the files' bytes at the plan, one snapshot)
        self.known = known if known else None

    @classmethod
    def of_plan(cls, partition: Partition, plan: LoadPlan, *, use_snapshot: bool = True, verify_crc: bool = False,
                known: dict[str, bytes] | None = None) -> FileEvents:
        """The files' events as the broker's load leaves them (``LogLoader``): every segment read only as far
        as ``LogSegment.recover`` keeps it (``plan.cuts``: bytes after a batch that fails its check are
        truncated, whatever they hold), no run across a snapshot the broker reloads (``plan.chain.reloads``,
        with ``use_snapshot``). Every replay of a plan reads its files through this."""
        return cls(partition, verify_crc=verify_crc, breaks=plan.chain.reloads if use_snapshot else (),
                   cuts=plan.cuts, known=known)

    def open(self, segment: Segment) -> AbstractContextManager[tuple[Buffer, WindowedSnapshot | None]]:
        """``open_windowed(segment.log_path)``, or the bytes :attr:`known` holds for it."""
        if self.known is not None:
            data = self.known.get(str(segment.log_path))
            if data is not None:
                return nullcontext((data, None))
        return open_windowed(segment.log_path)

    def __call__(self, start: int) -> Iterator[BatchEvent]:
        return file_events(self.partition, start, verify_crc=self.verify_crc, breaks=self.breaks, cuts=self.cuts)


def _range_events(segment: Segment, buf: Buffer, lo: int, hi: int | None, start: int, crc_mode: int,
                  stops: Sequence[int], win: WindowedSnapshot | None = None) -> Iterator[BatchEvent]:
    """The events of ``buf[lo:hi]`` (one segment's bytes) at or past ``start``; ``win``: ``buf`` is an
    :func:`~kafkatx.storage.segment.open_windowed` buffer read forward window by window."""
    try:
        for ev in iter_fold(buf, lo, hi, crc_mode=crc_mode, breaks=stops,
                            window=win.prepare if win is not None else None):
            got = _batch_event(segment, buf, ev, start)
            if got is not None:
                yield got
    except DecodeError as err:
        raise err.at(segment.log_path) from err


def _batch_event(segment: Segment, buf: Buffer, ev: FoldEvent, start: int) -> BatchEvent | None:
    """The :class:`BatchEvent` of one fold event (None below ``start``); reads the control record
    ``format/segment_fold.py`` left to ``read_control_record`` (which raises on one it cannot read)."""
    log_path = str(segment.log_path)
    h, last, count, crc_ok, control_type = ev[0], ev[1], ev[2], ev[3], ev[4]
    if h.base_offset < start and (last or h).last_offset < start:
        return None
    if control_type is None and crc_ok and (count > 1 or not h.is_control):
        return BatchEvent(log_path, h, last, count)  # data: a batch or a run
    if not crc_ok:
        return BatchEvent(log_path, h, crc_valid=False)
    if h.is_control and h.producer_id >= 0:
        if h.records_count == 0:
            return BatchEvent(log_path, h)
        if ev.parsed:
            return BatchEvent(log_path, h, control_type=control_type, coordinator_epoch=ev.coordinator_epoch)
        try:
            control = read_control_record(buf, h)
        except DecodeError as err:
            raise err.at(segment.log_path) from err
        return BatchEvent(log_path, h, control_type=control.type_id, coordinator_epoch=control.coordinator_epoch)
    return BatchEvent(log_path, h, last, count)


def expand_run(event: BatchEvent) -> Iterator[BatchEvent]:
    """The batches a run event stands for, re-read from its file (headers only)."""
    first, last = event.header, event.last
    if first is None or last is None:
        yield event
        return
    pid = first.producer_id
    try:
        with open_windowed(Path(event.log_path)) as (buf, win):  # forward only: windows on the pread path
            for h in iter_batches_windowed(buf, win, first.position, end=last.position + last.size):
                if h.producer_id == pid or (pid < 0 and h.producer_id < 0):
                    yield BatchEvent(event.log_path, h)
    except DecodeError as err:
        raise err.at(event.log_path) from err
