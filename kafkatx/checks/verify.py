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

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from operator import attrgetter, le
from pathlib import Path

from msgspec import Struct

from kafkatx.checks.indexes import (
    ERROR,
    INFO,
    NO_INDEX,
    NO_TIME_INDEX,
    RANK_CONTROL,
    RANK_CRC,
    RANK_ORDER,
    RANK_SNAPSHOT,
    WARNING,
    AddProblem,
    BatchRow,
    Problem,
    SegmentIndexCheck,
    add_row,
    log_decode_message,
    offset_index_padding,
    problem_of_finding,
    row_key,
    row_value,
    zero_filled_from,
    zero_first_entry_of_preallocated,
)
from kafkatx.coordinator.state_manager import CoordinatorState, replay_transaction_log
from kafkatx.errors import DecodeError, KafkaTxError, MissingFile, ReadFailed
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import ENTRY_SIZE as INDEX_ENTRY_SIZE
from kafkatx.format.offset_index import (
    OffsetIndexColumns,
    read_offset_index_relative,
)
from kafkatx.format.producer_snapshot import ProducerSnapshot, read_producer_snapshot
from kafkatx.format.record_batch import BatchHeader, crc_valid, read_batch_header, read_control_record
from kafkatx.format.segment_fold import (
    CRC_FAILS_ONLY,
    TABLE_COLUMNS,
    CrcAhead,
    FoldEvent,
    SegmentFold,
    crc_ahead_compiled,
    increasing,
)
from kafkatx.format.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkatx.format.time_index import TimeIndexColumns, read_time_index_columns
from kafkatx.format.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from kafkatx.format.txn_index import TxnIndexColumns, read_txn_index_columns
from kafkatx.rows import Finding, Progress
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
from kafkatx.storage.tiered import RemoteLogRule

_NO_TXN_INDEX = TxnIndexColumns((), (), (), ())
_PRODUCER_ID = attrgetter("producer_id")
_FIRST_OFFSET = attrgetter("first_offset")
_LSO = attrgetter("last_stable_offset")


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


def _finding_position(f: Finding) -> int:
    return f.position if f.position is not None else -1


def _iter_headers(segment: Segment, buf: Buffer, win: WindowedSnapshot | None) -> Iterator[BatchHeader]:
    """``segment.iter_batches(buf)`` over an :func:`open_windowed` buffer (errors name the ``.log``)."""
    try:
        yield from iter_batches_windowed(buf, win)
    except DecodeError as err:
        raise err.at(segment.log_path) from err


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
    problems.extend(problem_of_finding(f) for f in coordinator.findings)
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
            rows.sort(key=row_key)
            for row in rows:
                self.add(*row[2:])
        if bad is not None:
            self.add("log-decode", ERROR, log, bad[0], log_decode_message(size, bad[0], bad[1]))
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
                        next_offset = row_value(table, -2) + 1  # the last batch's last offset + 1
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
                        self._compare_snapshot(off, path, snap, partial(add_row, rows, h.position, RANK_SNAPSHOT))
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
            index = NO_INDEX  # the preallocation, not an entry
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
            return NO_INDEX
        keep = self.files if segment is self.part.segments[-1] else None
        got = self.ahead.take(path)
        if got is not None and not got[0]:  # read ahead empty (most at 10,000 partitions): what read_whole gives
            if keep is not None:
                keep[str(path)] = b""
            return NO_INDEX
        try:
            return read_whole(path, self._index_columns, path, keep=keep, allowed=self.small, got=got)
        except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
            raise
        except KafkaTxError as err:
            self.add("index-decode", ERROR, str(path), getattr(err, "position", None), str(err))
            return NO_INDEX

    def _index_columns(self, buf: Buffer, path: Path) -> OffsetIndexColumns:
        if not buf:
            return NO_INDEX  # an empty file: no entry, nothing to decode
        entries = read_offset_index_relative(buf)  # offsets relative to the base: SegmentIndexCheck(index_base)
        self._preallocation(path, buf, len(entries[0]) * INDEX_ENTRY_SIZE)
        return entries

    def _read_time_index(self, segment: Segment) -> TimeIndexColumns:
        path = segment.timeindex_path
        if path is None:
            return NO_TIME_INDEX
        try:
            return read_whole(path, self._time_index_columns, path, segment.base_offset, allowed=self.small,
                              got=self.ahead.take(path))
        except ReadFailed:  # a read that failed is no finding about the file: the answer is exit 3
            raise
        except KafkaTxError as err:
            self.add("timeindex-decode", ERROR, str(path), getattr(err, "position", None), str(err))
            return NO_TIME_INDEX

    def _time_index_columns(self, buf: Buffer, path: Path, base_offset: int) -> TimeIndexColumns:
        if not buf:
            return NO_TIME_INDEX  # an empty file: no entry, nothing to decode
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
