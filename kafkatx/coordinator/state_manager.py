"""The transaction coordinator's load of ``__transaction_state``, offline.

:func:`replay_transaction_log` rebuilds what every transaction coordinator would load
(``TransactionStateManager.loadTransactionsForTxnTopicPartition``): the latest value per
transactional id wins, a tombstone removes the id. Streaming: batch headers, and records only
for ``__transaction_state`` values, so memory follows the number of transactional ids.

Kafka sources: transaction-coordinator/.../TransactionStateManager (Kafka 3.x:
core/.../coordinator/transaction/TransactionStateManager.scala).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from kafkatx.coordinator.rules import TWO_PHASE_COMMIT_TIMEOUT_MS, is_timed_out
from kafkatx.coordinator.state import (
    NO_PRODUCER_ID,
    STATE_NAMES_BY_NUMBER,
    TransactionMetadata,
    fields_partition_names,
    history_entry_fields,
    state_of,
)
from kafkatx.coordinator.txn_fold import (
    TXN_STATE_TOPIC,
    TxnIds,
    TxnItem,
    TxnKept,
    TxnLatest,
    fold_txn_partition,
    history_items,
)
from kafkatx.errors import KafkaTxError, ReadFailed
from kafkatx.format import compiled
from kafkatx.format.txn_log import (
    F_LAST_UPDATE_TIMESTAMP,
    F_NEXT_PRODUCER_ID,
    F_PREVIOUS_PRODUCER_ID,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_START_TIMESTAMP,
    F_STATE,
    F_TIMEOUT_MS,
    TxnLogFields,
    coordinator_partition,
)
from kafkatx.rows import Finding, HistoryEntry, Progress, Report, RowChunks, Unreadable, unreadable
from kafkatx.storage.loading import DELETE_SEGMENT, TRUNCATE_SEGMENT, plan_load
from kafkatx.storage.log_dir import LogDir, collector_paused
from kafkatx.storage.replicas import as_log_dirs, choose_replicas

try:  # the compiled TxnFold loop (kafkatx/coordinator/_coordinator.c); absent: Python only, the same answers
    from kafkatx.coordinator import _coordinator
except ImportError:  # pragma: no cover - built without a C compiler
    _coordinator = None  # type: ignore[assignment]
_coordinator = compiled.bind(__name__, "_coordinator", _coordinator)  # type: ignore[assignment]

DEFAULT_TXN_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions


# TransactionRow's field names in order: what :func:`transaction_values` gives, one value each.
TRANSACTION_ROW_FIELDS: tuple[str, ...] = (
    "transactional_id", "producer_id", "producer_epoch", "state", "timeout_ms", "start_timestamp_ms",
    "last_update_timestamp_ms", "partitions", "coordinator_partition", "coordinator_id")


def transaction_values(tid: str, f: TxnLogFields, coordinator_partition: int,
                       coordinator_id: int | None) -> tuple[object, ...]:
    """The list-txn row of ``tid``'s latest record ``f`` as the tuple of its fields in order
    (:data:`TRANSACTION_ROW_FIELDS`), no object made (``list-txn`` at 1,000,000 ids): the one mapping from
    the record's fields to the row, which ``offline.transaction_row_fields`` makes a ``TransactionRow`` of
    (the test suite holds it to ``offline.transaction_row`` of the metadata). ``coordinator_id``: the node
    id of the log dir holding ``__transaction_state-<coordinator_partition>`` (``offline.coordinator_ids``)."""
    start, last = f[F_START_TIMESTAMP], f[F_LAST_UPDATE_TIMESTAMP]
    return (tid, f[F_PRODUCER_ID], f[F_PRODUCER_EPOCH], state_of(f[F_STATE]).kafka_name, f[F_TIMEOUT_MS],
            start if start >= 0 else None, last if last >= 0 else None, fields_partition_names(f),
            coordinator_partition, coordinator_id)


def fold_values(latest: Mapping[str, TxnItem], skip: Container[str], partition: int, coordinator_id: int | None,
                wanted: Container[int] | None, out: list[tuple[object, ...]]) -> None:
    """Append to ``out`` the :func:`transaction_values` of each live id of one partition's fold (``latest``:
    ``TxnIds.latest``; tombstoned ids, the ids in ``skip`` and, with ``wanted``, those whose state is not
    in it left out), in the fold's order. ``_coordinator.fold_values`` is its compiled twin (the row of a
    record it does not take as it is: :func:`transaction_values` itself)."""
    for tid, (_offset, f) in latest.items():
        if f is not None and tid not in skip and (wanted is None or f[F_STATE] in wanted):
            out.append(transaction_values(tid, f, partition, coordinator_id))


def timed_out_of(latest: Mapping[str, TxnItem], skip: Container[str], partition: int, states: Container[int],
                 now: int, out: list[tuple[str, int, TxnLogFields, int]]) -> None:
    """Append to ``out`` (id, offset, fields, ``partition``) of each id of one partition's fold whose latest
    record is in ``states`` and past its timeout at ``now`` (``rules.is_timed_out``:
    ``TransactionStateManager.timedOutTransactions``), in the fold's order; tombstones and the ids in
    ``skip`` left out. ``_coordinator.timed_out_of`` is its compiled twin (``is_timed_out`` restated there
    for ints that fit 64 bits; any other record asks :func:`~kafkatx.coordinator.rules.is_timed_out` itself)."""
    for tid, (offset, f) in latest.items():
        if (f is not None and tid not in skip and f[F_STATE] in states
                and is_timed_out(f[F_START_TIMESTAMP], f[F_TIMEOUT_MS], now)):
            out.append((tid, offset, f, partition))


def sorted_values(folds: Iterable[tuple[Mapping[str, TxnItem], Container[str], int, int | None]],
                  wanted: Container[int] | None, out: list[tuple[object, ...]], *,
                  values_of: Callable[..., None] = fold_values) -> None:
    """Append to ``out`` the :func:`fold_values` rows of every ``(latest, skip, partition, coordinator_id)`` in
    ``folds``, sorted by id (stable: the folds' order among equal ids). ``_coordinator.sorted_values`` is its
    compiled twin over packed folds (ids sorted by their UTF-8 bytes, the order of str, before a row is made);
    ``values_of``: :func:`fold_values` or its compiled twin (the same arguments)."""
    rows: list[tuple[object, ...]] = []
    for latest, skip, partition, coordinator_id in folds:
        values_of(latest, skip, partition, coordinator_id, wanted, rows)
    rows.sort(key=itemgetter(0))
    out.extend(rows)


def sorted_rows(folds: Iterable[tuple[Mapping[str, TxnItem], Container[str], int, int | None]],
                wanted: Container[int] | None, *, values_of: Callable[..., None] = fold_values) -> RowCursor:
    """:func:`sorted_values`' rows taken a chunk at a time (:class:`RowCursor`). ``_coordinator.sorted_rows``
    is its compiled twin over packed folds: the ids sorted first, each row made only when taken (list-txn's
    JSON at 1,000,000 ids: a chunk of rows in memory at a time, not all of them)."""
    rows: list[tuple[object, ...]] = []
    sorted_values(folds, wanted, rows, values_of=values_of)
    return RowCursor(rows)


class RowCursor:
    """Rows taken in order a chunk at a time (:meth:`take`): :func:`sorted_rows`' answer, or any list of rows.
    ``_coordinator.SortedRows`` is its compiled twin (the same :meth:`take`)."""

    __slots__ = ("_at", "_rows")

    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self._rows = rows
        self._at = 0

    def take(self, n: int, make: Callable[..., Any] | None = None, k: int = 0) -> list[Any]:
        """The next ``n`` rows at most (``[]`` once every row was taken): each the tuple of its values, or
        ``make(*row[:k])`` (list-txn's JSON: a msgspec struct; ``SortedRows`` hands ``make`` the partitions
        as a tuple, the same JSON as the list)."""
        if n < 0 or (make is not None and not 0 <= k <= 10):
            raise ValueError("take(): n >= 0, and 0 <= k <= 10 with make")
        chunk = self._rows[self._at:self._at + n]
        self._at += len(chunk)
        if self._at == len(self._rows):
            self._rows = []  # every row taken: let go
            self._at = 0
        return chunk if make is None else [make(*row[:k]) for row in chunk]


def _compiled_fold_values(latest: dict[str, TxnItem] | TxnLatest, skip: Container[str], partition: int,
                          coordinator_id: int | None, wanted: Container[int] | None,
                          out: list[tuple[object, ...]]) -> None:
    """:func:`fold_values` by its compiled twin (the C extension built)."""
    assert _coordinator is not None
    _coordinator.fold_values(_raw(latest), skip, partition, coordinator_id, wanted, STATE_NAMES_BY_NUMBER,
                             transaction_values, out)


def _raw(latest: dict[str, TxnItem] | TxnLatest) -> Any:
    """What the compiled readers (``_coordinator.fold_values``, ``timed_out_of``) take: the dict, or the table
    a :class:`TxnLatest` reads."""
    return latest.table if isinstance(latest, TxnLatest) else latest


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnPartitionFold:
    """One ``__transaction_state`` partition replayed: its ids, or why it was skipped."""

    partition: int
    name: str  # "__transaction_state-N"
    path: str
    ids: TxnIds | None = None  # None: skipped (or nothing read)
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None  # "<path>: <error>" when its bytes do not decode
    unreadable: Unreadable | None = None  # the same, for the answer's ``incomplete`` list
    read_failed: bool = False  # skipped because a file could not be read (storage/fdio.py), not for its bytes


class FoldIndex:
    """Which partition's fold each id is taken from (:func:`coordinator_from_folds`), without a table by
    id: the partition it hashes to when that one holds it (``TransactionStateManager.partitionFor``), else
    the first partition holding it (``elsewhere``: ids in a wrong partition only, a few). ``skips[i]``:
    the ids of ``folds[i]`` taken from another partition; ``count``: the ids, each counted once."""

    __slots__ = ("folds", "skips", "home", "elsewhere", "n", "count")

    def __init__(self, folds: list[TxnIds], skips: list[frozenset[str]], elsewhere: dict[str, TxnIds],
                 n: int) -> None:
        self.folds, self.skips, self.elsewhere, self.n = folds, skips, elsewhere, n
        self.home = {ids.partition: ids for ids in folds}
        self.count = sum(len(ids.latest) - len(skip) for ids, skip in zip(folds, skips, strict=True))

    def get(self, tid: str) -> TxnIds | None:
        """The fold ``tid`` is taken from; None: no partition holds it."""
        if not isinstance(tid, str):
            return None
        ids = self.elsewhere.get(tid)
        if ids is not None:
            return ids
        ids = self.home.get(coordinator_partition(tid, self.n))
        return ids if ids is not None and tid in ids.latest else None

    def latest(self) -> Iterator[tuple[str, TxnItem, TxnIds]]:
        """(id, its latest record, its fold) of every id, once, partition by partition."""
        for ids, skip in zip(self.folds, self.skips, strict=True):
            if skip:
                for tid, item in ids.latest.items():
                    if tid not in skip:
                        yield tid, item, ids
            else:
                for tid, item in ids.latest.items():
                    yield tid, item, ids


class LiveTransactions(Mapping[str, TransactionMetadata]):
    """``CoordinatorState.transactions`` over the folded partitions: id -> its current
    ``TransactionMetadata`` (tombstoned ids left out), each built when asked, not kept
    (at 1,000,000 ids the answers read a handful; ``list-txn`` reads :meth:`fields`)."""

    __slots__ = ("_index", "_tombstoned")

    def __init__(self, index: FoldIndex, tombstoned: Mapping[str, int]) -> None:
        self._index = index
        self._tombstoned = tombstoned

    def __getitem__(self, tid: str) -> TransactionMetadata:
        ids = self._index.get(tid)
        if ids is None:
            raise KeyError(tid)
        offset, f = ids.latest[tid]
        if f is None:
            raise KeyError(tid)
        return TransactionMetadata.from_fields(tid, f, offset=offset, coordinator_partition=ids.partition)

    def __contains__(self, tid: object) -> bool:
        return tid not in self._tombstoned and self._index.get(tid) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self._index.count - len(self._tombstoned)

    def __iter__(self) -> Iterator[str]:
        return (tid for tid, (_o, f), _ids in self._index.latest() if f is not None)

    def fields(self) -> Iterator[tuple[str, int, TxnLogFields, int]]:
        """(id, offset, latest value in ``value_fields`` form, coordinator partition) per live id, in no
        particular order: what a metadata is built from, without building it."""
        for tid, (offset, f), ids in self._index.latest():
            if f is not None:
                yield tid, offset, f, ids.partition


class Histories(Mapping[str, list[HistoryEntry]]):
    """``CoordinatorState.history`` over the folded partitions: id -> its ``HistoryEntry`` list (every id
    ever seen, tombstoned ones included), built when asked."""

    __slots__ = ("_index",)

    def __init__(self, index: FoldIndex) -> None:
        self._index = index

    def __getitem__(self, tid: str) -> list[HistoryEntry]:
        ids = self._index.get(tid)
        if ids is None:
            raise KeyError(tid)
        return [history_entry_fields(o, f) for o, f in history_items(ids.history[tid])]

    def __contains__(self, tid: object) -> bool:
        return self._index.get(tid) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self._index.count

    def __iter__(self) -> Iterator[str]:
        return (tid for tid, _item, _ids in self._index.latest())


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorState:
    """What the transaction coordinators would load from every ``__transaction_state`` partition.

    ``transactions`` and ``history`` are mappings (:class:`LiveTransactions` / :class:`Histories` after a
    replay: built per id when asked; plain dicts work as well). The producer id index is built on the
    first :meth:`transactional_id_for` (``_by_producer`` None until then, or given)."""

    transactions: Mapping[str, TransactionMetadata]  # current, tombstoned ids removed
    history: Mapping[str, list[HistoryEntry]]  # every id ever seen, tombstoned ones included
    tombstoned: dict[str, int]  # id -> offset of its (latest) tombstone, when it is the latest record
    partitions_count: int  # N used for coordinator_partition checks
    partitions_found: tuple[int, ...]  # __transaction_state partition numbers on disk
    findings: list[Finding] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    incomplete: list[Unreadable] = field(default_factory=list)  # the skipped partitions, structured
    read_failed: list[Unreadable] = field(default_factory=list)  # those of them whose files could not be read
    _by_producer: Mapping[int, str] | None = None

    def transactional_id_for(self, producer_id: int) -> str | None:
        """The live transactional id a producer id belongs to: current owner first, then history."""
        return self.producer_index().get(producer_id)

    def producer_index(self) -> Mapping[int, str]:
        """producer id -> live transactional id (:func:`index_producers`), built once, on first use."""
        index = self._by_producer
        if index is None:
            index = index_producers(self.transactions, self.history)
            object.__setattr__(self, "_by_producer", index)
        return index

    def expired_transactional_id_for(self, producer_id: int) -> str | None:
        """A tombstoned (expired) transactional id whose history used ``producer_id``."""
        for tid in sorted(self.tombstoned):
            if any(h.producer_id == producer_id for h in self.history.get(tid, ())):
                return tid
        return None

    def timed_out(self, states: Container[int], now: int) -> list[TransactionMetadata]:
        """The current metadata of the live ids in one of ``states`` (``TxnState`` numbers) whose
        transaction timed out at ``now`` (``rules.is_timed_out``), sorted by id; after a replay the
        others' metadata is never built (find-hanging's notices: of 1,000,000 ids a few)."""
        tx = self.transactions
        if isinstance(tx, LiveTransactions):
            return [TransactionMetadata.from_fields(tid, f, offset=offset, coordinator_partition=partition)
                    for tid, offset, f, partition in self.timed_out_fields(states, now)]
        return [meta for _tid, meta in sorted(tx.items())
                if meta.state in states and is_timed_out(meta.start_timestamp, meta.timeout_ms, now)]

    def timed_out_fields(self, states: Container[int], now: int) -> list[tuple[str, int, TxnLogFields, int]]:
        """:meth:`timed_out` of a replay's state as ``LiveTransactions.fields`` gives each id (id, offset,
        latest value, coordinator partition), sorted by id: no metadata built (find-hanging's notices at
        1,000,000 ids all past their timeout). Each id's record is the one ``transactions[id]`` reads
        (``FoldIndex.latest`` yields an id from the fold ``FoldIndex.get`` takes it from)."""
        tx = self.transactions
        if not isinstance(tx, LiveTransactions):
            raise TypeError("timed_out_fields(): only the state a replay made (coordinator_from_folds)")
        found: list[tuple[str, int, TxnLogFields, int]] = []
        c = _coordinator
        index = tx._index
        for ids, skip in zip(index.folds, index.skips, strict=True):  # FoldIndex.latest's order
            if c is not None:
                c.timed_out_of(_raw(ids.latest), skip, ids.partition, states, now, TWO_PHASE_COMMIT_TIMEOUT_MS,
                               is_timed_out, found)
            else:
                timed_out_of(ids.latest, skip, ids.partition, states, now, found)
        found.sort(key=itemgetter(0))  # ids are unique (the first value): sorted by id
        return found

    def drain(self) -> Iterator[tuple[str, int, TxnLogFields, int]]:
        """``LiveTransactions.fields`` of a replay's state, each partition's records let go once read:
        the state holds no ids after (``list-txn``: its rows take the replay's memory as they come)."""
        for latest, skip, partition in self._drain_folds():
            for tid, (offset, f) in latest.items():
                if f is not None and tid not in skip:
                    yield tid, offset, f, partition

    def stream_values(self, wanted: Container[int] | None, coordinators: Mapping[int, int | None]) -> RowChunks:
        """:meth:`drain` as ``list-txn``'s offline rows, taken a chunk at a time (``RowCursor.take``): the
        :func:`transaction_values` of every live id whose state is in ``wanted`` (None: all), sorted by id
        (the order of ``sorted(transactions.items())``); ``coordinators``: partition -> node id
        (``offline.coordinator_ids``). :func:`sorted_rows`, in one compiled call where every fold is packed
        (``_coordinator.sorted_rows``: the cursor holds the folds, each row made when taken); else a compiled
        call per partition (:func:`fold_values`' twin) where the C extension is built. The state holds no
        ids after."""
        c = _coordinator
        folds = self._folds()
        if c is not None and all(isinstance(latest, TxnLatest) for latest, _s, _p in folds):
            rows: RowChunks = c.sorted_rows([(_raw(latest), skip, partition, coordinators.get(partition))
                                             for latest, skip, partition in folds], wanted,
                                            STATE_NAMES_BY_NUMBER, transaction_values)
            self._release(clear=False)  # the tables are the cursor's now
            return rows
        # each partition let go once its rows are made (_drain_folds)
        return sorted_rows(((latest, skip, partition, coordinators.get(partition))
                            for latest, skip, partition in self._drain_folds()), wanted,
                           values_of=fold_values if c is None else _compiled_fold_values)

    def _drain_folds(self) -> Iterator[tuple[dict[str, TxnItem] | TxnLatest, Container[str], int]]:
        """Each partition's ``latest`` records, the ids to skip in it and its number; the partition's
        records let go once the caller moves on (:meth:`drain`)."""
        for latest, skip, partition in self._folds():
            yield latest, skip, partition
            latest.clear()
        self._release()

    def _folds(self) -> list[tuple[dict[str, TxnItem] | TxnLatest, Container[str], int]]:
        """Each partition's ``latest`` records, the ids to skip in it and its number (a replay's state only)."""
        tx = self.transactions
        if not isinstance(tx, LiveTransactions):
            raise TypeError("drain(): only the state a replay made (coordinator_from_folds) can be drained")
        index = tx._index
        return [(ids.latest, skip, ids.partition) for ids, skip in zip(index.folds, index.skips, strict=True)]

    def _release(self, *, clear: bool = True) -> None:
        """Every id let go (after :meth:`drain`): the state holds none. ``clear``: each fold emptied too (else
        only no longer held here: :meth:`stream_values`' cursor reads them)."""
        tx = self.transactions
        assert isinstance(tx, LiveTransactions)
        index = tx._index
        for ids in index.folds if clear else ():
            ids.latest.clear()
            ids.history.clear()
        index.folds, index.skips, index.home, index.elsewhere, index.count = [], [], {}, {}, 0
        self.tombstoned.clear()
        object.__setattr__(self, "_by_producer", None)

    def live_producer_ids(self) -> set[int]:
        """The current ``producer_id`` of every live id (verify's cluster check)."""
        tx = self.transactions
        if isinstance(tx, LiveTransactions):
            found: set[int] = set()
            index = tx._index
            for ids, skip in zip(index.folds, index.skips, strict=True):  # LiveTransactions.fields' records
                if _coordinator is not None and isinstance(ids.latest, TxnLatest):
                    _coordinator.producer_ids_of(ids.latest.table, skip, found)
                else:
                    producer_ids_of(ids.latest, skip, found)
            return found
        return {meta.producer_id for meta in tx.values()}


def index_producers(transactions: Mapping[str, TransactionMetadata],
                    history: Mapping[str, list[HistoryEntry]]) -> dict[int, str]:
    """producer id -> the live transactional id it belongs to (``CoordinatorState.transactional_id_for``).

    History first (older producer ids of a live id, e.g. before an epoch-exhaustion rotation), then
    current values override: a producer id belongs to exactly one transactional id at a time
    (InitProducerId hands out fresh ids). A tombstoned id does not map: the coordinator forgot it, as
    ListTransactions online would (``expired_transactional_id_for`` keeps that link for notices).
    Should two ids claim one producer id (copied or inconsistent logs), the greatest id wins (in
    history and in current values alike): one pass, no sort.
    """
    from_history: dict[int, str] = {}
    current: dict[int, str] = {}
    if isinstance(transactions, LiveTransactions) and isinstance(history, Histories) \
            and transactions._index is history._index:
        # The folds' raw records: no metadata or history entry built; a packed fold in C.
        index = transactions._index
        for ids, skip in zip(index.folds, index.skips, strict=True):
            if _coordinator is not None and isinstance(ids.latest, TxnLatest):
                _coordinator.claim_producers(ids.latest.table, skip, current, from_history)
            else:
                claim_producers(ids.latest, ids.history, skip, current, from_history)
    else:
        for tid, meta in transactions.items():
            for entry in history.get(tid, ()):
                if entry.producer_id is not None and entry.producer_id >= 0:
                    _claim(from_history, entry.producer_id, tid)
            for pid in meta.producer_ids:
                _claim(current, pid, tid)
    from_history.update(current)
    return from_history


def producer_ids_of(latest: Mapping[str, TxnItem], skip: Container[str], out: set[int]) -> None:
    """Add to ``out`` the producer id of each live id of one fold (the ids in ``skip`` left out).
    ``_coordinator.producer_ids_of`` is its compiled twin over a packed fold."""
    for tid, (_o, f) in latest.items():
        if f is not None and tid not in skip:
            out.add(f[F_PRODUCER_ID])


def claim_producers(latest: Mapping[str, TxnItem], history: Mapping[str, TxnKept], skip: Container[str],
                    current: dict[int, str], from_history: dict[int, str]) -> None:
    """:func:`index_producers` over one fold's raw records (the ids in ``skip`` left out): each live id claims
    its producer ids in ``current`` (``TransactionMetadata.producer_ids``: current, previous, next; -1 is none)
    and the producer id of each record its history keeps in ``from_history`` (``HistoryEntry.producer_id``,
    when not negative). ``_coordinator.claim_producers`` is its compiled twin over a packed fold."""
    for tid, (_o, f) in latest.items():
        if f is None or tid in skip:  # tombstoned, or taken from another partition
            continue
        for pid in (f[F_PRODUCER_ID], f[F_PREVIOUS_PRODUCER_ID], f[F_NEXT_PRODUCER_ID]):
            if pid != NO_PRODUCER_ID:
                _claim(current, pid, tid)
        for _o, h in history_items(history[tid]):
            if h is not None and h[F_PRODUCER_ID] >= 0:
                _claim(from_history, h[F_PRODUCER_ID], tid)


def _claim(index: dict[int, str], pid: int, tid: str) -> None:
    """``pid`` -> ``tid`` unless a greater id claimed it already."""
    old = index.get(pid)
    if old is None or old < tid:
        index[pid] = tid


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


def metadata_partitions_count(dirs: Sequence[LogDir], report: Report) -> int | None:
    """``__transaction_state``'s partition count from a ``__cluster_metadata-0`` in the log dirs (the
    controller's TopicRecord/PartitionRecords), said in a note in ``report``; None without one. A metadata
    record that could not be read makes the answer incomplete (``report.incomplete``): what it said is
    unknown."""
    from kafkatx.storage.cluster_metadata import cluster_image

    try:
        image = cluster_image(dirs)
    except ReadFailed:  # could not read is no "facts assumed": the answer would rest on a guess
        raise
    except KafkaTxError as err:
        report.note(f"__cluster_metadata-0 could not be read ({err}); facts it holds are assumed")
        return None
    if image is None:
        return None
    report.note(*image.notices)  # newer record versions read as far as known, records that could not be read
    if image.unreadable:
        report.incomplete.append(Unreadable(partition=image.path.name, file=str(image.path), position=None,
                                     reason=f"{len(image.unreadable)} metadata record(s) could not be read: "
                                            f"{image.unreadable[0]}"))
    count = image.partition_count(TXN_STATE_TOPIC)
    if count is not None:
        report.note(f"{TXN_STATE_TOPIC} has {count} partitions: taken from {image.path} "
                    f"(the controller's metadata log)")
    return count


def replay_transaction_log(log_dirs: Iterable[str | Path | LogDir], *, partitions_count: int | None = None,
                           progress: Progress | None = None,
                           history_for: Container[str] | None = None) -> CoordinatorState:
    """Replay every ``__transaction_state-N`` partition found in ``log_dirs``.

    ``partitions_count`` is ``transaction.state.log.num.partitions`` (for the check that each id
    sits in ``coordinator_partition(id, N)``); by default the highest partition number on disk + 1.
    A partition that cannot be decoded is skipped (named in ``skipped``), the others still count.
    ``history_for``: the ids whose every record ``history`` keeps (None: all; see ``fold_txn_fields``;
    :data:`NO_HISTORY`: no history at all).
    """
    with collector_paused():
        return _replay_transaction_log(log_dirs, partitions_count, progress, history_for)


def _replay_transaction_log(log_dirs: Iterable[str | Path | LogDir], partitions_count: int | None,
                            progress: Progress | None, history_for: Container[str] | None) -> CoordinatorState:
    dirs = as_log_dirs(log_dirs)
    said = Report()  # the replica choices, the partition count, the loading's truncations
    choices = choose_replicas(dirs, topic=TXN_STATE_TOPIC, notices=said.notices)
    numbers = tuple(c.partition.partition for c in choices)
    if partitions_count is None:
        partitions_count = metadata_partitions_count(dirs, said)
    n = txn_state_partitions_count(numbers, partitions_count, said.notices)
    if progress is not None:
        progress.start(sum(s.size for c in choices for s in c.partition.segments),
                       f"replaying {TXN_STATE_TOPIC}")
    folds = []
    for choice in choices:
        part = choice.partition
        findings: list[Finding] = []
        try:
            plan = plan_load(part)
            said.note(*(a.message for a in plan.actions if a.action in (TRUNCATE_SEGMENT, DELETE_SEGMENT)))
            ids = fold_txn_partition(part, plan, n, findings, history_for=history_for, progress=progress)
        except (KafkaTxError, OSError) as err:
            where = f"{err.filename}: " if isinstance(err, OSError) and err.filename else ""
            folds.append(TxnPartitionFold(partition=part.partition, name=part.name, path=str(part.path),
                                          findings=findings, skipped=f"{part.path}: {where}{err}",
                                          unreadable=unreadable(part.name, err),
                                          read_failed=isinstance(err, (ReadFailed, OSError))))
            continue
        folds.append(TxnPartitionFold(partition=part.partition, name=part.name, path=str(part.path), ids=ids,
                                      findings=findings))
    return coordinator_from_folds(folds, partitions_count=n, partitions_found=numbers, report=said)


def coordinator_from_folds(folds: Iterable[TxnPartitionFold], *, partitions_count: int,
                           partitions_found: tuple[int, ...], report: Report | None = None,
                           ) -> CoordinatorState:
    """Merge per-partition replays (in partition order) into what the coordinators would load; ``report``:
    what was said before the folds (its notes first, its unreadable entries after the folds').

    An id found in two ``__transaction_state`` partitions (a change of
    ``transaction.state.log.num.partitions``, or copied files) is taken from the partition it
    hashes to, and reported. ``replay_transaction_log`` and ``kafkatx scan`` both end here.
    """
    n = partitions_count
    findings: list[Finding] = []
    skipped: list[str] = []
    incomplete: list[Unreadable] = []
    read_failed: list[Unreadable] = []
    folds = list(folds)
    # An id in two partitions is in a wrong one in at least one of them: the candidates.
    misplaced = {tid for fold in folds if fold.skipped is None and fold.ids is not None for tid in fold.ids.misplaced}
    taken: list[TxnIds] = []
    skips: list[frozenset[str]] = []
    chosen: dict[str, TxnIds] = {}  # candidate id -> the fold it is taken from so far
    for fold in folds:
        findings.extend(fold.findings)  # a skipped partition's findings up to its bad bytes still count
        if fold.skipped is not None:
            skipped.append(fold.skipped)
            incomplete.append(fold.unreadable or Unreadable(partition=fold.name, file=None, position=None,
                                                            reason=fold.skipped))
            if fold.read_failed:
                read_failed.append(incomplete[-1])
            continue
        ids = fold.ids
        if ids is None:
            continue
        taken.append(ids)
        here = misplaced & ids.latest.keys() if misplaced else ()
        for tid in (t for t in ids.latest if t in here) if here else ():  # in first-seen order
            earlier = chosen.get(tid)
            if earlier is not None:
                findings.append(Finding(
                    check="duplicate-transactional-id",
                    message=(f"transactional id {tid!r} has records in {TXN_STATE_TOPIC}-{earlier.partition} and "
                             f"{fold.name}; using the one in {TXN_STATE_TOPIC}-{coordinator_partition(tid, n)}"),
                    partition=fold.name, severity="warning"))
                if fold.partition != coordinator_partition(tid, n):
                    continue
            chosen[tid] = ids
    for ids in taken:
        skips.append(frozenset(tid for tid in misplaced & ids.latest.keys() if chosen[tid] is not ids)
                     if misplaced else frozenset())
    elsewhere = {tid: ids for tid, ids in chosen.items() if tid in ids.misplaced}
    index = FoldIndex(taken, skips, elsewhere, n)
    tombstoned = {tid: offset for ids, skip in zip(taken, skips, strict=True)
                  for tid, offset in ids.tombstones.items() if tid not in skip}
    return CoordinatorState(transactions=LiveTransactions(index, tombstoned), history=Histories(index),
                            tombstoned=tombstoned, partitions_count=n, partitions_found=partitions_found,
                            findings=findings, notices=list(report.notices) if report is not None else [],
                            skipped=skipped,
                            incomplete=incomplete + (report.incomplete if report is not None else []),
                            read_failed=read_failed)


