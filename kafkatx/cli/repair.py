"""Repair commands: ``kafkatx undo JOURNAL`` (and, later, ``abort-hanging``).

Each command makes one library call (``kafkatx.repair``) and renders its rows; refusals
are ``RepairError``/``LogDirLocked`` (exit 3), which the app prints as one stderr line.
Shared repair options live here so ``abort-hanging`` can reuse them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.render import emit

JournalOpt = Annotated[Path | None, typer.Option(
    "--journal", metavar="FILE", dir_okay=False,
    help="Where to write the repair journal (never inside a log dir). Default: "
         "./kafkatx-repair-<UTC time>.journal, or beside the first log dir when the current "
         "directory is inside one. Replaced/removed files are kept in FILE.d/.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would be done; change nothing.")]

UNDO_COLUMNS = ("action", "op", "path", "size_before_undo", "size_after_undo", "verified")


@app.command("undo")
def undo(
    journal: Annotated[Path, typer.Argument(metavar="JOURNAL", dir_okay=False,
                                            help="The journal a repair wrote (kafkatx-repair-*.journal).")],
    dry_run: DryRunOpt = False,
    fmt: opt.FormatOpt = opt.OutputFormat.table,
) -> None:
    """Reverse a repair from its journal: truncate appends, delete created files, restore backups.

    Refuses (exit 3, nothing changed) when the journal's checksum does not match, a path
    leaves the journal's log dirs or is a symlink, a file changed since the repair in a way
    the repair does not explain (for example the broker appended to it), or a broker holds
    a log dir's .lock. Works on a repair that crashed half-way; running it twice is harmless.
    """
    from kafkatx.repair import undo_journal  # imported here so `kafkatx --help` stays fast

    result = undo_journal(journal, dry_run=dry_run)
    verb = "would undo" if dry_run else "undone"
    emit(result.rows, fmt.value, columns=UNDO_COLUMNS if fmt.value in ("text", "table") else None,
         title=f"{verb} from {result.journal_path}")
    for temp in result.temps_removed:
        typer.echo(f"{'would remove' if dry_run else 'removed'} leftover temporary file {temp}", err=True)
