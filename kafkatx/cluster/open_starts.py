"""When each partition's oldest open transaction began, asked of a live cluster (the exporter's
``kafkatx_oldest_open_transaction_age_seconds``): the coordinator's start time where DescribeTransactions
tells it, else the first record's timestamp (Fetch), else the producer's last write (DescribeProducers)."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from kafkatx.cluster.backend import (
    ClusterBackend,
    TopicPartitionKey,
    TransactionState,
)
from kafkatx.rows import (
    LagRow,
)


class OpenStart(Struct, frozen=True, kw_only=True):
    """When a partition's oldest open transaction began, and which broker answer says so.

    ``source``: ``DescribeTransactions`` (the coordinator's transactionStartTimeMs: exact),
    ``Fetch`` (the timestamp of the record at the transaction's first offset: the producer's
    CreateTime, or the broker's LogAppendTime) or ``DescribeProducers`` (the producer's last
    write, lastTimestamp: a lower bound of the age, for a transaction whose first batch is gone).
    """

    start_ms: int
    source: str


def open_transaction_starts(backend: ClusterBackend, rows: Sequence[LagRow]) -> dict[TopicPartitionKey, OpenStart]:
    """For each partition whose LSO is held below its high watermark, when the transaction holding
    it began, from the broker's own records (never from when we first looked):

    - DescribeProducers lists the open transactions (currentTransactionStartOffset); each one's
      start is the coordinator's transactionStartTimeMs when its producer id maps
      (ListTransactions, DescribeTransactions) to a transaction that still includes the partition,
      else the timestamp of the record at its first offset (Fetch), else its producer's
      lastTimestamp; the partition's answer is the earliest of them;
    - a broker without DescribeProducers: the record at the LSO, which on Kafka is the first
      offset of the oldest open transaction (``UnifiedLog.firstUnstableOffset``).

    Partitions nothing answers for are left out.
    """
    held = sorted((r.topic, r.partition) for r in rows
                  if r.lso is not None and r.high_watermark is not None and r.lso < r.high_watermark)
    if not held:
        return {}
    if not backend.supports("DescribeProducers"):
        lso = {(r.topic, r.partition): r.lso for r in rows if r.lso is not None}
        stamps = backend.record_timestamps({tp: lso[tp] for tp in held})
        return {tp: OpenStart(start_ms=ts, source="Fetch") for tp, ts in stamps.items()}
    producers = backend.describe_producers(held)
    opened = [(tp, p) for tp in held for p in producers.get(tp, []) if p.current_txn_start_offset is not None]
    if not opened:
        return {}
    described: dict[str, TransactionState] = {}
    id_by_pid: dict[int, str] = {}
    if backend.supports("ListTransactions") and backend.supports("DescribeTransactions"):
        pids = sorted({p.producer_id for _, p in opened})
        id_by_pid = {t.producer_id: t.transactional_id for t in backend.list_transactions(producer_ids=pids)
                     if t.producer_id in set(pids)}
        described = backend.describe_transactions(sorted(set(id_by_pid.values())))
    starts: dict[tuple[TopicPartitionKey, int], OpenStart] = {}
    to_fetch: dict[TopicPartitionKey, int] = {}
    for tp, p in opened:
        desc = described.get(id_by_pid.get(p.producer_id, ""))
        if desc is not None and desc.producer_id == p.producer_id and tp in desc.partitions \
                and desc.start_timestamp is not None:
            starts[(tp, p.producer_id)] = OpenStart(start_ms=desc.start_timestamp, source="DescribeTransactions")
        elif p.current_txn_start_offset is not None:
            # one Fetch per partition: the earliest first offset there (a second one waits its turn)
            first = to_fetch.get(tp)
            if first is None or p.current_txn_start_offset < first:
                to_fetch[tp] = p.current_txn_start_offset
    stamps = backend.record_timestamps(to_fetch) if to_fetch else {}
    for tp, p in opened:
        if (tp, p.producer_id) in starts:
            continue
        if to_fetch.get(tp) == p.current_txn_start_offset and tp in stamps:
            starts[(tp, p.producer_id)] = OpenStart(start_ms=stamps[tp], source="Fetch")
        elif p.last_timestamp is not None:
            starts[(tp, p.producer_id)] = OpenStart(start_ms=p.last_timestamp, source="DescribeProducers")
    out: dict[TopicPartitionKey, OpenStart] = {}
    for (tp, _pid), start in sorted(starts.items()):
        if tp not in out or start.start_ms < out[tp].start_ms:
            out[tp] = start
    return out
