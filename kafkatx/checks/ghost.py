"""Ghost transactions: open transactions that only a producer snapshot remembers.

A ``.snapshot`` stores, per producer, the first offset of its open transaction
(``currentTxnFirstOffset``, ProducerStateManager.writeSnapshot). When retention deletes
the segments holding that offset, the log no longer has the transaction's data, but the
broker still loads the snapshot on startup (``LogLoader`` -> ``ProducerStateManager.
loadFromSnapshot``) and keeps the transaction open. ``UnifiedLog.maybeIncrementFirstUnstableOffset``
clamps the first unstable offset to the log start, so the LSO sticks at the log start
forever: no marker will ever come from a coordinator that considers the transaction done.

Rule: an open transaction of a replayed partition is a *ghost* when

* the replay started from a snapshot (``snapshot_offset`` is set: without a snapshot the
  replay starts at the log start and cannot see anything below it), and
* its first offset is strictly below the partition's log start offset (equal means the
  first batch is still there: an ordinary hanging transaction), and
* the replay found no later marker ending it (it is still in ``open_transactions``), and
* find-hanging classified it ``orphaned`` (the coordinator has no undecided or preparing
  transaction that includes the partition; a timed-out or incomplete-markers transaction
  is finished by the coordinator-side repair, which closes it too).

The position and kind rules are ``kafkatx.coordinator.rules.below_log_start``/``ghost_kind``, the
ones the online path applies to the leader's producer state.

The row keeps every find-hanging key; ``start_ms``/``duration_ms`` are ``None`` because the
batch that opened the transaction is gone (a snapshot does not store when it began).

A snapshot with a bad CRC is skipped by ``replay_partition`` (it falls back to an older
one, or to the log start, and says so in its notices), so a ghost is only ever reported
from a snapshot the broker itself would load.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from msgspec.structs import replace

from kafkatx.coordinator.rules import HangingKind, below_log_start, ghost_kind
from kafkatx.rows import HangingRow
from kafkatx.storage.producer_state import OpenTxn, PartitionProducerState

KIND_GHOST = HangingKind.GHOST.value


def is_ghost(txn: OpenTxn, state: PartitionProducerState) -> bool:
    """True when ``txn`` began below the log start and only the snapshot remembers it."""
    return state.snapshot_offset is not None and below_log_start(txn.first_offset, state.log_start_offset)


def ghost_transactions(state: PartitionProducerState) -> list[OpenTxn]:
    """The open transactions of one replayed partition that began below its log start."""
    return [t for t in state.open_transactions if is_ghost(t, state)]


def apply_ghost_rule(rows: Iterable[HangingRow],
                     states: Mapping[tuple[str, int], PartitionProducerState]) -> list[HangingRow]:
    """Re-label find-hanging's ``orphaned`` rows that are ghosts (``states`` by (topic, partition))."""
    out = []
    for row in rows:
        state = states.get((row.topic, row.partition))
        if state is not None and state.snapshot_offset is not None:
            kind = ghost_kind(row.kind, first_offset=row.first_offset, log_start=state.log_start_offset)
            if kind != row.kind:
                row = replace(row, kind=kind, start_ms=None, duration_ms=None)
        out.append(row)
    return out


__all__ = ["KIND_GHOST", "apply_ghost_rule", "ghost_transactions", "is_ghost"]
