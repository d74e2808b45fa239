"""Offline replay: the coordinator from ``__transaction_state``, and producer state per partition.

Two replays, both streaming (batch headers only, records only for control
batches and ``__transaction_state`` values), so memory follows the number of
producers and open transactions, never the size of the log:

* :func:`replay_transaction_log` rebuilds what every transaction coordinator
  would load (``TransactionStateManager.loadTransactionsForTxnTopicPartition``):
  the latest value per transactional id wins, a tombstone removes the id.
* :func:`replay_partition` rebuilds one partition's producer state the way the
  broker does on startup (``LogLoader`` / ``UnifiedLog.rebuildProducerState``):
  start from the newest usable ``.snapshot``, then apply every batch after it
  (``ProducerAppendInfo.append``): a transactional data batch opens a
  transaction for its producer when none is open, a COMMIT/ABORT marker ends it.

Kafka sources: storage/src/main/java/org/apache/kafka/storage/internals/log/
ProducerStateManager.java, ProducerAppendInfo.java, ProducerStateEntry.java;
transaction-coordinator/.../TransactionStateManager (Kafka 3.x: core/.../coordinator/transaction/).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, TypeVar

import kafkatx.format.record_batch as record_batch
from kafkatx.errors import DecodeError, KafkaTxError, MissingFile
from kafkatx.format import compiled
from kafkatx.format.control import ControlType
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.format.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_BATCH_SIZE,
    BatchHeader,
    crc_valid,
    iter_batches,
    iter_records,
    read_batch_header,
    read_control_record,
)
from kafkatx.format.segment_fold import FoldEvent, SegmentFold, iter_fold, plain_control
from kafkatx.format.txn_log import (
    F_PRODUCER_ID,
    F_STATE,
    TxnLogFields,
    TxnLogValue,
    coordinator_partition,
    decode_txn_log_fields,
    decode_txn_log_key,
    decode_txn_log_value,
    value_fields,
)
from kafkatx.log.log_dir import LogDir, open_log_dirs
from kafkatx.log.partition import Partition, is_log_manager_topic, seek_position
from kafkatx.log.segment import Buffer, FileShrank, Segment, iter_batches_windowed, map_file, open_windowed
from kafkatx.txn.loading import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DELETE_SEGMENT,
    TRUNCATE_SEGMENT,
    Chain,
    LoadPlan,
    is_expired,
    plan_load,
)
from kafkatx.txn.lso import clamp_high_watermark, high_watermark_or_log_end
from kafkatx.txn.model import HistoryEntry, Unreadable, unreadable
from kafkatx.txn.state import (
    VALID_TRANSITIONS,
    Finding,
    TransactionMetadata,
    apply_fields,
    history_entry_fields,
)

TXN_STATE_TOPIC = "__transaction_state"
DEFAULT_TXN_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions
NO_OFFSET = -1
_TRANSACTIONAL = 0x10  # batch attributes bit 4 (DefaultRecordBatch.TRANSACTIONAL_FLAG_MASK)
_CONTROL = 0x20  # bit 5 (CONTROL_FLAG_MASK)
# ProducerReplay.fold: why it stopped (see its docstring), and the bytes it folds per call at most.
FOLD_END = 0
FOLD_CHUNK = 1
FOLD_SLOW = 2
FOLD_BYTES = 64 << 20
_LENGTH = struct.Struct(">i")


T = TypeVar("T")

class Progress(Protocol):
    """What the replays report progress to (the CLI wraps a rich progress bar; txn/ never imports rich)."""

    def start(self, total: int, description: str) -> None: ...

    def advance(self, n: int) -> None: ...


def as_log_dirs(log_dirs: Iterable[str | Path | LogDir]) -> list[LogDir]:
    """Accept paths or already opened :class:`LogDir` objects."""
    items = list(log_dirs)
    paths = [p for p in items if not isinstance(p, LogDir)]
    opened = iter(open_log_dirs([Path(p) for p in paths])) if paths else iter(())
    return [p if isinstance(p, LogDir) else next(opened) for p in items]


# ----------------------------------------------------------------------------- replicas

def log_end_offset(partition: Partition) -> int:
    """The next offset the partition would assign: last batch's last offset + 1.

    Scans only the last non-empty segment. An empty log's end is its last segment's base
    offset (Kafka's ``nextOffsetMetadata`` after a roll). A torn tail stops the scan at the
    last whole batch (what recovery would truncate to).
    """
    for segment in reversed(partition.segments):
        last = None
        try:
            with open_windowed(segment.log_path) as (buf, win):  # forward only: windows on the pread path
                for header in iter_batches_windowed(buf, win, last_only=True):
                    last = header.last_offset
        except DecodeError:
            pass
        if last is not None:
            return last + 1
    if partition.segments:
        return partition.segments[-1].base_offset
    return partition.log_start_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaChoice:
    partition: Partition
    log_end_offset: int
    copies: int


def choose_replicas(log_dirs: Sequence[LogDir], *, topic: str | None = None,
                    notices: list[str] | None = None) -> list[ReplicaChoice]:
    """One :class:`Partition` per (topic, partition) over all dirs, sorted.

    When several brokers' dirs hold the same partition (replicas), the copy with the highest
    log end offset is used: followers only ever hold a prefix of the leader's log (they
    truncate to it), so the longest copy is the leader's or an equal one. The choice is noted.
    The KRaft metadata log is no partition of these answers (``is_log_manager_topic``).
    """
    groups: dict[tuple[str, int], list[Partition]] = {}
    for log_dir in log_dirs:
        for part in log_dir.partitions():
            if (topic is not None and part.topic != topic) or not is_log_manager_topic(part.topic):
                continue
            groups.setdefault((part.topic, part.partition), []).append(part)
    chosen = []
    for key in sorted(groups):
        copies = groups[key]
        if len(copies) == 1:
            chosen.append(ReplicaChoice(partition=copies[0], log_end_offset=-1, copies=1))
            continue
        ends = [(log_end_offset(p), -i, p) for i, p in enumerate(copies)]
        best = max(ends, key=lambda e: (e[0], e[1]))
        if notices is not None:
            others = ", ".join(f"{p.path} (log end {leo})" for leo, _i, p in ends if p is not best[2])
            notices.append(f"{copies[0].name}: {len(copies)} replicas; using {best[2].path} "
                           f"(log end {best[0]}) over {others}")
        chosen.append(ReplicaChoice(partition=best[2], log_end_offset=best[0], copies=len(copies)))
    return chosen


# ----------------------------------------------------------------------------- coordinator


class TxnLogRecord(NamedTuple):
    """One decoded ``__transaction_state`` record (a NamedTuple: Spark ships them by the thousand)."""

    offset: int
    transactional_id: str
    value: TxnLogValue | None  # None: a tombstone
    file: str
    position: int  # byte position of its batch in ``file``


# What one __transaction_state partition's replay leaves per transactional id:
# (metadata or None after a tombstone, history, offset of the tombstone when it is the latest record).
TxnIdFold = tuple["TransactionMetadata | None", list[HistoryEntry], "int | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnPartitionFold:
    """One ``__transaction_state`` partition replayed: its ids in first-seen order, or why it was skipped."""

    partition: int
    name: str  # "__transaction_state-N"
    path: str
    ids: dict[str, TxnIdFold] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None  # "<path>: <error>" when its bytes do not decode
    unreadable: Unreadable | None = None  # the same, for the answer's ``incomplete`` list


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorState:
    """What the transaction coordinators would load from every ``__transaction_state`` partition."""

    transactions: dict[str, TransactionMetadata]  # current, tombstoned ids removed
    history: dict[str, list[HistoryEntry]]  # every id ever seen, tombstoned ones included
    tombstoned: dict[str, int]  # id -> offset of its (latest) tombstone, when it is the latest record
    partitions_count: int  # N used for coordinator_partition checks
    partitions_found: tuple[int, ...]  # __transaction_state partition numbers on disk
    findings: list[Finding] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    incomplete: list[Unreadable] = field(default_factory=list)  # the skipped partitions, structured
    _by_producer: dict[int, str] = field(default_factory=dict)

    def transactional_id_for(self, producer_id: int) -> str | None:
        """The live transactional id a producer id belongs to: current owner first, then history."""
        return self._by_producer.get(producer_id)

    def expired_transactional_id_for(self, producer_id: int) -> str | None:
        """A tombstoned (expired) transactional id whose history used ``producer_id``."""
        for tid in sorted(self.tombstoned):
            if any(h.producer_id == producer_id for h in self.history.get(tid, ())):
                return tid
        return None


def index_producers(transactions: dict[str, TransactionMetadata],
                    history: dict[str, list[HistoryEntry]]) -> dict[int, str]:
    """producer id -> the live transactional id it belongs to (``CoordinatorState.transactional_id_for``)."""
    index: dict[int, str] = {}
    # History first (older producer ids of a live id, e.g. before an epoch-exhaustion
    # rotation), then current values override: a producer id belongs to exactly one
    # transactional id at a time (InitProducerId hands out fresh ids). A tombstoned id does
    # not map: the coordinator forgot it, as ListTransactions online would
    # (``expired_transactional_id_for`` keeps that link for notices).
    for tid, entries in sorted(history.items()):
        if tid not in transactions:
            continue
        for entry in entries:
            if entry.producer_id is not None and entry.producer_id >= 0:
                index[entry.producer_id] = tid
    for tid, meta in sorted(transactions.items()):
        for pid in sorted(meta.producer_ids):
            index[pid] = tid
    return index


_index_producers = index_producers  # the old private name (tests build CoordinatorStates with it)


def txn_state_partitions_count(numbers: Sequence[int], partitions_count: int | None, notices: list[str]) -> int:
    """``transaction.state.log.num.partitions`` as given, else the highest partition number on disk + 1."""
    if partitions_count is not None:
        return partitions_count
    n = (max(numbers) + 1) if numbers else DEFAULT_TXN_STATE_PARTITIONS
    if numbers and len(numbers) != n:
        notices.append(f"only {len(numbers)} of at least {n} {TXN_STATE_TOPIC} partitions are in these log "
                       f"dirs: transactional ids coordinated elsewhere are not listed; coordinator partition "
                       f"checks assume {n} partitions (set --txn-state-partitions)")
    return n


def metadata_partitions_count(dirs: Sequence[LogDir], notices: list[str]) -> int | None:
    """``__transaction_state``'s partition count from a ``__cluster_metadata-0`` in the log dirs (the
    controller's TopicRecord/PartitionRecords), said in a notice; None without one."""
    from kafkatx.log.cluster_metadata import cluster_image

    try:
        image = cluster_image(dirs)
    except KafkaTxError as err:
        notices.append(f"__cluster_metadata-0 could not be read ({err}); facts it holds are assumed")
        return None
    if image is None:
        return None
    count = image.partition_count(TXN_STATE_TOPIC)
    if count is not None:
        notices.append(f"{TXN_STATE_TOPIC} has {count} partitions: taken from {image.path} "
                       f"(the controller's metadata log)")
    return count


def replay_transaction_log(log_dirs: Iterable[str | Path | LogDir], *, partitions_count: int | None = None,
                           progress: Progress | None = None,
                           history_for: Container[str] | None = None) -> CoordinatorState:
    """Replay every ``__transaction_state-N`` partition found in ``log_dirs``.

    ``partitions_count`` is ``transaction.state.log.num.partitions`` (for the check that each id
    sits in ``coordinator_partition(id, N)``); by default the highest partition number on disk + 1.
    A partition that cannot be decoded is skipped (named in ``skipped``), the others still count.
    ``history_for``: the ids whose every record ``history`` keeps (None: all; see ``fold_txn_fields``).
    """
    dirs = as_log_dirs(log_dirs)
    notices: list[str] = []
    choices = choose_replicas(dirs, topic=TXN_STATE_TOPIC, notices=notices)
    numbers = tuple(c.partition.partition for c in choices)
    if partitions_count is None:
        partitions_count = metadata_partitions_count(dirs, notices)
    n = txn_state_partitions_count(numbers, partitions_count, notices)
    if progress is not None:
        progress.start(sum(s.size for c in choices for s in c.partition.segments),
                       f"replaying {TXN_STATE_TOPIC}")
    folds = []
    for choice in choices:
        part = choice.partition
        findings: list[Finding] = []
        try:
            plan = plan_load(part)
            notices.extend(a.message for a in plan.actions if a.action in (TRUNCATE_SEGMENT, DELETE_SEGMENT))
            records = txn_log_field_records(_txn_batches(part, plan, progress), part.name, findings,
                                            loader_crc=False)
            ids = fold_txn_fields(part.partition, part.name, n, records, findings, history_for=history_for)
        except (KafkaTxError, OSError) as err:
            where = f"{err.filename}: " if isinstance(err, OSError) and err.filename else ""
            folds.append(TxnPartitionFold(partition=part.partition, name=part.name, path=str(part.path),
                                          findings=findings, skipped=f"{part.path}: {where}{err}",
                                          unreadable=unreadable(part.name, err)))
            continue
        folds.append(TxnPartitionFold(partition=part.partition, name=part.name, path=str(part.path), ids=ids,
                                      findings=findings))
    return coordinator_from_folds(folds, partitions_count=n, partitions_found=numbers, notices=notices)


def coordinator_from_folds(folds: Iterable[TxnPartitionFold], *, partitions_count: int,
                           partitions_found: tuple[int, ...], notices: list[str] | None = None,
                           ) -> CoordinatorState:
    """Merge per-partition replays (in partition order) into what the coordinators would load.

    An id found in two ``__transaction_state`` partitions (a change of
    ``transaction.state.log.num.partitions``, or copied files) is taken from the partition it
    hashes to, and reported. ``replay_transaction_log`` and ``kafkatx scan`` both end here.
    """
    n = partitions_count
    findings: list[Finding] = []
    skipped: list[str] = []
    incomplete: list[Unreadable] = []
    current: dict[str, TransactionMetadata] = {}
    history: dict[str, list[HistoryEntry]] = {}
    tombstoned: dict[str, int] = {}
    seen_in: dict[str, int] = {}  # id -> __transaction_state partition it was read from
    for fold in folds:
        findings.extend(fold.findings)  # a skipped partition's findings up to its bad bytes still count
        if fold.skipped is not None:
            skipped.append(fold.skipped)
            incomplete.append(fold.unreadable or Unreadable(partition=fold.name, file=None, position=None,
                                                            reason=fold.skipped))
            continue
        for tid, (meta, entries, tomb) in fold.ids.items():
            if tid in seen_in:
                findings.append(Finding(
                    check="duplicate-transactional-id",
                    message=(f"transactional id {tid!r} has records in {TXN_STATE_TOPIC}-{seen_in[tid]} and "
                             f"{fold.name}; using the one in {TXN_STATE_TOPIC}-{coordinator_partition(tid, n)}"),
                    partition=fold.name, severity="warning"))
                if fold.partition != coordinator_partition(tid, n):
                    continue
            seen_in[tid] = fold.partition
            history[tid] = entries
            if meta is None:
                current.pop(tid, None)
                if tomb is not None:
                    tombstoned[tid] = tomb
            else:
                current[tid] = meta
                tombstoned.pop(tid, None)
    return CoordinatorState(transactions=current, history=history, tombstoned=tombstoned, partitions_count=n,
                            partitions_found=partitions_found, findings=findings, notices=list(notices or []),
                            skipped=skipped, incomplete=incomplete,
                            _by_producer=index_producers(current, history))


class TxnLoadWindow(NamedTuple):
    """Which bytes of a ``__transaction_state`` partition ``TransactionStateManager.loadTransactionMetadata``
    reads once ``LogLoader`` is done (:func:`~kafkatx.txn.loading.plan_load`): from the batch holding the log
    start to the log end, never in a segment recovery deleted nor past where it truncated one. The offline
    replay (:func:`replay_transaction_log`) and ``kafkatx scan``'s executors both ask it, batch by batch."""

    log_start: int
    log_end: int
    cuts: dict[str, int]  # segment .log path -> bytes recovery keeps
    deleted: frozenset[str]  # segment .log paths recovery deletes

    @classmethod
    def of(cls, plan: LoadPlan) -> TxnLoadWindow:
        return cls(plan.log_start_offset, plan.log_end_offset, dict(plan.cuts), frozenset(plan.deleted_segments))

    def gone(self, log_path: str, position: int) -> bool:
        """Bytes at ``position`` of ``log_path`` that recovery deletes or truncates: the broker never reads them."""
        cut = self.cuts.get(log_path)
        return log_path in self.deleted or (cut is not None and position >= cut)

    def reads(self, log_path: str, header: BatchHeader) -> bool:
        """Whether the coordinator's loader reads this batch."""
        return (not self.gone(log_path, header.position) and header.last_offset >= self.log_start
                and header.base_offset < self.log_end)


def _txn_batches(part: Partition, plan: LoadPlan,
                 progress: Progress | None) -> Iterator[tuple[str, Buffer, BatchHeader]]:
    """The batches the coordinator loads (:class:`TxnLoadWindow`). With a clean shutdown nothing was
    recovered, so bytes that do not form a batch at the end of the last segment (``plan.tail_error``)
    make the partition unreadable, as before."""
    if plan.tail_error is not None:
        raise plan.tail_error
    window = TxnLoadWindow.of(plan)
    for segment in part.segments:
        log_path = str(segment.log_path)
        if log_path in window.deleted:
            continue
        # forward only: on the pread path (a live broker) in --read-window windows; what is yielded is
        # decoded before the next batch is asked for
        with open_windowed(segment.log_path) as (buf, win):
            try:
                for header in iter_batches_windowed(buf, win, 0, end=window.cuts.get(log_path)):
                    if header.base_offset >= window.log_end:
                        break
                    if window.reads(log_path, header):
                        yield log_path, buf, header
            except DecodeError as err:
                raise err.at(segment.log_path) from err
        if progress is not None:
            progress.advance(segment.size)


def txn_log_records(batches: Iterable[tuple[str, Buffer, BatchHeader]], partition_name: str,
                    findings: list[Finding], *, loader_crc: bool = True) -> Iterator[TxnLogRecord]:
    """The key/value records of ``__transaction_state`` batches ``(log path, buffer, header)``, decoded.

    ``loader_crc=False`` reads as the coordinator does: ``TransactionStateManager.loadTransactionMetadata``
    iterates ``memRecords.batches`` and their records without ``ensureValid``, so a batch whose CRC
    fails still counts (a warning says so). The bytes it is given must already be what the broker's
    recovery keeps (``_txn_batches``): after an unclean shutdown ``LogSegment.recover`` truncated at the
    first bad batch past the recovery point, so a bad CRC reaches the coordinator only where nothing
    was recovered (a clean shutdown, or below the recovery point). ``loader_crc=True`` (the Spark
    path, which does not plan the load): a batch with a bad CRC is a finding and stepped over.
    A record that does not decode is a finding (stepped over); a record batch that does not frame
    raises (the caller skips the partition).
    """
    for offset, tid, value, log_path, position in _txn_log_items(batches, partition_name, findings, _decode_value,
                                                                 loader_crc):
        yield TxnLogRecord(offset=offset, transactional_id=tid, value=value, file=log_path, position=position)


def _decode_value(key: Buffer, value: Buffer | None) -> tuple[str, TxnLogValue | None]:
    return decode_txn_log_key(key).transactional_id, decode_txn_log_value(value)


# (offset, transactional id, value in value_fields form or None for a tombstone, file, batch position)
TxnFieldRecord = tuple[int, str, "TxnLogFields | None", str, int]


def txn_log_field_records(batches: Iterable[tuple[str, Buffer, BatchHeader]], partition_name: str,
                          findings: list[Finding], *, loader_crc: bool = True) -> Iterator[TxnFieldRecord]:
    """:func:`txn_log_records` as plain tuples, values in ``value_fields`` form: what the replay
    folds (decoded by the compiled ``txn_log_decode`` when built; the same answers either way)."""
    return _txn_log_items(batches, partition_name, findings, decode_txn_log_fields, loader_crc)


def _txn_log_items(batches: Iterable[tuple[str, Buffer, BatchHeader]], partition_name: str,
                   findings: list[Finding], decode: Callable[[Buffer, Buffer | None], tuple[str, T]],
                   loader_crc: bool) -> Iterator[tuple[int, str, T, str, int]]:
    for log_path, buf, header in batches:
        if header.is_control or header.records_count == 0:
            continue
        if not loader_crc and not crc_valid(buf, header):
            findings.append(Finding(
                check="crc-unchecked", severity="warning", file=log_path, position=header.position,
                offset=header.base_offset, partition=partition_name,
                message=(f"{partition_name}: batch at offset {header.base_offset} has a bad CRC, but no recovery "
                         f"checks it (clean shutdown, or below the recovery point) and the coordinator's loader "
                         f"does not (TransactionStateManager.loadTransactionMetadata): its "
                         f"{header.records_count} record(s) are loaded")))
        elif loader_crc and not crc_valid(buf, header):
            # A corrupt batch cannot be trusted; the broker's recovery would truncate here.
            findings.append(Finding(check="crc", message=f"batch at offset {header.base_offset} has a bad CRC; "
                                    f"its {header.records_count} record(s) are ignored",
                                    file=log_path, position=header.position,
                                    offset=header.base_offset, partition=partition_name))
            continue
        try:
            records = list(iter_records(buf, header))
        except DecodeError as err:
            raise err.at(log_path) from err
        for record in records:
            if record.key is None:
                continue
            try:
                tid, value = decode(record.key, record.value)
            except DecodeError as err:
                findings.append(Finding(check="txn-log-record",
                                        message=f"record at offset {record.offset} does not decode: {err.message}",
                                        file=log_path, position=header.position,
                                        offset=record.offset, partition=partition_name))
                continue
            yield record.offset, tid, value, log_path, header.position


def fold_txn_log(partition: int, partition_name: str, n: int, records: Iterable[TxnLogRecord],
                 findings: list[Finding]) -> dict[str, TxnIdFold]:
    """``apply_record`` over one ``__transaction_state`` partition's records in offset order.

    Returns per transactional id (in first-seen order) its latest metadata, its history and its
    tombstone offset; checks that each id hashes to this partition (``coordinator_partition``).
    """
    return fold_txn_fields(partition, partition_name, n,
                           ((r.offset, r.transactional_id, None if r.value is None else value_fields(r.value),
                             r.file, r.position) for r in records), findings)


def fold_txn_fields(partition: int, partition_name: str, n: int, records: Iterable[TxnFieldRecord],
                    findings: list[Finding], *, history_for: Container[str] | None = None,
                    ) -> dict[str, TxnIdFold]:
    """:func:`fold_txn_log` over :func:`txn_log_field_records`: no object per record.

    Per id it keeps the latest record (its metadata is built once, at the end) and its history:
    every record when ``history_for`` is None or holds the id (``describe-txn``), else only the
    first record of each producer id it used (what ``index_producers`` and
    ``expired_transactional_id_for`` read), so memory grows with ids, not records.
    """
    latest: dict[str, tuple[int, TxnLogFields | None]] = {}
    history: dict[str, list[HistoryEntry]] = {}
    valid = VALID_TRANSITIONS
    for offset, tid, value, file, position in records:
        before = latest.get(tid)
        entries = history.get(tid)
        if entries is None:
            entries = history[tid] = []
            expected = coordinator_partition(tid, n)
            if expected != partition:
                findings.append(Finding(
                    check="wrong-coordinator-partition",
                    message=(f"transactional id {tid!r} is in {partition_name} but hashes to "
                             f"{TXN_STATE_TOPIC}-{expected} of {n}; the coordinator would never load it from here"),
                    file=file, position=position, offset=offset,
                    partition=partition_name, severity="warning"))
        if (value is not None and before is not None and before[1] is not None
                and (before[1][F_STATE], value[F_STATE]) not in valid):
            current = TransactionMetadata.from_fields(tid, before[1], offset=before[0],
                                                      coordinator_partition=partition)
            applied = apply_fields(current, tid, value, offset=offset, coordinator_partition=partition,
                                   file=file, position=position)
            if applied.finding is not None:
                findings.append(applied.finding)
        if history_for is None or tid in history_for:
            entries.append(history_entry_fields(offset, value))
        elif value is not None and all(e.producer_id != value[F_PRODUCER_ID] for e in entries):
            entries.append(history_entry_fields(offset, value))
        latest[tid] = (offset, value)
    out: dict[str, TxnIdFold] = {}
    for tid in history:  # first-seen order; each latest record is let go once its metadata is built
        offset, value = latest.pop(tid)
        if value is None:
            out[tid] = (None, history[tid], offset)
        else:
            out[tid] = (TransactionMetadata.from_fields(tid, value, offset=offset, coordinator_partition=partition),
                        history[tid], None)
    return out


# ----------------------------------------------------------------------------- partitions

@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerState:
    """One producer id's state in one partition (``ProducerStateEntry``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int  # last offset of its last data batch, -1 when none seen
    last_timestamp: int  # max timestamp of its last batch (data or marker)
    coordinator_epoch: int
    current_txn_first_offset: int | None
    current_txn_last_offset: int | None = None
    current_txn_start_timestamp: int | None = None  # of the first batch of the open txn, when known
    current_txn_last_timestamp: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenTxn:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    last_offset: int | None
    start_timestamp: int | None
    last_timestamp: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedTxn:
    """A transaction span ended by a marker in one partition (``scan`` writes these)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int | None  # None when it began before the replay start (data deleted)
    last_offset: int | None  # last data offset of the span
    outcome: str  # COMMIT | ABORT
    marker_offset: int
    coordinator_epoch: int
    start_timestamp: int | None
    end_timestamp: int
    # The LSO Kafka would store in the .txnindex entry if this is an abort (see lso.py).
    last_stable_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProducerState:
    topic: str
    partition: int
    path: str
    log_start_offset: int
    log_end_offset: int
    replay_start_offset: int  # where the log replay began (snapshot offset or log start)
    snapshot_offset: int | None  # the .snapshot used, None when replayed from the log start
    batches: int  # batches replayed
    producers: dict[int, ProducerState]
    completed: list[CompletedTxn] = field(default_factory=list)  # only with keep_completed=True
    findings: list[Finding] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    # Producers the broker expires at ``now`` (idle past producer.id.expiration.ms, no open txn).
    expired: dict[int, ProducerState] = field(default_factory=dict)
    # (first offset, marker offset) of transactions completed in the broker's final replay: the
    # ProducerStateManager keeps them in ``unreplicatedTxns`` until the high watermark passes the
    # marker, and they hold the first unstable offset until then (``firstUnstableOffset``).
    unreplicated: tuple[tuple[int, int], ...] = ()
    load: LoadPlan | None = None  # what the broker does to the files on startup (txn/loading.py)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def open_transactions(self) -> list[OpenTxn]:
        """Open transactions, earliest first offset first."""
        rows = [OpenTxn(topic=self.topic, partition=self.partition, producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch, coordinator_epoch=p.coordinator_epoch,
                        first_offset=p.current_txn_first_offset, last_offset=p.current_txn_last_offset,
                        start_timestamp=p.current_txn_start_timestamp,
                        last_timestamp=p.current_txn_last_timestamp)
                for p in self.producers.values() if p.current_txn_first_offset is not None]
        rows.sort(key=lambda t: (t.first_offset, t.producer_id))
        return rows


class _Entry:
    """Mutable per-producer state while replaying (frozen into :class:`ProducerState` at the end)."""

    __slots__ = ("producer_id", "epoch", "last_seq", "last_offset", "last_ts", "coord_epoch",
                 "txn_first", "txn_last", "txn_start_ts", "txn_last_ts")

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.epoch = -1
        self.last_seq = -1
        self.last_offset = NO_OFFSET
        self.last_ts = -1
        self.coord_epoch = -1
        self.txn_first: int | None = None
        self.txn_last: int | None = None
        self.txn_start_ts: int | None = None
        self.txn_last_ts: int | None = None

    @classmethod
    def from_snapshot(cls, e: ProducerSnapshotEntry) -> _Entry:
        entry = cls(e.producer_id)
        entry.epoch = e.producer_epoch
        entry.last_seq = e.last_sequence
        entry.last_offset = e.last_offset
        entry.last_ts = e.timestamp
        entry.coord_epoch = e.coordinator_epoch
        if e.current_txn_first_offset >= 0:
            entry.txn_first = e.current_txn_first_offset
            entry.txn_last = e.last_offset if e.last_offset >= e.current_txn_first_offset else None
            entry.txn_last_ts = e.timestamp
        return entry

    def freeze(self) -> ProducerState:
        return ProducerState(producer_id=self.producer_id, producer_epoch=self.epoch, last_sequence=self.last_seq,
                             last_offset=self.last_offset, last_timestamp=self.last_ts,
                             coordinator_epoch=self.coord_epoch, current_txn_first_offset=self.txn_first,
                             current_txn_last_offset=self.txn_last, current_txn_start_timestamp=self.txn_start_ts,
                             current_txn_last_timestamp=self.txn_last_ts)


CompletedCallback = Callable[[CompletedTxn], None]


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
        with segment.open() as buf:
            pos = seek_position(segment, start, len(buf)) if segment is partition.segments[first] else 0
            cut = cuts.get(log_path) if cuts else None
            ranges = [(pos, cut), (cut, None)] if cut is not None and cut > pos else [(pos, None)]
            for lo, hi in ranges:
                yield from _range_events(segment, buf, lo, hi, start, crc_mode, stops)


class FileEvents:
    """:func:`file_events` as an :data:`EventSource` the replay recognises: ``replay_partition_events``
    then folds the files' common batches straight into the producer state in compiled code
    (:meth:`ProducerReplay.fold`) and sees events only for the batches that need Python."""

    def __init__(self, partition: Partition, *, verify_crc: bool = False, breaks: Sequence[int] = (),
                 cuts: dict[str, int] | None = None) -> None:
        self.partition = partition
        self.verify_crc = verify_crc
        self.breaks = tuple(breaks)
        self.cuts = cuts

    def __call__(self, start: int) -> Iterator[BatchEvent]:
        return file_events(self.partition, start, verify_crc=self.verify_crc, breaks=self.breaks, cuts=self.cuts)


def _range_events(segment: Segment, buf: Buffer, lo: int, hi: int | None, start: int, crc_mode: int,
                  stops: Sequence[int]) -> Iterator[BatchEvent]:
    """The events of ``buf[lo:hi]`` (one segment's bytes) at or past ``start``."""
    try:
        for ev in iter_fold(buf, lo, hi, crc_mode=crc_mode, breaks=stops):
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
    if control_type is None and crc_ok and (count > 1 or not h.attributes & _CONTROL):
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


def replay_partition(partition: Partition, *, use_snapshot: bool = True, keep_completed: bool = False,
                     on_completed: CompletedCallback | None = None, verify_crc: bool = False,
                     progress: Progress | None = None, now: int | None = None,
                     expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> PartitionProducerState:
    """The producer state the broker builds when it starts on ``partition``'s files (``txn/loading.py``).

    ``use_snapshot=False`` replays the whole surviving log from the log start instead (verify
    does, to see every marker). ``now`` (epoch ms) expires idle producers as
    ``ProducerStateManager`` does at every snapshot load and in ``removeExpiredProducers``;
    None expires nothing. ``verify_crc`` also checks data batches' CRCs (control batches are
    always checked: their record is read); a data batch with a bad CRC is then reported and
    skipped. A decode error (garbage, a control batch with a bad CRC) the broker would not
    truncate raises: the caller skips the partition and says so.
    """
    plan = plan_load(partition)
    breaks = plan.chain.reloads if use_snapshot else ()
    return replay_partition_events(partition, FileEvents(partition, verify_crc=verify_crc, breaks=breaks,
                                                         cuts=plan.cuts),
                                   use_snapshot=use_snapshot, keep_completed=keep_completed,
                                   on_completed=on_completed, verify_crc=verify_crc, progress=progress, now=now,
                                   expiration_ms=expiration_ms, plan=plan)


def replay_partition_events(partition: Partition, events: EventSource, *, use_snapshot: bool = True,
                            keep_completed: bool = False, on_completed: CompletedCallback | None = None,
                            verify_crc: bool = False, progress: Progress | None = None, now: int | None = None,
                            expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                            plan: LoadPlan | None = None) -> PartitionProducerState:
    """:func:`replay_partition` over already decoded events: the one producer-state fold.

    :func:`~kafkatx.txn.loading.plan_load` decides, from the partition's files, where the
    broker's producer state starts (a snapshot, the log start, or empty) and where the log
    ends after recovery; ``events`` is asked for the events from that start and folded with
    :class:`ProducerReplay`. ``replay_partition`` feeds it from the files, ``kafkatx scan``
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


def expand_run(event: BatchEvent) -> Iterator[BatchEvent]:
    """The batches a run event stands for, re-read from its file (headers only)."""
    first, last = event.header, event.last
    if first is None or last is None:
        yield event
        return
    pid = first.producer_id
    try:
        with map_file(Path(event.log_path)) as buf:
            for h in iter_batches(buf, first.position, last.position + last.size):
                if h.producer_id == pid or (pid < 0 and h.producer_id < 0):
                    yield BatchEvent(event.log_path, h)
    except DecodeError as err:
        raise err.at(event.log_path) from err


def _replay(partition: Partition, events: EventSource, plan: LoadPlan, chain: Chain, keep_completed: bool,
            on_completed: CompletedCallback | None, verify_crc: bool, progress: Progress | None,
            now: int | None, expiration_ms: int) -> PartitionProducerState:
    findings: list[Finding] = []
    producers: dict[int, _Entry] = {}
    expired: dict[int, _Entry] = {}
    end = plan.log_end_offset
    start = chain.offset
    snapshot_offset = None
    if chain.kind == "file" and plan.snapshot_entries is not None:
        snapshot_offset = chain.offset
        producers = {e.producer_id: _Entry.from_snapshot(e) for e in plan.snapshot_entries.entries}
    elif chain.kind == "empty":
        start = end  # the upgrade path: the broker reads nothing

    def expire() -> None:  # ProducerStateManager.isProducerExpired, at a snapshot load
        if now is None:
            return
        for pid in [pid for pid, e in producers.items() if is_expired(e.last_ts, e.txn_first is not None,
                                                                        now, expiration_ms)]:
            expired[pid] = producers.pop(pid)

    expire()
    reloads = sorted(r for r in chain.reloads if r > start)
    unreplicated: list[tuple[int, int]] = []  # (first offset, marker offset) completed in the final replay
    # Only a marker at or above the high watermark can hold the first unstable offset
    # (offline.lag_row): the others are not kept, so memory follows the unreplicated tail.
    span_floor = max(plan.final_load_offset, _unreplicated_floor(partition, plan))
    ctx = ProducerReplay(partition, producers, findings, keep_completed, on_completed, spans=unreplicated,
                         span_floor=span_floor)
    cuts = plan.cuts
    surviving = [str(s.log_path) for s in partition.segments if str(s.log_path) not in plan.deleted_segments]
    last_file = surviving[-1] if surviving else ""
    fold = _FileFold(events, ctx, start, end, reloads, verify_crc, progress) if isinstance(events, FileEvents) else None
    if fold is not None:
        progress = None  # the fold reports per file
    sizes = {str(s.log_path): s.size for s in partition.segments} if progress is not None else {}
    last_path = None
    batches = 0
    for ev in _until_cut((fold.events() if fold is not None else events(start)) if start < end else (), cuts,
                         last_file):
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
            if (h.base_offset < start and h.last_offset < start) or (
                    not h.is_transactional and h.producer_id >= 0
                                         and producers.get(h.producer_id) is not None
                                         and producers[h.producer_id].txn_first is not None):
                # The run straddles the start, or its non-transactional batches land in an open
                # transaction (one finding each): replay its batches one by one.
                for one in expand_run(ev):
                    if one.header is not None and one.header.last_offset >= start:
                        batches += 1
                        if one.header.producer_id >= 0:
                            ctx.data(one.header)
                continue
            batches += ev.batch_count
            if h.producer_id >= 0:
                ctx.data(h)
                if ev.batch_count > 1:
                    ctx.data(last)  # the batches between only set what the last one sets again
            continue
        if h.base_offset < start and h.last_offset < start:
            continue
        batches += 1
        if verify_crc and not h.is_control and not ev.crc_valid:
            findings.append(Finding(check="crc", message=f"batch at offset {h.base_offset} has a bad CRC; skipped",
                                    file=ev.log_path, position=h.position,
                                    offset=h.base_offset, partition=partition.name))
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
                ctx.marker(ev.log_path, h, ev.control_type, ev.coordinator_epoch)
        else:
            ctx.data(h)
    if progress is not None and last_path is not None:
        progress.advance(sizes.get(last_path, 0))
    if fold is not None:
        fold.finish()
        batches += fold.batches
    expire()  # the remaining reloads (the broker's own snapshots up to the log end) and removeExpiredProducers
    for pid in producers:
        expired.pop(pid, None)
    if snapshot_offset is not None and snapshot_offset <= end:
        _fill_start_timestamps(partition, producers, snapshot_offset)
    return PartitionProducerState(
        topic=partition.topic, partition=partition.partition, path=str(partition.path),
        log_start_offset=plan.log_start_offset, log_end_offset=end, replay_start_offset=start,
        snapshot_offset=snapshot_offset, batches=batches,
        producers={pid: e.freeze() for pid, e in sorted(producers.items())},
        completed=ctx.completed, findings=findings, notices=list(plan.notices) if chain is plan.chain else [],
        expired={pid: e.freeze() for pid, e in sorted(expired.items())},
        unreplicated=tuple(sorted(unreplicated)), load=plan)


def _unreplicated_floor(partition: Partition, plan: LoadPlan) -> int:
    """The lowest high watermark ``offline.lag_row`` can use for this partition: the checkpointed one
    clamped into the log as the broker does (the log end when there is none). Unknown (a checkpoint
    that does not read): the log start, below every marker."""
    log_dir = partition.log_dir
    if log_dir is None:
        return plan.log_start_offset
    try:
        hw = getattr(log_dir, "high_watermarks", {}).get(partition.key)
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


class _FileFold:
    """The files' batches from ``start`` folded by :meth:`ProducerReplay.fold`, segment by segment;
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
                    pos, n, seen, reason = ctx.fold(buf, pos, lim, start=start, end=self.end,
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
                if cut is not None:
                    if win is not None:  # the bytes recovery truncates: read whole (what the fold left)
                        win.prepare(max(cut, pos), len(buf) - max(cut, pos))
                    for got in _range_events(segment, buf, max(cut, pos), None, start, crc_mode, stops):
                        self.pending = segment.size
                        yield got
        self.finish()

    def finish(self) -> None:
        """Report the file read last (the replay calls this also when bytes recovery truncates
        ended the events early, as its loop reports the file of its last event)."""
        if self.progress is not None and self.pending is not None:
            self.progress.advance(self.pending)
        self.pending = None


def _fill_start_timestamps(partition: Partition, producers: dict[int, _Entry], snapshot_offset: int) -> None:
    """A snapshot keeps an open transaction's first offset but not when it began: read that batch."""
    for entry in producers.values():
        if entry.txn_first is None or entry.txn_start_ts is not None or entry.txn_first >= snapshot_offset:
            continue
        try:
            for _segment, header in partition.iter_batches(entry.txn_first):
                entry.txn_start_ts = header.max_timestamp  # the batch holding (or first after) txn_first
                break
        except FileShrank:  # changed size while being read: never taken for damage
            raise
        except (DecodeError, MissingFile):
            pass


class ProducerReplay:
    """``ProducerAppendInfo`` for every producer of one partition (REPLICATION origin: no sequence checks).

    :meth:`data` and :meth:`marker` apply one batch; :meth:`fold` applies a segment's batches
    from a position in one call (compiled when the C extension is built) and returns at the
    first batch it leaves to the caller. ``spans`` (when given) collects ``(first offset,
    marker offset)`` of every transaction a marker at or above ``span_floor`` completes.
    """

    def __init__(self, partition: Partition, producers: dict[int, _Entry], findings: list[Finding],
                 keep_completed: bool, on_completed: CompletedCallback | None, *,
                 spans: list[tuple[int, int]] | None = None, span_floor: int = 0) -> None:
        self.partition = partition
        self.producers = producers
        self.findings = findings
        self.keep = keep_completed
        self.on_completed = on_completed
        self.spans = spans
        self.span_floor = span_floor
        self.completed: list[CompletedTxn] = []

    def fold(self, buf: Buffer, pos: int, hi: int, *, start: int = -(2**63), end: int = 2**63 - 1,
             stop: int | None = None, verify_crc: bool = False, log_path: str = "",
             max_bytes: int | None = None) -> tuple[int, int, int, int]:
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
        non-transactional batch in an open transaction, a stale marker), or its base offset is
        at or past ``stop`` (where the caller looks at the state between batches: a snapshot
        reload, a snapshot to compare with). A control batch at or past ``end`` whose record
        is not plain is left to the caller too (the event source reads it).
        ``on_completed`` is called (and ``completed`` extended) for the markers folded, in
        order, before this returns. The compiled ``_replay.replay_fold`` and
        :meth:`_fold_py` stop at the same batches with the same state.
        """
        if max_bytes is None:
            max_bytes = FOLD_BYTES
        sp = _fold_c
        if sp is not None and record_batch._direct(buf):
            want = self.keep or self.on_completed is not None
            sink: list[CompletedTxn] | None = [] if want else None
            got: tuple[int, int, int, int] = sp.replay_fold(
                buf, pos, hi, self.producers, start, end, stop, verify_crc, self.spans, self.span_floor, sink,
                self.partition.topic, self.partition.partition, max_bytes)
            if sink:
                if self.keep:
                    self.completed.extend(sink)
                if self.on_completed is not None:
                    for done in sink:
                        self.on_completed(done)
            return got
        return self._fold_py(buf, pos, hi, start, end, stop, verify_crc, log_path, max_bytes)

    def _fold_py(self, buf: Buffer, pos: int, hi: int, start: int, end: int, stop: int | None, verify_crc: bool,
                 log_path: str, max_bytes: int) -> tuple[int, int, int, int]:
        """The pure-Python twin of ``_replay.replay_fold`` (see :meth:`fold`)."""
        producers = self.producers
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
            h = read_batch_header(buf, pos, hi)
            base = h.base_offset
            pid = h.producer_id
            if base >= end:
                if (h.is_control and pid >= 0 and h.records_count != 0 and crc_valid(buf, h)
                        and plain_control(buf, h) is None):
                    return pos, batches, seen, FOLD_SLOW
                seen += 1
            elif stop is not None and base >= stop:
                return pos, batches, seen, FOLD_SLOW
            elif base < start and h.last_offset < start:
                pass
            else:
                if verify_crc and not h.is_control and not crc_valid(buf, h):
                    return pos, batches, seen, FOLD_SLOW
                if pid >= 0 and h.is_control:
                    if not crc_valid(buf, h):
                        return pos, batches, seen, FOLD_SLOW
                    if h.records_count != 0:
                        control = plain_control(buf, h)
                        if control is None:
                            return pos, batches, seen, FOLD_SLOW
                        type_id, coordinator_epoch = control
                        if type_id in (ControlType.COMMIT, ControlType.ABORT):
                            entry = producers.get(pid)
                            epoch, coord = (entry.epoch, entry.coord_epoch) if entry is not None else (-1, -1)
                            assert coordinator_epoch is not None
                            if h.producer_epoch < epoch or coordinator_epoch < coord:
                                return pos, batches, seen, FOLD_SLOW
                            self.marker(log_path, h, type_id, coordinator_epoch)
                elif pid >= 0:
                    entry = producers.get(pid)
                    if entry is not None and (h.producer_epoch < entry.epoch or (
                            entry.txn_first is not None and not h.attributes & _TRANSACTIONAL)):
                        return pos, batches, seen, FOLD_SLOW
                    if entry is None and h.producer_epoch < -1:
                        return pos, batches, seen, FOLD_SLOW
                    self.data(h)
                batches += 1
                seen += 1
            pos += size
            scanned += size
        return pos, batches, seen, FOLD_END

    def _entry(self, pid: int) -> _Entry:
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = _Entry(pid)
        return entry

    def data(self, h: BatchHeader) -> None:
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self._entry(h.producer_id)
        if h.producer_epoch < entry.epoch:
            # The leader rejects this (InvalidProducerEpochException); a replica or the loader only
            # warns and takes the batch (ProducerAppendInfo.checkProducerEpoch, REPLICATION origin).
            self.findings.append(Finding(
                check="producer-epoch", severity="warning", offset=h.base_offset, position=h.position,
                partition=self.partition.name,
                message=(f"{self.partition.name}: producer {h.producer_id} writes at offset {h.base_offset} with "
                         f"epoch {h.producer_epoch}, below its last epoch {entry.epoch}")))
        entry.epoch = h.producer_epoch
        entry.last_seq = h.last_sequence
        last_offset = entry.last_offset = h.base_offset + h.last_offset_delta
        entry.last_ts = h.max_timestamp
        txn = h.magic >= 2 and h.attributes & _TRANSACTIONAL
        if entry.txn_first is not None and not txn:
            self.findings.append(Finding(
                check="non-transactional-in-txn", offset=h.base_offset, position=h.position,
                partition=self.partition.name,
                message=(f"{self.partition.name}: producer {h.producer_id} wrote a non-transactional batch at "
                         f"offset {h.base_offset} while its transaction from offset {entry.txn_first} is open "
                         f"(InvalidTxnStateException on a leader)")))
        elif txn:
            if entry.txn_first is None:
                entry.txn_first = h.base_offset
                entry.txn_start_ts = h.max_timestamp
            entry.txn_last = last_offset
            entry.txn_last_ts = h.max_timestamp

    def marker(self, log_path: Path | str, h: BatchHeader, type_id: int, coordinator_epoch: int | None) -> None:
        if type_id not in (ControlType.COMMIT, ControlType.ABORT):
            return  # LEADER_CHANGE and KRaft records carry no producer state
        outcome = "COMMIT" if type_id == ControlType.COMMIT else "ABORT"
        entry = self._entry(h.producer_id)
        coord_epoch = coordinator_epoch if coordinator_epoch is not None else 0
        # appendEndTxnMarker: a leader rejects a marker from an older producer epoch or an older
        # coordinator (a zombie coordinator after failover), but a broker rebuilding producer state
        # from its files replays with AppendOrigin.REPLICATION, where both checks only log
        # (ProducerAppendInfo.checkProducerEpoch / checkCoordinatorEpoch) and the marker is applied.
        # Files on disk are what the broker will reload, so we apply it too and report it.
        if h.producer_epoch < entry.epoch or coord_epoch < entry.coord_epoch:
            why = (f"producer epoch {h.producer_epoch} < {entry.epoch}" if h.producer_epoch < entry.epoch
                   else f"coordinator epoch {coord_epoch} < {entry.coord_epoch}")
            self.findings.append(Finding(
                check="stale-marker", file=str(log_path), position=h.position, offset=h.base_offset,
                partition=self.partition.name, severity="warning",
                message=(f"{self.partition.name}: {outcome} marker of producer {h.producer_id} at offset "
                         f"{h.base_offset} is stale ({why}); a leader would have rejected it, but the "
                         f"broker's log loader applies it on restart, so it ends the transaction")))
        if entry.txn_first is not None and self.spans is not None and h.base_offset >= self.span_floor:
            self.spans.append((entry.txn_first, h.base_offset))
        if entry.txn_first is not None and (self.keep or self.on_completed is not None):
            others = [e.txn_first for e in self.producers.values()
                      if e.txn_first is not None and e.producer_id != entry.producer_id]
            lso = min(others) if others else h.base_offset + 1
            done = CompletedTxn(
                topic=self.partition.topic, partition=self.partition.partition, producer_id=entry.producer_id,
                producer_epoch=h.producer_epoch, first_offset=entry.txn_first, last_offset=entry.txn_last,
                outcome=outcome, marker_offset=h.base_offset, coordinator_epoch=coord_epoch,
                start_timestamp=entry.txn_start_ts, end_timestamp=h.max_timestamp, last_stable_offset=lso)
            if self.keep:
                self.completed.append(done)
            if self.on_completed is not None:
                self.on_completed(done)
        if h.producer_epoch != entry.epoch:
            # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch drops the batch metadata, so the
            # entry's last sequence/offset read -1 until the producer writes again (TV2 markers and
            # the coordinator's timeout abort carry a bumped epoch).
            entry.last_seq = -1
            entry.last_offset = NO_OFFSET
        entry.epoch = h.producer_epoch
        entry.coord_epoch = coord_epoch
        entry.last_ts = h.max_timestamp
        entry.txn_first = None
        entry.txn_last = None
        entry.txn_start_ts = None
        entry.txn_last_ts = None


# The compiled fold (kafkatx/txn/_replay.c) writes _Entry's slots and makes CompletedTxn instances
# directly: it learns their slot offsets here, once (record_batch does the same for BatchHeader and Record).
try:
    from kafkatx.txn import _replay as _fold_c
except ImportError:  # pragma: no cover - depends on the build
    _fold_c = None  # type: ignore[assignment]
_fold_c = compiled.bind(__name__, "_fold_c", _fold_c,  # type: ignore[assignment]
                        lambda m: m.replay_setup(_Entry, CompletedTxn, "ABORT", "COMMIT"))


def fold_compiled() -> bool:
    """Whether :meth:`ProducerReplay.fold` runs in C (``_replay`` built, the compiled paths on)."""
    return _fold_c is not None
