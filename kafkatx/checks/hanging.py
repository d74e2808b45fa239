"""Which open transactions hold a partition's LSO back, and why (``find-hanging``).

Inputs are the replayed coordinator (``replay_transaction_log``) and the
replayed producer state of every partition (``replay_partition``); ``now`` and
the timeouts are parameters. Every open transaction in a partition (a producer
whose ``current_txn_first_offset`` is set) is classified by the rule book,
``kafkatx.coordinator.rules.classify`` (the same function the online path and Spark use;
the kinds and their Kafka sources are documented there): ``timed-out``,
``prepared-2pc``, ``incomplete-markers``, ``orphaned`` (``ghost`` is added by ``checks/ghost.py``).

Offline the inputs are: the coordinator entry of the producer's transactional id covers
the partition when the producer id is one of the entry's (``producer_ids``: TV2 rotation
keeps the previous/next id) and the entry lists the partition; the last write is the
producer's last batch timestamp in the partition. For ``timed-out``/``prepared-2pc`` the row's
``start_ms``/``duration_ms`` are the coordinator's (the timeout runs from there); for the
other kinds ``start_ms`` is when the transaction's first batch in the partition was written.

An ``Ongoing`` transaction past its timeout whose partitions hold no open data (the
producer added partitions but wrote nothing there yet, or the partitions are in log dirs
not given) holds no LSO back, so it produces no row; ``find_hanging`` adds a notice
instead, because the coordinator still owes it an abort.

Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable

from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS, TIMEOUT_STATES, HangingKind, classify
from kafkatx.coordinator.state import fields_partitions, sorted_partition_names
from kafkatx.coordinator.state_manager import CoordinatorState, LiveTransactions
from kafkatx.format.txn_log import F_PARTITIONS, F_PRODUCER_ID, F_START_TIMESTAMP, F_TIMEOUT_MS
from kafkatx.rows import HangingRow, Report
from kafkatx.storage.producer_state import PartitionProducerState


def find_hanging(coordinator: CoordinatorState, partitions: Iterable[PartitionProducerState], *, now: int,
                 max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 report: Report | None = None,
                 in_scope: Callable[[tuple[str, int]], bool] | None = None,
                 held_open: set[tuple[str, tuple[str, int]]] | None = None) -> list[HangingRow]:
    """One row per (partition, producer) whose open transaction is hanging; sorted by topic, partition, offset.

    ``in_scope``: the partitions the caller chose to read (``--topic``/``--partition``); a transaction with
    a partition outside them gets no "no partition holds it open" notice, since the partitions left out
    were never looked at. ``held_open``: given, the (transactional id, partition) pairs these partitions
    hold open are added to it and the coordinator-level notices (:func:`owed_abort_notices`) are left to
    the caller, who says them once for all partitions (``kafkatx scan`` replays partitions one by one).
    ``report``: where the notes are said (None: not said).
    """
    rows: list[HangingRow] = []
    seen_open: set[tuple[str, tuple[str, int]]] = set() if held_open is None else held_open
    # __transaction_state partitions that could not be read: a producer no readable one knows may be one of
    # theirs, so "no coordinator transaction of it" (orphaned) cannot be said of it
    unread = sorted({u.partition for u in coordinator.incomplete})
    for part in partitions:
        tp = (part.topic, part.partition)
        for txn in part.open_transactions:
            tid = coordinator.transactional_id_for(txn.producer_id)
            if tid is None and unread:
                if report is not None:
                    report.unclassified(part.name, txn.producer_id, txn.first_offset,
                                        f"{', '.join(unread[:3])}{' and more' if len(unread) > 3 else ''} could not "
                                        "be read")
                continue
            meta = coordinator.transactions.get(tid) if tid is not None else None
            covers = meta is not None and txn.producer_id in meta.producer_ids and meta.includes(tp)
            if covers and tid is not None:
                seen_open.add((tid, tp))
            last_ts = txn.last_timestamp if txn.last_timestamp is not None else txn.start_timestamp
            start_ms = txn.start_timestamp if txn.start_timestamp is not None and txn.start_timestamp >= 0 else None
            kind = classify(state=meta.state if meta is not None else None, includes_partition=covers,
                            start_ms=meta.start_timestamp if meta is not None else None,
                            timeout_ms=meta.timeout_ms if meta is not None else None,
                            last_write_ms=last_ts, now=now, max_timeout_ms=max_timeout_ms)
            if kind in (HangingKind.TIMED_OUT, HangingKind.PREPARED_2PC) and meta is not None:
                start_ms = meta.start_timestamp if meta.start_timestamp >= 0 else None
            if kind is None:
                continue
            if tid is None and report is not None:
                expired = coordinator.expired_transactional_id_for(txn.producer_id)
                if expired is not None:
                    report.note(f"{part.name}: producer {txn.producer_id} last belonged to transactional id "
                                   f"{expired!r}, which expired (tombstone at offset "
                                   f"{coordinator.tombstoned[expired]})")
            rows.append(HangingRow(
                kind=kind.value, topic=part.topic, partition=part.partition, producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch, transactional_id=tid,
                coordinator_state=meta.state.kafka_name if meta is not None else None,
                first_offset=txn.first_offset, start_ms=start_ms,
                duration_ms=now - start_ms if start_ms is not None else None))
    if report is not None and held_open is None:
        report.note(*owed_abort_notices(coordinator, seen_open, now=now, in_scope=in_scope))
    rows.sort(key=lambda r: (r.topic, r.partition, r.first_offset, r.producer_id))
    return rows


# The sentence of an owed abort, one per transaction (find-hanging's notices; a million at scale, so
# %-formatted: the id's repr, the producer id, timeout and start, the partition names or "none").
# render/notes.py reads its shape from this very template to say a million of them in one line fast.
OWED_ABORT_NOTE = ("transaction %r (producer %d) is Ongoing past its timeout (%d ms from %d) but no partition in "
                   "these log dirs holds it open; the coordinator still owes it an abort (partitions: %s)")


def owed_abort_notices(coordinator: CoordinatorState, held_open: Container[tuple[str, tuple[str, int]]], *,
                       now: int, in_scope: Callable[[tuple[str, int]], bool] | None = None) -> list[str]:
    """One notice per transaction ``Ongoing`` past its timeout that no partition holds open (``held_open``:
    the (transactional id, partition) pairs the replayed partitions hold open), sorted by id: it holds no
    LSO back, but the coordinator still owes it an abort (``TransactionStateManager.timedOutTransactions``).
    After a replay straight from each id's latest record (``CoordinatorState.timed_out_fields``: no
    metadata per id; its partitions as ``TransactionMetadata.from_fields`` reads them)."""
    notices: list[str] = []
    if isinstance(coordinator.transactions, LiveTransactions):
        checks = bool(held_open) or in_scope is not None  # else every one is said: no partition set made
        note, append = OWED_ABORT_NOTE, notices.append
        for tid, _offset, f, _p in coordinator.timed_out_fields(TIMEOUT_STATES, now):  # sorted by id
            parts = f[F_PARTITIONS]
            if parts and len(parts) == 1 and len(parts[0][1]) == 1:  # one partition: the set of one
                topic, (number,) = parts[0]
                if checks:
                    tps: Collection[tuple[str, int]] = ((topic, number),)
                names = f"{topic}-{number}"
            else:
                tps = frozenset(fields_partitions(f)) if parts else ()
                names = ", ".join(sorted_partition_names(tps)) or "none"
            if checks and ((tps and held_open and any((tid, tp) in held_open for tp in tps)) or
                           (in_scope is not None and not all(in_scope(tp) for tp in tps))):
                continue
            append(note % (tid, f[F_PRODUCER_ID], f[F_TIMEOUT_MS], f[F_START_TIMESTAMP], names))
        return notices
    for meta in coordinator.timed_out(TIMEOUT_STATES, now):  # sorted by id; the others never built
        tid = meta.transactional_id
        if not any((tid, tp) in held_open for tp in meta.partitions) and \
                (in_scope is None or all(in_scope(tp) for tp in meta.partitions)):
            notices.append(OWED_ABORT_NOTE % (tid, meta.producer_id, meta.timeout_ms, meta.start_timestamp,
                                              ", ".join(meta.partition_names()) or "none"))
    return notices
