"""One ``__transaction_state`` partition folded as ``TransactionStateManager.loadTransactionMetadata`` reads it.

What the coordinator's loader reads once ``LogLoader`` is done (:class:`TxnLoadWindow`), the records decoded
(``TransactionLog.readTxnRecordValue``) and folded to the latest value per transactional id, a tombstone
removing the id (:class:`TxnFold`, the readable reference; ``kafkatx/coordinator/_coordinator.c``'s
``txn_fold`` is its compiled twin, swapped in whole). The offline load (:mod:`.state_manager`) and
``kafkatx scan``'s executors fold each partition here.

Kafka sources: transaction-coordinator/.../TransactionStateManager (Kafka 3.x:
core/.../coordinator/transaction/TransactionStateManager.scala), TransactionLog.
"""

from __future__ import annotations

from collections.abc import Callable, Container, ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar

import kafkatx.format.txn_log as txn_log
from kafkatx.coordinator.state import (
    VALID_TRANSITIONS,
    TransactionMetadata,
    apply_fields,
)
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format.record_batch import BatchHeader, crc_valid, iter_records
from kafkatx.format.txn_log import (
    F_PRODUCER_ID,
    F_STATE,
    TxnLogFields,
    coordinator_partition,
    decode_txn_log_fields,
)
from kafkatx.rows import Finding, Progress
from kafkatx.storage.loading import LoadPlan
from kafkatx.storage.partition import Partition
from kafkatx.storage.segment import Buffer, iter_batches_windowed, open_windowed

try:  # the compiled TxnFold loop (kafkatx/coordinator/_coordinator.c); absent: Python only, the same answers
    from kafkatx.coordinator import _coordinator
except ImportError:  # pragma: no cover - built without a C compiler
    _coordinator = None  # type: ignore[assignment]
_coordinator = compiled.bind(__name__, "_coordinator", _coordinator)  # type: ignore[assignment]


TXN_STATE_TOPIC = "__transaction_state"


# One record as the fold keeps it: (offset, value in ``value_fields`` form or None for a tombstone).
TxnItem = tuple[int, "TxnLogFields | None"]


# An id's history as the fold keeps it: one record as the item itself (most ids: no list of one,
# 88 bytes an id), else a list of them (none, or two and more).
TxnKept = TxnItem | list[TxnItem]


def history_items(kept: TxnKept | None) -> Sequence[TxnItem]:
    """The records of a :data:`TxnKept` (None: none)."""
    if kept is None:
        return ()
    return (kept,) if type(kept) is tuple else kept  # type: ignore[return-value]


class _NoHistory(Container[str]):
    """:data:`NO_HISTORY`'s type: holds no id."""

    __slots__ = ()

    def __contains__(self, tid: object) -> bool:
        return False

    def __repr__(self) -> str:
        return "NO_HISTORY"

    def __reduce__(self) -> str:
        return "NO_HISTORY"  # one object, also after pickling (is-tested)


# ``history_for=NO_HISTORY``: the replay keeps each id's latest record and nothing else (no first record
# per producer id either): for an answer that reads no history and no old producer id (``list-txn``:
# 1,000,000 records and a dict entry fewer at 1,000,000 ids).
NO_HISTORY: Final = _NoHistory()


V = TypeVar("V")


class _TableView(Mapping[str, V]):
    """A mapping over a fold kept packed in C (``_coordinator.TxnTable``): its ids are the table's, in
    first-seen order; each value made when asked (:class:`TxnLatest`, :class:`TxnHistory`). Pickled (kafkatx
    scan's broadcast) as the dict it stands for, its items streamed (no list of them)."""

    __slots__ = ("table",)

    def __init__(self, table: Any) -> None:
        self.table = table

    def __contains__(self, tid: object) -> bool:
        return isinstance(tid, str) and tid in self.table

    def __len__(self) -> int:
        return len(self.table)

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def clear(self) -> None:
        self.table.clear()

    def __reduce__(self) -> tuple[type[dict[str, V]], tuple[()], None, None, Iterator[tuple[str, V]]]:
        return dict, (), None, None, iter(self.items())


class TxnLatest(_TableView[TxnItem]):
    """``TxnIds.latest`` of a fold kept packed in C (``_coordinator.TxnTable``): id -> its latest
    record as a :data:`TxnItem`, made when asked, in first-seen order, as :class:`TxnFold`'s dict holds it."""

    __slots__ = ()

    def __getitem__(self, tid: str) -> TxnItem:
        item: TxnItem = self.table[tid]
        return item

    def get(self, tid: str, default: Any = None) -> Any:
        return self.table.get(tid, default)

    def items(self) -> ItemsView[str, TxnItem]:
        return _TableItems(self)


class _TableItems(ItemsView[str, TxnItem]):
    """:meth:`TxnLatest.items`: the pairs made by the table's own iterator (one call per id, not two)."""

    _mapping: TxnLatest

    def __iter__(self) -> Iterator[tuple[str, TxnItem]]:
        return self._mapping.table.items()  # type: ignore[no-any-return]


class TxnHistory(_TableView[TxnKept]):
    """``TxnIds.history`` of a fold kept packed in C: id -> its records kept (:data:`TxnKept`), made when asked.
    Only over a table that keeps a history (``TxnFold``: not for ``NO_HISTORY``, whose history is ``{}``): its
    ids are the table's."""

    __slots__ = ()

    def __getitem__(self, tid: str) -> TxnKept:
        kept: TxnKept | None = self.table.history_get(tid) if isinstance(tid, str) else None
        if kept is None:
            raise KeyError(tid)
        return kept


class TxnIds(NamedTuple):
    """What one ``__transaction_state`` partition's replay leaves, compact (:class:`TxnFold`'s own state,
    no object per id): per transactional id, in first-seen order, its latest record and its
    history as :data:`TxnItem` pairs, the ids whose latest record is a tombstone (-> its offset) and
    the ids that do not hash to this partition.
    :class:`CoordinatorState` builds a ``TransactionMetadata`` / ``HistoryEntry`` only for an id asked about."""

    partition: int
    latest: dict[str, TxnItem] | TxnLatest  # TxnLatest: the C fold's (TxnTable), the same mapping
    history: dict[str, TxnKept] | TxnHistory
    tombstones: dict[str, int]
    misplaced: dict[str, None]  # the ids that hash to another partition (wrong-coordinator-partition)


class TxnLoadWindow(NamedTuple):
    """Which bytes of a ``__transaction_state`` partition ``TransactionStateManager.loadTransactionMetadata``
    reads once ``LogLoader`` is done (:func:`~kafkatx.storage.loading.plan_load`): from the batch holding the log
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


# (offset, transactional id, value in value_fields form or None for a tombstone, file, batch position)
TxnFieldRecord = tuple[int, str, "TxnLogFields | None", str, int]


def txn_log_field_records(batches: Iterable[tuple[str, Buffer, BatchHeader]], partition_name: str,
                          findings: list[Finding], *, loader_crc: bool = True) -> Iterator[TxnFieldRecord]:
    """The key/value records of ``__transaction_state`` batches ``(log path, buffer, header)``, decoded
    into plain tuples, values in ``value_fields`` form: what the replay folds (decoded by the compiled
    ``txn_log_decode`` when built; the same answers either way).

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
                tid, value = decode_txn_log_fields(record.key, record.value)
            except DecodeError as err:
                findings.append(Finding(check="txn-log-record",
                                        message=f"record at offset {record.offset} does not decode: {err.message}",
                                        file=log_path, position=header.position,
                                        offset=record.offset, partition=partition_name))
                continue
            yield record.offset, tid, value, log_path, header.position


def fold_txn_fields(partition: int, partition_name: str, n: int, records: Iterable[TxnFieldRecord],
                    findings: list[Finding], *, history_for: Container[str] | None = None,
                    ) -> TxnIds:
    """``TransactionStateManager.loadTransactionMetadata`` over one ``__transaction_state`` partition's
    records (:func:`txn_log_field_records`) in offset order, by :class:`TxnFold` (no object per record).

    Returns per transactional id (in first-seen order) its latest record, its history and, when the
    latest is a tombstone, its offset (:class:`TxnIds`); checks that each id hashes to this partition
    (``coordinator_partition``).
    """
    fold = TxnFold(partition, partition_name, n, findings, history_for)
    record = fold.record
    for offset, tid, value, file, position in records:
        record(offset, tid, value, file, position)
    return fold.finish()


class TxnFold:
    """``TransactionStateManager.loadTransactionMetadata`` over one ``__transaction_state`` partition,
    one record at a time (:meth:`record`, in offset order), or a segment's batches at a time in C
    (``kafkatx/coordinator/_coordinator.c`` ``txn_fold``, the twin of :meth:`record`, updating this very state).

    Per id it keeps the latest record and its history as ``(offset, fields)`` (handed over as they are
    by :meth:`finish`: metadata is built only for the ids an answer reads, ``LiveTransactions``): every record when ``history_for`` is None or holds the id
    (``describe-txn``), else only the first record of each producer id it used (what
    ``index_producers`` and ``expired_transactional_id_for`` read), so memory grows with ids, not
    records. Findings go to ``findings`` in record order (the C loop's as tuples, made Findings in
    :meth:`finish`).
    """

    __slots__ = ("partition", "name", "n", "findings", "history_for", "latest", "history", "misplaced", "table")

    def __init__(self, partition: int, name: str, n: int, findings: list[Finding],
                 history_for: Container[str] | None, *, packed: bool = False) -> None:
        self.partition, self.name, self.n = partition, name, n
        self.findings = findings
        self.history_for = history_for
        self.latest: dict[str, TxnItem] | TxnLatest = {}  # first-seen order
        self.history: dict[str, TxnKept] | TxnHistory = {}  # id -> its records kept (TxnKept)
        self.misplaced: dict[str, None] = {}  # ids that hash to another partition, as found
        # packed (the C extension built): the state kept in a _coordinator.TxnTable, whose record() is the twin
        # of record() here, and read through TxnLatest / TxnHistory (the same mappings)
        self.table: Any = None
        if packed and _coordinator is not None:
            keep = history_for is not NO_HISTORY
            self.table = _coordinator.TxnTable(partition, n, findings, keep, history_for, VALID_TRANSITIONS)
            self.latest = TxnLatest(self.table)
            if keep:
                self.history = TxnHistory(self.table)

    def record(self, offset: int, tid: str, value: TxnLogFields | None, file: str, position: int) -> None:
        """One record: the id's partition is checked at first sight (``TransactionStateManager.partitionFor``),
        a value after a value checks the move (``TransactionState.validPreviousStates``), the latest wins.
        A packed fold's records go to ``table.record``, this rule's compiled twin (see :meth:`record_of`)."""
        latest, history = self.latest, self.history
        assert type(latest) is dict and type(history) is dict  # a packed fold records through its table
        before = latest.get(tid)
        if before is None:  # first sight (every record sets latest)
            expected = coordinator_partition(tid, self.n)
            if expected != self.partition:
                self.misplaced[tid] = None
                self.findings.append(self._wrong_partition(tid, expected, offset, position, file))
        elif (value is not None and before[1] is not None
                and (before[1][F_STATE], value[F_STATE]) not in VALID_TRANSITIONS):
            self._illegal(tid, before[0], before[1], offset, value, position, file)
        item = (offset, value)
        if self.history_for is NO_HISTORY:
            latest[tid] = item
            return
        kept = history.get(tid)
        if self.history_for is None or tid in self.history_for:
            add = True
        else:
            add = value is not None and all(e[1] is None or e[1][F_PRODUCER_ID] != value[F_PRODUCER_ID]
                                            for e in history_items(kept))
        if add:  # one record: the item itself (no list); more: a list of them
            if kept is None:
                history[tid] = item
            elif type(kept) is tuple:
                history[tid] = [kept, item]
            else:
                kept.append(item)  # type: ignore[union-attr]
        elif kept is None:
            history[tid] = []  # seen, nothing kept
        latest[tid] = item

    def record_of(self) -> Callable[[int, str, TxnLogFields | None, str, int], None]:
        """The :meth:`record` this fold's records go through: its table's twin when packed."""
        return self.table.record if self.table is not None else self.record

    def _wrong_partition(self, tid: str, expected: int, offset: int, position: int, file: str) -> Finding:
        return Finding(
            check="wrong-coordinator-partition",
            message=(f"transactional id {tid!r} is in {self.name} but hashes to "
                     f"{TXN_STATE_TOPIC}-{expected} of {self.n}; the coordinator would never load it from here"),
            file=file, position=position, offset=offset, partition=self.name, severity="warning")

    def _illegal(self, tid: str, before_offset: int, before: TxnLogFields, offset: int, value: TxnLogFields,
                 position: int, file: str) -> None:
        current = TransactionMetadata.from_fields(tid, before, offset=before_offset,
                                                  coordinator_partition=self.partition)
        applied = apply_fields(current, tid, value, offset=offset, coordinator_partition=self.partition,
                               file=file, position=position)
        if applied.finding is not None:
            self.findings.append(applied.finding)

    def finish(self) -> TxnIds:
        """Its state handed over as it is (:class:`TxnIds`): no object per id."""
        self.settle_findings()
        latest = self.latest
        if self.table is not None:
            self.table.trim()
            tombstones = self.table.tombstones()
        else:
            tombstones = {tid: item[0] for tid, item in latest.items() if item[1] is None}
        ids = TxnIds(self.partition, latest, self.history, tombstones, self.misplaced)
        self.latest, self.history, self.misplaced, self.table = {}, {}, {}, None
        return ids

    def settle_findings(self) -> None:
        """The C loop's findings (tuples) made :class:`Finding` objects in their place (also when the
        partition stops at bytes that do not decode: its findings up to there still count)."""
        found: list[Any] = self.findings  # the C loop's findings are tuples until made Findings here
        if any(type(f) is tuple for f in found):  # the C loop's, in their place
            made: list[Finding] = []
            for f in found:
                if type(f) is not tuple:
                    made.append(f)
                elif f[0] == 0:
                    self.misplaced[f[1]] = None
                    made.append(self._wrong_partition(f[1], f[2], f[3], f[4], f[5]))
                else:
                    keep = self.findings
                    self.findings = made
                    self._illegal(f[1], f[2], f[3], f[4], f[5], f[6], f[7])
                    self.findings = keep
            self.findings[:] = made


def fold_txn_partition(part: Partition, plan: LoadPlan, n: int, findings: list[Finding], *,
                       history_for: Container[str] | None = None,
                       progress: Progress | None = None) -> TxnIds:
    """The batches the coordinator loads (:func:`_txn_batches`) folded by :class:`TxnFold`: segment by segment
    in C (``_coordinator.txn_fold``) where it is built, a batch it leaves (see its module comment) by
    :meth:`TxnFold.record`; all in Python without it (or on the windowed pread path). Same answers."""
    fold = TxnFold(part.partition, part.name, n, findings, history_for, packed=_compiled() is not None)
    if _compiled() is None:
        for rec in txn_log_field_records(_txn_batches(part, plan, progress), part.name, findings, loader_crc=False):
            fold.record(*rec)
        return fold.finish()
    try:
        _fold_segments(part, plan, findings, fold, progress)
    finally:
        fold.settle_findings()
    return fold.finish()


def _fold_segments(part: Partition, plan: LoadPlan, findings: list[Finding], fold: TxnFold,
                   progress: Progress | None) -> None:
    if plan.tail_error is not None:
        raise plan.tail_error
    window = TxnLoadWindow.of(plan)
    record = fold.record_of()
    for segment in part.segments:
        log_path = str(segment.log_path)
        if log_path in window.deleted:
            continue
        with open_windowed(segment.log_path) as (buf, win):
            cut = window.cuts.get(log_path)
            end = len(buf) if cut is None else min(cut, len(buf))
            try:
                if win is not None:  # the pread path in windows: the batch-at-a-time reader
                    for rec in txn_log_field_records(_segment_batches(log_path, buf, win, 0, cut, window),
                                                     part.name, findings, loader_crc=False):
                        record(*rec)
                else:
                    pos = 0
                    while pos < end:
                        pos, status = _coordinator.txn_fold(  # type: ignore[union-attr,unused-ignore]
                            buf, pos, end, window.log_start, window.log_end, log_path, fold.table)
                        if status != 2:
                            break
                        # one batch the C loop leaves: framed, checked and decoded by the Python readers
                        header = next(iter_batches_windowed(buf, None, pos, end=cut), None)
                        if header is None:
                            break
                        if header.base_offset >= window.log_end:
                            break
                        if window.reads(log_path, header):
                            for rec in txn_log_field_records([(log_path, buf, header)], part.name, findings,
                                                             loader_crc=False):
                                record(*rec)
                        pos = header.position + header.size
            except DecodeError as err:
                raise err.at(segment.log_path) from err
        if progress is not None:
            progress.advance(segment.size)


def _segment_batches(log_path: str, buf: Buffer, win: object, start: int, cut: int | None,
                     window: TxnLoadWindow) -> Iterator[tuple[str, Buffer, BatchHeader]]:
    for header in iter_batches_windowed(buf, win, start, end=cut):  # type: ignore[arg-type]
        if header.base_offset >= window.log_end:
            break
        if window.reads(log_path, header):
            yield log_path, buf, header


def _compiled() -> Callable[..., object] | None:
    """The compiled ``txn_log_decode`` when ``txn_fold`` may run (it decodes with that very code,
    ``format/_txn_log.h``): both compiled modules built and the
    compiled paths on (``kafkatx.format.compiled``: ``KAFKATX_PURE_PYTHON`` unset)."""
    co, tl = _coordinator, getattr(txn_log, "_txn_log", None)
    if co is None or tl is None:
        return None
    decode: Callable[..., object] = tl.txn_log_decode
    return decode
