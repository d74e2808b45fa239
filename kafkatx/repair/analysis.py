"""Offline ``abort-hanging``: the analysis, every file read a repair plan is made from.

A repair reads the log dirs once, under the log dirs' locks (``repair.offline``), and plans from what
it read: :func:`analyse_abort_hanging` replays ``__transaction_state`` and the partitions' producer
state (``txn.replay``: the state ``TransactionStateManager`` and ``ProducerStateManager`` rebuild when a
broker loads these files), finds and selects the hanging transactions, and then reads what the plan
will append after: for each partition the selection may write to, the active segment (the size and
sha256 of exactly the bytes decoded, its last offset and leader epoch), its ``.index``/``.timeindex``
(the last entry, whether the file is trimmed to its entries) and ``.txnindex``, the partition's
``leader-epoch-checkpoint``; the ``__transaction_state`` record each coordinator-side repair rewrites;
the checkpoints' bytes; the snapshots a ghost ``drop-snapshots`` moves. :func:`kafkatx.repair.plan.plan_repair`
makes the plan from a :class:`RepairAnalysis` alone and reads no file.

The active segment is read forward in ``--read-window`` windows on the pread path (a live broker holds
the log dir: ``log.segment.open_windowed``), hashing each batch as it passes, so a repair's analysis does
not hold a whole segment in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from kafkatx.checks import hanging as _hanging
from kafkatx.checks.ghost import KIND_GHOST, apply_ghost_rule
from kafkatx.coordinator.decision import MarkerSeen, coordinator_decision
from kafkatx.coordinator.groups import with_blocked_groups
from kafkatx.coordinator.rules import (
    COORDINATOR_KINDS,
    TIMEOUT_STATES,
    HangingKind,
    is_distributed_two_phase_commit,
)
from kafkatx.coordinator.state import TransactionMetadata
from kafkatx.coordinator.state_manager import CoordinatorState
from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
from kafkatx.coordinator.versions import (
    NEWEST_MODELLED,
    KafkaVersion,
    release_of_metadata_version,
    version_text,
)
from kafkatx.errors import DecodeError, KafkaTxError, MissingFile, UsageError
from kafkatx.format.checkpoint import read_offset_checkpoint
from kafkatx.format.offset_index import ENTRY_SIZE as INDEX_ENTRY_SIZE
from kafkatx.format.offset_index import read_offset_index
from kafkatx.format.record_batch import iter_records
from kafkatx.format.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from kafkatx.format.time_index import read_time_index
from kafkatx.format.txn_log import TxnLogValue, decode_txn_log_key, decode_txn_log_value
from kafkatx.repair.fsutil import hash_file, hasher_of_file
from kafkatx.rows import HangingRow, Report
from kafkatx.session.offline import OfflineSession, hanging_key, require_match, require_selection
from kafkatx.session.transactions import known_ids
from kafkatx.storage import fdio
from kafkatx.storage.cluster_metadata import cluster_image
from kafkatx.storage.log_dir import CLEAN_SHUTDOWN, RECOVERY_CHECKPOINT, REPLICATION_CHECKPOINT, LogDir
from kafkatx.storage.partition import Partition, read_text_file
from kafkatx.storage.producer_state import PartitionProducerState
from kafkatx.storage.replay import replay_partition
from kafkatx.storage.segment import Segment, iter_batches_windowed, map_file, open_windowed

GHOST_STRATEGIES = ("marker", "drop-snapshots")
DECISIONS = ("commit", "abort")
# The kinds a coordinator-side repair finishes (every partition of the transaction at once).
COORDINATED = COORDINATOR_KINDS | {HangingKind.PREPARED_2PC}
TP = tuple[str, int]


class FileRead(Struct, frozen=True, kw_only=True):
    """One file as the analysis read it: whether it existed, its size and the sha256 of those bytes
    (``hasher``: a sha256 object fed with them, which the plan copies to chain its appends)."""

    path: Path
    exists: bool
    size: int
    hasher: hashlib._Hash

    @classmethod
    def of(cls, path: Path, data: bytes | memoryview | object | None) -> FileRead:
        if data is None:
            return cls(path=path, exists=False, size=0, hasher=hashlib.sha256())
        return cls(path=path, exists=True, size=len(data), hasher=hashlib.sha256(data))  # type: ignore[arg-type]


class SegmentTail(Struct, frozen=True, kw_only=True):
    """What a repair appends after in one partition: its active segment and that segment's indexes."""

    segment: Segment
    log: FileRead  # the .log: size and sha256 of the bytes decoded
    last_offset: int | None  # of the last batch; None: an empty segment
    last_epoch: int  # the last batch's partition leader epoch (-1: none)
    leader_epochs: tuple[tuple[int, int], ...]  # leader-epoch-checkpoint (epoch, start offset)
    index: FileRead | None  # None: absent, or not trimmed to its entries (no entry is appended then)
    last_index_position: int
    timeindex: FileRead | None
    last_time: int
    txnindex: FileRead  # exists=False: absent (the plan creates it)
    notices: tuple[str, ...] = ()  # said when the plan appends here


class CheckpointRead(Struct, frozen=True, kw_only=True):
    """A ``replication-offset-checkpoint`` / ``recovery-point-offset-checkpoint`` as read: its sha256
    and the offsets those very bytes hold."""

    path: Path
    sha256: str
    offsets: dict[TP, int]


class RepairAnalysis(Struct, kw_only=True):
    """Everything ``plan_repair`` plans from (module docstring); built by :func:`analyse_abort_hanging`."""

    dirs: list[LogDir]
    coord: CoordinatorState
    parts: dict[TP, Partition]
    states: dict[TP, PartitionProducerState]
    report: Report  # the session's: the replay's notes, skipped and unreadable partitions, then the analysis's
    selected: list[HangingRow] = field(default_factory=list)
    transactional_ids: tuple[str, ...] = ()
    force_terminate: tuple[str, ...] = ()
    topic: str | None = None
    transaction_version: int | None = None  # the cluster's finalized transaction.version, when known
    transaction_version_source: str = ""
    kafka_version: KafkaVersion = NEWEST_MODELLED  # the release whose coordinator rules the plan follows
    kafka_version_source: str = ""
    tails: dict[TP, SegmentTail | KafkaTxError] = field(default_factory=dict)
    last_values: dict[str, TxnLogValue | KafkaTxError] = field(default_factory=dict)
    # errors are kept where the plan would meet them (a file it must append to or move: it refuses then)
    file_hashes: dict[Path, str | KafkaTxError] = field(default_factory=dict)  # what drop-snapshots moves
    checkpoints: dict[Path, dict[str, CheckpointRead | KafkaTxError]] = field(default_factory=dict)
    # open transactions of the selection that do not hang yet (within their timeout): not selected
    # without ``force``; the command says why and how to go on
    in_timeout: list[HangingRow] = field(default_factory=list)
    # the markers other partitions hold of the producers whose orphan the history cannot decide
    markers: list[MarkerSeen] = field(default_factory=list)


# Past every timeout a transaction can have (Integer.MAX_VALUE ms, a two-phase-commit one's included)
PAST_EVERY_TIMEOUT_MS = 2**31


def open_not_hanging(coord: CoordinatorState, states: dict[TP, PartitionProducerState], found: list[HangingRow],
                     *, now: int) -> list[HangingRow]:
    """The open transactions ``found`` (the hanging ones at ``now``) leaves out: each one's row as it will be
    once its timeout has passed (the coordinator's own, ``TransactionStateManager.timedOutTransactions``, or
    for one it does not hold open, any age), with its age at ``now``. kafka-transactions.sh abort aborts the
    open transaction it is told (``TransactionsCommand.AbortTransactionCommand``, whatever its age):
    ``abort-hanging --force`` selects these too."""
    hanging = {(r.topic, r.partition, r.producer_id) for r in found}
    later = _hanging.find_hanging(coord, list(states.values()), now=now + PAST_EVERY_TIMEOUT_MS, max_timeout_ms=0)
    return [replace(r, duration_ms=now - r.start_ms if r.start_ms is not None else None)
            for r in apply_ghost_rule(later, states)
            if (r.topic, r.partition, r.producer_id) not in hanging]


def analyse_abort_hanging(log_dirs: Iterable[str | Path | LogDir], *, transactional_ids: Sequence[str] = (),
                          topic: str | None = None, partition: int | None = None, producer_id: int | None = None,
                          all_: bool = False, now: int, max_timeout_ms: int | None = None,
                          ghost_strategy: str = "marker", partitions_count: int | None = None,
                          force_terminate: Sequence[str] = (), decision: str | None = None,
                          index_interval_bytes: int = 0, metadata_log_dir: Path | None = None,
                          kafka_version: KafkaVersion | None = None, force: bool = False) -> RepairAnalysis:
    """Read and replay the log dirs, select the hanging transactions, read what a plan appends after.

    Raises :class:`UsageError` for a selection that cannot be meant and :class:`MissingFile` for an
    unknown ``--transactional-id``, as ``plan_abort_hanging`` documents."""
    if force_terminate:
        transactional_ids = tuple(dict.fromkeys([*transactional_ids, *force_terminate]))
    require_selection(transactional_ids=transactional_ids, topic=topic, partition=partition,
                      producer_id=producer_id, all_=all_)
    if ghost_strategy not in GHOST_STRATEGIES:
        raise UsageError(f"--ghost-strategy {ghost_strategy!r}: expected one of {', '.join(GHOST_STRATEGIES)}")
    if decision is not None and decision not in DECISIONS:
        raise UsageError(f"--decision {decision!r}: expected commit or abort")
    if index_interval_bytes < 0:
        raise UsageError(f"--index-interval-bytes must not be negative, got {index_interval_bytes}")
    # max_timeout_ms None: the broker configs' transaction.max.timeout.ms (--broker-config), as find-hanging.
    session = OfflineSession(log_dirs, now=now, max_timeout_ms=max_timeout_ms, partitions_count=partitions_count)
    session.resolve_settings(max_timeout=True)
    max_timeout_ms = session.max_timeout_ms
    work = _replay(session, metadata_log_dir)
    work.transactional_ids = tuple(transactional_ids)
    work.force_terminate = tuple(force_terminate)
    work.topic = topic
    require_match(work.dirs, topic, partition)
    unknown = [t for t in transactional_ids if t not in work.coord.transactions and t not in force_terminate]
    # (--force-terminate of an unknown id is _check_force_terminate's usage error)
    if unknown:
        gone = [t for t in unknown if t in work.coord.tombstoned]
        why = f" ({', '.join(gone)} expired: tombstoned)" if gone else ""
        raise MissingFile(f"--transactional-id {', '.join(unknown)}: not known to the coordinator in these log "
                          f"dirs{why}; {known_ids(work.coord.transactions)}")
    _cluster_transaction_version(work, metadata_log_dir, kafka_version)
    found = _hanging.find_hanging(work.coord, list(work.states.values()), now=now, max_timeout_ms=max_timeout_ms,
                                  report=work.report)
    found = apply_ghost_rule(found, work.states)
    waiting = open_not_hanging(work.coord, work.states, found, now=now)
    if force:
        found, waiting = found + waiting, []
    found = with_blocked_groups(found, work.parts.get, work.report, key=hanging_key)
    _check_force_terminate(work.coord, found, force_terminate)
    work.selected = select(found, transactional_ids=transactional_ids, topic=topic, partition=partition,
                           producer_id=producer_id, all_=all_)
    _read_markers(work)
    if not all_:  # --all is every hanging transaction: one still in flight is no finding to mention
        work.in_timeout = select(waiting, transactional_ids=transactional_ids, topic=topic, partition=partition,
                                 producer_id=producer_id, all_=False)
    _read_for_plan(work, ghost_strategy)
    return work


def history_decision(work: RepairAnalysis, h: HangingRow) -> Any:
    """What the ``__transaction_state`` history says of orphan ``h`` (``txn.decision.coordinator_decision``)."""
    owner = h.transactional_id or work.coord.expired_transactional_id_for(h.producer_id)
    return coordinator_decision(work.coord.history.get(owner, ()) if owner is not None else (),
                                transactional_id=owner, producer_id=h.producer_id,
                                producer_epoch=h.producer_epoch, partition=f"{h.topic}-{h.partition}",
                                start_ms=h.start_ms)


def last_write_ms(work: RepairAnalysis, h: HangingRow) -> int | None:
    """When ``h``'s producer last wrote to its open transaction in ``h``'s partition."""
    state = work.states.get((h.topic, h.partition))
    for t in state.open_transactions if state is not None else ():
        if t.producer_id == h.producer_id:
            return t.last_timestamp
    return None


def _read_markers(work: RepairAnalysis) -> None:
    """The markers every other partition holds of the producers of the selected orphans the history cannot
    decide (``txn.decision.marker_decision`` reads them): each partition replayed from its log start."""
    undecided = {h.producer_id for h in work.selected if h.kind == HangingKind.ORPHANED.value
                 and history_decision(work, h).control is None}
    if not undecided:
        return

    def seen(done: Any) -> None:
        if done.producer_id in undecided:
            work.markers.append(MarkerSeen(
                partition=f"{done.topic}-{done.partition}", producer_id=done.producer_id,
                marker_epoch=done.producer_epoch, outcome=done.outcome, marker_offset=done.marker_offset,
                first_data_ms=done.start_timestamp, marker_ms=done.end_timestamp))

    for tp, part in sorted(work.parts.items()):
        if tp[0] == TXN_STATE_TOPIC or tp not in work.states:
            continue
        try:
            replay_partition(part, use_snapshot=False, on_completed=seen)
        except (KafkaTxError, OSError):
            continue  # already said (skipped/incomplete) by the analysis' own replay


def _replay(session: OfflineSession, metadata_log_dir: Path | None) -> RepairAnalysis:
    """The session's coordinator (its ``__transaction_state`` partition count from ``metadata_log_dir`` when no
    flag, config or log dir gave it) and every partition replayed, the replay's notes and findings kept in the
    session's report, which the analysis shares."""
    if session.partitions_count is None and metadata_log_dir is not None:
        image = cluster_image(session.dirs, metadata_log_dir)
        if image is None:
            raise MissingFile(f"{metadata_log_dir}: no __cluster_metadata-0 here (--metadata-log-dir)")
        session.partitions_count = image.partition_count(TXN_STATE_TOPIC)
        if session.partitions_count is not None:
            session.report.note(f"{TXN_STATE_TOPIC} has {session.partitions_count} partitions: taken from "
                                f"{image.path} (the controller's metadata log)")
    coord = session.coordinator(history_for=None)  # every id's history: the decisions of its orphans
    # every partition (a coordinator-side repair touches any of them), loaded as the broker loads it, without
    # expiring idle producers at --now (a repair plans from the state on disk)
    session.replayed(replay=replay_partition)
    return RepairAnalysis(dirs=session.dirs, coord=coord, parts=session.parts, states=session.states,
                          report=session.report)


def select(rows: list[HangingRow], *, transactional_ids: Sequence[str], topic: str | None, partition: int | None,
           producer_id: int | None, all_: bool) -> list[HangingRow]:
    """The hanging rows a selection names; a coordinator-side repair brings every partition of its transaction."""
    if all_:
        return list(rows)
    ids = set(transactional_ids)
    chosen = []
    for r in rows:
        if ids and r.transactional_id not in ids:
            continue
        if topic is not None and r.topic != topic:
            continue
        if partition is not None and r.partition != partition:
            continue
        if producer_id is not None and r.producer_id != producer_id:
            continue
        chosen.append(r)
    # A coordinator-side repair finishes the whole transaction: show every partition it touches.
    coordinated = {r.transactional_id for r in chosen
                   if r.kind in COORDINATED}
    return [r for r in rows if r in chosen or (r.kind in COORDINATED
                                                and r.transactional_id in coordinated)]


def touched_names(coord: CoordinatorState, rows: Sequence[HangingRow]) -> set[str]:
    """The partitions repairing ``rows`` reads or writes: a coordinator-side repair every partition of
    the transaction and its __transaction_state partition; a partition-side marker its own partition."""
    names: set[str] = set()
    for h in rows:
        names.add(f"{h.topic}-{h.partition}")
        meta = coord.transactions.get(h.transactional_id) if h.transactional_id is not None else None
        if meta is not None and h.kind in COORDINATOR_KINDS:
            names.update(f"{t}-{p}" for t, p in meta.partitions)
            names.add(f"{TXN_STATE_TOPIC}-{meta.coordinator_partition}")
    return names


def _read_for_plan(work: RepairAnalysis, ghost_strategy: str) -> None:
    """Read what the plan of ``work.selected`` may append after or move (module docstring)."""
    wanted: set[TP] = set()
    coordinated: dict[str, TransactionMetadata] = {}
    ghosts: set[TP] = set()
    for h in work.selected:
        wanted.add((h.topic, h.partition))
        meta = work.coord.transactions.get(h.transactional_id) if h.transactional_id is not None else None
        if meta is not None and h.kind in COORDINATED:
            coordinated[meta.transactional_id] = meta
            wanted.update(meta.partitions)
            wanted.add((TXN_STATE_TOPIC, meta.coordinator_partition))
        elif h.kind == KIND_GHOST and ghost_strategy == "drop-snapshots":
            ghosts.add((h.topic, h.partition))
    for tp in sorted(wanted):
        part = work.parts.get(tp)
        if part is not None:
            try:
                work.tails[tp] = read_tail(part)
            except KafkaTxError as err:
                work.tails[tp] = err  # raised when the plan appends here (it refuses everything then)
    for tid, meta in sorted(coordinated.items()):
        if (TXN_STATE_TOPIC, meta.coordinator_partition) in work.parts:
            try:
                work.last_values[tid] = _last_value(work.parts[(TXN_STATE_TOPIC, meta.coordinator_partition)], meta)
            except KafkaTxError as err:
                work.last_values[tid] = err
    for tp in sorted(ghosts):
        part = work.parts[tp]
        paths = [path for _off, path in part.snapshots]
        if part.log_dir is not None and fdio.is_file(part.log_dir.path / CLEAN_SHUTDOWN):
            paths.append(part.log_dir.path / CLEAN_SHUTDOWN)
        for path in paths:
            try:
                work.file_hashes[path] = hash_file(path)
            except KafkaTxError as err:
                work.file_hashes[path] = err
    written = {ld.path for tp in work.tails if (ld := work.parts[tp].log_dir) is not None}
    for d in work.dirs:
        if d.path not in written:
            continue
        reads: dict[str, CheckpointRead | KafkaTxError] = {}
        for name in (REPLICATION_CHECKPOINT, RECOVERY_CHECKPOINT):
            path = d.path / name
            if not d.listed(name):
                continue
            try:
                text = read_text_file(path)
                try:
                    offsets = dict(read_offset_checkpoint(text))
                except DecodeError as err:
                    raise err.at(path) from err
            except KafkaTxError as err:
                reads[name] = err
                continue
            reads[name] = CheckpointRead(path=path, sha256=hashlib.sha256(text.encode()).hexdigest(),
                                         offsets=offsets)
        work.checkpoints[d.path] = reads


def read_tail(part: Partition) -> SegmentTail:
    """The active segment of ``part`` and its indexes as a repair appends after them.

    The ``.log`` is decoded batch by batch (in windows on the pread path) and hashed as it is
    decoded; it must end in a whole batch (a torn tail is the broker's recovery's to truncate)."""
    if not part.segments:
        raise MissingFile(f"{part.path}: partition has no segment to append to")
    seg = part.segments[-1]
    last_offset = None
    last_epoch = -1
    end = 0
    hasher = hashlib.sha256()
    try:
        with open_windowed(seg.log_path) as (buf, win):
            size = len(buf)
            with memoryview(buf) as view:
                for h in iter_batches_windowed(buf, win):
                    if h.position != end:  # pragma: no cover - batches follow each other from byte 0
                        break
                    hasher.update(view[h.position:h.position + h.size])
                    last_offset, last_epoch, end = h.last_offset, h.partition_leader_epoch, h.position + h.size
    except DecodeError as err:
        raise DecodeError(f"{part.name}: active segment does not end in a whole batch ({err.message}); "
                          "start the broker once so its recovery truncates the torn tail, or run verify",
                          path=seg.log_path, position=err.position) from err
    if end != size:
        raise DecodeError(f"{part.name}: {size - end} bytes after the last batch; refusing to append after them",
                          path=seg.log_path, position=end)
    log = FileRead(path=seg.log_path, exists=True, size=size, hasher=hasher)
    notices: list[str] = []
    index, entry, untrimmed = _index_tail(seg.index_path, read_offset_index, INDEX_ENTRY_SIZE, seg.base_offset)
    if untrimmed is not None:
        notices.append(f"{seg.index_path}: not trimmed to its entries ({untrimmed}); no index entry appended "
                       "(the index is sparse; lookups still work)")
    last_index_position = entry.position if entry is not None else 0
    timeindex, tentry, untrimmed = _index_tail(seg.timeindex_path, read_time_index, TIME_ENTRY_SIZE,
                                               seg.base_offset)
    if untrimmed is not None:
        notices.append(f"{seg.timeindex_path}: not trimmed to its entries; no time index entry appended")
    last_time = tentry.timestamp if tentry is not None else -1
    # the segment's files as its folder's listing saw them: one listed and gone is ReadFailed, not absent
    listed_txn = seg.txnindex_path
    txn_path = listed_txn if listed_txn is not None else seg.log_path.with_suffix(".txnindex")
    if listed_txn is not None:
        txn_hasher = hasher_of_file(txn_path)
        txnindex = FileRead(path=txn_path, exists=True, size=fdio.stat(txn_path).st_size, hasher=txn_hasher)
    else:
        txnindex = FileRead.of(txn_path, None)
    return SegmentTail(segment=seg, log=log, last_offset=last_offset, last_epoch=last_epoch,
                       leader_epochs=tuple(part.leader_epochs), index=index, last_index_position=last_index_position,
                       timeindex=timeindex, last_time=last_time, txnindex=txnindex, notices=tuple(notices))


def _index_tail(path: Path | None, read: Callable[..., list[Any]], entry_size: int,
                base_offset: int) -> tuple[FileRead | None, Any, str | None]:
    """An index (``.index``/``.timeindex``) as a repair appends after it: (its read, its last entry or None
    when empty, None). Without the file: (None, None, None). Longer than its entries (preallocated, not
    trimmed: the repair appends no entry to it): (None, None, "<size> bytes, <n> entries")."""
    if path is None:
        return None, None, None
    with map_file(path) as buf:
        entries = read(buf, base_offset, strict=False) if len(buf) else []
        size = len(buf)
        read_back = FileRead.of(path, buf)
    if size != len(entries) * entry_size:
        return None, None, f"{size} bytes, {len(entries)} entries"
    return read_back, (entries[-1] if entries else None), None


def _last_value(part: Partition, meta: TransactionMetadata) -> TxnLogValue:
    """The id's latest ``__transaction_state`` value, read back from its record (version and tags kept)."""
    for segment, buf, header in part.iter_batch_buffers(meta.offset):
        if header.base_offset > meta.offset:
            break
        try:
            for rec in iter_records(buf, header):
                if rec.offset == meta.offset and rec.key is not None:
                    if decode_txn_log_key(rec.key).transactional_id == meta.transactional_id:
                        value = decode_txn_log_value(rec.value)
                        if value is not None:
                            return value
        except DecodeError as err:
            raise err.at(segment.log_path) from err
    raise MissingFile(f"{part.path}: the record at offset {meta.offset} for transactional id "
                      f"{meta.transactional_id!r} was not found")


def _cluster_transaction_version(work: RepairAnalysis, metadata_log_dir: Path | None = None,
                                 kafka_version: KafkaVersion | None = None) -> None:
    """The finalized ``transaction.version`` of a ``__cluster_metadata-0`` in the log dirs (or in
    ``metadata_log_dir``), if any, and the Kafka release whose coordinator rules the plan follows:
    ``kafka_version`` when given, else the release of the finalized ``metadata.version``
    (``MetadataVersion``), else the newest release modelled (said so)."""
    if kafka_version is not None:
        work.kafka_version = kafka_version
        work.kafka_version_source = "--kafka-version"
    try:
        image = cluster_image(work.dirs, metadata_log_dir)
    except KafkaTxError as err:
        work.report.note(f"__cluster_metadata-0 could not be read ({err}); the transaction version of each "
                            "transaction is taken from its own last record")
        if kafka_version is None:
            work.kafka_version_source = (f"no readable metadata.version, so the newest release modelled, "
                                         f"Kafka {version_text(NEWEST_MODELLED)}; give --kafka-version")
        return
    if image is not None:
        work.transaction_version = image.transaction_version
        work.transaction_version_source = ("the cluster's finalized transaction.version in "
                                           f"{image.source('transaction.version')}")
        level = image.features.get("metadata.version")
        release = release_of_metadata_version(level) if level is not None else None
        if kafka_version is None:
            if release is not None:
                work.kafka_version = release[0]
                work.kafka_version_source = (f"metadata.version {level} = {release[1]} in "
                                             f"{image.source('metadata.version')}")
            else:
                work.kafka_version_source = (
                    f"metadata.version {level if level is not None else 'not finalized'} names no release "
                    f"kafkatx knows, so Kafka {version_text(NEWEST_MODELLED)} is assumed; give --kafka-version")
    else:
        if kafka_version is None:
            work.kafka_version_source = (f"no __cluster_metadata-0, so the newest release modelled, "
                                         f"Kafka {version_text(NEWEST_MODELLED)}; give --kafka-version")
        if work.coord.transactions:
            work.report.note(f"no __cluster_metadata-0 in these log dirs: {TXN_STATE_TOPIC} is assumed to have "
                                f"{work.coord.partitions_count} partitions (from its folders or the flag) and each "
                                "transaction's version is taken from its own last record (--metadata-log-dir "
                                "names a metadata log elsewhere)")


def _check_force_terminate(coord: CoordinatorState, found: list[HangingRow], ids: Sequence[str]) -> None:
    """``--force-terminate ID`` must name a prepared 2PC transaction that find-hanging lists."""
    listed = {r.transactional_id for r in found if r.kind == HangingKind.PREPARED_2PC}
    for tid in ids:
        if tid in listed:
            continue
        meta = coord.transactions.get(tid)
        if meta is None:
            raise UsageError(f"--force-terminate {tid}: no such transactional id in these log dirs")
        if not (meta.state in TIMEOUT_STATES and is_distributed_two_phase_commit(meta.timeout_ms)):
            raise UsageError(f"--force-terminate {tid}: not a prepared two-phase-commit transaction (state "
                             f"{meta.state.kafka_name}, timeout {meta.timeout_ms} ms); select it with "
                             "--transactional-id")
        raise UsageError(f"--force-terminate {tid}: its 2PC transaction holds no partition's LSO here for "
                         "longer than --max-transaction-timeout; find-hanging does not list it")


__all__ = ["COORDINATED", "DECISIONS", "GHOST_STRATEGIES", "CheckpointRead", "FileRead", "RepairAnalysis",
           "SegmentTail", "analyse_abort_hanging", "read_tail", "select", "touched_names"]
