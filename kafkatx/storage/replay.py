"""One partition's producer state as the broker rebuilds it on startup.

:func:`replay_partition` rebuilds one partition's producer state the way the broker does on
startup (``LogLoader`` / ``UnifiedLog.rebuildProducerState``): start from the newest usable
``.snapshot`` (``storage/loading.py`` plans which), then apply every batch after it
(``ProducerAppendInfo.append``, ``storage/producer_state.py``), segment by segment in compiled code
where it is built (``storage/producer_state.py``'s ``ProducerStateFold``, its compiled twin swapped
in whole), the batches whose bytes need reading event by event (``storage/events.py``). Streaming:
memory follows the number of producers and open transactions, never the size of the log.

Kafka sources: storage/src/main/java/org/apache/kafka/storage/internals/log/
LogLoader.java, ProducerStateManager.java; core/.../log/UnifiedLog.scala (rebuildProducerState).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from kafkatx.errors import DecodeError, KafkaTxError, MissingFile, ReadFailed
from kafkatx.format.segment_fold import SegmentFold
from kafkatx.rows import Finding, Progress
from kafkatx.storage.events import (
    BatchEvent,
    EventSource,
    FileEvents,
    _batch_event,
    _range_events,
    expand_run,
)
from kafkatx.storage.loading import DEFAULT_PRODUCER_ID_EXPIRATION_MS, Chain, LoadPlan, is_expired, plan_load
from kafkatx.storage.lso import clamp_high_watermark, high_watermark_or_log_end
from kafkatx.storage.partition import Opener, Partition, seek_position
from kafkatx.storage.producer_state import (
    FOLD_BYTES,
    FOLD_CHUNK,
    FOLD_STOP,
    CompletedCallback,
    CompletedTxn,
    EntryRow,
    PartitionProducerState,
    ProducerState,
    ProducerStateFold,
    check_txn_state,
    completed_txn_of,
    entry_of_snapshot,
    finding_of,
    new_producer_state_fold,
    producer_state_of,
)
from kafkatx.storage.segment import FileShrank, Segment


def replay_partition(partition: Partition, *, use_snapshot: bool = True, keep_completed: bool = False,
                     on_completed: CompletedCallback | None = None, verify_crc: bool = False,
                     progress: Progress | None = None, now: int | None = None,
                     expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                     small: bool | None = None) -> PartitionProducerState:
    """The producer state the broker builds when it starts on ``partition``'s files (``storage/loading.py``).

    ``use_snapshot=False`` replays the whole surviving log from the log start instead (verify
    does, to see every marker). ``now`` (epoch ms) expires idle producers as
    ``ProducerStateManager`` does at every snapshot load and in ``removeExpiredProducers``;
    None expires nothing. ``verify_crc`` also checks data batches' CRCs (control batches are
    always checked: their record is read); a data batch with a bad CRC is then reported and
    skipped. A decode error (garbage, a control batch with a bad CRC) the broker would not
    truncate raises: the caller skips the partition and says so. ``small``: ``plan_load``'s (a caller
    replaying many partitions asks ``segment.small_reads()`` once).
    """
    plan = plan_load(partition, small=small)
    return replay_partition_events(partition, FileEvents.of_plan(partition, plan, use_snapshot=use_snapshot,
                                                                 verify_crc=verify_crc),
                                   use_snapshot=use_snapshot, keep_completed=keep_completed,
                                   on_completed=on_completed, verify_crc=verify_crc, progress=progress, now=now,
                                   expiration_ms=expiration_ms, plan=plan)


def replay_partition_events(partition: Partition, events: EventSource, *, use_snapshot: bool = True,
                            keep_completed: bool = False, on_completed: CompletedCallback | None = None,
                            verify_crc: bool = False, progress: Progress | None = None, now: int | None = None,
                            expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                            plan: LoadPlan | None = None) -> PartitionProducerState:
    """:func:`replay_partition` over already decoded events: the one producer-state fold.

    :func:`~kafkatx.storage.loading.plan_load` decides, from the partition's files, where the
    broker's producer state starts (a snapshot, the log start, or empty) and where the log
    ends after recovery; ``events`` is asked for the events from that start and folded with
    :class:`~kafkatx.storage.producer_state.ProducerStateFold`. ``replay_partition`` feeds it from the files, ``kafkatx scan``
    from events its executors decoded. An error event the broker would not truncate away
    raises :class:`KafkaTxError`.
    """
    if plan is None:
        plan = plan_load(partition)
    if plan.tail_error is not None:
        raise plan.tail_error
    chain = plan.chain if use_snapshot else Chain("log-start", plan.log_start_offset, None, ())
    return _replay(partition, events, plan, chain, keep_completed, on_completed, verify_crc, progress,
                   now, expiration_ms)


def _replay(partition: Partition, events: EventSource, plan: LoadPlan, chain: Chain, keep_completed: bool,
            on_completed: CompletedCallback | None, verify_crc: bool, progress: Progress | None,
            now: int | None, expiration_ms: int) -> PartitionProducerState:
    findings: list[Finding] = []
    expired: dict[int, EntryRow] = {}
    completed: list[CompletedTxn] = []
    end = plan.log_end_offset
    start = chain.offset
    snapshot_offset = None
    entries: list[EntryRow] = []
    if chain.kind == "file" and plan.snapshot_entries is not None:
        snapshot_offset = chain.offset
        entries = [entry_of_snapshot(e) for e in plan.snapshot_entries.entries]
    elif chain.kind == "empty":
        start = end  # the upgrade path: the broker reads nothing
    # Nothing to replay from the files (the start state is at the log end, most partitions at 10,000):
    # no fold, no event loop, no high watermark asked (what they would give: no batch, nothing completed).
    replaying = start < end or not isinstance(events, FileEvents)
    # Only a marker at or above the high watermark can hold the first unstable offset
    # (offline.lag_row): the spans below it are not kept, so memory follows the unreplicated tail.
    span_floor = max(plan.final_load_offset, _unreplicated_floor(partition, plan)) if replaying else None
    keep = keep_completed or on_completed is not None
    state = new_producer_state_fold(entries, keep_completed=keep, span_floor=span_floor)
    name, topic, number = partition.name, partition.topic, partition.partition

    def expire() -> None:  # ProducerStateManager.isProducerExpired, at a snapshot load
        if now is None:
            return
        for row in state.active_producers():
            if is_expired(row[4], row[6] is not None, now, expiration_ms):
                expired[row[0]] = state.remove_producer(row[0])

    def drain() -> None:
        """What the fold gathered since the last call, in order (before the loop adds a finding of its own)."""
        got = state.take_findings()
        if got:
            findings.extend(finding_of(name, row) for row in got)
        if keep:
            for row in state.take_completed():
                done = completed_txn_of(topic, number, row)
                if keep_completed:
                    completed.append(done)
                if on_completed is not None:
                    on_completed(done)

    expire()
    reloads = sorted([r for r in chain.reloads if r > start]) if chain.reloads else []
    batches = 0
    if replaying:
        cuts = plan.cuts
        surviving = [str(s.log_path) for s in partition.segments if str(s.log_path) not in plan.deleted_segments]
        last_file = surviving[-1] if surviving else ""
        fold = FileFold(events, state, start, end, reloads, verify_crc, progress) if isinstance(events, FileEvents) else None
        if fold is not None:
            progress = None  # the fold reports per file
        sizes = {str(s.log_path): s.size for s in partition.segments} if progress is not None else {}
        last_path = None
        for ev in _until_cut((fold.events() if fold is not None else events(start)) if start < end else (), cuts,
                             last_file):
            drain()
            if progress is not None and ev.log_path != last_path:
                if last_path is not None:
                    progress.advance(sizes.get(last_path, 0))
                last_path = ev.log_path
            h = ev.header
            cut = cuts.get(ev.log_path) if cuts else None
            if ev.error is not None:
                if cut is not None or ev.error_offset >= end:
                    continue  # bytes the broker's recovery truncates
                if (h.last_offset if h is not None else ev.error_offset) >= start:
                    raise KafkaTxError(ev.error)
                continue
            assert h is not None
            if h.base_offset >= end or (cut is not None and h.position >= cut):
                continue  # truncated by recovery
            while reloads and h.base_offset >= reloads[0]:
                reloads.pop(0)
                expire()
            last = ev.last
            if last is not None:
                if h.base_offset < start and last.last_offset < start:
                    continue
                row = state.last_entry(h.producer_id) if h.producer_id >= 0 else None
                if (h.base_offset < start and h.last_offset < start) or (
                        row is not None and not check_txn_state(row[6] is not None, h.is_transactional)):
                    # The run straddles the start, or its non-transactional batches land in an open
                    # transaction (one finding each): replay its batches one by one.
                    for one in expand_run(ev):
                        if one.header is not None and one.header.last_offset >= start:
                            batches += 1
                            state.append(one.header)
                    continue
                batches += ev.batch_count
                state.append(h)
                if ev.batch_count > 1:
                    state.append(last)  # the batches between only set what the last one sets again
                continue
            if h.base_offset < start and h.last_offset < start:
                continue
            batches += 1
            if verify_crc and not h.is_control and not ev.crc_valid:
                findings.append(Finding(check="crc", message=f"batch at offset {h.base_offset} has a bad CRC; skipped",
                                        file=ev.log_path, position=h.position,
                                        offset=h.base_offset, partition=name))
                continue
            if h.producer_id < 0:
                continue  # not idempotent: no producer state (UnifiedLog only tracks batch.hasProducerId)
            if h.is_control:
                if not ev.crc_valid:
                    raise DecodeError(f"control batch at offset {h.base_offset} has a bad CRC",
                                      path=ev.log_path, position=h.position)
                if h.records_count == 0:
                    continue  # the cleaner emptied it: the whole transaction is gone (ProducerAppendInfo.append)
                if ev.control_type is not None:
                    state.append_end_txn_marker(h, ev.control_type, ev.coordinator_epoch, ev.log_path)
            else:
                state.append(h)
        drain()
        if progress is not None and last_path is not None:
            progress.advance(sizes.get(last_path, 0))
        if fold is not None:
            fold.finish()
            batches += fold.batches
    expire()  # the remaining reloads (the broker's own snapshots up to the log end) and removeExpiredProducers
    producers = {row[0]: producer_state_of(row) for row in sorted(state.active_producers())}
    for pid in producers:
        expired.pop(pid, None)
    if snapshot_offset is not None and snapshot_offset <= end:
        _fill_start_timestamps(partition, producers, snapshot_offset,
                               events.open if isinstance(events, FileEvents) else None)
    return PartitionProducerState(
        topic=topic, partition=number, path=str(partition.path),
        log_start_offset=plan.log_start_offset, log_end_offset=end, replay_start_offset=start,
        snapshot_offset=snapshot_offset, batches=batches, producers=producers,
        completed=completed, findings=findings, notices=list(plan.notices) if chain is plan.chain else [],
        expired={pid: producer_state_of(row) for pid, row in sorted(expired.items())},
        unreplicated=tuple(sorted(state.take_spans())), load=plan)


class FileFold:
    """The files' batches from ``start`` folded into ``state`` (:meth:`ProducerStateFold.fold`), segment by
    segment; :meth:`events` yields only the batches whose bytes the fold leaves to the event source (a
    magic 0/1 batch, bytes that do not frame, a CRC that fails, a control record not in the plain layout)
    and stops at each snapshot reload offset (the replay loop pops it and expires producers there, then
    the fold applies the batch); the bytes a recovery cut truncates go through :func:`_range_events`
    unchanged. Progress is reported per file, for every file that had a batch at or past ``start``, when
    the next file starts or the replay ends (as the event loop reports it).
    """

    def __init__(self, source: FileEvents, state: ProducerStateFold, start: int, end: int, reloads: list[int],
                 verify_crc: bool, progress: Progress | None) -> None:
        self.source = source
        self.state = state
        self.start = start
        self.end = end
        self.reloads = reloads  # shared with the loop, which pops the reloads it passes
        self.verify_crc = verify_crc
        self.progress = progress
        self.batches = 0  # batches the fold applied (the loop counts the events it gets)
        self.pending: Segment | None = None  # the file being read, once it had a batch at or past start

    def events(self) -> Iterator[BatchEvent]:
        partition, start, state = self.source.partition, self.start, self.state
        if not partition.segments:
            return
        cuts = self.source.cuts
        stops = sorted({start, *self.source.breaks})
        crc_mode = 1 if self.verify_crc else 0
        first = partition.segment_for(start)
        for segment in partition.segments[first:]:
            self.finish()
            log_path = str(segment.log_path)
            # forward only: on the pread path (a live broker) in --read-window windows (storage.segment.WindowedSnapshot)
            with self.source.open(segment) as (buf, win):  # the bytes the plan read already, if it did
                pos = seek_position(segment, start, len(buf)) if segment is partition.segments[first] else 0
                cut = cuts.get(log_path) if cuts else None
                hi = len(buf) if cut is None else min(cut, len(buf))
                while pos < hi:
                    lim = hi if win is None else min(hi, win.prepare(pos, win.window))
                    pos, n, seen, reason = state.fold(buf, pos, lim, start=start, end=self.end,
                                                      stop=self.reloads[0] if self.reloads else None,
                                                      verify_crc=self.verify_crc, max_bytes=FOLD_BYTES,
                                                      log_path=log_path)
                    self.batches += n
                    if seen:
                        self.pending = segment
                    if win is not None and lim < hi and reason != FOLD_CHUNK and min(hi, win.prepare(
                            pos, win.window)) > lim:
                        continue  # the window ended (inside the batch at pos, read whole now): fold on
                    if reason == FOLD_STOP:  # the event source reads the batch at pos
                        try:
                            one = SegmentFold(buf, pos, hi, crc_mode=crc_mode, max_bytes=1)
                            ev = next(one.chunks()).events[0]
                        except DecodeError as err:
                            raise err.at(segment.log_path) from err
                        pos = one.pos
                        got = _batch_event(segment, buf, ev, start)
                        if got is not None:
                            self.pending = segment
                            yield got
                if cut is not None:  # the bytes recovery truncates: read on in windows too
                    for got in _range_events(segment, buf, max(cut, pos), None, start, crc_mode, stops, win):
                        self.pending = segment
                        yield got
        self.finish()

    def finish(self) -> None:
        """Report the file read last (the replay calls this also when bytes recovery truncates
        ended the events early, as its loop reports the file of its last event)."""
        if self.progress is not None and self.pending is not None:
            self.progress.advance(self.pending.size)  # its size (a stat) only for a progress bar
        self.pending = None


def _unreplicated_floor(partition: Partition, plan: LoadPlan) -> int:
    """The lowest high watermark ``offline.lag_row`` can use for this partition: the checkpointed one
    clamped into the log as the broker does (the log end when there is none). Unknown (a checkpoint
    that does not read): the log start, below every marker."""
    log_dir = partition.log_dir
    if log_dir is None:
        return plan.log_start_offset
    try:
        hw = getattr(log_dir, "high_watermarks", {}).get(partition.key)
    except ReadFailed:
        raise
    except KafkaTxError:
        return plan.log_start_offset
    return clamp_high_watermark(high_watermark_or_log_end(hw, plan.log_end_offset)[0], plan.log_start_offset,
                                plan.log_end_offset)


def _until_cut(events: Iterable[BatchEvent], cuts: dict[str, int], last_file: str) -> Iterator[BatchEvent]:
    """``events``, ending quietly where a file source hits bytes the broker's recovery truncates.

    A file event source raises :class:`DecodeError` at a torn or corrupt tail; when that tail lies
    past the point recovery cuts the last segment (``LoadPlan.cuts``), the broker never sees
    those bytes. (A segment recovered in the middle of the log, for a missing index, keeps the
    segments after it: bytes that do not decode there still make the partition unreadable.)
    """
    it = iter(events)
    while True:
        try:
            ev = next(it)
        except StopIteration:
            return
        except DecodeError as err:
            cut = cuts.get(str(err.path)) if err.path is not None else None
            if cut is not None and err.position is not None and err.position >= cut and str(err.path) == last_file:
                return
            raise
        yield ev


def _fill_start_timestamps(partition: Partition, producers: dict[int, ProducerState], snapshot_offset: int,
                           opener: Opener | None = None) -> None:
    """A snapshot keeps an open transaction's first offset but not when it began: read that batch (through
    ``opener``, the event source's, when it has one: the bytes the replay read)."""
    for pid, p in producers.items():
        first = p.current_txn_first_offset
        if first is None or p.current_txn_start_timestamp is not None or first >= snapshot_offset:
            continue
        try:
            for _segment, header in partition.iter_batches(first, opener=opener):
                # the batch holding (or first after) the transaction's first offset
                producers[pid] = msgspec.structs.replace(p, current_txn_start_timestamp=header.max_timestamp)
                break
        except FileShrank:  # changed size while being read: never taken for damage
            raise
        except (DecodeError, MissingFile):
            pass
