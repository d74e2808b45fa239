"""Writing a view out: :func:`print_view` (a table or panel, then its summary; piped, plain ASCII lines
without trailing blanks, :func:`plain_lines`), :func:`print_lines` (prose wrapped to the width) and
:func:`shell_lines` (a command continued with `` \\`` so it still pastes). The pieces they print are
:mod:`kafkatx.render.human`'s."""

from __future__ import annotations

import io
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import TextIO

from rich.console import Console, RenderableType
from rich.text import Text

from kafkatx.render.human import ASCII_ELLIPSIS, LineTable, colour_wanted, output_console


def plain_lines(text: str) -> str:
    """Rendered text for a pipe: no trailing blanks on any line (rich pads cells) and ASCII
    ``~`` for rich's ``…`` where a cell was cut."""
    return "".join(line.rstrip().replace("\u2026", ASCII_ELLIPSIS) + "\n" for line in text.splitlines())


def print_view(out: TextIO, body: RenderableType | None, summary: Sequence[str] = (), *,
               width: int | None = None, labels: Mapping[str, str] | None = None) -> None:
    """Write ``body`` (a table, a panel), then a blank line and the ``summary`` lines, to ``out``.

    On a terminal in colour; otherwise through :func:`plain_lines` (ASCII, no trailing blanks,
    since rich pads cells), so piped output and golden files diff cleanly.
    """
    console = output_console(out, width)
    plain = not colour_wanted(out)
    buffer = io.StringIO()
    if plain:
        console = output_console(buffer, console.width)
    written = False
    if plain and isinstance(body, LineTable):
        lines = body.plain_lines(console.width)
        if lines is not None:  # what console.print(body) writes there, without a segment per line
            buffer.write("".join(line + "\n" for line in lines))
            written = True
        else:
            body = body.rich_table()  # rich's to lay out: its lines not tried a second time by the console
    if body is not None and not written:
        console.print(body)
    if summary:
        if body is not None:
            console.print()
        print_lines(console, summary, labels)
    if plain:
        out.write(plain_lines(buffer.getvalue()))
    out.flush()


def print_lines(console: Console, lines: Iterable[str], labels: Mapping[str, str] | None = None) -> None:
    """Print summary lines within the console width: prose wraps at words; a line that starts with
    two spaces is a shell command, continued over lines with `` \\`` so it still pastes as one
    (and is bold on a terminal). ``labels``: a line's leading word (``Worst:``) -> its style."""
    width = min(console.width, 200)
    for line in lines:
        command = line.startswith("  ")
        if command:
            wrapped = shell_lines(line.strip(), width, indent="  ")
        else:
            wrapped = textwrap.wrap(line, width, break_on_hyphens=False, break_long_words=False) or [""]
        for i, part in enumerate(wrapped):
            text = Text(part, style="bold" if command else "")
            label = part.split(" ", 1)[0]
            if i == 0 and labels and label in labels:
                text.stylize(labels[label], 0, len(label))
            console.print(text, soft_wrap=True)


def shell_lines(command: str, width: int, indent: str = "") -> list[str]:
    """``command`` (shell-quoted) as lines of at most ``width`` columns, joined by `` \\`` continuations.

    A flag stays on the line of its value; a single token longer than the width gets its own line.
    """
    words = shlex.split(command)
    tokens: list[str] = []
    i = 0
    while i < len(words):
        word = shlex.quote(words[i])
        if words[i].startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            word += " " + shlex.quote(words[i + 1])
            i += 1
        tokens.append(word)
        i += 1
    lines: list[str] = []
    current = ""
    for token in tokens:
        if not current:
            current = indent + token
        elif len(current) + 1 + len(token) + 2 > width:  # room for the " \\" continuation
            lines.append(current + " \\")
            current = indent + "    " + token
        else:
            current += " " + token
    lines.append(current)
    return lines
