"""One partition's producer state: ``ProducerStateManager``'s entries and ``ProducerAppendInfo``'s rules.

:class:`ProducerReplay` applies one batch at a time (:meth:`ProducerReplay.data`,
:meth:`ProducerReplay.marker`) the way the broker does when it rebuilds producer state from its
files (``ProducerAppendInfo.append`` with ``AppendOrigin.REPLICATION``): a transactional data
batch opens a transaction for its producer when none is open, a COMMIT/ABORT marker ends it.
The segment-at-a-time fold (compiled or pure) is ``storage/fold.py``; the partition replay that
drives both is ``storage/replay.py``.

``ProducerAppendInfo``'s rules are the predicates below, each stated once: the per-batch path
(:meth:`ProducerReplay.data` / :meth:`ProducerReplay.marker`), the pure fold's guard
(``storage/fold.py`` ``_fold_py``) and the replay's run handling (``storage/replay.py``) call them, and
the compiled fold (``storage/_replay.c``) mirrors each in a C function of the same name.
``checkSequence`` has no predicate: it runs only for ``AppendOrigin.CLIENT``, and the loader
replays with ``REPLICATION``.

Kafka sources: storage/src/main/java/org/apache/kafka/storage/internals/log/
ProducerStateManager.java, ProducerAppendInfo.java, ProducerStateEntry.java.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from msgspec import Struct, field

from kafkatx.format.control import ControlType
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.format.record_batch import BatchHeader
from kafkatx.rows import Finding
from kafkatx.storage.loading import LoadPlan
from kafkatx.storage.lso import txn_index_last_stable_offset
from kafkatx.storage.partition import Partition

NO_OFFSET = -1
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH: what a producer without an entry compares against
NO_COORDINATOR_EPOCH = -1  # ProducerStateEntry.empty's coordinator epoch (as _Entry starts)


# ----------------------------------------------------------------------------- ProducerAppendInfo's rules
# Each returns whether the check passes. A leader throws where one fails; the log loader replays
# with AppendOrigin.REPLICATION, where the epoch checks only log and the batch is applied, so the
# replay applies it too and reports a finding. The compiled fold leaves such a batch to Python
# (its C twin of the same name says so), where the finding is built.

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

def ongoing_txns(producers: dict[int, _Entry]) -> dict[int, int]:
    """``ProducerStateManager.ongoingTxns``: producer id -> first offset of its open transaction,
    ordered by first offset (Kafka's ``TreeMap`` keyed by first offset).

    The replay reads a partition in offset order, so a transaction that begins later is added
    last and the order holds; :meth:`ProducerReplay.begin_txn` re-sorts when a log's offsets go
    back. Built once here (from a snapshot's entries); kept by the replay and the compiled fold.
    """
    if not producers:
        return {}  # a replay from the log start (verify's, one per partition): nothing to sort
    return dict(sorted(((pid, e.txn_first) for pid, e in producers.items() if e.txn_first is not None),
                       key=_first))


def _first(item: tuple[int, int]) -> int:
    return item[1]


def ongoing_in_order(ongoing: dict[int, int], first_offset: int) -> bool:
    """Whether a transaction beginning at ``first_offset`` goes last in ``ongoing`` (its order
    holds). Only a log whose offsets go back breaks it: :meth:`ProducerReplay.begin_txn` then
    re-sorts, and the compiled fold leaves such a batch to Python."""
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


class ProducerReplay:
    """``ProducerAppendInfo`` for every producer of one partition (REPLICATION origin: no sequence checks).

    :meth:`data` and :meth:`marker` apply one batch; :func:`kafkatx.storage.fold.fold_batches` applies
    a segment's batches from a position in one call (compiled when the C extension is built) and
    returns at the first batch it leaves to the caller. ``spans`` (when given) collects ``(first offset,
    marker offset)`` of every transaction a marker at or above ``span_floor`` completes.
    """

    def __init__(self, partition: Partition, producers: dict[int, _Entry], findings: list[Finding],
                 keep_completed: bool, on_completed: CompletedCallback | None, *,
                 spans: list[tuple[int, int]] | None = None, span_floor: int = 0,
                 keep_aborts_only: bool = False) -> None:
        self.partition = partition
        self.producers = producers
        self.findings = findings
        self.keep = keep_completed
        # ``completed`` keeps only the aborted transactions (``verify``: the .txnindex holds only those);
        # the ongoing transactions are kept all the same (an abort's last stable offset needs them).
        self.keep_aborts_only = keep_aborts_only
        self.on_completed = on_completed
        self.spans = spans
        self.span_floor = span_floor
        self.completed: list[CompletedTxn] = []
        # ProducerStateManager.ongoingTxns, kept only where a completed transaction's last stable
        # offset is wanted (lastStableOffset(completedTxn): the earliest ongoing one of another producer).
        self.ongoing: dict[int, int] | None = (ongoing_txns(producers) if keep_completed or on_completed is not None
                                               else None)

    def begin_txn(self, entry: _Entry, first_offset: int) -> None:
        """``appendDataBatch`` began a transaction (``ProducerStateManager.update`` puts it in ``ongoingTxns``)."""
        entry.txn_first = first_offset
        ongoing = self.ongoing
        if ongoing is None:
            return
        if not ongoing_in_order(ongoing, first_offset):  # a log whose offsets go back
            ongoing[entry.producer_id] = first_offset
            items = sorted(ongoing.items(), key=_first)
            ongoing.clear()
            ongoing.update(items)
        else:
            ongoing[entry.producer_id] = first_offset

    def _entry(self, pid: int) -> _Entry:
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = _Entry(pid)
        return entry

    def data(self, h: BatchHeader) -> None:
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self._entry(h.producer_id)
        if not check_producer_epoch(h.producer_epoch, entry.epoch):
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
        txn = h.is_transactional
        txn_open = entry.txn_first is not None
        if not check_txn_state(txn_open, txn):
            self.findings.append(Finding(
                check="non-transactional-in-txn", offset=h.base_offset, position=h.position,
                partition=self.partition.name,
                message=(f"{self.partition.name}: producer {h.producer_id} wrote a non-transactional batch at "
                         f"offset {h.base_offset} while its transaction from offset {entry.txn_first} is open "
                         f"(InvalidTxnStateException on a leader)")))
        elif txn:
            if begins_txn(txn_open, txn):
                self.begin_txn(entry, h.base_offset)
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
        if not check_end_txn_marker(h.producer_epoch, coord_epoch, entry.epoch, entry.coord_epoch):
            why = (f"producer epoch {h.producer_epoch} < {entry.epoch}"
                   if not check_producer_epoch(h.producer_epoch, entry.epoch)
                   else f"coordinator epoch {coord_epoch} < {entry.coord_epoch}")
            self.findings.append(Finding(
                check="stale-marker", file=str(log_path), position=h.position, offset=h.base_offset,
                partition=self.partition.name, severity="warning",
                message=(f"{self.partition.name}: {outcome} marker of producer {h.producer_id} at offset "
                         f"{h.base_offset} is stale ({why}); a leader would have rejected it, but the "
                         f"broker's log loader applies it on restart, so it ends the transaction")))
        if entry.txn_first is not None and self.spans is not None and h.base_offset >= self.span_floor:
            self.spans.append((entry.txn_first, h.base_offset))
        ongoing = self.ongoing
        if entry.txn_first is not None and ongoing is not None:
            keep = self.keep and (outcome == "ABORT" or not self.keep_aborts_only)
            done = None
            if keep or self.on_completed is not None:
                # ProducerStateManager.lastStableOffset(completedTxn), before completeTxn removes it
                nxt = find_next_incomplete_txn(ongoing, entry.producer_id)
                lso = txn_index_last_stable_offset(() if nxt is None else (nxt,), h.base_offset)
                done = CompletedTxn(
                    topic=self.partition.topic, partition=self.partition.partition, producer_id=entry.producer_id,
                    producer_epoch=h.producer_epoch, first_offset=entry.txn_first, last_offset=entry.txn_last,
                    outcome=outcome, marker_offset=h.base_offset, coordinator_epoch=coord_epoch,
                    start_timestamp=entry.txn_start_ts, end_timestamp=h.max_timestamp, last_stable_offset=lso)
            ongoing.pop(entry.producer_id, None)  # completeTxn
            if done is not None:
                if keep:
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
