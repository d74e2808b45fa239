"""The ``table``/``text`` output of each command: a table (or panel) fitted to the width, then a summary.

One function per command, ``show_<command>(rows, fmt, ...)``, each taking its command's row type
(:mod:`kafkatx.rows`'s Structs; a path that hands cli.md's dicts of them is converted once on entry,
:func:`typed_rows`); the CLI calls it for ``table`` and ``text`` and :func:`kafkatx.render.emit` for
json/jsonl/yaml (which never see any of this).
``table`` draws lines, ``text`` the same columns aligned without lines. Under a finding the
summary says how many partitions are held back, the worst one and why, and the command to paste
(:mod:`kafkatx.render.descriptions` holds the wording, :mod:`kafkatx.render.human` the pieces).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

import msgspec
from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kafkatx.render import descriptions as d
from kafkatx.render.human import (
    NONE,
    Column,
    Rows,
    Severity,
    ago,
    by_severity,
    cell,
    colour_wanted,
    duration,
    output_console,
    print_view,
    size,
    styled,
    table,
    tp,
    wall_now_ms,
    when,
)
from kafkatx.render.plain import transactions
from kafkatx.rows import (
    UNTOUCHED_2PC_REASON,
    AbortPlanRow,
    HangingRow,
    LagRow,
    ProducerRow,
    ProducerRowWithExpiry,
    RowAction,
    RowResult,
    TransactionDescription,
    TransactionRow,
)

if TYPE_CHECKING:  # imported where a view needs it at run time: list-txn's table does not load the checks
    from kafkatx.checks.indexes import Problem
    from kafkatx.repair.apply import UndoResult

H = d.HEADERS


def _out(out: TextIO | None) -> TextIO:
    return sys.stdout if out is None else out


def _boxed(fmt: str) -> bool:
    return getattr(fmt, "value", fmt) == "table"


def _print(out: TextIO | None, width: int | None, body: RenderableType | None, summary: Sequence[str]) -> None:
    print_view(_out(out), body, summary, width=width, labels=d.LABEL_STYLES)


def _fit(out: TextIO | None, width: int | None, data: Rows, fmt: str, *, title: str | None = None,
         colour_keys: Sequence[str] = (), inset: int = 0) -> RenderableType:
    console = output_console(_out(out), width)
    return table(data, console.width - inset, title=title, boxed=_boxed(fmt), colour_keys=colour_keys,
                 ascii_only=not colour_wanted(_out(out)))


# An abort-hanging row is a find-hanging row plus what is done (AbortPlanRow's first ten fields are
# HangingRow's): the views that order and sum up hanging rows take either.
HangingLike = HangingRow | AbortPlanRow

_Row = TypeVar("_Row", bound=msgspec.Struct)
_Hanging = TypeVar("_Hanging", HangingRow, AbortPlanRow, HangingLike)


def typed_rows(rows: Sequence[_Row | Mapping[str, Any]], cls: type[_Row]) -> list[_Row]:
    """``rows`` as ``cls`` objects: a row already one as it is, a dict of cli.md's keys (what list-txn's
    JSON-shaped path hands, and verify's rows read back from JSON) converted once, here."""
    return [r if isinstance(r, cls) else msgspec.convert(r, cls) for r in rows]


# ----------------------------------------------------------------------------- lag

LAG_COLUMNS = (
    Column("partition", H["partition"], 0, shrink=True),
    Column("log_start_offset", H["log_start_offset"], 4, justify="right"),
    Column("lso", H["lso"], 0, justify="right"),
    Column("high_watermark", H["high_watermark"], 1, justify="right"),
    Column("log_end_offset", H["log_end_offset"], 3, justify="right"),
    Column("lag", H["lag"], 0, justify="right"),
    Column("open_transactions", H["open_transactions"], 2, justify="right"),
    Column("oldest_open", H["oldest_open"], 2),
    Column("held_by_ghost", H["held_by_ghost"], 1),
)


LAG_COLUMNS_TIERED = (*LAG_COLUMNS[:2], Column("local_log_start_offset", H["local_log_start_offset"], 4,
                                               justify="right"), *LAG_COLUMNS[2:])


def lag_severity(row: LagRow) -> Severity:
    if row.held_by_ghost:
        return Severity.CRITICAL
    if (row.lag or 0) > 0:
        return Severity.WARNING
    if (row.open_transactions or 0) > 0:
        return Severity.INFO
    return Severity.OK


def _holder_of(row: LagRow, holders: Mapping[int, TransactionRow]) -> TransactionRow | None:
    """The coordinator's open transaction (a list-txn row) of the producer holding ``row``'s partition back."""
    pid = row.oldest_open_producer_id
    return holders.get(pid) if pid is not None else None


def within_timeout(row: LagRow, holder: TransactionRow | None, now_ms: int) -> bool:
    """The partition is held by a transaction its coordinator still has ``Ongoing`` for it and that has not
    timed out (``TransactionStateManager.timedOutTransactions``: start + timeout < now): in flight, not
    hanging; the coordinator aborts it itself once the timeout passes."""
    from kafkatx.coordinator.rules import is_timed_out

    return (holder is not None and holder.state == "Ongoing"
            and tp(row.topic, row.partition) in (holder.partitions or ())
            and not is_timed_out(holder.start_timestamp_ms, holder.timeout_ms or 0, now_ms))


def show_lag(rows: Sequence[LagRow], fmt: str, inv: d.Invocation, *, out: TextIO | None = None,
             width: int | None = None, now_ms: int | None = None, holders: Mapping[int, TransactionRow] | None = None) -> None:
    """``kafkatx lag``: partitions worst first (ghost-held, then by lag); the summary names the worst.

    ``holders``: the coordinator's open transaction of each producer holding a partition back (by producer
    id): the ``oldest open`` cell then names its id and age, and a partition held by one still within its
    timeout is said to be in flight, with the command that shows it."""
    holders = holders or {}
    now = now_ms if now_ms is not None else wall_now_ms()
    ordered = by_severity(rows, lag_severity, lambda r: -(r.lag or 0),
                          lambda r: (r.topic, r.partition))
    # the local log start (UnifiedLog.localLogStartOffset) is a column of its own only where a tiered partition
    # has one apart from its log start (KIP-405: the offsets between them are in the remote tier)
    tiered = any(r.local_log_start_offset not in (None, r.log_start_offset) for r in rows)
    data = Rows(LAG_COLUMNS_TIERED if tiered else LAG_COLUMNS)
    for r in ordered:
        pid, first = r.oldest_open_producer_id, r.oldest_open_first_offset
        oldest = NONE if pid is None else f"{pid} from {first}" if first is not None else str(pid)
        owner = _holder_of(r, holders)
        if owner is not None:
            start = owner.start_timestamp_ms
            oldest = f"{owner.transactional_id} {duration(now - start) if start is not None else ''}".strip()
        ghost = r.held_by_ghost
        data.add({"partition": tp(r.topic, r.partition),
                  "log_start_offset": r.log_start_offset,
                  "local_log_start_offset": r.local_log_start_offset, "lso": r.lso,
                  "high_watermark": r.high_watermark, "log_end_offset": r.log_end_offset,
                  "lag": r.lag, "open_transactions": r.open_transactions,
                  "oldest_open": oldest, "held_by_ghost": "GHOST" if ghost else (NONE if ghost is None else "")},
                 lag_severity(r))
    held = [r for r in ordered if (r.lag or 0) > 0 or r.held_by_ghost]
    worst = held[0] if held else None
    holder: str | None = None
    if worst is not None and worst.oldest_open_producer_id is not None:
        holder = (f"producer {worst.oldest_open_producer_id}'s open transaction "
                  f"(from offset {worst.oldest_open_first_offset})")
    in_flight: dict[str, TransactionRow] = {}
    for r in held:
        if (owner := _holder_of(r, holders)) is not None and within_timeout(r, owner, now):
            in_flight[owner.transactional_id] = owner
    if worst is not None and (h := _holder_of(worst, holders)) is not None:
        start = h.start_timestamp_ms
        holder = (f"{h.transactional_id} (producer {h.producer_id}), {h.state}"
                  + (f" for {duration(now - start)}" if start is not None else ""))
    summary = d.lag_summary(len(held), len(rows), sum(r.lag or 0 for r in rows),
                            tp(worst.topic, worst.partition) if worst else None,
                            worst.lag if worst else None, holder,
                            bool(worst is not None and worst.held_by_ghost), inv,
                            in_flight=[(tid, h.timeout_ms, h.start_timestamp_ms)
                                       for tid, h in in_flight.items()],
                            all_in_flight=bool(held) and all(within_timeout(r, _holder_of(r, holders), now)
                                                             for r in held),
                            now_ms=now)
    summary = _upload_blocked(ordered, summary)
    _print(out, width, _fit(out, width, data, fmt, colour_keys=("partition", "lag", "held_by_ghost")), summary)


# ----------------------------------------------------------------------------- find-hanging

KIND_SEVERITY = {"ghost": Severity.CRITICAL, "orphaned": Severity.CRITICAL, "incomplete-markers": Severity.ERROR,
                 "timed-out": Severity.ERROR, "requested": Severity.WARNING, "prepared-2pc": Severity.WARNING}

HANGING_COLUMNS = (
    Column("kind", H["kind"], 0),
    Column("partition", H["partition"], 0, shrink=True),
    Column("producer_id", H["producer_id"], 2, justify="right"),
    Column("producer_epoch", H["producer_epoch"], 6, justify="right"),
    Column("transactional_id", H["transactional_id"], 1, shrink=True),
    Column("coordinator_state", H["coordinator_state"], 4),
    Column("first_offset", H["first_offset"], 5, justify="right"),
    Column("start_ms", H["start_ms"], 3),
    Column("duration_ms", H["duration_ms"], 0, justify="right"),
)


def hanging_severity(row: HangingLike) -> Severity:
    return KIND_SEVERITY.get(row.kind, Severity.WARNING)


def _held_for(row: HangingLike) -> float:
    ms = row.duration_ms
    return float("inf") if ms is None else float(ms)  # a ghost began before anything still on disk


def _hanging_cells(r: HangingRow, now_ms: int) -> dict[str, Any]:
    return {"kind": r.kind, "partition": tp(r.topic, r.partition),
            "producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
            "transactional_id": r.transactional_id, "coordinator_state": r.coordinator_state,
            "first_offset": r.first_offset,
            "start_ms": d.since_text(r.start_ms, now_ms, ghost=r.kind == "ghost"),
            "duration_ms": duration(r.duration_ms)}


def order_hanging(rows: Sequence[_Hanging]) -> list[_Hanging]:
    """Worst first: by kind severity, then held longest, then partition."""
    return by_severity(rows, hanging_severity, lambda r: -_held_for(r),
                       lambda r: (r.topic or "", r.partition or 0, r.producer_id or 0))


def show_hanging(rows: Sequence[HangingRow], fmt: str, inv: d.Invocation, now_ms: int, *, out: TextIO | None = None,
                 width: int | None = None) -> None:
    """``kafkatx find-hanging``: the rows worst first, then how many partitions, the worst and its fix."""
    ordered = order_hanging(rows)
    data = Rows(HANGING_COLUMNS)
    for r in ordered:
        data.add(_hanging_cells(r, now_ms), hanging_severity(r))
    summary = hanging_summary_lines(ordered, inv, now_ms)
    _print(out, width, _fit(out, width, data, fmt, colour_keys=("kind", "partition", "duration_ms")), summary)


def blocked_lines(rows: Sequence[HangingLike]) -> list[str]:
    """For each row about a ``__consumer_offsets`` partition, the consumer groups it blocks (find-hanging,
    abort-hanging: the rows' ``blocked_groups``)."""
    lines: list[str] = []
    for r in rows:
        groups = r.blocked_groups
        if groups:
            tid = r.transactional_id
            where = (f"{tp(r.topic, r.partition)}, producer {r.producer_id}"
                     + (f" ({tid})" if tid else ""))
            lines += d.blocked_group_lines(where, groups)
    return lines


def hanging_summary_lines(rows: Sequence[HangingRow], inv: d.Invocation, now_ms: int) -> list[str]:
    """find-hanging's summary under its table: how many, the worst and the command of its repair (also
    the timeline page's next step, so both tell the same story), then the consumer groups the rows on
    ``__consumer_offsets`` block. Empty for no rows."""
    ordered = order_hanging(rows)
    if not ordered:
        return []
    w = ordered[0]
    partitions = {(r.topic, r.partition) for r in ordered}
    tid = w.transactional_id  # the id selects it; without one, partition and producer do
    selection = (d.abort_selection([tid]) if tid else
                 d.abort_selection((), w.topic, w.partition, w.producer_id))
    lines = d.hanging_summary(transactions(ordered), len(partitions), tp(w.topic, w.partition),
                              w.start_ms, now_ms, w.producer_id,
                              w.transactional_id, w.kind, w.coordinator_state,
                              selection, inv)
    return _upload_blocked(ordered, lines[:1] + blocked_lines(ordered) + lines[1:])


def _upload_blocked(rows: Sequence[HangingRow | LagRow], lines: list[str]) -> list[str]:
    """``lines`` with, before its next step, one line per tiered partition whose local segments an open
    transaction keeps from the remote tier (KIP-405; the rows' ``upload_blocked_bytes``)."""
    seen: dict[str, tuple[int, int | None]] = {}
    for r in rows:
        blocked = r.upload_blocked_bytes
        if blocked is not None:
            seen.setdefault(tp(r.topic, r.partition), (blocked, r.remote_copied_offset))
    if not seen:
        return lines
    extra = [d.upload_blocked_line(name, blocked, copied) for name, (blocked, copied) in seen.items()]
    at = next((i for i, line in enumerate(lines) if line.startswith(d.NEXT)), len(lines))
    return [*lines[:at], *extra, *lines[at:]]


# ----------------------------------------------------------------------------- list-txn

STATE_SEVERITY = {"Ongoing": Severity.INFO, "PrepareCommit": Severity.WARNING, "PrepareAbort": Severity.WARNING,
                  "PrepareEpochFence": Severity.WARNING, "CompleteCommit": Severity.OK,
                  "CompleteAbort": Severity.OK, "Empty": Severity.MUTED, "Dead": Severity.MUTED}


def late(row: TransactionRow, now_ms: int) -> bool:
    """An Ongoing transaction older than its own timeout (the coordinator should have aborted it)."""
    start = row.start_timestamp_ms
    return (row.state == "Ongoing" and start is not None and start >= 0
            and now_ms - start > (row.timeout_ms or 0))


def txn_severity(row: TransactionRow, now_ms: int) -> Severity:
    if late(row, now_ms):
        return Severity.ERROR
    return STATE_SEVERITY.get(row.state, Severity.INFO)


def _state_cell(row: TransactionRow, now_ms: int) -> str:
    return f"{row.state} (late)" if late(row, now_ms) else str(row.state)


def list_columns(online: bool) -> tuple[Column, ...]:
    return (
        Column("transactional_id", H["transactional_id"], 0, shrink=True),
        Column("state", H["state"], 0),
        Column("producer_id", H["producer_id"], 3, justify="right"),
        Column("producer_epoch", H["producer_epoch"], 6, justify="right"),
        Column("timeout_ms", H["timeout_ms"], 4, justify="right"),
        Column("start_timestamp_ms", H["start_timestamp_ms"], 2),
        Column("last_update_timestamp_ms", H["last_update_timestamp_ms"], 5, justify="right"),
        Column("partitions", H["partitions"], 1, shrink=True),
        Column("coordinator_id", H["coordinator_id"], 7, justify="right") if online else
        Column("coordinator_partition", H["coordinator_partition"], 7, justify="right"),
    )


def _txn_cells(r: TransactionRow, now_ms: int) -> dict[str, Any]:
    return {"transactional_id": r.transactional_id, "state": _state_cell(r, now_ms),
            "producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
            "timeout_ms": duration(r.timeout_ms),
            "start_timestamp_ms": when(_valid_ms(r.start_timestamp_ms), now_ms),
            "last_update_timestamp_ms": ago(_valid_ms(r.last_update_timestamp_ms), now_ms),
            "partitions": cell(r.partitions),
            "coordinator_partition": r.coordinator_partition, "coordinator_id": r.coordinator_id}


def _valid_ms(ms: int | None) -> int | None:
    return None if ms is None or ms < 0 else ms  # -1: Kafka's "no timestamp"


def show_list(rows: Sequence[TransactionRow | Mapping[str, Any]], fmt: str, inv: d.Invocation, now_ms: int, *, online: bool = False,
              out: TextIO | None = None, width: int | None = None) -> None:
    """``kafkatx list-txn``: late and undecided transactions first, then by id. ``rows``: TransactionRow
    objects, or cli.md's dicts of them (the CLI's JSON-shaped rows), converted once here."""
    rows = typed_rows(rows, TransactionRow)
    ordered = by_severity(rows, lambda r: txn_severity(r, now_ms), lambda r: r.transactional_id)
    data = Rows(list_columns(online))
    for r in ordered:
        data.add(_txn_cells(r, now_ms), txn_severity(r, now_ms))
    summary = d.list_summary(len(rows), sum(1 for r in rows if r.state == "Ongoing"),
                             sum(1 for r in rows if late(r, now_ms)),
                             sum(1 for r in rows if str(r.state).startswith("Prepare")), inv)
    _print(out, width, _fit(out, width, data, fmt, colour_keys=("transactional_id", "state")), summary)


# ----------------------------------------------------------------------------- describe-txn

def _panel(body: RenderableType, title: str, fmt: str, severity: Severity, out: TextIO | None) -> RenderableType:
    if _boxed(fmt):
        ascii_only = not colour_wanted(_out(out))
        return Panel(body, title=Text(title, style=severity.style), title_align="left", expand=False,
                     box=box.ASCII if ascii_only else box.ROUNDED, safe_box=False)
    return Group(Text(title, style=severity.style), body)


def _facts(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in pairs:
        grid.add_row(label, value if isinstance(value, Text) else Text(cell(value)))
    return grid


HISTORY_COLUMNS = (
    Column("offset", H["offset"], 0, justify="right"),
    Column("state", H["state"], 0),
    Column("producer", H["producer_id"], 2),
    Column("partitions", H["partitions"], 1, shrink=True),
    Column("at", "at", 3),
)

STATUS_COLUMNS = (
    Column("partition", H["partition"], 0, shrink=True),
    Column("status", H["status"], 0),
)


def show_description(desc: TransactionDescription, fmt: str, inv: d.Invocation, now_ms: int, *, online: bool = False,
                     out: TextIO | None = None, width: int | None = None) -> None:
    """``kafkatx describe-txn``: a panel with the state, epoch, timeout and age, the partitions and
    their status, and the history as a compact table."""
    txn = desc.transaction
    sev = txn_severity(txn, now_ms)
    start = _valid_ms(txn.start_timestamp_ms)
    facts: list[tuple[str, Any]] = [
        ("state", styled(_state_cell(txn, now_ms), sev)),
        ("producer", f"{txn.producer_id}, epoch {txn.producer_epoch}"),
        ("timeout", duration(txn.timeout_ms)),
        ("started", when(start, now_ms)),
        ("updated", when(_valid_ms(txn.last_update_timestamp_ms), now_ms)),
    ]
    if txn.state == "Ongoing" and start is not None:
        facts.append(("open for", duration(now_ms - start)))
    facts.append(("coordinator", f"broker {txn.coordinator_id}" if online else
                  f"__transaction_state-{txn.coordinator_partition}" if txn.coordinator_partition is not None
                  else NONE))
    if not desc.partition_status:
        facts.append(("partitions", cell(txn.partitions)))
    console = output_console(_out(out), width)
    inner = console.width - (4 if _boxed(fmt) else 0)
    ascii_only = not colour_wanted(_out(out))
    parts: list[RenderableType] = [_facts(facts)]
    if desc.partition_status:
        status = Rows(STATUS_COLUMNS)
        for p in sorted(desc.partition_status, key=lambda p: (not p.open, p.partition)):
            text = f"open since offset {p.first_offset}" if p.open else "closed (marker written)"
            status.add({"partition": p.partition, "status": text}, Severity.WARNING if p.open else Severity.OK)
        parts += [Text(""), table(status, inner, title="partitions", boxed=_boxed(fmt),
                                  colour_keys=("partition", "status"), ascii_only=ascii_only)]
    if desc.history:
        hist = Rows(HISTORY_COLUMNS)
        for h in desc.history:
            state = h.state if h.state is not None else "tombstone"
            hist.add({"offset": h.offset, "state": state,
                      "producer": NONE if h.producer_id is None else f"{h.producer_id}/{h.producer_epoch}",
                      "partitions": cell(h.partitions), "at": when(_valid_ms(h.last_update_timestamp_ms), now_ms)},
                     STATE_SEVERITY.get(state, Severity.MUTED))
        parts += [Text(""), table(hist, inner, title="history", boxed=_boxed(fmt), colour_keys=("state",),
                                  ascii_only=ascii_only)]
    opened = desc.open_partitions
    current = {p.partition for p in desc.partition_status if p.open}
    elsewhere = [o for o in opened if o.partition not in current]  # the partitions table shows the rest
    if elsewhere:
        # One story: where a producer of this id holds a transaction open, with find-hanging's kind.
        held = Rows(STATUS_COLUMNS)
        for o in elsewhere:
            text = f"{o.kind or 'open'} since offset {o.first_offset} (producer {o.producer_id}/{o.producer_epoch})"
            held.add({"partition": o.partition, "status": text},
                     Severity.CRITICAL if o.kind is not None else Severity.WARNING)
        parts += [Text(""), table(held, inner, title="held open by this id's producers", boxed=_boxed(fmt),
                                  colour_keys=("partition", "status"), ascii_only=ascii_only)]
    open_count = len({p.partition for p in desc.partition_status if p.open} | {o.partition for o in opened})
    hanging_kinds = sorted({o.kind for o in opened if o.kind is not None})
    summary = d.describe_summary(txn.transactional_id, open_count, late(txn, now_ms),
                                 str(txn.state).startswith("Prepare"), inv, hanging_kinds=hanging_kinds)
    blocked = [line for o in opened for line in d.blocked_group_lines(o.partition, o.blocked_groups)]
    summary = summary[:1] + blocked + summary[1:]
    _print(out, width, _panel(Group(*parts), f"transaction {txn.transactional_id}", fmt, sev, out), summary)


# ----------------------------------------------------------------------------- describe-producers

PRODUCER_COLUMNS = (
    Column("producer_id", H["producer_id"], 0, justify="right"),
    Column("producer_epoch", H["producer_epoch"], 2, justify="right"),
    Column("coordinator_epoch", H["coordinator_epoch"], 5, justify="right"),
    Column("last_sequence", H["last_sequence"], 4, justify="right"),
    Column("last_timestamp_ms", H["last_timestamp_ms"], 3),
    Column("current_txn_first_offset", H["current_txn_first_offset"], 0, justify="right"),
    Column("ghost", H["ghost"], 1),
    Column("expired", H["expired"], 1),
)


def _expired(row: ProducerRow) -> bool:
    """``--include-expired``'s verdict (a plain :class:`ProducerRow` is never expired)."""
    return isinstance(row, ProducerRowWithExpiry) and row.expired


def producer_severity(row: ProducerRow) -> Severity:
    if row.ghost:
        return Severity.CRITICAL
    if _expired(row):
        return Severity.MUTED
    if row.current_txn_first_offset is not None:
        return Severity.WARNING
    return Severity.OK


def _kafka_optional(value: Any) -> Any:
    """A cell as ``kafka-transactions.sh describe-producers`` prints it (TransactionsCommand's
    DescribeProducersCommand): an absent CurrentTransactionStartOffset (no open transaction, -1 on
    the wire) is ``None``; the coordinator epoch is printed as the wire has it (-1 when unknown)."""
    return "None" if value is None else value


def show_producers(rows: Sequence[ProducerRow], fmt: str, inv: d.Invocation, now_ms: int, *, topic: str, partition: int,
                   out: TextIO | None = None, width: int | None = None) -> None:
    """``kafkatx describe-producers``: a panel per partition, open transactions and ghosts first."""
    ordered = by_severity(rows, producer_severity, lambda r: r.producer_id)
    data = Rows(PRODUCER_COLUMNS)
    for r in ordered:
        data.add({"producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
                  "coordinator_epoch": r.coordinator_epoch, "last_sequence": r.last_sequence,
                  "last_timestamp_ms": when(_valid_ms(r.last_timestamp_ms), now_ms),
                  "current_txn_first_offset": _kafka_optional(r.current_txn_first_offset),
                  "ghost": "GHOST" if r.ghost else "", "expired": "expired" if _expired(r) else ""},
                 producer_severity(r))
    console = output_console(_out(out), width)
    body = table(data, console.width - (4 if _boxed(fmt) else 0), boxed=_boxed(fmt),
                 colour_keys=("producer_id", "current_txn_first_offset", "ghost"),
                 ascii_only=not colour_wanted(_out(out)))
    name = tp(topic, partition)
    summary = d.producers_summary(name, len(rows),
                                  sum(1 for r in rows if r.current_txn_first_offset is not None),
                                  sum(1 for r in rows if r.ghost), sum(1 for r in rows if _expired(r)),
                                  inv)
    worst = producer_severity(ordered[0]) if ordered else Severity.OK
    _print(out, width, _panel(body, f"producers of {name}", fmt, worst, out), summary)


# ----------------------------------------------------------------------------- verify

SEVERITY_OF = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}

VERIFY_COLUMNS = (
    Column("severity", H["severity"], 0),
    Column("check", H["check"], 2),
    Column("where", H["where"], 1, fill=True, min_width=24, cut_left=True),
    Column("message", H["message"], 0, fill=True, min_width=36),
)

DUMP_COMMAND = {".log": "dump-segment", ".index": "dump-index", ".timeindex": "dump-index",
                ".snapshot": "dump-snapshot", ".txnindex": "dump-txnindex"}


def short_path(path: str | None, keep: int = 2) -> str:
    """The last ``keep`` parts of a path (``orders-0/00000000000000000000.log``)."""
    if not path:
        return NONE
    parts = PurePath(path).parts
    return "/".join(parts[-keep:])


# The files a log dir keeps beside its partition folders (Kafka's LogManager: the checkpoint files and
# the clean-shutdown marker).
LOG_DIR_FILES = frozenset({"replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                           "log-start-offset-checkpoint", "cleaner-offset-checkpoint", ".kafka_cleanshutdown",
                           "meta.properties"})


def file_in_log_dir(path: str | None) -> str:
    """A file a repair changes, as the log dir knows it: ``orders-0/00000000000000000000.log`` in a partition
    folder, ``replication-offset-checkpoint`` at the log dir's top (never the log dir's own name)."""
    if not path:
        return NONE
    p = PurePath(path)
    top = p.name in LOG_DIR_FILES or not p.parent.name.rpartition("-")[2].isdigit()
    return p.name if top else f"{p.parent.name}/{p.name}"


def _where(row: Problem) -> str:
    where = short_path(row.file) if row.file else (row.partition or NONE)
    pos = row.position
    return f"{where}@{pos}" if pos is not None else str(where)


def _message(row: Problem) -> str:
    """The message without the file or partition it starts with (the ``where`` column shows it)."""
    text = " ".join(str(row.message).split())
    for prefix in (row.file, row.partition):
        if prefix and text.startswith(f"{prefix}: "):
            text = text[len(prefix) + 2:]
    return text


GROUP_NOTES_OVER = 3  # more startup notes of one kind than this are one row with their count


# What each kind of startup note says, without its file's details (the grouped row's message)
STARTUP_NOTES = {
    "startup-rebuild-index": "index preallocated (a crash left it); rebuilt at startup",
    "startup-recover-segment": "recovered at startup (the broker did not shut down cleanly)",
    "startup-truncate-segment": "recovery truncates the segment's invalid tail",
    "startup-delete-segment": "deleted at startup",
    "startup-delete-snapshot": "producer snapshot deleted at startup",
}


def show_verify(rows: Sequence[Problem | Mapping[str, Any]], fmt: str, *, out: TextIO | None = None, width: int | None = None,
                hidden: int = 0) -> None:
    """``kafkatx verify``: errors first, then warnings, then the startup notes (one row per kind past
    GROUP_NOTES_OVER). ``hidden``: the startup notes ``--severity`` left out (counted in the summary)."""
    from kafkatx.checks.indexes import Problem

    rows = typed_rows(rows, Problem)  # verify's rows, or cli.md's dicts of them

    def sev(r: Problem) -> Severity:
        return SEVERITY_OF.get(r.severity, Severity.WARNING)

    ordered = by_severity(rows, sev, lambda r: (r.file or "", r.position or 0))
    data = Rows(VERIFY_COLUMNS)
    for r in ordered:
        if r.severity != "info":
            data.add({"severity": r.severity, "check": r.check, "where": _where(r),
                      "message": _message(r)}, sev(r))
    # Startup notes (what the broker itself does when it starts: a crashed broker leaves hundreds)
    # are one row per kind with its count past GROUP_NOTES_OVER; --format json keeps one row per file.
    def kind(r: Problem) -> tuple[str, str]:  # the check, and what its note says without this file's details
        return r.check, STARTUP_NOTES.get(r.check) or _message(r).split(" (", 1)[0].split(": ", 1)[0]

    infos = [r for r in ordered if r.severity == "info"]
    sizes: dict[tuple[str, str], int] = {}
    for r in infos:
        sizes[kind(r)] = sizes.get(kind(r), 0) + 1
    grouped: set[tuple[str, str]] = set()
    for r in infos:
        k = kind(r)
        if sizes[k] <= GROUP_NOTES_OVER:
            data.add({"severity": "info", "check": k[0], "where": _where(r), "message": _message(r)},
                     Severity.INFO)
        elif k not in grouped:  # the kind's first row stands for all of them, and none is listed again
            data.add({"severity": "info", "check": k[0], "where": f"{sizes[k]} files", "message": k[1]},
                     Severity.INFO)
            grouped.add(k)
    problems = [r for r in ordered if r.severity != "info"]
    worst = problems[0] if problems else None
    dump = None
    missing = False
    if worst is not None and worst.file:
        file = Path(worst.file)
        if not file.exists():
            # A missing .txnindex/.index/.timeindex: show the segment it belongs to (what recovery
            # rebuilds it from), never a command on a file that is not there.
            missing, file = True, file.with_suffix(".log")
        command = DUMP_COMMAND.get(file.suffix) if file.exists() else None
        if command:
            args = ["--deep-iteration"] if command == "dump-segment" else []
            dump = d.Invocation().command(command, str(file), *args)
    summary = d.verify_summary(sum(1 for r in rows if r.severity == "error"),
                               sum(1 for r in rows if r.severity == "warning"),
                               sum(1 for r in rows if r.severity == "info") + hidden,
                               len({r.file for r in problems}),
                               _where(worst) if worst is not None else None,
                               _message(worst) if worst is not None else None, dump, missing=missing,
                               hidden=hidden)
    _print(out, width, _listing(out, width, data) if data.rows else None, summary)


def _listing(out: TextIO | None, width: int | None, data: Rows) -> RenderableType:
    """verify's rows as a list: ``severity  check  where`` on one line, the message under it wrapped between
    words to the width (a table would cut it), indented so the next row's head stands out."""
    import textwrap

    room = max(output_console(_out(out), width).width - len(LISTING_INDENT), 20)
    lines: list[Text] = []
    for cells, severity in data.rows:
        head = Text(no_wrap=True, overflow="fold")
        head.append(f"{cells['severity']:<7}", style=severity.style)
        head.append(f" {cells['check']}  {cells['where']}")
        lines.append(head)
        for part in textwrap.wrap(str(cells["message"]), room, break_long_words=False, break_on_hyphens=False):
            lines.append(Text(LISTING_INDENT + part, no_wrap=True, overflow="fold"))
    return Group(*lines)


LISTING_INDENT = " " * 8


# ----------------------------------------------------------------------------- abort-hanging

ABORT_COLUMNS = (
    Column("kind", H["kind"], 2),
    Column("partition", H["partition"], 0, shrink=True),
    Column("producer_id", H["producer_id"], 3, justify="right"),
    Column("transactional_id", H["transactional_id"], 1, shrink=True),
    Column("first_offset", H["first_offset"], 5, justify="right"),
    Column("action", H["action"], 0, shrink=True, min_width=18),
    Column("marker", H["marker"], 4),
    Column("result", H["result"], 1, fill=True),
)


def _marker(r: AbortPlanRow) -> str:
    kind, offset, epoch = r.control_type, r.marker_offset, r.marker_epoch
    if kind is None and offset is None:
        return NONE
    text = kind or "marker"
    if offset is not None:
        text += f" @{offset}"
    if epoch is not None:
        text += f" e{epoch}"
    return text


PLAN_FILE_COLUMNS = (
    Column("op", "op", 0),
    Column("path", "file it will change", 0, fill=True, cut_left=True),
)
APPLIED_FILE_COLUMNS = (PLAN_FILE_COLUMNS[0], Column("path", "file changed", 0, fill=True, cut_left=True))


def _fence_timeout_lines(rows: Sequence[AbortPlanRow]) -> list[str]:
    """One line per fenced id: the transaction timeout its InitProducerId sends, which the id keeps."""
    lines: dict[str, str] = {}
    for r in rows:
        ms = r.transaction_timeout_ms
        tid = r.transactional_id
        if r.state is not RowAction.FENCE_EPOCH or ms is None or tid is None or tid in lines:
            continue
        whose = "its own" if r.coordinator_state is not None else \
            "the producer default: its own is unknown without DescribeTransactions"
        lines[tid] = f"Fence of {tid}: InitProducerId with transaction.timeout.ms {ms} ({whose}), which the id keeps."
    return list(lines.values())


def show_abort(rows: Sequence[AbortPlanRow], fmt: str, inv: d.Invocation, *, title: str | None = None,
               operations: int | None = None, execute_command: str | None = None, applied: bool = False,
               journal: str | None = None, out: TextIO | None = None, width: int | None = None,
               files: Sequence[tuple[str, str]] = (), waiting: Sequence[HangingRow] = (), now_ms: int | None = None,
               force_command: str | None = None) -> None:
    """``kafkatx abort-hanging``: the plan (or what was done), every file it changes (``files``: (op, path)
    for each operation: create, append, replace or move to the journal's backup), then how to apply (or
    undo) it."""
    def sev(r: AbortPlanRow) -> Severity:
        if r.refused:
            return Severity.CRITICAL
        if r.outcome is not None:
            return Severity.OK if r.outcome is RowResult.OK else Severity.ERROR
        return hanging_severity(r)

    ordered = order_hanging(rows) if not applied else list(rows)
    data = Rows(ABORT_COLUMNS)
    for r in ordered:
        action = r.action
        data.add({"kind": r.kind, "partition": tp(r.topic, r.partition),
                  "producer_id": r.producer_id, "transactional_id": r.transactional_id,
                  "first_offset": r.first_offset, "action": d.ACTIONS.get(action, action),
                  "marker": _marker(r), "result": r.result or ""}, sev(r))
    refusals = [r.action for r in rows if r.refused]  # each said in full: "refused: <reason>"
    failures = [RowResult.FAILED.text(r.failure) for r in rows if r.failure is not None]
    problems = refusals or failures
    untouched = [r for r in rows if r.untouched]
    acted = len(rows) - len(untouched)
    summary = d.abort_summary(acted, operations, len(refusals), execute_command, applied, len(failures), inv,
                              journal, problems[0] if problems else None,
                              txns=transactions(r for r in rows if not r.untouched))
    summary = summary[:1] + blocked_lines(ordered) + summary[1:]
    if untouched and not refusals:
        two_pc = [r for r in untouched if r.reason == UNTOUCHED_2PC_REASON]
        undecided = [r for r in untouched if r not in two_pc]
        left = []
        if two_pc:
            ids = sorted({str(r.transactional_id) for r in two_pc})
            left.append(f"Left untouched ({len(two_pc)} row(s)): prepared two-phase-commit transaction(s) "
                        f"{', '.join(ids)}, held open by an external transaction manager; --force-terminate ID "
                        "aborts one.")
        if undecided:
            left.append(f"Left untouched ({len(undecided)} row(s)): orphans whose outcome neither the "
                        "__transaction_state history nor their other partitions' markers show; the line on "
                        "stderr names the --decision command for each.")
        summary = left + (summary if acted else [])
    summary = _fence_timeout_lines(ordered) + summary
    # An orphan completed with COMMIT (or by --decision) says whose decision it follows.
    summary = [f"{d.WHY} {r.why}." for r in ordered
               if r.why and (r.state is RowAction.WRITE_COMMIT_MARKER or "--decision" in r.why)
               ] + summary
    if waiting and not acted:  # the selection holds open transactions, none hanging yet: say why, how to go on
        now = now_ms if now_ms is not None else wall_now_ms()
        summary = d.in_timeout_lines([(r.transactional_id, r.producer_id, r.kind,
                                       tp(r.topic, r.partition), r.first_offset,
                                       r.start_ms) for r in waiting], now, force_command)
    body = _fit(out, width, data, fmt, title=title, colour_keys=("partition", "action", "result")) if rows else None
    if body is None and title and not (waiting and not acted):
        summary = [title] + summary
    if body is not None and files:
        changes = Rows(APPLIED_FILE_COLUMNS if applied else PLAN_FILE_COLUMNS)
        for op, path in files:
            changes.add({"op": op, "path": file_in_log_dir(path)}, Severity.INFO)
        body = Group(body, Text(""), _fit(out, width, changes, fmt))
    _print(out, width, body, summary)


# ----------------------------------------------------------------------------- undo

UNDO_COLUMNS = (
    Column("action", H["action"], 0),
    Column("op", H["op"], 3),
    Column("path", H["path"], 0, fill=True, cut_left=True),
    Column("sizes", H["sizes"], 1, justify="right"),
    Column("verified", H["verified"], 1),
)


def show_undo(result: UndoResult, fmt: str, *, journal: str | None = None, out: TextIO | None = None,
              width: int | None = None) -> None:
    """``kafkatx undo``: per file what is (or would be) done, then how to really do it.

    ``journal``: the journal path as the user gave it (default: the resolved one)."""
    shown = journal if journal is not None else str(result.journal_path)
    dry = bool(result.dry_run)
    data = Rows(UNDO_COLUMNS)
    for r in result.rows:
        verified = r.verified
        sev = Severity.INFO if verified is None else Severity.OK if verified else Severity.ERROR
        data.add({"action": d.UNDO_ACTIONS.get(r.action, r.action), "op": r.op, "path": file_in_log_dir(r.path),
                  "sizes": f"{cell(r.size_before_undo)} -> {cell(r.size_after_undo)}",
                  "verified": cell(verified)}, sev)
    title = f"{'would undo' if dry else 'undone'} from {shown}"
    done = [r for r in result.rows if r.action != "nothing"]  # "nothing": the file already is as before
    summary = d.undo_summary(len(done), dry, sum(1 for r in done if r.verified), shown,
                             already=bool(result.rows) and not done)
    if result.rows and not done:
        _print(out, width, None, summary)
        return
    _print(out, width, _fit(out, width, data, fmt, title=title, colour_keys=("action", "verified")), summary)


# ----------------------------------------------------------------------------- scan

class ScanFacts(Protocol):
    """What the scan summary panel reads (``kafkatx.spark.job.ScanSummary``, a room above this one)."""

    @property
    def output(self) -> str: ...

    @property
    def log_dirs(self) -> list[str]: ...

    @property
    def segments(self) -> int: ...

    @property
    def bytes(self) -> int: ...

    @property
    def batches(self) -> int: ...

    @property
    def crc_errors(self) -> int: ...

    @property
    def decode_errors(self) -> int: ...

    @property
    def partitions(self) -> int: ...

    @property
    def partitions_with_lag(self) -> int: ...

    @property
    def transactions_commit(self) -> int: ...

    @property
    def transactions_abort(self) -> int: ...

    @property
    def transactions_open(self) -> int: ...

    @property
    def hanging(self) -> int: ...

    @property
    def skipped_partitions(self) -> int: ...

    @property
    def wall_time_ms(self) -> int: ...


def show_scan(summary: ScanFacts, fmt: str, inv: d.Invocation, *, out: TextIO | None = None,
              width: int | None = None) -> None:
    """``kafkatx scan``: the summary as a panel of facts, then what to look at next."""
    s = summary
    bad = Severity.ERROR if (s.crc_errors or s.decode_errors) else Severity.OK
    facts: list[tuple[str, Any]] = [
        ("output", s.output),
        ("log dirs", ", ".join(s.log_dirs)),
        ("read", f"{s.segments} segments, {size(s.bytes)}, {s.batches} batches"),
        ("corrupt", styled(f"{s.crc_errors} CRC errors, {s.decode_errors} decode errors", bad)),
        ("partitions", f"{s.partitions}, {s.partitions_with_lag} with LSO lag"
                       + (f", {s.skipped_partitions} skipped" if s.skipped_partitions else "")),
        ("transactions", f"{s.transactions_commit} committed, {s.transactions_abort} aborted, "
                         f"{s.transactions_open} open"),
        ("hanging", styled(str(s.hanging), Severity.CRITICAL if s.hanging else Severity.OK)),
        ("took", duration(s.wall_time_ms)),
    ]
    worst = max(bad, Severity.CRITICAL if s.hanging else Severity.OK)
    _print(out, width, _panel(_facts(facts), "scan", fmt, worst, out),
           d.scan_summary(s.hanging, s.crc_errors, s.decode_errors, inv))
