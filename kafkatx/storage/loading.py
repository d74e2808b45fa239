"""What the broker builds when it starts on a partition's files: Kafka's log loading, step by step.

Every offline answer (``lag``, ``find-hanging``, ``describe-producers``, ``verify``, the
``abort-hanging`` plan, ``scan``) must be the state the broker will have after it starts on
the same files, not what the files literally say. Kafka 4's loader
(storage/src/main/java/org/apache/kafka/storage/internals/log/LogLoader.java,
``UnifiedLog.rebuildProducerState``, ``ProducerStateManager``) does, in order:

1. ``loadSegmentFiles``: a segment whose offset index is missing, or whose ``.txnindex``
   fails ``TransactionIndex.sanityCheck``, is recovered right away (clean shutdown or not).
2. ``recoverLog``: without ``.kafka_cleanshutdown``, every segment from the one holding the
   recovery point (``recovery-point-offset-checkpoint``, 0 when absent) onwards is recovered;
   the first invalid or partial batch truncates its segment and deletes every later one.
   Each recovery (``LogLoader.recoverSegment``) rebuilds producer state to the segment's
   base with a fresh ``ProducerStateManager``: ``truncateAndReload(logStartCheckpoint, base)``
   **deletes every snapshot above that base** and at or below the checkpointed log start, then
   writes new snapshots at the base and at the recovered segment's end.
3. log start = max(``log-start-offset-checkpoint`` entry, first segment's base offset), or the
   checkpoint's entry as it is when the log loads with remote storage enabled (KIP-405,
   ``LogLoader.load``'s ``isRemoteLogEnabled`` branch: the older segments live in the remote tier);
   ``UnifiedLog`` keeps ``localLogStartOffset`` = max(log start, first segment's base) beside it.
   Which partitions are tiered: ``kafkatx.storage.tiered`` (asked only where the checkpoint is below the
   first segment: elsewhere both rules agree).
4. ``removeStraySnapshots``: of the snapshots matching no segment base only the newest
   survives, and only when it lies above the newest segment base.
5. ``rebuildProducerState(logStart, logEnd)``: with ``.kafka_cleanshutdown`` and no snapshot
   left at all, Kafka assumes an upgrade from a pre-0.11 broker: empty producer state, no
   log scan. Otherwise ``truncateAndReload`` deletes snapshots at or below the log start or
   above the log end, loads the newest one whose CRC holds (``loadFromSnapshot``: a corrupt
   one is deleted and the next older tried), dropping expired producers
   (``isProducerExpired``: no open transaction and ``now - lastTimestamp >=
   producer.id.expiration.ms``), and replays the batches after it.
6. ``removeExpiredProducers`` runs every ``producer.id.expiration.check.interval.ms``: no
   expired producer survives for long, so none is shown or counted at ``now``.

:func:`plan_load` reproduces steps 1-5 on the file names, checkpoints and (for recovered
segments) batch CRCs, without changing anything on disk: which snapshot the final replay
starts from, where the broker's own intermediate snapshots make it drop expired producers
(``reloads``), the log end after truncation, and every file the broker deletes or rebuilds
(``actions``). ``storage/replay.py`` folds the batches accordingly. Pure apart from reading files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

from msgspec import Struct, field

from kafkatx.errors import DecodeError, KafkaTxError, MissingFile
from kafkatx.format.producer_snapshot import ProducerSnapshot, read_producer_snapshot
from kafkatx.format.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from kafkatx.format.txn_index import first_entry_below, read_txn_index
from kafkatx.storage import fdio
from kafkatx.storage.broker_config import DEFAULT_PRODUCER_ID_EXPIRATION_MS as _DEFAULT_EXPIRATION_MS
from kafkatx.storage.log_end import (
    ValidPrefix,
    known_next_offset,
    next_offset_of,
    segment_valid_prefix,
    valid_prefix,
)
from kafkatx.storage.partition import METADATA_TOPIC, NOTHING_AHEAD, Partition, ReadAhead, segment_reads
from kafkatx.storage.segment import (
    FileShrank,
    Segment,
    map_file,
    read_whole,
    small_reads,
)
from kafkatx.storage.tiered import RemoteLogRule, remote_log_rule

# producer.id.expiration.ms's default (stated in storage/broker_config.py with the broker's other settings)
DEFAULT_PRODUCER_ID_EXPIRATION_MS = _DEFAULT_EXPIRATION_MS

V = TypeVar("V")

# StartupAction.action values
DELETE_SNAPSHOT = "delete-snapshot"
RECOVER_SEGMENT = "recover-segment"
TRUNCATE_SEGMENT = "truncate-segment"
DELETE_SEGMENT = "delete-segment"
SKIP_PRODUCER_STATE = "skip-producer-state"
REPLAY_FROM_LOG_START = "replay-from-log-start"


class StartupAction(Struct, frozen=True, kw_only=True):
    """One thing the broker does to a partition's files (or state) when it starts on them."""

    action: str  # one of the constants above
    file: str  # the file acted on (the partition folder for state-only actions)
    position: int | None
    message: str  # "<file>: <why>; the broker <does what> on startup"
    changes_answer: bool = True  # False: housekeeping that leaves every answer as it is
    # Why, as a stable code: delete-snapshot: at-or-below-log-start | past-log-end |
    # above-recovered-segment-base | stray | corrupt | log-end-below-log-start; others: the action.
    reason: str = ""


class Chain(NamedTuple):
    """How a producer state came to be: start state, then the batches after it.

    ``kind`` is ``file`` (a ``.snapshot`` on disk: ``path``), ``log-start`` (empty state, replay
    from ``offset``) or ``empty`` (the upgrade path: empty state at ``offset``, no replay
    before it). ``reloads`` are the offsets where the broker reloads a snapshot it wrote
    itself during this start-up, each load dropping expired producers.
    """

    kind: str
    offset: int
    path: Path | None
    reloads: tuple[int, ...]


class _Snap(NamedTuple):
    offset: int
    path: Path | None  # None: written by the broker during this start-up (its state is ``chain``)
    chain: Chain | None


class LoadPlan(Struct, frozen=True, kw_only=True):
    """What :func:`plan_load` found: the broker's view of one partition after it starts."""

    partition: str  # "topic-N"
    clean_shutdown: bool
    log_start_offset: int
    log_start_checkpoint: int | None
    recovery_point: int | None  # the checkpointed recovery point (None: absent, Kafka uses 0)
    log_end_offset: int  # after any recovery truncation
    chain: Chain  # where the final producer state starts and which reloads it passes
    final_load_offset: int  # the offset the final ProducerStateManager replays from
    mode: str  # "snapshot" | "log-replay" | "empty-upgrade"
    truncated: tuple[str, int, int] | None = None  # (file, position, bytes) cut by recovery
    cuts: dict[str, int] = field(default_factory=dict)  # segment file -> bytes that survive recovery
    deleted_segments: tuple[str, ...] = ()
    actions: tuple[StartupAction, ...] = ()
    snapshot_entries: ProducerSnapshot | None = None  # the decoded start snapshot when chain.kind == file
    # Bytes at the end of an unrecovered last segment that do not form a batch (clean shutdown: the
    # broker does not truncate them): the partition is not analysed, like any undecodable partition.
    tail_error: DecodeError | None = None
    # UnifiedLog.localLogStartOffset: the first local segment's base, at least the log start (-1: as the log
    # start, for a plan made without it)
    local_log_start_offset: int = -1
    # What decided the tiered question (kafkatx.storage.tiered), where it was asked: the checkpoint is below the
    # first local segment. None elsewhere (both of LogLoader's rules give the same log start).
    remote: RemoteLogRule | None = None

    @property
    def local_start(self) -> int:
        """``UnifiedLog.localLogStartOffset``."""
        return self.local_log_start_offset if self.local_log_start_offset >= 0 else self.log_start_offset

    @property
    def tiered(self) -> bool:
        """The log loads with remote storage enabled and its log start is below the first local segment."""
        return self.remote is not None and self.remote.enabled

    @property
    def snapshot_offset(self) -> int | None:
        return self.chain.offset if self.chain.kind == "file" else None

    @property
    def notices(self) -> list[str]:
        return [a.message for a in self.actions if a.changes_answer]


_UNREAD = object()  # _Loader.decoded's "not read yet"


class _Loader(Struct):
    partition: Partition
    clean: bool
    lsc: int  # log-start-offset-checkpoint entry, 0 when absent (LogManager's default)
    rp: int  # recovery point, 0 when absent
    segments: list[Segment]
    snaps: dict[int, _Snap] = field(default_factory=dict)
    actions: list[StartupAction] = field(default_factory=list)
    # by the path's string: a Path hashes its parts as a tuple (~1 us the first time, per partition)
    decoded: dict[str, ProducerSnapshot | None] = field(default_factory=dict)
    truncated: tuple[str, int, int] | None = None
    cuts: dict[str, int] = field(default_factory=dict)
    tail_error: DecodeError | None = None
    deleted_segments: list[str] = field(default_factory=list)
    seg_ends: dict[int, int] = field(default_factory=dict)  # base -> next offset, for recovered segments
    # plan_load's ``known_prefixes`` and ``known_files``, by the path's string (as ``decoded``)
    known_prefixes: Mapping[str, ValidPrefix] = field(default_factory=dict)
    known_files: Mapping[str, bytes] = field(default_factory=dict)
    small: bool = True  # segment.small_reads(), asked once per partition
    ahead: ReadAhead = NOTHING_AHEAD  # small files read ahead in one call (_read_ahead)
    lsc_entry: int | None = None  # the checkpoints' entries as listed (None: absent), for LoadPlan
    rp_entry: int | None = None
    read: dict[str, bytes] | None = None  # plan_load's ``read``: the small last segment read whole for the log end

    # ------------------------------------------------------------------ files
    def _name(self, path: Path | str) -> str:
        return str(path)

    def _read_ahead(self) -> None:
        """Read the small files this load reads when nothing is recovered (the last segment's ``.log``
        and ``.index`` for the log end, the newest snapshot) in one call (``partition.ReadAhead``);
        each is handed to the reader that reads it, which judges it as its own read."""
        part = self.partition
        paths: list[Path] = []
        stat_first: list[bool] = []
        if self.segments:
            segment_reads(self.segments[-1], paths, stat_first)
        if part.snapshots:
            paths.append(part.snapshots[-1][1])
            stat_first.append(False)
        self.ahead = ReadAhead(paths, stat_first)

    def _delete_snapshot(self, offset: int, why: str, reason: str) -> None:
        snap = self.snaps.pop(offset, None)
        if snap is None or snap.path is None:
            return  # a snapshot the broker wrote itself during this start-up: nothing on disk now
        self.actions.append(StartupAction(action=DELETE_SNAPSHOT, file=str(snap.path), position=None, reason=reason,
                                          message=f"{self._name(snap.path)}: {why}; the broker deletes it on startup"))

    def _read_snapshot(self, path: Path) -> ProducerSnapshot | None:
        """The decoded snapshot, or None when Kafka's ``readSnapshot`` would throw CorruptSnapshotException."""
        key = str(path)
        got = self.decoded.get(key, _UNREAD)  # one hash of the path's string, not three (twice per partition)
        if got is not _UNREAD:
            return got  # type: ignore[return-value]
        try:
            snap = read_whole(path, read_producer_snapshot, allowed=self.small, got=self.ahead.take(path))
            decoded = snap if snap.crc_valid else None
        except FileShrank:  # changed size while being read: never taken for damage
            raise
        except (DecodeError, MissingFile):
            decoded = None
        self.decoded[key] = decoded
        return decoded

    # ------------------------------------------------------------------ ProducerStateManager
    def _load_newest(self, log_start: int) -> tuple[Chain, int]:
        """``loadFromSnapshot``: the newest snapshot that reads, else the log start. Returns (chain, mapEnd)."""
        while self.snaps:
            offset = max(self.snaps)
            snap = self.snaps[offset]
            if snap.path is None:
                assert snap.chain is not None
                base = snap.chain
                return Chain(base.kind, base.offset, base.path, base.reloads + (offset,)), offset
            if self._read_snapshot(snap.path) is not None:
                return Chain("file", offset, snap.path, ()), offset
            self._delete_snapshot(offset, "does not read (snapshot CRC mismatch, bad version or "
                                          "length), so the broker falls back to an older snapshot", "corrupt")
        return Chain("log-start", log_start, None, ()), log_start

    def _rebuild(self, segments: Sequence[Segment], log_start: int, last_offset: int, clean: bool,
                 above: tuple[str, str]) -> tuple[Chain, int, str]:
        """``UnifiedLog.rebuildProducerState`` with a fresh manager; returns (chain, final load offset, mode).

        ``above`` says why a snapshot past ``last_offset`` goes (the log end, or a recovered
        segment's base).
        """
        bases = [s.base_offset for s in segments]
        to_snapshot = set(bases[-2:]) | {last_offset}
        if not self.snaps and clean:
            # The upgrade path: empty snapshots at the last two segment bases and the log end.
            last_snap = 0
            for off in sorted(to_snapshot):
                if off > last_snap:
                    self.snaps[off] = _Snap(off, None, Chain("empty", off, None, ()))
                    last_snap = off
            return Chain("empty", last_offset, None, ()), last_offset, "empty-upgrade"
        for off in sorted(self.snaps):
            if off > last_offset:
                self._delete_snapshot(off, *above)
            elif off <= log_start:
                self._delete_snapshot(off, f"is at or below the log start offset {log_start}", "at-or-below-log-start")
        if last_offset == 0:  # logEndOffset == mapEndOffset of a fresh manager: nothing to load
            return Chain("log-start", 0, None, ()), 0, "log-replay"
        chain, map_end = self._load_newest(log_start)
        loaded_at = last_snap = map_end
        if last_offset > map_end:
            first = 0
            for i, b in enumerate(bases):
                if b <= map_end:
                    first = i
            for seg in segments[first:]:
                if seg.base_offset >= last_offset:
                    break
                map_end = max(seg.base_offset, map_end, log_start)
                if seg.base_offset in to_snapshot and map_end > last_snap:
                    self.snaps[map_end] = _Snap(map_end, None, chain)
                    last_snap = map_end
        if last_offset > last_snap:
            self.snaps[last_offset] = _Snap(last_offset, None, chain)
        mode = "snapshot" if chain.kind == "file" or chain.reloads else "log-replay"
        return chain, loaded_at, mode

    # ------------------------------------------------------------------ LogSegment.recover
    def _recover(self, seg: Segment, segments: Sequence[Segment], why: str) -> int:
        """``LogLoader.recoverSegment``: returns the bytes recovery truncates from ``seg``.

        ``segments`` is what the broker's segment map holds at that moment (the segments
        before ``seg`` while loading files, all of them in ``recoverLog``).
        """
        chain, _loaded, _mode = self._rebuild(segments, self.lsc, seg.base_offset, False,
                                              (f"is above the base offset {seg.base_offset} of a segment the "
                                               f"broker recovers", "above-recovered-segment-base"))
        if chain.kind == "log-start" and chain.offset > seg.base_offset:
            # LogSegment.recover feeds every batch of the segment into the producer state
            # (``producerStateManager.update`` per batch, no log-start filter), so the state it
            # snapshots at the segment's end saw the batches below the checkpointed log start too:
            # the replay that stands for it starts at the segment's base. (A snapshot file at or
            # below this base survives only above the log start, so only a log-start chain can
            # begin above the base.)
            chain = Chain("log-start", seg.base_offset, None, chain.reloads)
        self.actions.append(StartupAction(
            action=RECOVER_SEGMENT, file=str(seg.log_path), position=0, changes_answer=False,
            message=(f"{self._name(seg.log_path)}: {why}; the broker recovers it on startup (checks every "
                     f"batch, rebuilds its indexes and producer state)")))
        size = seg.size
        known = self.known_prefixes.get(str(seg.log_path))
        valid, next_offset, bad, _walked = known if known is not None and known.size == size else segment_valid_prefix(seg)
        self.seg_ends[seg.base_offset] = next_offset
        if next_offset > seg.base_offset:
            self.snaps[next_offset] = _Snap(next_offset, None, chain)
        if size > valid:
            self.cuts[str(seg.log_path)] = valid
            self.truncated = (str(seg.log_path), valid, size - valid)
            self.actions.append(StartupAction(
                action=TRUNCATE_SEGMENT, file=str(seg.log_path), position=valid,
                message=(f"{self._name(seg.log_path)}: {size - valid} bytes from byte {valid} are {bad}; "
                         f"recovery truncates the segment there (next offset {next_offset})")))
        return size - valid

    # ------------------------------------------------------------------ LogLoader.load
    def load(self) -> LoadPlan:
        part = self.partition
        for off, path in part.snapshots:
            self.snaps[off] = _Snap(off, path, None)
        # 1. loadSegmentFiles: a missing offset index or a txnindex failing its sanity check.
        for i, seg in enumerate(self.segments):
            why = _needs_recovery_at_load(seg)
            if why is not None:
                self._recover(seg, self.segments[:i], why)
        # 2. recoverLog
        if not self.clean:
            floor = 0
            for i, seg in enumerate(self.segments):
                if seg.base_offset <= self.rp:
                    floor = i
            for i in range(floor, len(self.segments)):
                seg = self.segments[i]
                why = ("the KRaft metadata log is recovered from offset 0 at every start (KafkaMetadataLog "
                       "opens it with recovery point 0 and an unclean flag) and this segment holds or follows it"
                       if self.partition.topic == METADATA_TOPIC else
                       f"the broker did not shut down cleanly (no .kafka_cleanshutdown) and this segment holds or "
                       f"follows the recovery point {self.rp}")
                if self._recover(seg, self.segments, why) > 0:
                    for later in self.segments[i + 1:]:
                        self.deleted_segments.append(str(later.log_path))
                        self.actions.append(StartupAction(
                            action=DELETE_SEGMENT, file=str(later.log_path), position=None,
                            message=(f"{self._name(later.log_path)}: follows the truncated segment; recovery "
                                     f"deletes it on startup")))
                        self.snaps.pop(later.base_offset, None)
                    del self.segments[i + 1:]
                    break
        log_end = self._log_end()
        if self.segments and log_end < self.lsc:
            # deleteSegmentsIfLogStartGreaterThanLogEnd
            for seg in self.segments:
                self.deleted_segments.append(str(seg.log_path))
                self.actions.append(StartupAction(
                    action=DELETE_SEGMENT, file=str(seg.log_path), position=None,
                    message=(f"{self._name(seg.log_path)}: the log end {log_end} is below the checkpointed log "
                             f"start {self.lsc}; the broker deletes every segment on startup")))
            for off in sorted(self.snaps):
                self._delete_snapshot(off, f"the log end {log_end} is below the log start {self.lsc}",
                                      "log-end-below-log-start")
            self.segments = []
            log_end = self.lsc
        # 3. LogLoader.load: newLogStartOffset (the checkpoint's entry as it is for a remote-enabled log)
        remote: RemoteLogRule | None = None
        if self.segments and self.lsc_entry is not None and self.lsc < self.segments[0].base_offset \
                and part.topic != METADATA_TOPIC:
            remote = remote_log_rule(part.topic, part.log_dir, self.clean)
        if not self.segments:
            log_start = local_start = self.lsc
        else:
            local_start = max(self.lsc, self.segments[0].base_offset)
            log_start = self.lsc if remote is not None and remote.enabled else local_start
        # 4. removeStraySnapshots
        bases = {s.base_offset for s in self.segments}
        newest_base = max(bases) if bases else None
        strays = sorted([off for off in self.snaps if off not in bases])
        for off in strays[:-1]:
            self._delete_snapshot(off, "matches no segment base offset and a newer such snapshot exists "
                                       "(removeStraySnapshots)", "stray")
        if strays and newest_base is not None and strays[-1] < newest_base:
            self._delete_snapshot(strays[-1], f"matches no segment base offset and lies below the newest "
                                              f"segment base {newest_base} (removeStraySnapshots)", "stray")
        # 5. rebuildProducerState
        chain, loaded_at, mode = self._rebuild(self.segments, log_start, log_end, self.clean,
                                               (f"is past the log end offset {log_end}", "past-log-end"))
        # A deleted snapshot changes an answer only when the broker would otherwise have loaded it
        # (it is newer than the state the final replay starts from).
        start = chain.offset if chain.kind == "file" else -1
        if self.actions:  # none at most partitions
            self.actions = [a if a.action != DELETE_SNAPSHOT
                            else StartupAction(action=a.action, file=a.file, position=a.position, message=a.message,
                                               changes_answer=_snapshot_offset(a.file) > start, reason=a.reason)
                            for a in self.actions]
        if mode == "empty-upgrade" and log_end > log_start:
            self.actions.append(StartupAction(
                action=SKIP_PRODUCER_STATE, file=str(part.path), position=None,
                message=(f"{part.name}: clean shutdown and no producer snapshot; the broker takes this for an "
                         f"upgrade from a pre-0.11 broker and starts with empty producer state, without reading "
                         f"the log (open transactions in the log are forgotten)")))
        if chain.kind == "log-start" and part.snapshots and log_end > log_start:
            self.actions.append(StartupAction(
                action=REPLAY_FROM_LOG_START, file=str(part.path), position=None,
                message=(f"{part.name}: no usable producer snapshot; the broker rebuilds producer state by "
                         f"replaying the log from the log start {log_start} (replayed from the log start)"
                         if chain.offset >= log_start else
                         f"{part.name}: no usable producer snapshot; the broker rebuilds producer state by "
                         f"replaying the log from offset {chain.offset}, below the log start {log_start}: "
                         f"recovery reads every batch of the segment it recovers (LogSegment.recover)")))
        start_snapshot = self._read_snapshot(chain.path) if chain.kind == "file" and chain.path else None
        return LoadPlan(partition=part.name, clean_shutdown=self.clean, log_start_offset=log_start,
                        log_start_checkpoint=self.lsc_entry, recovery_point=self.rp_entry,
                        log_end_offset=log_end, chain=chain,
                        final_load_offset=loaded_at, mode=mode, truncated=self.truncated,
                        cuts=dict(self.cuts), tail_error=self.tail_error, deleted_segments=tuple(self.deleted_segments),
                        actions=tuple(self.actions), snapshot_entries=start_snapshot,
                        local_log_start_offset=local_start, remote=remote)

    def _log_end(self) -> int:
        """``segments.lastSegment().readNextOffset()``: the last segment's last batch + 1, or its base."""
        if not self.segments:
            return self.lsc
        last = self.segments[-1]
        if last.base_offset in self.seg_ends:
            return self.seg_ends[last.base_offset]
        known = known_next_offset(last, self.known_prefixes, self.known_files) if self.known_prefixes else None
        if known is not None:
            return known
        nxt, self.tail_error = next_offset_of(last, self.known_files, self.small, self.ahead.take, self.read)
        return nxt


def _snapshot_offset(path: str) -> int:
    return int(Path(path).name[:20])


def _checkpoint(part: Partition, name: str) -> int | None:
    log_dir = part.log_dir
    if log_dir is None:
        return None
    table = getattr(log_dir, name, None)
    return table.get(part.key) if table is not None else None


def _needs_recovery_at_load(seg: Segment) -> str | None:
    """``LogSegment.sanityCheck``: why ``loadSegmentFiles`` recovers this segment, or None."""
    if seg.index_path is None:
        return "has no offset index (.index)"
    if seg.txnindex_path is not None:
        try:
            with map_file(seg.txnindex_path) as buf:
                below = first_entry_below(buf, seg.base_offset)
                if below is None:
                    return None
                last = read_txn_index(buf[below:below + TXN_ENTRY_SIZE])[0].last_offset
        except FileShrank:  # changed size while being read: never taken for damage
            raise
        except (DecodeError, MissingFile):
            return None  # Kafka fails on versions it does not know rather than recovering
        return (f"its .txnindex has an entry ending at {last}, below the segment base "
                f"{seg.base_offset} (TransactionIndex.sanityCheck)")
    return None


def plan_load(partition: Partition, *,
              known_prefixes: Mapping[Path, ValidPrefix] | Mapping[str, ValidPrefix] | None = None,
              known_snapshots: Mapping[Path, ProducerSnapshot | None] | Mapping[str, ProducerSnapshot | None]
              | None = None,
              known_files: Mapping[Path, bytes] | Mapping[str, bytes] | None = None,
              small: bool | None = None, read: dict[str, bytes] | None = None) -> LoadPlan:
    """What the broker does when it starts on ``partition``'s files (module docstring, steps 1-5).

    The log dir's ``.kafka_cleanshutdown`` and checkpoints come from ``partition.log_dir``; a
    partition opened without its log dir is taken as cleanly shut down with no checkpoints.
    ``known_prefixes`` (segment ``.log`` path -> :class:`ValidPrefix`) are recoveries a caller
    already walked (``verify`` checks every CRC of every segment): a segment recovery reaches is
    not walked again when its entry was made from as many bytes as the file has now.
    ``known_snapshots`` (``.snapshot`` path -> the decoded snapshot, None where Kafka's
    ``readSnapshot`` would throw: a bad CRC or bytes that do not decode) are snapshots a caller
    already read (``verify`` decodes every one): not read again. ``known_files`` (path -> the whole
    bytes of a small file a caller read in this run: ``verify``'s last segment and its index) are
    used for the log end instead of reading them again; the last segment's known prefix gives the log
    end without a walk when it covers those bytes whole and its index has no entry
    (:func:`kafkatx.storage.log_end.known_next_offset`). Each is keyed by path or by the path's string
    (``verify``'s: a Path hashes its parts as a tuple). ``small``: ``segment.small_reads()`` as the caller
    asked it once for many partitions (None: asked here; an environment lookup). ``read``: given, the last
    segment's ``.log`` is put there (by the path's string) when the log end read it whole as a small file, the
    bytes ``open_windowed`` hands out for it: a replay of the same plan folds them (``FileEvents(known=...)``)
    instead of reading the file a second time (and two replays of one partition read it once).
    """
    log_dir = partition.log_dir
    # .kafka_cleanshutdown as the log dir's listing saw it (LogDir.listed_clean_shutdown: the files planned
    # from are that listing's); another kind of log dir (spark's) says clean_shutdown
    listed = getattr(log_dir, "listed_clean_shutdown", None) if log_dir is not None else True
    clean = bool(listed if listed is not None else getattr(log_dir, "clean_shutdown", True))
    lsc = lsc_entry = _checkpoint(partition, "log_start_offsets")
    rp = rp_entry = _checkpoint(partition, "recovery_points")
    if partition.topic == METADATA_TOPIC:
        # KafkaMetadataLog.apply opens the KRaft metadata log as UnifiedLog(logStartOffset = 0L,
        # recoveryPoint = 0L, lastShutdownClean = false) whatever the log dir's checkpoints and
        # .kafka_cleanshutdown say: every start recovers it from offset 0 (and so deletes its producer
        # snapshots above the recovered segment's base, as for any recovered segment).
        clean, lsc, rp = False, 0, 0
    loader = _Loader(partition=partition, clean=clean, lsc=lsc if lsc is not None else 0,
                     rp=rp if rp is not None else 0, segments=list(partition.segments),
                     known_prefixes=_by_str(known_prefixes) if known_prefixes else {},
                     lsc_entry=lsc_entry, rp_entry=rp_entry,
                     decoded=_by_str(known_snapshots, copy=True) if known_snapshots else {},
                     known_files=_by_str(known_files) if known_files else {},
                     small=small_reads() if small is None else small, read=read)
    if loader.small and clean and not known_files:
        # Nothing is recovered when the broker shut down cleanly (unless an index is missing or a
        # txnindex fails its check: then a read-ahead file may go unused, and is read no more)
        loader._read_ahead()
    try:
        return loader.load()
    except KafkaTxError:
        raise
    except OSError as err:  # pragma: no cover - fdio's calls raise ReadFailed (a KafkaTxError)
        raise fdio.failed(err.filename if isinstance(err.filename, str) else partition.path, err) from err


def _by_str(known: Mapping[Path, V] | Mapping[str, V], copy: bool = False) -> dict[str, V]:
    """``known`` keyed by the path's string (``plan_load``'s ``known_*``): itself when it is a dict so
    keyed already (``verify``'s; ``copy``: a copy, for a loader that adds to it), else re-keyed."""
    if known.__class__ is dict and next(iter(known)).__class__ is str:
        return dict(known) if copy else known
    return {str(p): v for p, v in known.items()}


def is_expired(last_timestamp: int, has_open_txn: bool, now: int, expiration_ms: int) -> bool:
    """``ProducerStateManager.isProducerExpired``."""
    return not has_open_txn and now - last_timestamp >= expiration_ms


# ValidPrefix and valid_prefix are storage.log_end's, named here too because checks.verify imports them from here
__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "Chain", "LoadPlan", "StartupAction", "ValidPrefix", "is_expired",
    "plan_load", "valid_prefix",
]
