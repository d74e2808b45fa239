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
from pathlib import PurePath
from typing import Any, Protocol, TextIO, TypeVar

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
    size,
    styled,
    table,
    tp,
    wall_now_ms,
    when,
)
from kafkatx.render.plain import transactions
from kafkatx.render.printing import print_view
from kafkatx.rows import (
    AbortPlanRow,
    HangingRow,
    LagRow,
    TransactionRow,
)

H = d.HEADERS


# The pieces every command's view is built of (here and in the views of describe_views, verify_views and
# repair_views).

def view_stream(out: TextIO | None) -> TextIO:
    """Where a view prints: ``out``, else standard output."""
    return sys.stdout if out is None else out


def boxed(fmt: str) -> bool:
    """``table`` draws lines; ``text`` aligns the same columns without them."""
    return getattr(fmt, "value", fmt) == "table"


def print_body(out: TextIO | None, width: int | None, body: RenderableType | None, summary: Sequence[str]) -> None:
    """A view's table (or panel) then its summary lines."""
    print_view(view_stream(out), body, summary, width=width, labels=d.LABEL_STYLES)


def fit(out: TextIO | None, width: int | None, data: Rows, fmt: str, *, title: str | None = None,
         colour_keys: Sequence[str] = (), inset: int = 0) -> RenderableType:
    """``data`` as a table fitted to the output's width (less ``inset``)."""
    console = output_console(view_stream(out), width)
    return table(data, console.width - inset, title=title, boxed=boxed(fmt), colour_keys=colour_keys,
                 ascii_only=not colour_wanted(view_stream(out)))


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
    print_body(out, width, fit(out, width, data, fmt, colour_keys=("partition", "lag", "held_by_ghost")), summary)


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
    print_body(out, width, fit(out, width, data, fmt, colour_keys=("kind", "partition", "duration_ms")), summary)


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


def state_cell(row: TransactionRow, now_ms: int) -> str:
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
    return {"transactional_id": r.transactional_id, "state": state_cell(r, now_ms),
            "producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
            "timeout_ms": duration(r.timeout_ms),
            "start_timestamp_ms": when(valid_ms(r.start_timestamp_ms), now_ms),
            "last_update_timestamp_ms": ago(valid_ms(r.last_update_timestamp_ms), now_ms),
            "partitions": cell(r.partitions),
            "coordinator_partition": r.coordinator_partition, "coordinator_id": r.coordinator_id}


def valid_ms(ms: int | None) -> int | None:
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
    print_body(out, width, fit(out, width, data, fmt, colour_keys=("transactional_id", "state")), summary)


# ----------------------------------------------------------------------------- panels (describe-*, scan)

def severity_panel(body: RenderableType, title: str, fmt: str, severity: Severity, out: TextIO | None) -> RenderableType:
    if boxed(fmt):
        ascii_only = not colour_wanted(view_stream(out))
        return Panel(body, title=Text(title, style=severity.style), title_align="left", expand=False,
                     box=box.ASCII if ascii_only else box.ROUNDED, safe_box=False)
    return Group(Text(title, style=severity.style), body)


def facts_table(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in pairs:
        grid.add_row(label, value if isinstance(value, Text) else Text(cell(value)))
    return grid


# ----------------------------------------------------------------------------- files (verify, repair)


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
    print_body(out, width, severity_panel(facts_table(facts), "scan", fmt, worst, out),
           d.scan_summary(s.hanging, s.crc_errors, s.decode_errors, inv))
