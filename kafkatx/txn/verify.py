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
* ``.timeindex``: timestamps and offsets never go back; each offset is held by a batch
  of the segment.
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

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import read_offset_index
from kafkatx.format.producer_snapshot import ProducerSnapshot, read_producer_snapshot
from kafkatx.format.record_batch import BatchHeader, iter_batches, read_control_record
from kafkatx.format.segment_fold import SegmentFold
from kafkatx.format.time_index import read_time_index
from kafkatx.format.txn_index import read_txn_index
from kafkatx.log.log_dir import LogDir
from kafkatx.log.partition import Partition
from kafkatx.log.segment import Buffer, Segment, map_file
from kafkatx.txn.loading import plan_load
from kafkatx.txn.replay import (
    CompletedTxn,
    ProducerReplay,
    Progress,
    _Entry,
    as_log_dirs,
    replay_transaction_log,
)
from kafkatx.txn.state import Finding

ERROR = "error"
WARNING = "warning"
INFO = "info"  # not a defect: what the broker will do to the files when it starts (txn/loading.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
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


def verify(log_dirs: Iterable[str | Path | LogDir], *, partitions_count: int | None = None,
           progress: Progress | None = None) -> list[Problem]:
    """Check every partition of every log dir; the problems, in dir/partition/file order."""
    dirs = as_log_dirs(log_dirs)
    problems: list[Problem] = []
    coordinator = replay_transaction_log(dirs, partitions_count=partitions_count)
    problems.extend(_from_finding(f) for f in coordinator.findings)
    for skipped in coordinator.skipped:
        problems.append(Problem(check="txn-state-decode", severity=ERROR, file=None, position=None,
                                message=f"__transaction_state partition skipped: {skipped}"))
    if progress is not None:
        progress.start(sum(s.size for d in dirs for p in d.partitions() for s in p.segments), "verifying")
    for log_dir in dirs:
        checkpoints = {}
        for name, attr in (("replication-offset-checkpoint", "high_watermarks"),
                           ("recovery-point-offset-checkpoint", "recovery_points"),
                           ("log-start-offset-checkpoint", "log_start_offsets")):
            try:
                checkpoints[attr] = getattr(log_dir, attr)
            except KafkaTxError as err:
                checkpoints[attr] = {}
                problems.append(Problem(check="checkpoint", severity=ERROR, file=str(log_dir.path / name),
                                        position=getattr(err, "position", None), message=str(err)))
        for part in log_dir.partitions():
            problems.extend(verify_partition(part, high_watermark=checkpoints["high_watermarks"].get(part.key),
                                             recovery_point=checkpoints["recovery_points"].get(part.key),
                                             log_start=checkpoints["log_start_offsets"].get(part.key)))
            if progress is not None:
                progress.advance(sum(s.size for s in part.segments))
    return problems


def verify_partition(part: Partition, *, high_watermark: int | None = None, recovery_point: int | None = None,
                     log_start: int | None = None) -> list[Problem]:
    """Every check of one partition folder (see the module docstring)."""
    v = _PartitionVerifier(part)
    v.run()
    try:
        plan = plan_load(part)
    except KafkaTxError as err:
        v.add("startup", ERROR, str(part.path), getattr(err, "position", None),
              f"{part.name}: cannot tell what the broker does with these files on startup: {err}")
    else:
        # Rows of their own kind: the files the broker deletes, recovers or truncates when it starts.
        for a in plan.actions:
            v.add(f"startup-{a.action}", INFO, a.file, a.position, a.message)
    leo = v.log_end_offset
    name = part.name
    first_base = part.segments[0].base_offset if part.segments else 0
    hw_file = str(part.path.parent / "replication-offset-checkpoint")
    if high_watermark is not None and high_watermark > leo:
        v.add("checkpoint-high-watermark", ERROR, hw_file, None,
              f"{name}: high watermark {high_watermark} is past the log end offset {leo}")
    if recovery_point is not None and recovery_point > leo:
        v.add("checkpoint-recovery-point", ERROR, str(part.path.parent / "recovery-point-offset-checkpoint"), None,
              f"{name}: recovery point {recovery_point} is past the log end offset {leo}")
    if log_start is not None:
        ls_file = str(part.path.parent / "log-start-offset-checkpoint")
        if log_start > leo:
            v.add("checkpoint-log-start", ERROR, ls_file, None,
                  f"{name}: log start offset {log_start} is past the log end offset {leo}")
        elif log_start < first_base:
            v.add("checkpoint-log-start", WARNING, ls_file, None,
                  f"{name}: log start offset {log_start} is below the first segment's base offset {first_base} "
                  f"(those offsets are gone)")
    return v.problems


class _PartitionVerifier:
    def __init__(self, part: Partition) -> None:
        self.part = part
        self.problems: list[Problem] = []
        self.producers: dict[int, _Entry] = {}
        self.findings: list[Finding] = []
        self.aborts: dict[int, CompletedTxn] = {}  # marker offset -> completed abort, current segment
        self.replay = ProducerReplay(part, self.producers, self.findings, False, self._completed)
        self.prev_last: int | None = None
        self.log_end_offset = part.segments[0].base_offset if part.segments else part.log_start_offset
        self.snapshots: list[tuple[int, Path, ProducerSnapshot]] = []

    def add(self, check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        self.problems.append(Problem(check=check, severity=severity, file=file, position=position, message=message,
                                     partition=self.part.name))

    def _completed(self, txn: CompletedTxn) -> None:
        if txn.outcome == "ABORT":
            self.aborts[txn.marker_offset] = txn

    # ------------------------------------------------------------------ driver
    def run(self) -> None:
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

    def _load_snapshots(self) -> None:
        for offset, path in self.part.snapshots:
            try:
                with map_file(path) as buf:
                    snap = read_producer_snapshot(buf)
            except DecodeError as err:
                self.add("snapshot-decode", ERROR, str(path), err.position, str(err.at(path)))
                continue
            except KafkaTxError as err:
                self.add("snapshot-decode", ERROR, str(path), None, str(err))
                continue
            if not snap.crc_valid:
                self.add("snapshot-crc", ERROR, str(path), 2,
                         f"{self.part.name}: producer snapshot {path.name} has a bad CRC (stored {snap.crc:#010x}); "
                         f"the broker falls back to an older snapshot or the log")
                continue
            self.snapshots.append((offset, path, snap))

    def _compare_snapshot(self, offset: int, path: Path, snap: ProducerSnapshot) -> None:
        for e in snap.entries:
            r = self.producers.get(e.producer_id)
            if r is None:
                if self.part.log_start_offset == 0 and e.last_offset >= 0:
                    self.add("snapshot-log-mismatch", WARNING, str(path), None,
                             f"{self.part.name}: snapshot {offset} has producer {e.producer_id} (last offset "
                             f"{e.last_offset}) that the log before {offset} never mentions")
                continue
            diffs = []
            if r.epoch != e.producer_epoch:
                diffs.append(f"epoch {e.producer_epoch} vs log {r.epoch}")
            if r.last_offset >= 0 and e.last_offset != r.last_offset:
                diffs.append(f"last offset {e.last_offset} vs log {r.last_offset}")
            log_first = r.txn_first if r.txn_first is not None else -1
            if e.current_txn_first_offset != log_first:
                diffs.append(f"open transaction from {e.current_txn_first_offset} vs log {log_first}")
            if diffs:
                self.add("snapshot-log-mismatch", WARNING, str(path), None,
                         f"{self.part.name}: snapshot {offset} disagrees with the log for producer "
                         f"{e.producer_id}: {'; '.join(diffs)}")

    # ------------------------------------------------------------------ one segment
    def _segment(self, segment: Segment, pending: list[tuple[int, Path, ProducerSnapshot]]
                 ) -> list[tuple[int, Path, ProducerSnapshot]]:
        log = str(segment.log_path)
        index = self._read_index(segment)
        time_index = self._read_time_index(segment)
        by_position = {e.position: e.offset for e in index}
        # byte position of each index entry in its file, so every problem names file and byte
        entry_at = {e.position: i * 8 for i, e in enumerate(index)}
        time_entry_at = {e.offset: i * 12 for i, e in enumerate(time_index)}
        time_offsets = sorted(e.offset for e in time_index)
        ti = 0
        aborts_no_data: dict[int, int] = {}  # ABORT marker offset -> producer id (data before the replay start)
        self.aborts = {}
        seg_last: int | None = None
        size = 0
        # Problems of the batch loop, keyed (batch position, kind rank, n): the order they had when
        # they were found one batch at a time (snapshot comparison, offsets, index, time index, CRC,
        # control record), though they are now found per chunk of events.
        found: list[tuple[int, int, int, Problem]] = []

        def note(pos: int, rank: int, check: str, severity: str, file: str | None, position: int | None,
                 message: str) -> None:
            found.append((pos, rank, len(found), Problem(check=check, severity=severity, file=file,
                                                         position=position, message=message,
                                                         partition=self.part.name)))

        idx_positions = sorted(by_position)
        ii = 0
        fold = None
        try:
            with segment.open() as buf:
                size = len(buf)
                fold = SegmentFold(buf, crc_mode=2, breaks=[off for off, _p, _s in pending],
                                   seg_base=segment.base_offset, prev_last=self.prev_last, want_table=True)
                for chunk in fold.chunks():
                    assert chunk.table is not None
                    rows = memoryview(chunk.table).cast("q")
                    positions, bases, lasts = rows[0::3], rows[1::3], rows[2::3]
                    chunk_start, chunk_end = positions[0], chunk.pos
                    seg_last = lasts[-1]
                    for kind, pos, base, prev in chunk.order:
                        if kind == 0:
                            note(pos, 1, "offset-order", ERROR, log, pos,
                                 f"batch at offset {base} is below its segment's base offset {segment.base_offset}")
                        else:
                            note(pos, 2, "offset-order", ERROR, log, pos,
                                 f"batch base offset {base} is not after the previous batch's last offset {prev}")
                    # .index entries pointing into this chunk: at a batch start, offset not below its base
                    while ii < len(idx_positions) and idx_positions[ii] < chunk_end:
                        p = idx_positions[ii]
                        ii += 1
                        if p < chunk_start:
                            continue
                        j = bisect_left(positions, p)
                        if j < len(positions) and positions[j] == p:
                            entry_offset = by_position.pop(p)
                            if entry_offset < bases[j]:
                                note(p, 3, "index-offset", ERROR, str(segment.index_path), entry_at.get(p),
                                     f"index entry (offset {entry_offset}, position {p}) points at a batch "
                                     f"starting at offset {bases[j]}")
                    # .timeindex offsets: each must be held by the first batch reaching it
                    ti = self._time_entries(chunk.order, positions, bases, lasts, time_offsets, ti, segment,
                                            time_entry_at, note)
                    for ev in chunk.events:
                        h = ev.first
                        while pending and pending[0][0] <= h.base_offset:
                            off, path, snap = pending.pop(0)
                            mark = len(self.problems)
                            self._compare_snapshot(off, path, snap)
                            for problem in self.problems[mark:]:
                                found.append((h.position, 0, len(found), problem))
                            del self.problems[mark:]
                        if not ev.crc_ok:
                            note(h.position, 5, "crc", ERROR, log, h.position,
                                 f"batch at offset {h.base_offset} (size {h.size}) has a bad CRC (stored "
                                 f"{h.crc:#010x})")
                            continue
                        if h.producer_id < 0:
                            continue
                        if h.is_control:
                            if h.records_count == 0:
                                continue
                            if ev.parsed:
                                type_id, coordinator_epoch = ev.control_type, ev.coordinator_epoch
                            else:
                                try:
                                    control = read_control_record(buf, h)
                                except DecodeError as err:
                                    note(h.position, 6, "control-record", ERROR, log, err.position,
                                         str(err.at(segment.log_path)))
                                    continue
                                type_id, coordinator_epoch = control.type_id, control.coordinator_epoch
                            assert type_id is not None
                            before = len(self.aborts)
                            self.replay.marker(segment.log_path, h, type_id, coordinator_epoch)
                            if type_id == ControlType.ABORT and len(self.aborts) == before:
                                aborts_no_data[h.base_offset] = h.producer_id
                        elif ev.last is None:
                            self.replay.data(h)
                        else:
                            self._run(buf, ev.first, ev.last)
                self.prev_last = fold.prev_last
        except DecodeError as err:
            next_pos = fold.pos if fold is not None else 0
            if fold is not None:
                self.prev_last = fold.prev_last
            # Report where the bad bytes begin (the end of the last whole batch), which is what
            # recovery would truncate to; the decoder's own position says what exactly is wrong.
            note(next_pos, 7, "log-decode", ERROR, log, next_pos,
                 f"{size - next_pos} bytes from position {next_pos} do not form a batch ({err.message} at byte "
                 f"{err.position}); Kafka's recovery truncates them")
        if self.prev_last is not None:
            self.log_end_offset = max(self.log_end_offset, self.prev_last + 1)
        found.sort(key=lambda f: (f[0], f[1], f[2]))
        self.problems.extend(f[3] for f in found)
        for pos, off in sorted(by_position.items()):
            self.add("index-position", ERROR, str(segment.index_path), entry_at.get(pos),
                     f"index entry (offset {off}, position {pos}) does not point at a batch start "
                     f"({'past the end of' if pos >= size else 'inside a batch of'} {segment.log_path.name})")
        if seg_last is not None:
            for i, e in enumerate(index):
                if e.offset > seg_last:
                    self.add("index-offset", ERROR, str(segment.index_path), i * 8,
                             f"index entry offset {e.offset} is past the segment's last offset {seg_last}")
        for off in time_offsets[ti:]:
            self.add("timeindex-offset", ERROR, str(segment.timeindex_path), time_entry_at.get(off),
                     f"time index entry offset {off} is past the segment's last offset "
                     f"{seg_last if seg_last is not None else '(empty segment)'}")
        self._check_txn_index(segment, aborts_no_data)
        return pending

    def _run(self, buf: Buffer, first: BatchHeader, last: BatchHeader) -> None:
        """A run of one producer's data batches: its first and last batch set what every batch between
        would; a non-transactional run inside an open transaction is a finding per batch, so it is
        replayed batch by batch."""
        entry = self.producers.get(first.producer_id)
        if first.is_transactional or entry is None or entry.txn_first is None:
            self.replay.data(first)
            self.replay.data(last)
            return
        for h in iter_batches(buf, first.position, last.position + last.size):
            if h.producer_id == first.producer_id:
                self.replay.data(h)

    @staticmethod
    def _time_entries(order: list, positions: Any, bases: Any, lasts: Any, time_offsets: list[int], ti: int,
                      segment: Segment, time_entry_at: dict[int, int], note: Any) -> int:
        """Consume the sorted time index offsets the chunk's batches reach (each is taken by the first
        batch, in file order, whose last offset reaches it); an offset in a gap is a problem. Returns
        the next unconsumed index."""
        n = len(time_offsets)
        if ti >= n or not len(lasts):
            return ti
        if order:  # offsets go back somewhere in this chunk: the running maximum, batch by batch
            top = None
            reach = []
            for v in lasts:
                top = v if top is None or v > top else top
                reach.append(top)
        else:
            reach = lasts  # strictly increasing
        while ti < n and time_offsets[ti] <= reach[-1]:
            t = time_offsets[ti]
            j = bisect_left(reach, t)
            if t < bases[j]:
                note(positions[j], 4, "timeindex-offset", ERROR, str(segment.timeindex_path), time_entry_at.get(t),
                     f"time index entry offset {t} is held by no batch of {segment.log_path.name}")
            ti += 1
        return ti

    def _read_index(self, segment: Segment) -> list:
        if segment.index_path is None:
            return []
        try:
            with map_file(segment.index_path) as buf:
                entries = read_offset_index(buf, segment.base_offset)
        except KafkaTxError as err:
            self.add("index-decode", ERROR, str(segment.index_path), getattr(err, "position", None), str(err))
            return []
        prev = None
        for i, e in enumerate(entries):
            if prev is not None and (e.offset <= prev.offset or e.position <= prev.position):
                self.add("index-order", ERROR, str(segment.index_path), i * 8,
                         f"index entry {i} (offset {e.offset}, position {e.position}) does not come after "
                         f"(offset {prev.offset}, position {prev.position})")
            prev = e
        return entries

    def _read_time_index(self, segment: Segment) -> list:
        if segment.timeindex_path is None:
            return []
        try:
            with map_file(segment.timeindex_path) as buf:
                entries = read_time_index(buf, segment.base_offset)
        except KafkaTxError as err:
            self.add("timeindex-decode", ERROR, str(segment.timeindex_path), getattr(err, "position", None),
                     str(err))
            return []
        prev = None
        for i, e in enumerate(entries):
            if prev is not None and (e.timestamp < prev.timestamp or e.offset < prev.offset):
                self.add("timeindex-order", ERROR, str(segment.timeindex_path), i * 12,
                         f"time index entry {i} (timestamp {e.timestamp}, offset {e.offset}) goes back from "
                         f"(timestamp {prev.timestamp}, offset {prev.offset})")
            prev = e
        return entries

    def _check_txn_index(self, segment: Segment, aborts_no_data: dict[int, int]) -> None:
        entries = []
        path = segment.txnindex_path
        if path is not None:
            try:
                with map_file(path) as buf:
                    entries = read_txn_index(buf)
            except KafkaTxError as err:
                self.add("txnindex-decode", ERROR, str(path), getattr(err, "position", None), str(err))
                entries = []
        where = str(path) if path is not None else str(segment.log_path.with_suffix(".txnindex"))
        prev_last = None
        matched: set[int] = set()
        for i, e in enumerate(entries):
            pos = i * 34
            if prev_last is not None and e.last_offset <= prev_last:
                self.add("txnindex-order", ERROR, where, pos,
                         f"entry {i} last offset {e.last_offset} does not increase (previous {prev_last})")
            prev_last = e.last_offset
            done = self.aborts.get(e.last_offset)
            if done is None:
                if aborts_no_data.get(e.last_offset) == e.producer_id:
                    continue  # its data lies before where we could replay from: cannot check more
                self.add("txnindex-no-marker", ERROR, where, pos,
                         f"entry {i} (producer {e.producer_id}, offsets {e.first_offset}..{e.last_offset}) matches "
                         f"no ABORT marker of that producer in {segment.log_path.name}")
                continue
            if done.producer_id != e.producer_id:
                self.add("txnindex-no-marker", ERROR, where, pos,
                         f"entry {i} names producer {e.producer_id} but the ABORT marker at {e.last_offset} is "
                         f"producer {done.producer_id}'s")
                continue
            matched.add(e.last_offset)
            if done.first_offset is not None and done.first_offset != e.first_offset:
                self.add("txnindex-first-offset", ERROR, where, pos,
                         f"entry {i} (producer {e.producer_id}) starts at {e.first_offset} but the aborted "
                         f"transaction began at offset {done.first_offset}")
            if e.last_stable_offset > e.last_offset + 1 or e.last_stable_offset < 0:
                self.add("txnindex-lso", ERROR, where, pos,
                         f"entry {i} last stable offset {e.last_stable_offset} is impossible for a marker at "
                         f"{e.last_offset}")
            elif e.last_stable_offset != done.last_stable_offset:
                self.add("txnindex-lso", WARNING, where, pos,
                         f"entry {i} last stable offset {e.last_stable_offset}; the log gives "
                         f"{done.last_stable_offset} (ProducerStateManager.lastStableOffset)")
        for marker, done in sorted(self.aborts.items()):
            if marker not in matched:
                self.add("txnindex-missing", ERROR, where, None,
                         f"ABORT marker at offset {marker} (producer {done.producer_id}, data from "
                         f"{done.first_offset}) has no .txnindex entry: read_committed consumers will see the "
                         f"aborted records")
