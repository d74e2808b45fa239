"""The consumer groups an open transaction blocks: its pending transactional offset commits.

A transactional offset commit (``TxnOffsetCommit``, KIP-98; ``sendOffsetsToTransaction``) is an
``OffsetCommit`` record (key type 0 or 1) written to the group's ``__consumer_offsets`` partition in a
transactional batch of the producer. The group coordinator keeps it apart until the transaction ends
(``OffsetMetadataManager.replay``, Kafka 3.7+'s group coordinator, KIP-848; before it
``GroupMetadataManager.scala``'s ``pendingTransactionalOffsetCommits``):

- a commit in a batch of producer P goes to ``pendingTransactionalOffsets[P]`` (group, topic,
  partition -> offset) and P joins ``openTransactionsByGroup[group]``;
- a tombstone (null value) of (group, topic, partition), from any batch, removes that partition from
  every producer's pending offsets (``replay``'s tombstone branch: a deleted offset or group);
- P's COMMIT or ABORT marker (``replayEndTransactionMarker``) ends them: moved to the committed
  offsets on COMMIT, dropped on ABORT.

While P's commit is pending, an ``OffsetFetch`` that asks for stable offsets (``require_stable``,
KIP-447: every consumer with ``isolation.level=read_committed``) answers ``UNSTABLE_OFFSET_COMMIT``
for that partition (``OffsetMetadataManager.fetchOffsets``/``fetchAllOffsets``:
``requireStable && hasPendingTransactionalOffsets(group, topic, partition)``), and the consumer
retries until the transaction ends: a hanging transaction stalls the group. The coordinator loads
``__consumer_offsets`` from the log start, so only the records from there on count.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Protocol, TypeVar

import msgspec

from kafkatx.errors import DecodeError
from kafkatx.format.consumer_offsets import OffsetCommitKey, decode_offsets_key
from kafkatx.format.record_batch import iter_records
from kafkatx.rows import Report, groups_unknown_note

OFFSETS_TOPIC = "__consumer_offsets"  # Topic.GROUP_METADATA_TOPIC_NAME


class PendingOffsets:
    """``OffsetMetadataManager``'s pending transactional offsets, for the producers asked about."""

    def __init__(self, producer_ids: Collection[int]) -> None:
        self._pending: dict[int, dict[tuple[str, str, int], None]] = {pid: {} for pid in producer_ids}

    def commit(self, producer_id: int, transactional: bool, group: str, topic: str, partition: int) -> None:
        """An OffsetCommit record with a value; only a transactional batch's is pending."""
        pending = self._pending.get(producer_id) if transactional else None
        if pending is not None:
            pending[(group, topic, partition)] = None

    def tombstone(self, group: str, topic: str, partition: int) -> None:
        for pending in self._pending.values():
            pending.pop((group, topic, partition), None)

    def marker(self, producer_id: int) -> None:
        pending = self._pending.get(producer_id)
        if pending is not None:
            pending.clear()

    def groups(self) -> dict[int, list[str]]:
        """Per producer, the groups with a pending offset, sorted."""
        return {pid: sorted({g for g, _t, _p in pending}) for pid, pending in self._pending.items()}


class _Header(Protocol):
    producer_id: int
    last_offset: int

    @property
    def is_control(self) -> bool: ...

    @property
    def is_transactional(self) -> bool: ...


def replay_pending(batches: Iterable[tuple[Any, _Header]], producer_ids: Collection[int],
                   from_offset: int) -> dict[int, list[str]]:
    """The groups each of ``producer_ids`` holds pending offsets for, replaying the ``(buffer, header)``
    batches of a ``__consumer_offsets`` partition from ``from_offset`` (the first offset of the earliest
    open transaction asked about, not below the log start). A key that does not decode is a
    :class:`~kafkatx.errors.DecodeError` (the coordinator's load would fail on it too)."""
    state = PendingOffsets(producer_ids)
    for buf, header in batches:
        if header.last_offset < from_offset:
            continue
        if header.is_control:
            state.marker(header.producer_id)
            continue
        for record in iter_records(buf, header):  # type: ignore[arg-type]
            if record.offset < from_offset or record.key is None:
                continue
            key = decode_offsets_key(record.key)
            if not isinstance(key, OffsetCommitKey):
                continue
            if record.value is None:
                state.tombstone(key.group, key.topic, key.partition)
            else:
                state.commit(header.producer_id, header.is_transactional, key.group, key.topic, key.partition)
    return state.groups()


def partition_blocked_groups(partition: Any, open_txns: Iterable[tuple[int, int]]
                             ) -> tuple[dict[int, list[str]] | None, str | None]:
    """For a ``__consumer_offsets`` :class:`~kafkatx.storage.partition.Partition` and its open transactions
    ``(producer id, first offset)``: the groups each blocks, or ``(None, why)`` when the partition does
    not read to its end (never a partial list)."""
    txns = list(open_txns)
    if not txns:
        return {}, None
    start = max(min(first for _pid, first in txns), partition.log_start_offset)

    def batches() -> Iterator[tuple[Any, Any]]:
        for _segment, buf, header in partition.iter_batch_buffers(start):
            yield buf, header

    try:
        return replay_pending(batches(), {pid for pid, _first in txns}, start), None
    except DecodeError as err:
        return None, groups_unknown_note(partition.name, err)


R = TypeVar("R", bound=msgspec.Struct)


def with_blocked_groups(rows: list[R], partition_of: Callable[[tuple[str, int]], Any], report: Report,
                        *, key: Callable[[R], tuple[str, int, int, int] | None]) -> list[R]:
    """``rows`` with ``blocked_groups`` set on each row about a ``__consumer_offsets`` partition.

    ``key(row)``: ``(topic, partition, producer id, first offset)`` of the row's open transaction, or
    None for a row about no open transaction. ``partition_of((topic, partition))``: its
    :class:`~kafkatx.storage.partition.Partition`, or None when the dirs do not hold it (the row's list stays
    None: unknown); a partition whose groups cannot be read is said in ``report``. The other rows keep None."""
    wanted: dict[tuple[str, int], set[tuple[int, int]]] = {}
    for row in rows:
        k = key(row)
        if k is not None and k[0] == OFFSETS_TOPIC:
            wanted.setdefault((k[0], k[1]), set()).add((k[2], k[3]))
    if not wanted:
        return rows
    found: dict[tuple[str, int], dict[int, list[str]] | None] = {}
    for tp, txns in sorted(wanted.items()):
        part = partition_of(tp)
        if part is None:
            found[tp] = None
            continue
        found[tp], why = partition_blocked_groups(part, sorted(txns))
        if why is not None:
            report.note(why)
    out: list[R] = []
    for row in rows:
        k = key(row)
        groups = found.get((k[0], k[1])) if k is not None else None
        if groups is not None and k is not None and k[2] in groups:
            row = msgspec.structs.replace(row, blocked_groups=groups[k[2]])
        out.append(row)
    return out


__all__ = ["OFFSETS_TOPIC", "PendingOffsets", "partition_blocked_groups",
           "replay_pending", "with_blocked_groups"]
