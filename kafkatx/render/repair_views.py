"""The ``table``/``text`` views of the repair commands: ``abort-hanging``'s plan (or what it applied) with the
files it changes, and ``undo``'s reversal of a journal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from rich.console import Group
from rich.text import Text

from kafkatx.render import descriptions as d
from kafkatx.render.human import (
    NONE,
    Column,
    Rows,
    Severity,
    cell,
    tp,
    wall_now_ms,
)
from kafkatx.render.plain import transactions
from kafkatx.render.views import (
    blocked_lines,
    file_in_log_dir,
    fit,
    hanging_severity,
    order_hanging,
    print_body,
)
from kafkatx.rows import (
    UNTOUCHED_2PC_REASON,
    AbortPlanRow,
    HangingRow,
    RowAction,
    RowResult,
)

if TYPE_CHECKING:
    from kafkatx.repair.undo import UndoResult

H = d.HEADERS


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
    body = fit(out, width, data, fmt, title=title, colour_keys=("partition", "action", "result")) if rows else None
    if body is None and title and not (waiting and not acted):
        summary = [title] + summary
    if body is not None and files:
        changes = Rows(APPLIED_FILE_COLUMNS if applied else PLAN_FILE_COLUMNS)
        for op, path in files:
            changes.add({"op": op, "path": file_in_log_dir(path)}, Severity.INFO)
        body = Group(body, Text(""), fit(out, width, changes, fmt))
    print_body(out, width, body, summary)


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
        print_body(out, width, None, summary)
        return
    print_body(out, width, fit(out, width, data, fmt, title=title, colour_keys=("action", "verified")), summary)
