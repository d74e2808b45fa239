"""One partition's answers, from its replayed producer state: its find-hanging rows (``hanging_rows``, the
ghost rule, the tiered costs), its ``lag`` row (``lag_row``: ``UnifiedLog.lastStableOffset`` at the
checkpointed high watermark) and the notes they say. The offline session (``session/offline.py``) reduces
each partition with them, in as many processes as it runs; ``kafkatx scan``'s executors call the same
functions (``spark/tasks.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from kafkatx.checks import hanging as _hanging
from kafkatx.checks.ghost import apply_ghost_rule, is_ghost
from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS, HangingKind, coordinator_holds
from kafkatx.coordinator.state_manager import (
    CoordinatorState,
)
from kafkatx.errors import KafkaTxError, ReadFailed
from kafkatx.format.txn_log import (
    TxnState,
)
from kafkatx.rows import (
    HangingRow,
    LagRow,
    OpenPartition,
    Report,
    TransactionRow,
)
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.lso import clamp_high_watermark, high_watermark_or_log_end, last_stable_offset
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import OpenTxn, PartitionProducerState
from kafkatx.storage.remote_log import tiered_facts, tiered_notices


class HangingPart(Struct, frozen=True, kw_only=True):
    """find-hanging's answer of one partition (``hanging_rows`` with that partition's state only): its rows,
    the report of its replay and rows, and the (transactional id, partition) pairs it holds open (the
    coordinator-level notes are said once, over all partitions: :func:`owed_notices`)."""

    rows: list[HangingRow]
    report: Report
    held: list[tuple[str, tuple[str, int]]]


def hanging_key(row: HangingRow) -> tuple[str, int, int, int]:
    """A find-hanging row's open transaction, as ``txn.groups.with_blocked_groups`` asks for it."""
    return row.topic, row.partition, row.producer_id, row.first_offset


def _open_key(row: OpenPartition) -> tuple[str, int, int, int] | None:
    topic, _, number = row.partition.rpartition("-")
    return topic, int(number), row.producer_id, row.first_offset


def _older_broker_notices(rows: list[HangingRow], dirs: list[LogDir], coord: CoordinatorState) -> list[str]:
    """``incomplete-markers`` rows whose partition lies on a broker older than the coordinator's, where the
    metadata log says (``txn.mixed``: KAFKA-20322); nothing without incomplete-markers rows or a metadata log."""
    ids = {r.transactional_id for r in rows if r.kind == HangingKind.INCOMPLETE_MARKERS and r.transactional_id}
    if not ids:
        return []
    from kafkatx.coordinator.mixed import older_broker_notices
    from kafkatx.storage.cluster_metadata import cluster_image

    try:
        image = cluster_image(dirs)
    except KafkaTxError:
        return []  # said already where the partition count was read
    if image is None:
        return []
    parts = {tid: meta.coordinator_partition for tid in ids if (meta := coord.transactions.get(tid)) is not None}
    return older_broker_notices(rows, image, parts)


def _in_scope(topic: str | None, partition: int | None) -> Callable[[tuple[str, int]], bool] | None:
    """The partitions a ``--topic``/``--partition`` filter read, as a test (None: all were read)."""
    if topic is None and partition is None:
        return None

    def in_scope(tp: tuple[str, int]) -> bool:
        return (topic is None or tp[0] == topic) and (partition is None or tp[1] == partition)
    return in_scope


def owed_notices(coordinator: CoordinatorState, held_open: set[tuple[str, tuple[str, int]]], *, now: int,
                 topic: str | None = None, partition: int | None = None) -> list[str]:
    """The coordinator-level notes of find-hanging (``hanging.owed_abort_notices``) over the pairs every
    partition read holds open, the filter it read them with."""
    return _hanging.owed_abort_notices(coordinator, held_open, now=now, in_scope=_in_scope(topic, partition))


def hanging_rows(coordinator: CoordinatorState, states: list[PartitionProducerState], *, now: int,
                 max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS, report: Report | None = None,
                 topic: str | None = None, partition: int | None = None,
                 held_open: set[tuple[str, tuple[str, int]]] | None = None) -> list[HangingRow]:
    """find-hanging's rows for replayed partitions: ``hanging.find_hanging`` then the ghost rule.

    ``find_hanging`` (per partition, in as many processes as it runs) and ``kafkatx scan`` (per partition,
    on executors) both call this. ``topic`` / ``partition``: the filter the partitions were read with
    (coordinator notices stay inside it).
    """
    rows = _hanging.find_hanging(coordinator, states, now=now, max_timeout_ms=max_timeout_ms, report=report,
                                 in_scope=_in_scope(topic, partition), held_open=held_open)
    return apply_ghost_rule(rows, {(s.topic, s.partition): s for s in states})


def _lso(state: PartitionProducerState, opened: list[OpenTxn], hw: int) -> int:
    """``UnifiedLog.lastStableOffset`` at high watermark ``hw``."""
    # ProducerStateManager.firstUnstableOffset: open transactions, and transactions the broker's own
    # replay saw completed whose marker the high watermark has not passed yet (unreplicatedTxns); raised to
    # the log start (UnifiedLog.maybeIncrementFirstUnstableOffset: the global one, below the first local
    # segment on a tiered partition)
    unstable = [t.first_offset for t in opened] + [first for first, marker in state.unreplicated if marker >= hw]
    return last_stable_offset(unstable, hw, state.log_start_offset)


def tiered_hanging(state: PartitionProducerState, part: Partition, checkpointed_hw: int | None,
                   rows: list[HangingRow], report: Report) -> list[HangingRow]:
    """find-hanging's rows of a tiered partition with what the transaction costs its disk
    (``upload_blocked_bytes``, ``remote_copied_offset``: ``storage/remote_log.py``), and the lines saying so
    into ``report``."""
    if not rows:
        return rows
    hw = clamp_high_watermark(high_watermark_or_log_end(checkpointed_hw, state.log_end_offset)[0],
                              state.log_start_offset, state.log_end_offset)
    opened = state.open_transactions
    lso = _lso(state, opened, hw)
    facts = tiered_facts(state, part, lso, bool(opened) and lso < hw)
    if facts is None:
        return rows
    report.note(*tiered_notices(state.name, facts, lso))
    return [replace(r, upload_blocked_bytes=facts.blocked_bytes, remote_copied_offset=facts.copied_offset)
            if (r.topic, r.partition) == (state.topic, state.partition) else r for r in rows]


def lag_row(state: PartitionProducerState, checkpointed_hw: int | None, report: Report,
            part: Partition | None = None) -> tuple[LagRow, bool]:
    """One partition's ``lag`` row from its replayed state and its checkpointed high watermark.

    Returns the row and whether the log end offset stood in for a missing high watermark (the
    caller names those partitions in one notice). A checkpointed high watermark outside the
    log is clamped as ``UnifiedLog.updateHighWatermark`` does, with a note in ``report``. ``lag`` and
    ``kafkatx scan`` both call this.
    """
    hw, stand_in = high_watermark_or_log_end(checkpointed_hw, state.log_end_offset)
    clamped = clamp_high_watermark(hw, state.log_start_offset, state.log_end_offset)
    if clamped != hw:
        report.note(f"{state.name}: checkpointed high watermark {hw} is outside the log "
                       f"[{state.log_start_offset}, {state.log_end_offset}]; using {clamped} as the broker would")
        hw = clamped
    opened = state.open_transactions
    lso = _lso(state, opened, hw)
    held = bool(opened) and lso < hw
    tiered = tiered_facts(state, part, lso, held)
    if tiered is not None:
        report.note(*tiered_notices(state.name, tiered, lso))
    elif state.load is not None and state.load.remote is not None:  # asked, and the local rule was used
        report.note(f"{state.name}: log-start-offset-checkpoint says {state.load.log_start_checkpoint}, below "
                       f"the first local segment {state.load.local_start}; log start {state.log_start_offset} "
                       f"(LogLoader without remote storage): {state.load.remote.why}")
    remote = tiered.remote if tiered is not None else None
    row = LagRow(
        topic=state.topic, partition=state.partition, log_start_offset=state.log_start_offset, lso=lso,
        high_watermark=hw, log_end_offset=state.log_end_offset, lag=hw - lso, open_transactions=len(opened),
        oldest_open_producer_id=opened[0].producer_id if opened else None,
        oldest_open_first_offset=opened[0].first_offset if opened else None,
        held_by_ghost=held and is_ghost(opened[0], state),
        local_log_start_offset=state.load.local_start if state.load is not None else state.log_start_offset,
        remote_storage=tiered.rule.code if tiered is not None else None,
        remote_segments=None if remote is None else list(remote.segments),
        remote_copied_offset=tiered.copied_offset if tiered is not None else None,
        upload_blocked_bytes=tiered.blocked_bytes if tiered is not None else None)
    return row, stand_in


def _high_watermarks(dirs: list[LogDir], report: Report) -> dict[Path, dict[tuple[str, int], int]]:
    """Each log dir's ``replication-offset-checkpoint`` ({} with a note in ``report`` when it does not read)."""
    hws: dict[Path, dict[tuple[str, int], int]] = {}
    for d in dirs:
        try:
            hws[d.path] = d.high_watermarks
        except ReadFailed:  # a checkpoint that could not be read is no answer (bytes that do not decode are)
            raise
        except KafkaTxError as err:
            report.note(f"{d.path}: replication-offset-checkpoint unreadable ({err}); using log end offsets")
            hws[d.path] = {}
    return hws


def _checkpointed_hw(hws: dict[Path, dict[tuple[str, int], int]], part: Partition) -> int | None:
    log_dir_path = part.log_dir.path if part.log_dir is not None else part.path.parent
    return hws.get(log_dir_path, {}).get(part.key)


class LagPart(Struct, frozen=True, kw_only=True):
    """lag's answer of one partition (``lag_row``): its row, whether the log end stood in for a missing high
    watermark, and the report of its replay and row."""

    row: LagRow
    stand_in: str | None  # the partition's name when its log end stood in for a missing high watermark
    report: Report


# The states of a transaction the coordinator still holds open (lag's holders)
OPEN_STATES = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


def held_producers(rows: Iterable[LagRow], *, everything: bool = True) -> set[int]:
    """The producers whose open transaction holds a partition of ``rows`` back: of every held partition for
    the human view (``everything``: it names the holder, its age and whether it is within its timeout), else
    only those held by a ghost (whose verdict the coordinator decides: :func:`no_coordinator_ghosts`)."""
    return {r.oldest_open_producer_id for r in rows if r.oldest_open_producer_id is not None
            and (r.held_by_ghost or (everything and (r.lag or 0) > 0))}


def no_coordinator_ghosts(rows: list[LagRow], holders: dict[int, TransactionRow]) -> list[LagRow]:
    """A partition held by a transaction that began below its log start is held by a ghost only when no
    coordinator transaction holds it (``coordinator.rules.coordinator_holds``): one still ``Ongoing`` or
    ``Prepare*`` there is find-hanging's timed-out/incomplete-markers wherever it began, and the coordinator
    ends it (``TransactionStateManager.timedOutTransactions``, the markers it writes), so lag says the same."""
    out = []
    for r in rows:
        holder = holders.get(r.oldest_open_producer_id) if r.held_by_ghost and r.oldest_open_producer_id is not None \
            else None
        if holder is not None and coordinator_holds(holder.state, holder.partitions, f"{r.topic}-{r.partition}"):
            r = replace(r, held_by_ghost=False)
        out.append(r)
    return out
