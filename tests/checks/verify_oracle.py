"""The per-batch ``verify`` walk as it was before the segment fold, kept as the tests' oracle.

``checks/verify.py`` now folds each segment in compiled code and applies the index rules per
index entry over the fold's batch table; these are the former per-batch implementations
(one Python step per batch: ``iter_batches``, ``crc_valid``, the index check's ``batch``,
``read_control_record``, ``ProducerStateFold.append``/``append_end_txn_marker``), unchanged, so the tests can
require that the new walk reports exactly what this one reports, in the same order.
Only tests import this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import kafkatx.checks.indexes as VI
import kafkatx.checks.verify as V
from kafkatx.checks.indexes import ERROR, WARNING, AddProblem, Problem, log_beside, log_decode_message
from kafkatx.errors import DecodeError, KafkaTxError, MissingFile
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import ENTRY_SIZE as INDEX_ENTRY_SIZE
from kafkatx.format.offset_index import OffsetIndexColumns, OffsetIndexEntry, read_offset_index
from kafkatx.format.producer_snapshot import ProducerSnapshot
from kafkatx.format.record_batch import BatchHeader, crc_valid, read_control_record
from kafkatx.format.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkatx.format.time_index import TimeIndexColumns, TimeIndexEntry, read_time_index
from kafkatx.format.txn_index import read_txn_index
from kafkatx.storage.segment import INDEX_SUFFIX, TIMEINDEX_SUFFIX, Segment, map_file


class PerBatchIndexCheck:
    """The former ``SegmentIndexCheck``: fed every batch header of the segment in log order."""

    def __init__(self, *, log_path: Path, add: AddProblem, index_path: Path | None = None,
                 index: Sequence[OffsetIndexEntry] = (), timeindex_path: Path | None = None,
                 time_index: Sequence[TimeIndexEntry] = ()) -> None:
        self.log_name = log_path.name
        self.add = add
        self.index_file = str(index_path) if index_path is not None else None
        self.time_file = str(timeindex_path) if timeindex_path is not None else None
        self.index = list(index)
        self._by_position: dict[int, tuple[int, OffsetIndexEntry]] = {}
        for i, e in enumerate(self.index):
            self._by_position.setdefault(e.position, (i, e))
        self._time = sorted((e.offset, i, e.timestamp) for i, e in enumerate(time_index))
        self._ti = 0
        self.seg_last: int | None = None
        prev: OffsetIndexEntry | None = None
        for i, e in enumerate(self.index):
            if prev is not None and (e.offset <= prev.offset or e.position <= prev.position):
                add("index-order", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                    f"index entry {i} (offset {e.offset}, position {e.position}) does not come after "
                    f"(offset {prev.offset}, position {prev.position})")
            prev = e
        prev_t: TimeIndexEntry | None = None
        for i, t in enumerate(time_index):
            if prev_t is not None and (t.timestamp < prev_t.timestamp or t.offset < prev_t.offset):
                add("timeindex-order", ERROR, self.time_file, i * TIME_ENTRY_SIZE,
                    f"time index entry {i} (timestamp {t.timestamp}, offset {t.offset}) goes back from "
                    f"(timestamp {prev_t.timestamp}, offset {prev_t.offset})")
            prev_t = t

    def batch(self, h: BatchHeader) -> None:
        self.seg_last = h.last_offset
        hit = self._by_position.pop(h.position, None)
        if hit is not None and hit[1].offset < h.base_offset:
            i, e = hit
            self.add("index-offset", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                     f"index entry (offset {e.offset}, position {e.position}): the batch there starts at offset "
                     f"{h.base_offset}, after the indexed offset")
        while self._ti < len(self._time) and self._time[self._ti][0] <= h.last_offset:
            off, i, ts = self._time[self._ti]
            if off < h.base_offset:
                self.add("timeindex-offset", ERROR, self.time_file, i * TIME_ENTRY_SIZE,
                         f"time index entry offset {off} is held by no batch of {self.log_name}")
            elif h.max_timestamp != ts:
                self.add("timeindex-timestamp", ERROR, self.time_file, i * TIME_ENTRY_SIZE,
                         f"time index entry (timestamp {ts}, offset {off}): the batch holding the offset (at byte "
                         f"{h.position} of {self.log_name}) has max timestamp {h.max_timestamp}")
            self._ti += 1

    def finish(self, log_size: int) -> None:
        for pos, (i, e) in sorted(self._by_position.items()):
            where = "past the end of" if pos >= log_size else "inside a batch of"
            self.add("index-position", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                     f"index entry (offset {e.offset}, position {pos}) does not point at a batch start "
                     f"({where} {self.log_name})")
        if self.seg_last is not None:
            for i, e in enumerate(self.index):
                if e.offset > self.seg_last:
                    self.add("index-offset", ERROR, self.index_file, i * INDEX_ENTRY_SIZE,
                             f"index entry offset {e.offset} is past the segment's last offset {self.seg_last}")
        for off, i, _ts in self._time[self._ti:]:
            self.add("timeindex-offset", ERROR, self.time_file, i * TIME_ENTRY_SIZE,
                     f"time index entry offset {off} is past the segment's last offset "
                     f"{self.seg_last if self.seg_last is not None else '(empty segment)'}")


def verify_index_file_per_batch(path: Path, base_offset: int) -> list[Problem]:
    """The former ``verify_index_file``."""
    problems: list[Problem] = []

    def add(check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        problems.append(Problem(check=check, severity=severity, file=file, position=position, message=message))

    # The preallocation rules (not the walk) are the ones verify.py shares with dump-index --verify.
    padding = [False]
    with map_file(path) as ibuf:
        try:
            if path.name.endswith(TIMEINDEX_SUFFIX):
                times = read_time_index(ibuf, base_offset)
                pre = VI.index_file_preallocation(path, len(ibuf), base_offset, TimeIndexColumns.of(times),
                                                  TIME_ENTRY_SIZE)
                check = PerBatchIndexCheck(log_path=log_beside(path), add=_padding_filter(
                                               add, str(path) if pre.zero_first and len(times) == 1 else None, padding),
                                           timeindex_path=path, time_index=times)
            elif path.name.endswith(INDEX_SUFFIX):
                index = read_offset_index(ibuf, base_offset)
                pre = VI.index_file_preallocation(path, len(ibuf), base_offset, OffsetIndexColumns.of(index),
                                                  INDEX_ENTRY_SIZE)
                check = PerBatchIndexCheck(log_path=log_beside(path), add=add, index_path=path,
                                           index=[] if pre.zero_first else index)
            else:
                raise MissingFile(f"{path}: not an .index or .timeindex file")
        except DecodeError as err:
            raise err.at(path) from err
    log_path = log_beside(path)
    if not log_path.is_file():
        raise MissingFile(f"{path}: no {log_path.name} beside it to verify the entries against")
    segment = Segment(base_offset=base_offset, log_path=log_path)
    with segment.open() as buf:
        next_pos = 0
        try:
            for h in segment.iter_batches(buf):
                next_pos = h.position + h.size
                check.batch(h)
        except DecodeError as err:
            add("log-decode", ERROR, str(log_path), next_pos, log_decode_message(len(buf), next_pos, err))
        check.finish(len(buf))
    VI.add_index_file_preallocated(add, path, pre, padding[0])
    problems.sort(key=lambda p: (p.position if p.position is not None else -1))
    return problems


def _padding_filter(add: AddProblem, ambiguous: str | None, padding: list[bool]) -> AddProblem:
    """``add`` without the rows of an ambiguous all-zero first time index entry (the preallocation)."""
    def keep(check: str, severity: str, file: str | None, position: int | None, message: str) -> None:
        if ambiguous is not None and file == ambiguous and position == 0:
            padding[0] = True
            return
        add(check, severity, file, position, message)
    return keep


class PerBatchVerifier(V._PartitionVerifier):
    """``_PartitionVerifier`` with the former per-batch ``_segment``."""

    def _segment(self, segment: Segment, pending: list[tuple[int, Path, ProducerSnapshot]]
                 ) -> list[tuple[int, Path, ProducerSnapshot]]:
        log = str(segment.log_path)
        # The entries as verify.py reads them, preallocation rules included (not the walk under test);
        # the offset index's offsets relative to the segment's base offset, as the file stores them.
        index, time_index, zero_first = self._index_inputs(segment)
        padding = [False]
        ambiguous = str(segment.timeindex_path) if zero_first and len(time_index[0]) == 1 else None
        indexes = PerBatchIndexCheck(
            log_path=segment.log_path, add=_padding_filter(self.add, ambiguous, padding),
            index_path=segment.index_path,
            index=[OffsetIndexEntry(offset=segment.base_offset + o, position=p) for o, p in zip(*index, strict=True)],
            timeindex_path=segment.timeindex_path,
            time_index=[TimeIndexEntry(timestamp=t, offset=o) for t, o in zip(*time_index, strict=True)])
        aborts_no_data: dict[int, int] = {}
        self.aborts = {}
        size = 0
        next_pos = 0
        try:
            with segment.open() as buf:
                size = len(buf)
                for h in segment.iter_batches(buf):
                    next_pos = h.position + h.size
                    while pending and pending[0][0] <= h.base_offset:
                        off, path, snap = pending.pop(0)
                        self._compare_snapshot(off, path, snap)
                    if h.base_offset < segment.base_offset:
                        self.add("offset-order", ERROR, log, h.position,
                                 f"batch at offset {h.base_offset} is below its segment's base offset "
                                 f"{segment.base_offset}")
                    if self.prev_last is not None and h.base_offset <= self.prev_last:
                        self.add("offset-order", ERROR, log, h.position,
                                 f"batch base offset {h.base_offset} is not after the previous batch's last "
                                 f"offset {self.prev_last}")
                    self.prev_last = h.last_offset if self.prev_last is None else max(self.prev_last, h.last_offset)
                    self.log_end_offset = max(self.log_end_offset, h.last_offset + 1)
                    indexes.batch(h)
                    good = crc_valid(buf, h)
                    if not good:
                        self.add("crc", ERROR, log, h.position,
                                 f"batch at offset {h.base_offset} (size {h.size}) has a bad CRC (stored "
                                 f"{h.crc:#010x})")
                        continue
                    if h.producer_id < 0:
                        continue
                    if h.is_control:
                        if h.records_count == 0:
                            continue
                        try:
                            control = read_control_record(buf, h)
                        except DecodeError as err:
                            self.add("control-record", ERROR, log, err.position, str(err.at(segment.log_path)))
                            continue
                        before = len(self.aborts)
                        self.replay.append_end_txn_marker(h, control.type_id, control.coordinator_epoch, log)
                        self._take_aborts()  # (was: the replay's on_completed callback, called in marker)
                        self._take_findings()
                        if control.type_id == ControlType.ABORT and len(self.aborts) == before:
                            aborts_no_data[h.base_offset] = h.producer_id
                    else:
                        self.replay.append(h, log)
                        self._take_findings()
        except DecodeError as err:
            self.add("log-decode", ERROR, log, next_pos, log_decode_message(size, next_pos, err))
        indexes.finish(size)
        self._note_preallocated(segment, len(index[0]), len(time_index[0]), padding[0])
        self._check_txn_index(segment, lambda _seg, off, pid: aborts_no_data.get(off) == pid)
        return pending

    def _check_txn_index(self, segment: Segment,
                         abort_without_data: Callable[[Segment, int, int], bool] | None = None) -> None:
        """The former ``_check_txn_index``: an ``AbortedTxn`` and a Python step per ``.txnindex`` entry."""
        if abort_without_data is None:
            abort_without_data = self._abort_without_data
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
                if abort_without_data(segment, e.last_offset, e.producer_id):
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


@contextmanager
def per_batch_walk() -> Iterator[None]:
    """``verify`` (and ``verify_partition``) with the former per-batch walk while inside."""
    saved = V._PartitionVerifier
    V._PartitionVerifier = PerBatchVerifier  # type: ignore[misc]
    try:
        yield
    finally:
        V._PartitionVerifier = saved  # type: ignore[misc]
