"""The ``table``/``text`` view of ``verify``: its problems, worst first, each with the file and byte and the
dump command that shows it; startup notes of one kind grouped into one row with their count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Group, RenderableType
from rich.text import Text

from kafkatx.render import descriptions as d
from kafkatx.render.human import (
    NONE,
    Column,
    Rows,
    Severity,
    by_severity,
    output_console,
)
from kafkatx.render.views import print_body, short_path, typed_rows, view_stream

if TYPE_CHECKING:  # imported where the view needs it at run time
    from kafkatx.checks.indexes import Problem

H = d.HEADERS


SEVERITY_OF = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


VERIFY_COLUMNS = (
    Column("severity", H["severity"], 0),
    Column("check", H["check"], 2),
    Column("where", H["where"], 1, fill=True, min_width=24, cut_left=True),
    Column("message", H["message"], 0, fill=True, min_width=36),
)


DUMP_COMMAND = {".log": "dump-segment", ".index": "dump-index", ".timeindex": "dump-index",
                ".snapshot": "dump-snapshot", ".txnindex": "dump-txnindex"}


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
    print_body(out, width, _listing(out, width, data) if data.rows else None, summary)


def _listing(out: TextIO | None, width: int | None, data: Rows) -> RenderableType:
    """verify's rows as a list: ``severity  check  where`` on one line, the message under it wrapped between
    words to the width (a table would cut it), indented so the next row's head stands out."""
    import textwrap

    room = max(output_console(view_stream(out), width).width - len(LISTING_INDENT), 20)
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
