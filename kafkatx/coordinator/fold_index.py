"""The coordinator's state read straight from its replayed ``__transaction_state`` folds: :class:`FoldIndex`
(which partition's fold each transactional id is taken from, ``TransactionStateManager.partitionFor``) and
the read-only mappings over it that :class:`~kafkatx.coordinator.state_manager.CoordinatorState` holds,
:class:`LiveTransactions` (id -> ``TransactionMetadata``) and :class:`Histories` (id -> its history),
each value built when asked rather than kept."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kafkatx.coordinator.state import (
    TransactionMetadata,
    history_entry_fields,
)
from kafkatx.coordinator.txn_fold import (
    TxnIds,
    TxnItem,
    history_items,
)
from kafkatx.format.txn_log import (
    TxnLogFields,
    coordinator_partition,
)
from kafkatx.rows import HistoryEntry


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
