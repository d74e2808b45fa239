"""Regenerate kafkatx's man pages in this folder from the kafkatx app.

    python man/generate.py          # rewrite kafkatx.1 and kafkatx-COMMAND.1 for every command
    python man/generate.py --check  # exit 1 when a page is stale (tests/test_man_pages.py)

The pages are written by click-man's ``ManPage`` (the roff writer) from the Typer app's own
command tree: the same names, help texts and options as ``kafkatx COMMAND --help``. click-man's
own walker expects the ``click`` package's classes, and Typer builds its commands on the Click it
vendors, so this script walks the tree and hands each command's fields to ``ManPage``. The wheel
installs the pages under ``share/man/man1`` (setup.py), so ``man kafkatx-lag`` works once the
environment's ``share/man`` is on ``MANPATH``; from a checkout: ``man -l man/kafkatx-lag.1``.
"""

from __future__ import annotations

import sys
from inspect import cleandoc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROG = "kafkatx"
# A fixed date: the pages change only when the app's help does (the check compares bytes).
DATE = "2026-11-29"


def _page(command: Any, ctx: Any, version: str) -> str:
    from click_man.man import ManPage

    page = ManPage(ctx.command_path)
    page.version = version
    page.date = DATE
    page.short_help = command.get_short_help_str(limit=200)
    page.description = cleandoc(command.help or "")
    page.synopsis = " ".join(command.collect_usage_pieces(ctx))
    page.options = [record for param in command.params
                    if getattr(param, "param_type_name", "") == "option" and not getattr(param, "hidden", False)
                    for record in [param.get_help_record(ctx)] if record is not None]
    subcommands = getattr(command, "commands", None)
    if subcommands:
        page.commands = [(name, sub.get_short_help_str(limit=200)) for name, sub in subcommands.items()
                         if not getattr(sub, "hidden", False)]
    return str(page) + "\n"


def pages() -> dict[Path, str]:
    sys.path.insert(0, str(HERE.parent))
    import typer.main

    from kafkatx import __version__
    from kafkatx.cli.main import app

    root = typer.main.get_command(app)
    root_ctx = root.make_context(PROG, [], resilient_parsing=True)
    out = {HERE / f"{PROG}.1": _page(root, root_ctx, __version__)}
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        if getattr(command, "hidden", False):
            continue
        ctx = command.make_context(name, [], parent=root_ctx, resilient_parsing=True)
        out[HERE / f"{PROG}-{name}.1"] = _page(command, ctx, __version__)
    return out


def main(argv: list[str]) -> int:
    wanted = pages()
    if "--check" in argv:
        stale = sorted(str(p.name) for p, text in wanted.items() if not p.exists() or p.read_text() != text)
        extra = sorted(p.name for p in HERE.glob("*.1") if p not in wanted)
        if stale or extra:
            print(f"man pages out of date: {', '.join(stale + extra)}; run: python man/generate.py")
            return 1
        return 0
    for old in HERE.glob("*.1"):
        if old not in wanted:
            old.unlink()
    for path, text in wanted.items():
        path.write_text(text)
    print(f"wrote {len(wanted)} man pages in {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
