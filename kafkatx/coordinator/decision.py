"""What the coordinator decided for a transaction a partition still holds open (``abort-hanging``).

An orphaned transaction (the coordinator's *current* transaction of that producer does not
include the partition) is usually one whose marker was lost: the coordinator wrote
``PrepareCommit``/``PrepareAbort`` listing the partition, sent markers, wrote ``Complete*`` and
moved on, and this partition's marker never landed. The decision is in the
``__transaction_state`` history, and repairing it with the other outcome would undo a decided
commit (read_committed consumers would drop data the rest of the transaction committed; aborted
consumer offsets make the group re-read input whose output was committed).

Kafka's rules this follows (read in apache/kafka):

* ``TransactionMetadata.prepareAbortOrCommit`` writes ``PrepareCommit``/``PrepareAbort`` with the
  transaction's partitions; ``prepareComplete`` writes ``Complete*`` with an empty list. The
  decision is final once Prepare* is logged: ``TransactionStateManager`` resends that outcome's
  markers when it loads a Prepare* record.
* The producer epoch of a Prepare* record is the epoch of the transaction's data, or one above
  it: ``TransactionCoordinator.abortTimedOutTransactions`` (``prepareFenceProducerEpoch``) and
  transaction version 2 (KIP-890, every EndTxn) bump the epoch before Prepare*, and the markers
  carry the bumped epoch.
* ``ProducerAppendInfo.appendEndTxnMarker`` checks only the marker's producer epoch (not below the
  producer's) and coordinator epoch (not below the last seen); the control type is not checked
  against anything: whichever marker lands first ends the open transaction with its outcome.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import Struct

from kafkatx.rows import HistoryEntry

COMMIT = "COMMIT"
ABORT = "ABORT"
_PREPARED = {"PrepareCommit": COMMIT, "PrepareAbort": ABORT}


class CoordinatorDecision(Struct, frozen=True, kw_only=True):
    """``control``: ``COMMIT``/``ABORT``, or None when the history cannot tell; ``why``: one sentence."""

    control: str | None
    why: str


def coordinator_decision(history: Iterable[HistoryEntry], *, transactional_id: str | None, producer_id: int,
                         producer_epoch: int, partition: str, start_ms: int | None) -> CoordinatorDecision:
    """The outcome ``TransactionMetadata`` logged for the transaction open in ``partition``.

    Looks at every Prepare* record of ``producer_id`` whose epoch is the partition's epoch or one
    above it (a bump before Prepare*), that lists ``partition`` and was written at or after the
    open transaction's first batch (``start_ms``; None: any). All agree: that outcome. None and
    the history reaches back to before the transaction began (a record of this producer written
    before ``start_ms``): the coordinator never decided a transaction with this partition, so
    the data was never part of a decided transaction: ``ABORT`` (what ``Admin.abortTransaction``
    writes). Otherwise (compacted away, no id, outcomes that disagree): None.
    """
    entries = [h for h in history if h.producer_id == producer_id]
    if transactional_id is None or not entries:
        return CoordinatorDecision(control=None, why=f"no __transaction_state history of producer {producer_id} "
                                                     "is left (its id expired or was compacted away)")
    decided: list[tuple[str, HistoryEntry]] = []
    for h in entries:
        control = _PREPARED.get(h.state or "")
        if control is None or h.producer_epoch is None or not 0 <= h.producer_epoch - producer_epoch <= 1:
            continue
        if partition not in (h.partitions or ()):
            continue
        if start_ms is not None and h.last_update_timestamp_ms is not None and h.last_update_timestamp_ms < start_ms:
            continue
        decided.append((control, h))
    outcomes = {c for c, _h in decided}
    if len(outcomes) == 1:
        control, h = decided[-1]
        return CoordinatorDecision(control=control, why=(
            f"the coordinator decided {control} for {transactional_id!r} (producer {producer_id} epoch "
            f"{h.producer_epoch}) including {partition}: {h.state} at __transaction_state offset {h.offset}"))
    if len(outcomes) > 1:
        offsets = ", ".join(f"{h.state} @ {h.offset}" for _c, h in decided)
        return CoordinatorDecision(control=None, why=(
            f"the history of {transactional_id!r} holds both outcomes for {partition} after its data ({offsets})"))
    reaches_back = start_ms is not None and any(
        h.last_update_timestamp_ms is not None and h.last_update_timestamp_ms <= start_ms for h in entries)
    if reaches_back:
        return CoordinatorDecision(control=ABORT, why=(
            f"the coordinator never decided a transaction of producer {producer_id} that included {partition} "
            f"(its history of {transactional_id!r} reaches back before the data): nothing committed it"))
    return CoordinatorDecision(control=None, why=(
        f"the history of {transactional_id!r} no longer shows whether producer {producer_id}'s transaction "
        f"including {partition} was committed or aborted (compacted away)"))


class MarkerSeen(Struct, frozen=True, kw_only=True):
    """A transaction span another partition ended with a marker (``CompletedTxn``'s fields this rule reads)."""

    partition: str  # topic-N
    producer_id: int
    marker_epoch: int
    outcome: str  # COMMIT | ABORT
    marker_offset: int
    first_data_ms: int | None  # the span's first data batch
    marker_ms: int  # the marker batch's max timestamp


def marker_decision(markers: Iterable[MarkerSeen], *, producer_id: int, producer_epoch: int, partition: str,
                    start_ms: int | None, last_write_ms: int | None) -> CoordinatorDecision:
    """The outcome the same transaction's markers on its *other* partitions show, when the history cannot tell.

    One producer runs one transaction at a time, and the next cannot write data before the last one's
    markers are all written (``TransactionCoordinator.handleAddPartitionsToTransaction`` answers
    ``CONCURRENT_TRANSACTIONS`` while the id is ``PrepareCommit``/``PrepareAbort``). So a span of
    ``producer_id`` on another partition, its marker at the data's epoch or one above (TV2 and the timeout
    abort bump it, KIP-890), is this transaction's exactly when its marker is not older than this
    partition's first batch (``start_ms``: else it ended an earlier transaction) and its data does not begin
    after this partition's last write (``last_write_ms``: else it is a later one). The coordinator wrote one
    outcome for all of them (``TransactionMarkerChannelManager``): all agree, that outcome; none, or both,
    None. Without both times nothing is decided."""
    if start_ms is None or last_write_ms is None:
        return CoordinatorDecision(control=None, why="the open transaction's times are unknown")
    same = [m for m in markers if m.producer_id == producer_id and m.partition != partition
            and 0 <= m.marker_epoch - producer_epoch <= 1 and m.marker_ms >= start_ms
            and (m.first_data_ms is None or m.first_data_ms <= last_write_ms)]
    outcomes = {m.outcome for m in same}
    if len(outcomes) == 1:
        m = same[0]
        return CoordinatorDecision(control=m.outcome, why=(
            f"the same transaction's {m.outcome} marker on {m.partition} (offset {m.marker_offset}, producer "
            f"{producer_id} epoch {m.marker_epoch}) decided it"))
    if outcomes:
        shown = ", ".join(f"{m.outcome} on {m.partition} @ {m.marker_offset}" for m in same)
        return CoordinatorDecision(control=None, why=f"its other partitions' markers disagree ({shown})")
    return CoordinatorDecision(control=None, why="no other partition holds a marker of this transaction")


__all__ = ["ABORT", "COMMIT", "CoordinatorDecision", "MarkerSeen", "coordinator_decision", "marker_decision"]
