"""Which open transactions hold a partition's LSO back, and why (``find-hanging``).

Inputs are the replayed coordinator (``replay_transaction_log``) and the
replayed producer state of every partition (``replay_partition``); ``now`` and
the timeouts are parameters. Every open transaction in a partition (a producer
whose ``current_txn_first_offset`` is set) is classified:

``timed-out``
    The coordinator has the producer's transaction ``Ongoing`` (or in
    ``PrepareEpochFence``, the first step of its own timeout abort), it includes
    this partition, and ``now > start_timestamp + timeout_ms``. A running
    coordinator would have aborted it (``TransactionStateManager.timedOutTransactions``);
    it did not, so the partition waits for an abort that is not coming. The row's
    ``start_ms``/``duration_ms`` are the coordinator's (the timeout runs from there).
``incomplete-markers``
    The coordinator already decided (``PrepareCommit``/``PrepareAbort``, the
    partition is in the transaction) but this partition never got its marker.
``orphaned``
    No coordinator entry of that producer id includes the partition in an
    undecided or preparing transaction: the marker was lost (KAFKA-12671), the id
    expired, or the producer id maps to no transactional id at all
    (``transactional_id`` null).

Like Kafka's ``kafka-transactions.sh find-hanging`` (tools/.../TransactionsCommand.java,
FindHangingTransactionsCommand.collectCandidateOpenTransactions), ``orphaned`` and
``incomplete-markers`` only count when the producer last wrote to the partition more
than ``max_timeout_ms`` ago (``now - lastTimestamp > maxTransactionTimeoutMs``):
younger ones may still be completed by a live coordinator or markers in flight. This
matches the online path (``kafkatx.cluster.service.find_hanging``). ``timed-out`` uses
the transaction's own timeout instead. For those two kinds ``start_ms`` is when the
transaction's first batch in the partition was written and ``duration_ms`` runs from it.

An ``Ongoing`` transaction past its timeout whose partitions hold no open data (the
producer added partitions but wrote nothing there yet, or the partitions are in log dirs
not given) holds no LSO back, so it produces no row; ``find_hanging`` adds a notice
instead, because the coordinator still owes it an abort.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkatx.format.txn_log import TxnState
from kafkatx.txn.model import HangingRow
from kafkatx.txn.replay import CoordinatorState, PartitionProducerState
from kafkatx.txn.state import PREPARE_STATES, UNDECIDED_STATES, TransactionMetadata

DEFAULT_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default (15 minutes)

KIND_ORPHANED = "orphaned"
KIND_TIMED_OUT = "timed-out"
KIND_INCOMPLETE_MARKERS = "incomplete-markers"


def _timed_out(meta: TransactionMetadata, now: int) -> bool:
    return meta.start_timestamp >= 0 and now > meta.start_timestamp + meta.timeout_ms


def find_hanging(coordinator: CoordinatorState, partitions: Iterable[PartitionProducerState], *, now: int,
                 max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 notices: list[str] | None = None) -> list[HangingRow]:
    """One row per (partition, producer) whose open transaction is hanging; sorted by topic, partition, offset."""
    rows: list[HangingRow] = []
    seen_open: set[tuple[str, tuple[str, int]]] = set()  # (transactional id, partition) with open data
    for part in partitions:
        tp = (part.topic, part.partition)
        for txn in part.open_transactions:
            tid = coordinator.transactional_id_for(txn.producer_id)
            meta = coordinator.transactions.get(tid) if tid is not None else None
            covers = meta is not None and txn.producer_id in meta.producer_ids and meta.includes(tp)
            if covers and tid is not None:
                seen_open.add((tid, tp))
            last_ts = txn.last_timestamp if txn.last_timestamp is not None else txn.start_timestamp
            old = last_ts is None or last_ts < 0 or now - last_ts > max_timeout_ms
            start_ms = txn.start_timestamp if txn.start_timestamp is not None and txn.start_timestamp >= 0 else None
            kind = None
            if covers and meta is not None:
                if meta.state in UNDECIDED_STATES:
                    if _timed_out(meta, now):
                        kind = KIND_TIMED_OUT
                        start_ms = meta.start_timestamp
                elif meta.state in PREPARE_STATES:
                    if old:
                        kind = KIND_INCOMPLETE_MARKERS
                elif old:
                    kind = KIND_ORPHANED  # a completed/empty state that still lists it (should not happen)
            elif old:
                kind = KIND_ORPHANED
            if kind is None:
                continue
            if tid is None and notices is not None:
                expired = coordinator.expired_transactional_id_for(txn.producer_id)
                if expired is not None:
                    notices.append(f"{part.name}: producer {txn.producer_id} last belonged to transactional id "
                                   f"{expired!r}, which expired (tombstone at offset "
                                   f"{coordinator.tombstoned[expired]})")
            rows.append(HangingRow(
                kind=kind, topic=part.topic, partition=part.partition, producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch, transactional_id=tid,
                coordinator_state=meta.state.kafka_name if meta is not None else None,
                first_offset=txn.first_offset, start_ms=start_ms,
                duration_ms=now - start_ms if start_ms is not None else None))
    if notices is not None:
        for tid, meta in sorted(coordinator.transactions.items()):
            if meta.state is TxnState.ONGOING and _timed_out(meta, now) and \
                    not any((tid, tp) in seen_open for tp in meta.partitions):
                notices.append(
                    f"transaction {tid!r} (producer {meta.producer_id}) is Ongoing past its timeout "
                    f"({meta.timeout_ms} ms from {meta.start_timestamp}) but no partition in these log dirs "
                    f"holds it open; the coordinator still owes it an abort "
                    f"(partitions: {', '.join(meta.partition_names()) or 'none'})")
    rows.sort(key=lambda r: (r.topic, r.partition, r.first_offset, r.producer_id))
    return rows
