"""``--watch [SECONDS]`` for ``lag`` and ``find-hanging``: run the command again and again.

- On a terminal with ``--format text|table``: a rich ``Live`` view redrawn in place, headed by
  the time of the last refresh. The rows are rendered by the command's own render call, so the
  live view looks exactly like one run.
- Otherwise (``--format json|jsonl|yaml``, or stdout not a terminal): every refresh prints the
  command's normal output again: one JSON document per refresh for ``json`` (``jq`` reads the
  stream), the rows of each refresh for ``jsonl``, one ``---``-started document per refresh for
  ``yaml``.
- A refresh that fails on the cluster (unreachable, timed out) is reported (on stderr, or in the
  live view) and retried at the next tick; a usage error still ends the command (exit 2).
- Ctrl-C (SIGINT) ends the watch with exit 0, whatever the last refresh found.

Click cannot parse an option whose value is optional, so :class:`WatchCommand` gives ``--watch``
without a number its default (:data:`DEFAULT_WATCH_S`) before Click parses the arguments:
``--watch``, ``--watch 2`` and ``--watch=2`` all work.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand

from kafkatx.cli.fastparams import FastParams
from kafkatx.cli.options import OUTPUT_PANEL
from kafkatx.errors import KafkaTxError, UsageError

DEFAULT_WATCH_S = 5.0
WATCH_FLAG = "--watch"

WatchOpt = Annotated[float | None, typer.Option(
    WATCH_FLAG, metavar="[SECONDS]", min=0.1, rich_help_panel=OUTPUT_PANEL,
    help=f"Refresh every SECONDS ({DEFAULT_WATCH_S:g} when given alone): a live table on a terminal, the "
         "output again per refresh otherwise (one JSON document each with --format json). Ctrl-C exits 0.")]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def with_optional_value(args: Sequence[str], flag: str, default: str) -> list[str]:
    """``args`` with ``default`` inserted after each bare ``flag`` (last, or followed by an option)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            out.extend(args[i:])
            break
        out.append(arg)
        if arg == flag:
            following = args[i + 1] if i + 1 < len(args) else None
            if following is None or (following.startswith("-") and not _is_number(following)):
                out.append(default)
    return out


class WatchCommand(FastParams, TyperCommand):
    """A command whose ``--watch`` may be given without its SECONDS."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, with_optional_value(args, WATCH_FLAG, f"{DEFAULT_WATCH_S:g}"))


class _TerminalBuffer(io.StringIO):
    """Captures a render call as if it wrote to the terminal (colours, terminal width)."""

    def isatty(self) -> bool:
        return True


_Row = TypeVar("_Row")
Produce = Callable[[], list[_Row]]
Show = Callable[[list[_Row]], None]


def watch(interval_s: float, produce: Produce[_Row], show: Show[_Row], *, fmt: str, title: str) -> list[_Row] | None:
    """Call ``produce`` every ``interval_s`` and ``show`` its rows, until Ctrl-C; then return the last
    rows produced (None if none were), so the caller can end as a partial answer ends (exit 3)."""
    last: list[list[_Row]] = []
    try:
        if fmt in ("text", "table") and sys.stdout.isatty():
            _live(interval_s, produce, show, title, last)
        else:
            _stream(interval_s, produce, show, fmt, last)
    except KeyboardInterrupt:
        pass
    return last[-1] if last else None


def _show_gaps(rows: Any) -> None:
    """Every refresh of a partial answer says so under its rows (cli.md "Incomplete answers")."""
    incomplete = getattr(rows, "incomplete", None)
    if incomplete:
        from kafkatx.cli.txn import incomplete_line

        typer.echo(incomplete_line(incomplete), err=True)


def _attempt(produce: Produce[_Row]) -> tuple[list[_Row] | None, str | None]:
    try:
        return produce(), None
    except UsageError:
        raise
    except KafkaTxError as err:
        return None, str(err)


def _pause(interval_s: float, started: float) -> None:
    time.sleep(max(0.0, interval_s - (time.monotonic() - started)))


def _stream(interval_s: float, produce: Produce[_Row], show: Show[_Row], fmt: str, last: list[list[_Row]]) -> None:
    while True:
        started = time.monotonic()
        rows, error = _attempt(produce)
        if rows is None:
            typer.echo(f"kafkatx: {error} (retrying in {interval_s:g}s)", err=True)
        else:
            last[:] = [rows]
            if fmt == "yaml":
                sys.stdout.write("---\n")  # one YAML document per refresh
            show(rows)
            sys.stdout.flush()
            _show_gaps(rows)
        _pause(interval_s, started)


def _live(interval_s: float, produce: Produce[_Row], show: Show[_Row], title: str, last: list[list[_Row]]) -> None:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.text import Text

    console = Console(file=sys.stdout)
    with Live(console=console, auto_refresh=False, redirect_stdout=False, redirect_stderr=False) as live:
        while True:
            started = time.monotonic()
            notes = io.StringIO()  # notices and skipped partitions, shown under the rows
            with redirect_stderr(notes):
                rows, error = _attempt(produce)
            stamp = datetime.now(UTC).strftime("%H:%M:%S UTC")
            header = Text(f"kafkatx {title} every {interval_s:g}s, last refresh {stamp}; Ctrl-C stops",
                          style="bold")
            if rows is None:
                body = Text(f"kafkatx: {error} (retrying in {interval_s:g}s)", style="red")
            else:
                last[:] = [rows]
                out, err = _TerminalBuffer(), io.StringIO()
                with redirect_stdout(out), redirect_stderr(err):
                    show(rows)
                    _show_gaps(rows)
                parts = (out.getvalue().rstrip("\n"), err.getvalue().rstrip("\n"), notes.getvalue().rstrip("\n"))
                body = Text.from_ansi("\n".join(p for p in parts if p))
            live.update(Group(header, body), refresh=True)
            _pause(interval_s, started)
