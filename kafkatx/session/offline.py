"""The offline session: one :class:`OfflineSession` per command, and one library function per CLI command
that builds it and asks it.

A session holds the broker log dirs (paths or opened :class:`LogDir` objects, several brokers' dirs at once),
the settings resolved for them, the coordinator (loaded once, when first asked), the partitions replayed and
one :class:`~kafkatx.rows.Report`. Each command returns an :class:`~kafkatx.rows.Answer`: the rows
(``rows.py`` structs, the same the online path returns) and the report: ``notices`` (what the user should
know: replica choices, missing high watermarks, snapshot fallbacks, findings stepped over), ``skipped``
(partitions that could not be decoded: named, left out, and the rest still answered) and ``incomplete``. The
CLI prints rows to stdout and notices/skipped to stderr.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS
from kafkatx.coordinator.state_manager import TRANSACTION_ROW_FIELDS
from kafkatx.rows import (
    Answer,
    HangingRow,
    LagAnswer,
    ProducerRow,
    Progress,
    TransactionDescription,
    TransactionRow,
)
from kafkatx.rows import no_high_watermark_note as no_high_watermark_notice
from kafkatx.session.partition_rows import hanging_key, hanging_rows, lag_row
from kafkatx.session.selection import refuse_metadata_topic, require_match, require_selection, topics_found
from kafkatx.session.session import (
    UNREADABLE_CHECKS,
    LogDirs,
    OfflineSession,
    ValuesAnswer,
)
from kafkatx.session.timeline import PartitionTimeline
from kafkatx.session.transactions import compile_pattern, coordinator_ids, parse_states, transaction_row
from kafkatx.storage.log_dir import collector_paused
from kafkatx.storage.replay import replay_partition
from kafkatx.storage.replicas import as_log_dirs
from kafkatx.storage.segment import DEFAULT_READ_WINDOW
from kafkatx.storage.segment import read_window as segment_read_window

if TYPE_CHECKING:
    from kafkatx.checks.indexes import Problem

# ----------------------------------------------------------------------------- commands

def list_transactions(log_dirs: LogDirs, *, states: Iterable[str] | None = None, pattern: str | None = None,
                      partitions_count: int | None = None, progress: Progress | None = None,
                      values: bool = False, producer_ids: Iterable[int] | None = None,
                      duration_ms: int | None = None, now: int | None = None) -> Answer[TransactionRow] | ValuesAnswer:
    """Every live transactional id in the ``__transaction_state`` partitions found (tombstoned ids left out),
    filtered as ListTransactions filters (:func:`kafkatx.coordinator.rules.listed`: ``pattern`` a full match,
    ``producer_ids``, ``duration_ms`` at ``now``, default the wall clock; Dead never listed).
    ``values``: a :class:`ValuesAnswer`, each row the tuple of its fields in order (:func:`transaction_values`),
    taken a chunk at a time, no ``TransactionRow`` made (``list-txn``'s 1,000,000 rows)."""
    parse_states(states)
    compile_pattern(pattern)
    session = OfflineSession(log_dirs, now=now, partitions_count=partitions_count, progress=progress)
    session.resolve_settings()
    return session.list_transactions(states=states, pattern=pattern, values=values, producer_ids=producer_ids,
                                     duration_ms=duration_ms)


@collector_paused()
def describe_transaction(log_dirs: LogDirs, transactional_id: str, *, partitions_count: int | None = None,
                         progress: Progress | None = None, now: int | None = None,
                         max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> Answer[TransactionDescription]:
    """One id: its row, the history the log kept, whether each of its partitions still has it open, and
    every partition where one of its producer ids holds a transaction open, with find-hanging's kind
    (``hanging_rows`` at ``now``, the function find-hanging uses: one story).

    No rows when the id is unknown (or tombstoned: the notice says so, with its history length).
    """
    session = OfflineSession(log_dirs, now=now, partitions_count=partitions_count, progress=progress)
    session.resolve_settings()
    return session.describe_transaction(transactional_id, max_timeout_ms=max_timeout_ms)


@collector_paused()
def describe_producers(log_dirs: LogDirs, *, topic: str, partition: int, now: int | None = None,
                       expiration_ms: int | None = None, include_expired: bool = False,
                       progress: Progress | None = None) -> Answer[ProducerRow]:
    """The producer state the broker builds for one partition when it starts (``storage/loading.py``).

    With ``now``, producers idle past ``expiration_ms`` (no open transaction) are expired as the
    broker does on load and in ``removeExpiredProducers``: left out, or listed with
    ``expired: true`` when ``include_expired``. ``expiration_ms`` None: the
    ``producer.id.expiration.ms`` of the partition's log dir's broker config, else Kafka's default.
    A partition that does not read: no rows, ``incomplete``.
    """
    refuse_metadata_topic(topic)
    session = OfflineSession(log_dirs, now=now, progress=progress)
    return session.describe_producers(topic=topic, partition=partition, expiration_ms=expiration_ms,
                                      include_expired=include_expired)


@collector_paused()
def find_hanging(log_dirs: LogDirs, *, now: int, max_timeout_ms: int | None = None,
                 topic: str | None = None, partition: int | None = None, partitions_count: int | None = None,
                 progress: Progress | None = None, read_window: int | None = None,
                 jobs: int | None = None) -> Answer[HangingRow]:
    """Open transactions that hold an LSO back: kinds orphaned, timed-out, incomplete-markers (hanging.py),
    in ``topic`` (``partition`` of it) only: only those partitions are replayed.

    ``max_timeout_ms`` None: the broker configs' ``transaction.max.timeout.ms``, else 15 minutes.
    ``read_window``: bytes of a segment held at most on the pread path (a live broker; None: 64 MiB).
    ``jobs``: processes that replay the partitions (``log.fanout.jobs_for``; the same answer)."""
    with segment_read_window(read_window):
        session = OfflineSession(log_dirs, now=now, max_timeout_ms=max_timeout_ms,
                                 partitions_count=partitions_count, progress=progress, jobs=jobs)
        session.resolve_settings(max_timeout=True)
        return session.hanging(now=now, topic=topic, partition=partition)


@collector_paused()
def lag(log_dirs: LogDirs, *, topic: str | None = None, topics: Sequence[str | None] | None = None,
        progress: Progress | None = None, now: int | None = None, read_window: int | None = None,
        jobs: int | None = None, holders: bool = False, everything: bool = True) -> LagAnswer:
    """Per partition: log start, LSO, high watermark, log end, lag = HW - LSO, open transactions.

    ``topics``: each topic's partitions one after another (default: ``topic``, None every topic).
    ``now``: the clock producer expiration runs at while loading (as find-hanging's ``--now``).
    ``read_window``: bytes of a segment held at most on the pread path (a live broker; None: 64 MiB).
    ``jobs``: processes that replay the partitions (``log.fanout.jobs_for``; the same answer).
    ``holders``: also the coordinator's transaction holding each held partition (``OfflineSession.lag``)."""
    with segment_read_window(read_window):
        session = OfflineSession(log_dirs, now=now, progress=progress, jobs=jobs)
        return session.lag(topics=list(topics) if topics is not None else [topic], holders=holders,
                           everything=everything)


def timeline(log_dirs: LogDirs, *, now: int, topic: str | None = None, partition: int | None = None,
             max_timeout_ms: int | None = None, partitions_count: int | None = None,
             progress: Progress | None = None) -> Answer[PartitionTimeline]:
    """Per partition: its transaction spans (``session/timeline.py``), its ``lag`` row and its
    ``find-hanging`` rows, from one pass over the files (``lag_row`` and ``hanging_rows``, the
    functions ``lag`` and ``find-hanging`` use). Every partition is listed, with or without spans.
    """
    session = OfflineSession(log_dirs, now=now, max_timeout_ms=max_timeout_ms, partitions_count=partitions_count,
                             progress=progress)
    session.resolve_settings(max_timeout=True)
    return session.timeline(now=now, topic=topic, partition=partition)


# The collector paused from the log dirs' listing on (checks/verify.verify pauses it for its own part): the
# listing makes a dozen objects per partition folder, no cycle, and with the collector on its full
# collections walked them all again (~40 ms at 10,000 partitions, more as the objects per folder grow).
@collector_paused()
def verify(log_dirs: LogDirs, *, partitions_count: int | None = None,
           progress: Progress | None = None, read_window: int = DEFAULT_READ_WINDOW,
           jobs: int | None = None) -> Answer[Problem]:
    """Integrity problems across every file of every partition (verify.py); no rows = healthy.
    ``read_window``: bytes of a segment held at most on the pread path (a live broker). ``jobs``:
    processes that check the partitions (None: one per CPU from 1,000 partitions up; the same answer).

    A partition whose log (or ``__transaction_state``) does not decode to its end is also in
    ``incomplete``: the checks after the bad bytes could not run there."""
    session = OfflineSession(log_dirs, partitions_count=partitions_count, progress=progress, jobs=jobs)
    session.resolve_settings()
    return session.verify(read_window=read_window)


# What the rest of kafkatx (and scan's executors) import from here: the commands, and the session's pieces
__all__ = [
    "TRANSACTION_ROW_FIELDS", "UNREADABLE_CHECKS", "Answer", "LogDirs", "OfflineSession", "ValuesAnswer",
    "as_log_dirs", "compile_pattern", "coordinator_ids", "describe_producers", "describe_transaction",
    "find_hanging", "hanging_key", "hanging_rows", "lag", "lag_row",
    "list_transactions", "no_high_watermark_notice", "parse_states",
    "refuse_metadata_topic", "replay_partition", "require_match", "require_selection",
    "timeline", "topics_found", "transaction_row",
    "verify",
]
