"""Transaction spans per partition: what ``kafkatx timeline`` draws and ``kafkatx scan`` writes.

A *span* is one producer's transaction in one partition, from the offset of its first
transactional batch to the marker that ended it (``COMMIT``/``ABORT``), or still ``OPEN``.
Two replays of the same partition, both the one producer-state fold every offline command
uses (:func:`~kafkatx.storage.replay.replay_partition_events`, planned by
:func:`~kafkatx.storage.loading.plan_load`):

* the completed spans come from a replay from the log start without a snapshot (like
  ``verify``), so every COMMIT/ABORT still on disk is listed, also those a snapshot
  summarises;
* the open spans are the open transactions of the producer state the broker builds on
  startup (the replay ``lag`` and ``find-hanging`` run: newest usable snapshot, expiry at
  ``now``). An open span can start below the log start (a ghost: retention deleted its
  data but a snapshot still remembers it); its ``start_ms`` is then null, as in find-hanging.

``timeline`` (``session/offline.py``) and ``scan`` (``spark/rows.py``) both build their spans here.
Pure: ``now`` is a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from msgspec import Struct

from kafkatx.checks.ghost import is_ghost
from kafkatx.rows import HangingRow, LagRow
from kafkatx.storage.events import EventSource
from kafkatx.storage.loading import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LoadPlan, plan_load
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import CompletedTxn, PartitionProducerState
from kafkatx.storage.replay import replay_partition_events

OUTCOMES = ("COMMIT", "ABORT", "OPEN")


class TransactionSpan(Struct, frozen=True, kw_only=True):
    """One transaction of one producer in one partition (``timeline`` JSON rows, ``scan``'s ``transactions/``).

    The first ten fields are cli.md's ``timeline`` keys, in order.
    """

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    transactional_id: str | None  # the coordinator's id for the producer (null when none maps)
    first_offset: int | None  # None only when the span began before the replay start
    last_offset: int | None  # the last data offset of the span (None: a marker with no data seen)
    outcome: str  # COMMIT | ABORT | OPEN
    start_ms: int | None  # max timestamp of the first batch (None when unknown: a ghost)
    end_ms: int | None  # the marker's timestamp; None while OPEN
    marker_offset: int | None  # the COMMIT/ABORT marker; None while OPEN
    coordinator_epoch: int
    duration_ms: int | None  # end - start, or now - start while OPEN


class PartitionTimeline(Struct, frozen=True, kw_only=True):
    """One partition for ``timeline``: its ``lag`` row (log start, LSO, high watermark, log end),
    its spans (first offset order) and the ``find-hanging`` rows of its open spans."""

    topic: str
    partition: int
    lag: LagRow
    spans: list[TransactionSpan]
    hanging: list[HangingRow]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def _ts(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def transaction_spans(completed: Iterable[CompletedTxn], state: PartitionProducerState | None,
                      transactional_id_for: Callable[[int], str | None], now: int) -> list[TransactionSpan]:
    """The spans of one partition: ``completed`` (from :func:`replay_spans`), then the open
    transactions of ``state`` (None when that replay failed)."""
    spans = []
    for c in completed:
        start, end = _ts(c.start_timestamp), _ts(c.end_timestamp)
        spans.append(TransactionSpan(
            topic=c.topic, partition=c.partition, producer_id=c.producer_id, producer_epoch=c.producer_epoch,
            transactional_id=transactional_id_for(c.producer_id), first_offset=c.first_offset,
            last_offset=c.last_offset, outcome=c.outcome, start_ms=start, end_ms=end, marker_offset=c.marker_offset,
            coordinator_epoch=c.coordinator_epoch,
            duration_ms=end - start if start is not None and end is not None else None))
    if state is not None:
        for t in state.open_transactions:
            # A ghost's first batch is gone (retention): when it began is unknown, as find-hanging says.
            start = None if is_ghost(t, state) else _ts(t.start_timestamp)
            spans.append(TransactionSpan(
                topic=t.topic, partition=t.partition, producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                transactional_id=transactional_id_for(t.producer_id), first_offset=t.first_offset,
                last_offset=t.last_offset, outcome="OPEN", start_ms=start, end_ms=None, marker_offset=None,
                coordinator_epoch=t.coordinator_epoch, duration_ms=now - start if start is not None else None))
    return spans


def replay_spans(partition: Partition, events: EventSource, *, now: int, plan: LoadPlan | None = None,
                 completed: list[CompletedTxn] | None = None,
                 expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> PartitionProducerState:
    """Both replays of the module docstring over ``events``: appends every completed span on disk
    to ``completed`` (filled as far as it got when the second replay raises) and returns the
    producer state the broker builds at ``now``.
    """
    if plan is None:
        plan = plan_load(partition)
    sink: list[CompletedTxn] = completed if completed is not None else []
    replay_partition_events(partition, events, use_snapshot=False, on_completed=sink.append, plan=plan)
    return replay_partition_events(partition, events, plan=plan, now=now, expiration_ms=expiration_ms)


__all__ = ["OUTCOMES", "PartitionTimeline", "TransactionSpan", "replay_spans", "transaction_spans"]
