"""The last stable offset, as the partition leader computes it.

``UnifiedLog.lastStableOffset`` (storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java,
Kafka 3.x core/src/main/scala/kafka/log/UnifiedLog.scala)::

    firstUnstableOffset = producerStateManager.firstUnstableOffset   // earliest open txn's first offset
    lastStableOffset    = min(firstUnstableOffset, highWatermark)   // when something is open
                        = highWatermark                              // otherwise

``read_committed`` consumers stop at the LSO, so one open transaction that
never gets its marker pins every consumer of the partition (the "hanging
transaction"). The high watermark itself is the replicated prefix: offline it
comes from ``replication-offset-checkpoint``; a dir without an entry (never
checkpointed, or a partition this broker only just got) has no high watermark,
and the log end offset stands in for it (callers say so).

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable


def last_stable_offset(open_first_offsets: Iterable[int], high_watermark: int,
                       log_start_offset: int | None = None) -> int:
    """LSO = the smallest first offset of an open transaction if below the high watermark, else the HW.

    An open transaction that began below the log start offset (retention deleted its start, the
    producer snapshot still names it) counts from the log start: ``UnifiedLog.maybeIncrementFirstUnstableOffset``
    uses ``max(firstUnstableOffset, logStartOffset)``.
    """
    first_unstable = min(open_first_offsets, default=None)
    if first_unstable is not None and log_start_offset is not None:
        first_unstable = max(first_unstable, log_start_offset)
    if first_unstable is not None and first_unstable < high_watermark:
        return first_unstable
    return high_watermark


def clamp_high_watermark(high_watermark: int, log_start_offset: int, log_end_offset: int) -> int:
    """``UnifiedLog.updateHighWatermark``: a loaded high watermark is bounded by [log start, log end]."""
    return max(log_start_offset, min(high_watermark, log_end_offset))


def txn_index_last_stable_offset(other_open_first_offsets: Iterable[int], marker_offset: int) -> int:
    """The ``lastStableOffset`` Kafka stores in a ``.txnindex`` entry when an abort completes.

    ``ProducerStateManager.lastStableOffset(CompletedTxn)``: the first offset of the earliest
    transaction still open *of another producer*, else the marker's offset + 1. (It is the LSO
    right after the abort, before the high watermark is taken into account.)
    """
    first = min(other_open_first_offsets, default=None)
    return first if first is not None else marker_offset + 1


def high_watermark_or_log_end(checkpointed: int | None, log_end_offset: int) -> tuple[int, bool]:
    """The high watermark to use and whether it is the log end offset standing in for a missing one."""
    if checkpointed is None:
        return log_end_offset, True
    return checkpointed, False
