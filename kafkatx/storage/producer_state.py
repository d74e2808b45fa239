"""One partition's producer state: ``ProducerStateManager``'s entries and ``ProducerAppendInfo``'s rules.

:class:`PyProducerStateFold` rebuilds it batch by batch the way the broker does from its files
(``ProducerAppendInfo.append`` with ``AppendOrigin.REPLICATION``): a transactional data batch opens
a transaction for its producer when none is open, a COMMIT/ABORT marker ends it. It is the plain
reference; its compiled twin (``kafkatx/storage/_replay.c``, the class of the same name without
``Py``) is swapped in whole by :func:`new_producer_state_fold` where it is built, and
``tests/storage/test_replay_fold.py`` holds the two to each other (results and errors). The
partition replay that drives one over a partition's files is ``storage/replay.py``.

``ProducerAppendInfo``'s rules are the predicates below, each stated once in Python and once in C
(a function of the same name in ``_replay.c``). ``checkSequence`` has no predicate: it runs only for
``AppendOrigin.CLIENT``, and the loader replays with ``REPLICATION``.

Kafka sources: storage/src/main/java/org/apache/kafka/storage/internals/log/
ProducerStateManager.java, ProducerAppendInfo.java, ProducerStateEntry.java.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

from msgspec import Struct, field

from kafkatx.format import compiled
from kafkatx.format._primitives import Buffer
from kafkatx.format.control import ControlType
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.format.record_batch import BatchHeader, crc_valid, frame_batch
from kafkatx.format.segment_fold import plain_control
from kafkatx.rows import Finding
from kafkatx.storage.loading import LoadPlan
from kafkatx.storage.lso import txn_index_last_stable_offset

NO_OFFSET = -1
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH: what a producer without an entry compares against
NO_COORDINATOR_EPOCH = -1  # ProducerStateEntry.empty's coordinator epoch (a producer first seen)


# ----------------------------------------------------------------------------- ProducerAppendInfo's rules
# Each returns whether the check passes. A leader throws where one fails; the log loader replays
# with AppendOrigin.REPLICATION, where the epoch checks only log and the batch is applied, so the
# replay applies it too and reports a finding (ProducerStateFold's FindingRow).

def check_producer_epoch(producer_epoch: int, current_epoch: int) -> bool:
    """``ProducerAppendInfo.checkProducerEpoch`` as the loader runs it (``TV_UNKNOWN``: the legacy rule):
    a batch's epoch may not be below the producer's current one (``invalidEpoch``). The TV2 rule
    (``<=`` for markers) is a leader's, given the transaction version by ``WriteTxnMarkers``; the
    version is not on disk, so a replay of files uses the legacy rule for markers too."""
    return producer_epoch >= current_epoch


def check_coordinator_epoch(coordinator_epoch: int, current_coordinator_epoch: int) -> bool:
    """``ProducerAppendInfo.checkCoordinatorEpoch``: a marker's coordinator epoch may not be below the
    one the producer's entry holds (a zombie coordinator after a failover)."""
    return current_coordinator_epoch <= coordinator_epoch


def check_end_txn_marker(producer_epoch: int, coordinator_epoch: int, current_epoch: int,
                         current_coordinator_epoch: int) -> bool:
    """``ProducerAppendInfo.appendEndTxnMarker``'s checks: ``checkProducerEpoch`` then
    ``checkCoordinatorEpoch``. False: a stale marker (still applied on load, and reported)."""
    return (check_producer_epoch(producer_epoch, current_epoch)
            and check_coordinator_epoch(coordinator_epoch, current_coordinator_epoch))


def check_txn_state(txn_open: bool, is_transactional: bool) -> bool:
    """``ProducerAppendInfo.appendDataBatch``: a producer with an open transaction writes only
    transactional batches (``InvalidTxnStateException`` on a leader; the loader applies the batch)."""
    return not txn_open or is_transactional


def begins_txn(txn_open: bool, is_transactional: bool) -> bool:
    """``ProducerAppendInfo.appendDataBatch``: a transactional batch of a producer with no open
    transaction begins one, at the batch's base offset (``setCurrentTxnFirstOffset``)."""
    return is_transactional and not txn_open


# ----------------------------------------------------------------------------- ongoing transactions

def _first(item: tuple[int, int]) -> int:
    return item[1]


def ongoing_in_order(ongoing: dict[int, int], first_offset: int) -> bool:
    """Whether a transaction beginning at ``first_offset`` goes last in ``ongoing`` (first-offset
    order, Kafka's ``TreeMap``, holds). Only a log whose offsets go back breaks it; the fold then
    puts it after the transactions beginning at or below it."""
    return not ongoing or first_offset >= next(reversed(ongoing.values()))


def find_next_incomplete_txn(ongoing: dict[int, int], producer_id: int) -> int | None:
    """``ProducerStateManager.findNextIncompleteTxn``: the first offset of the earliest ongoing
    transaction of another producer (``ongoing`` is first-offset ordered: the first or second entry)."""
    for pid, first in ongoing.items():
        if pid != producer_id:
            return first
    return None


class ProducerState(Struct, frozen=True, kw_only=True):
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


class OpenTxn(Struct, frozen=True, kw_only=True):
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


class PartitionProducerState(Struct, frozen=True, kw_only=True):
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
    load: LoadPlan | None = None  # what the broker does to the files on startup (storage/loading.py)

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


CompletedCallback = Callable[[CompletedTxn], None]

# ----------------------------------------------------------------------------- ProducerStateFold
# What the fold hands out: plain tuples, the same from both twins (the compiled class makes no object of
# this module's classes and writes into none).
#: A producer's entry (``ProducerStateEntry``): producer id, producer epoch, last sequence, last offset
#: (-1: no data batch since its epoch changed), last timestamp, coordinator epoch, then the open
#: transaction's first offset, last data offset, start and last timestamps (each None when none is open).
EntryRow = tuple[int, int, int, int, int, int, int | None, int | None, int | None, int | None]
#: A transaction a COMMIT/ABORT marker completed (``CompletedTxn`` with what ``scan`` and ``verify`` add):
#: producer id, the marker's producer epoch, first offset, last data offset (None: none seen), control type
#: (:class:`ControlType` ABORT 0 / COMMIT 1), marker offset, coordinator epoch, start timestamp (None: not
#: known), the marker's timestamp, and ``ProducerStateManager.lastStableOffset(completedTxn)``.
CompletedRow = tuple[int, int, int, int | None, int, int, int, int | None, int, int]
#: A check of ``ProducerAppendInfo`` that failed on a batch the loader applies all the same
#: (``AppendOrigin.REPLICATION`` only logs): check name, log path, position, offset, producer id, and
#: ``(batch's epoch, entry's epoch)`` for ``producer-epoch``, ``(open transaction's first offset,)`` for
#: ``non-transactional-in-txn``, ``(control type, marker's epoch, entry's epoch, marker's coordinator epoch,
#: entry's coordinator epoch)`` for ``stale-marker``. :func:`finding_of` words it.
FindingRow = tuple[str, str, int, int, int, tuple[int, ...]]

# ProducerStateFold.fold: why it returned, and the bytes it folds per call by default.
FOLD_END = 0  # it reached ``hi``
FOLD_CHUNK = 1  # ``max_bytes`` folded: call again
FOLD_STOP = 2  # the batch at ``pos`` is the caller's to read (see ProducerStateFold.fold)
FOLD_BYTES = 64 << 20
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"{value} does not fit a 64-bit producer state field")
    return value


class _Entry:
    """One producer's ``ProducerStateEntry`` while the pure :class:`PyProducerStateFold` replays."""

    __slots__ = ("producer_id", "epoch", "last_seq", "last_offset", "last_ts", "coord_epoch",
                 "txn_first", "txn_last", "txn_start_ts", "txn_last_ts")

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.epoch = NO_PRODUCER_EPOCH
        self.last_seq = -1
        self.last_offset = NO_OFFSET
        self.last_ts = -1
        self.coord_epoch = NO_COORDINATOR_EPOCH
        self.txn_first: int | None = None
        self.txn_last: int | None = None
        self.txn_start_ts: int | None = None
        self.txn_last_ts: int | None = None

    @classmethod
    def of_row(cls, row: EntryRow) -> _Entry:
        pid, epoch, last_seq, last_offset, last_ts, coord, first, last, start_ts, last_txn_ts = row
        entry = cls(_int64(pid))
        entry.epoch, entry.last_seq, entry.last_offset = _int64(epoch), _int64(last_seq), _int64(last_offset)
        entry.last_ts, entry.coord_epoch = _int64(last_ts), _int64(coord)
        entry.txn_first = None if first is None else _int64(first)
        entry.txn_last = None if last is None else _int64(last)
        entry.txn_start_ts = None if start_ts is None else _int64(start_ts)
        entry.txn_last_ts = None if last_txn_ts is None else _int64(last_txn_ts)
        return entry

    def row(self) -> EntryRow:
        return (self.producer_id, self.epoch, self.last_seq, self.last_offset, self.last_ts, self.coord_epoch,
                self.txn_first, self.txn_last, self.txn_start_ts, self.txn_last_ts)


def entry_of_snapshot(e: ProducerSnapshotEntry) -> EntryRow:
    """A ``.snapshot`` entry as the fold's entry (``ProducerStateManager.loadProducerEntry``): an open
    transaction keeps its first offset; its last data offset is the entry's when that lies inside it."""
    if e.current_txn_first_offset >= 0:
        last = e.last_offset if e.last_offset >= e.current_txn_first_offset else None
        return (e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.timestamp, e.coordinator_epoch,
                e.current_txn_first_offset, last, None, e.timestamp)
    return (e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.timestamp, e.coordinator_epoch,
            None, None, None, None)


def producer_state_of(row: EntryRow) -> ProducerState:
    return ProducerState(producer_id=row[0], producer_epoch=row[1], last_sequence=row[2], last_offset=row[3],
                         last_timestamp=row[4], coordinator_epoch=row[5], current_txn_first_offset=row[6],
                         current_txn_last_offset=row[7], current_txn_start_timestamp=row[8],
                         current_txn_last_timestamp=row[9])


def completed_txn_of(topic: str, partition: int, row: CompletedRow) -> CompletedTxn:
    return CompletedTxn(topic=topic, partition=partition, producer_id=row[0], producer_epoch=row[1],
                        first_offset=row[2], last_offset=row[3],
                        outcome="COMMIT" if row[4] == ControlType.COMMIT else "ABORT", marker_offset=row[5],
                        coordinator_epoch=row[6], start_timestamp=row[7], end_timestamp=row[8],
                        last_stable_offset=row[9])


def finding_of(partition: str, row: FindingRow) -> Finding:
    """The :class:`Finding` a :data:`FindingRow` reports (``partition``: ``topic-N``)."""
    check, log_path, position, offset, pid, detail = row
    if check == "producer-epoch":
        # The leader rejects this (InvalidProducerEpochException); a replica or the loader only
        # warns and takes the batch (ProducerAppendInfo.checkProducerEpoch, REPLICATION origin).
        epoch, current = detail
        return Finding(check=check, severity="warning", offset=offset, position=position, partition=partition,
                       message=(f"{partition}: producer {pid} writes at offset {offset} with epoch {epoch}, "
                                f"below its last epoch {current}"))
    if check == "non-transactional-in-txn":
        (first,) = detail
        return Finding(check=check, offset=offset, position=position, partition=partition,
                       message=(f"{partition}: producer {pid} wrote a non-transactional batch at offset {offset} "
                                f"while its transaction from offset {first} is open "
                                f"(InvalidTxnStateException on a leader)"))
    # stale-marker: appendEndTxnMarker on a leader rejects a marker from an older producer epoch or
    # an older coordinator (a zombie coordinator after failover), but a broker rebuilding producer
    # state from its files replays with AppendOrigin.REPLICATION, where both checks only log and the
    # marker is applied. Files on disk are what the broker will reload, so the fold applies it too.
    control_type, epoch, current, coord, current_coord = detail
    outcome = "COMMIT" if control_type == ControlType.COMMIT else "ABORT"
    why = (f"producer epoch {epoch} < {current}" if not check_producer_epoch(epoch, current)
           else f"coordinator epoch {coord} < {current_coord}")
    return Finding(check=check, file=log_path, position=position, offset=offset, partition=partition,
                   severity="warning",
                   message=(f"{partition}: {outcome} marker of producer {pid} at offset {offset} is stale ({why}); "
                            f"a leader would have rejected it, but the broker's log loader applies it on "
                            f"restart, so it ends the transaction"))


class PyProducerStateFold:
    """One partition's producer state as the broker's loader rebuilds it: ``ProducerStateManager``'s
    entries and ongoing transactions, changed batch by batch by ``ProducerAppendInfo``'s rules
    (``AppendOrigin.REPLICATION``: no sequence checks, and a failed check is a finding, not a refusal).

    The plain reference; :func:`new_producer_state_fold` hands out its compiled twin
    (``kafkatx.storage._replay.ProducerStateFold``, same methods, results and errors) where it is built.

    * :meth:`append` / :meth:`append_end_txn_marker`: one batch (``ProducerAppendInfo.append``,
      ``appendDataBatch``, ``appendEndTxnMarker``, then ``ProducerStateManager.update`` /
      ``completeTxn``);
    * :meth:`fold`: the plain batches of a segment's bytes, each through the two above, up to the
      first batch whose bytes the caller must read itself;
    * ``entries``, :meth:`load_producer_entry`: the start state (a ``.snapshot``'s entries);
      :meth:`active_producers`, :meth:`last_entry`, :meth:`remove_producer`, :meth:`ongoing_txns`: the state;
    * :meth:`take_completed` (with ``keep_completed``; only the ABORTs with ``aborts_only``: ``verify``, as
      the ``.txnindex`` holds only those), :meth:`take_findings`, :meth:`take_spans` (``(first offset,
      marker offset)`` of every transaction a marker at or above ``span_floor`` completes; None: none kept)
      hand out what was gathered since the last call.

    Kafka sources: storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerAppendInfo.java,
    ProducerStateManager.java, ProducerStateEntry.java.
    """

    def __init__(self, entries: Iterable[EntryRow] = (), *, keep_completed: bool = False, aborts_only: bool = False,
                 span_floor: int | None = None) -> None:
        self._producers: dict[int, _Entry] = {}
        self._ongoing: dict[int, int] = {}  # ProducerStateManager.ongoingTxns
        for row in entries:
            self.load_producer_entry(row)
        self._keep = keep_completed
        self._aborts_only = aborts_only
        self._span_floor = span_floor
        self._completed: list[CompletedRow] = []
        self._findings: list[FindingRow] = []
        self._spans: list[tuple[int, int]] = []

    # ------------------------------------------------------------------ ProducerStateManager's state
    def load_producer_entry(self, row: EntryRow) -> None:
        """``ProducerStateManager.loadProducerEntry``: an open transaction goes into ``ongoingTxns``."""
        entry = _Entry.of_row(row)
        old = self._producers.get(entry.producer_id)
        self._producers[entry.producer_id] = entry
        if old is not None and old.txn_first is not None:
            self._ongoing.pop(entry.producer_id, None)
        if entry.txn_first is not None:
            self._begin(entry.producer_id, entry.txn_first)

    def active_producers(self) -> list[EntryRow]:
        """``ProducerStateManager.activeProducers``, in the order the producers were first seen."""
        return [e.row() for e in self._producers.values()]

    def last_entry(self, producer_id: int) -> EntryRow | None:
        """``ProducerStateManager.lastEntry``."""
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.row()

    def remove_producer(self, producer_id: int) -> EntryRow:
        """Drop a producer (``removeExpiredProducers`` drops those ``isProducerExpired`` says); KeyError if none."""
        entry = self._producers.pop(producer_id)
        self._ongoing.pop(producer_id, None)
        return entry.row()

    def ongoing_txns(self) -> list[tuple[int, int]]:
        """``ProducerStateManager.ongoingTxns``: (producer id, first offset), by first offset."""
        return list(self._ongoing.items())

    def take_completed(self) -> list[CompletedRow]:
        got, self._completed = self._completed, []
        return got

    def take_findings(self) -> list[FindingRow]:
        got, self._findings = self._findings, []
        return got

    def take_spans(self) -> list[tuple[int, int]]:
        got, self._spans = self._spans, []
        return got

    def __len__(self) -> int:
        return len(self._producers)

    def _entry(self, producer_id: int) -> _Entry:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _Entry(producer_id)
        return entry

    def _begin(self, producer_id: int, first_offset: int) -> None:
        """``ProducerStateManager.update`` puts a begun transaction in ``ongoingTxns`` (a ``TreeMap`` by first
        offset: a log read in offset order adds each last; one whose offsets go back re-sorts)."""
        ongoing = self._ongoing
        in_order = ongoing_in_order(ongoing, first_offset)
        ongoing[producer_id] = first_offset
        if not in_order:
            items = sorted(ongoing.items(), key=_first)
            ongoing.clear()
            ongoing.update(items)

    # ------------------------------------------------------------------ ProducerAppendInfo
    def append(self, batch: BatchHeader, log_path: str = "") -> None:
        """``ProducerAppendInfo.append`` of a data batch (``appendDataBatch``); a batch without a producer
        id carries no producer state (``UnifiedLog`` tracks only ``batch.hasProducerId``). A control batch
        goes to :meth:`append_end_txn_marker` with its record (the header does not carry it)."""
        pid = batch.producer_id
        if pid < 0:
            return
        entry = self._entry(pid)
        epoch = batch.producer_epoch
        if not check_producer_epoch(epoch, entry.epoch):
            self._findings.append(("producer-epoch", log_path, batch.position, batch.base_offset, pid,
                                   (epoch, entry.epoch)))
        # ProducerStateEntry.addBatch
        entry.epoch = epoch
        entry.last_seq = batch.last_sequence
        last_offset = entry.last_offset = batch.base_offset + batch.last_offset_delta
        entry.last_ts = batch.max_timestamp
        txn = batch.is_transactional
        txn_open = entry.txn_first is not None
        if not check_txn_state(txn_open, txn):
            self._findings.append(("non-transactional-in-txn", log_path, batch.position, batch.base_offset, pid,
                                   (entry.txn_first,)))  # type: ignore[arg-type]
        elif txn:
            if begins_txn(txn_open, txn):  # setCurrentTxnFirstOffset
                entry.txn_first = batch.base_offset
                entry.txn_start_ts = batch.max_timestamp
                self._begin(pid, batch.base_offset)
            entry.txn_last = last_offset
            entry.txn_last_ts = batch.max_timestamp

    def append_end_txn_marker(self, batch: BatchHeader, control_type: int, coordinator_epoch: int | None,
                              log_path: str = "") -> None:
        """``ProducerAppendInfo.appendEndTxnMarker`` for the control batch ``batch`` whose record is of
        ``control_type`` (LEADER_CHANGE and KRaft records carry no producer state: nothing happens), then
        ``ProducerStateManager.completeTxn``."""
        if control_type != ControlType.COMMIT and control_type != ControlType.ABORT:
            return
        control_type = int(control_type)  # a plain int in the rows, as the compiled twin gives
        pid, epoch, offset = batch.producer_id, batch.producer_epoch, batch.base_offset
        entry = self._entry(pid)
        coord = coordinator_epoch if coordinator_epoch is not None else 0
        if not check_end_txn_marker(epoch, coord, entry.epoch, entry.coord_epoch):
            self._findings.append(("stale-marker", log_path, batch.position, offset, pid,
                                   (control_type, epoch, entry.epoch, coord, entry.coord_epoch)))
        first = entry.txn_first
        if first is not None:
            if self._span_floor is not None and offset >= self._span_floor:
                self._spans.append((first, offset))
            if self._keep and (control_type == ControlType.ABORT or not self._aborts_only):
                # ProducerStateManager.lastStableOffset(completedTxn), before completeTxn removes it
                nxt = find_next_incomplete_txn(self._ongoing, pid)
                lso = txn_index_last_stable_offset(() if nxt is None else (nxt,), offset)
                self._completed.append((pid, epoch, first, entry.txn_last, control_type, offset, coord,
                                        entry.txn_start_ts, batch.max_timestamp, lso))
            self._ongoing.pop(pid, None)  # completeTxn
        if epoch != entry.epoch:
            # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch drops the batch metadata, so the
            # entry's last sequence/offset read -1 until the producer writes again (TV2 markers and
            # the coordinator's timeout abort carry a bumped epoch).
            entry.last_seq = -1
            entry.last_offset = NO_OFFSET
        # ProducerStateEntry.update
        entry.epoch = epoch
        entry.coord_epoch = coord
        entry.last_ts = batch.max_timestamp
        entry.txn_first = entry.txn_last = entry.txn_start_ts = entry.txn_last_ts = None

    # ------------------------------------------------------------------ a segment's bytes
    def fold(self, buf: Buffer, pos: int, hi: int, *, start: int = _INT64_MIN, end: int = _INT64_MAX,
             stop: int | None = None, verify_crc: bool = False, crcs_hold: bool = False,
             max_bytes: int = FOLD_BYTES, log_path: str = "") -> tuple[int, int, int, int]:
        """Apply the batches of ``buf[pos:hi]`` (one segment's bytes) as the replay does, each through
        :meth:`append` / :meth:`append_end_txn_marker`.

        Returns ``(pos, batches, seen, reason)``: where it stopped, how many batches it applied (a batch
        below ``start`` -- base and last offset both below it -- or at or past ``end`` is skipped and not
        counted), how many it passed at or past ``start``, and why it stopped: :data:`FOLD_END` (``hi``),
        :data:`FOLD_CHUNK` (``max_bytes`` folded: call again) or :data:`FOLD_STOP`: the batch at ``pos``
        is left to the caller, unapplied, because its bytes need reading there (not a magic-2 batch that
        frames, ``read_batch_header`` says what; its checked CRC fails -- ``verify_crc`` for data batches,
        control batches of idempotent producers always; its control record is not in Kafka's plain layout,
        ``read_control_record`` reads it) or its base offset is at or past ``stop`` (where the caller looks
        at the state between batches: a snapshot reload, a snapshot to compare with). A control batch at or
        past ``end`` whose record is not plain is left to the caller too (the event source reads it).
        ``crcs_hold``: the caller checked the CRC of every batch of ``buf[pos:hi]`` and each holds.
        """
        if not 0 <= pos <= hi <= len(buf):
            raise ValueError(f"fold(): bytes {pos}..{hi} are not inside a buffer of {len(buf)}")
        batches = seen = scanned = 0
        while pos < hi:
            if scanned >= max_bytes:
                return pos, batches, seen, FOLD_CHUNK
            h = frame_batch(buf, pos, hi)
            if h is None:
                return pos, batches, seen, FOLD_STOP
            base, pid = h.base_offset, h.producer_id
            if base >= end:
                if (h.is_control and pid >= 0 and h.records_count != 0 and (crcs_hold or crc_valid(buf, h))
                        and plain_control(buf, h) is None):
                    return pos, batches, seen, FOLD_STOP
                seen += 1
            elif stop is not None and base >= stop:
                return pos, batches, seen, FOLD_STOP
            elif base >= start or h.last_offset >= start:
                if h.is_control and pid >= 0:
                    if not (crcs_hold or crc_valid(buf, h)):
                        return pos, batches, seen, FOLD_STOP
                    if h.records_count != 0:
                        control = plain_control(buf, h)
                        if control is None:
                            return pos, batches, seen, FOLD_STOP
                        self.append_end_txn_marker(h, control[0], control[1], log_path)
                elif not h.is_control:
                    if verify_crc and not (crcs_hold or crc_valid(buf, h)):
                        return pos, batches, seen, FOLD_STOP
                    self.append(h, log_path)
                batches += 1
                seen += 1
            pos += h.size
            scanned += h.size
        return pos, batches, seen, FOLD_END


# The type of either class (the compiled one is typed as the pure one: kafkatx/storage/_replay.pyi).
ProducerStateFold: TypeAlias = PyProducerStateFold


def new_producer_state_fold(entries: Iterable[EntryRow] = (), *, keep_completed: bool = False,
                            aborts_only: bool = False, span_floor: int | None = None) -> ProducerStateFold:
    """A :class:`PyProducerStateFold`, or its compiled twin where it is built and the compiled paths are on
    (``format/compiled.py``): chosen once per fold, so one partition is replayed by one class throughout."""
    c = _replay
    cls = c.ProducerStateFold if c is not None else PyProducerStateFold
    fold: ProducerStateFold = cls(entries, keep_completed=keep_completed, aborts_only=aborts_only,
                                  span_floor=span_floor)
    return fold


# The compiled twin (kafkatx/storage/_replay.c), swapped in whole (aiokafka's record/default_records.py way).
try:
    from kafkatx.storage import _replay
except ImportError:  # pragma: no cover - depends on the build
    _replay = None  # type: ignore[assignment]
_replay = compiled.bind(__name__, "_replay", _replay)  # type: ignore[assignment]


def fold_compiled() -> bool:
    """Whether :func:`new_producer_state_fold` hands out the compiled class now."""
    return _replay is not None
