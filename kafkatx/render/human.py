"""Building blocks of the output people read (``--format table``/``text``): times, sizes, colour, width.

Every human view (``render.views``, the timeline) uses these, so a time, a duration or a
severity looks the same everywhere:

- :func:`when` ``2023-11-14 22:30Z (1h50m ago)``, :func:`ago` ``1h50m ago``, :func:`utc`
  ``2023-11-14 22:30Z``, :func:`duration` ``1h50m``, :func:`size` ``1.5 MiB``, :func:`tp` ``orders-0``.
  Ages are taken against the ``now_ms`` the caller passes (the command's ``--now`` when given,
  else :func:`wall_now_ms`), so golden files stay reproducible. Times are UTC.
- :class:`Severity` orders rows (worst first) and gives them their colour.
- :class:`Column` declares a column: short header, ``priority`` (0 = never dropped; higher
  numbers are dropped first when the terminal is too narrow) and whether it may be shortened.
- :func:`output_console` is the rich console for a stream: the width from ``--width``/``COLUMNS``
  or the terminal, colour only on a terminal and never with ``NO_COLOR``.
- :func:`table` turns columns + rows into a rich table that fits the width: least important
  columns dropped first, then the shrinkable ones cut with ``…``; every row stays on one line.

Nothing here decides *what* is shown; the wording lives in :mod:`kafkatx.render.descriptions`.
"""

from __future__ import annotations

import enum
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, TextIO, TypeVar

from msgspec import Struct, field
from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

# the plain values (no rich: what the summaries of --format json need too), re-exported here
from kafkatx.render.plain import NONE as NONE
from kafkatx.render.plain import ago as ago
from kafkatx.render.plain import count as count
from kafkatx.render.plain import duration as duration
from kafkatx.render.plain import utc as utc
from kafkatx.render.plain import when as when
from kafkatx.render.plain import wrapped_note as wrapped_note

# Piped output is ASCII only (a header rule of "-", "~" for a cut cell), so byte-counting tools
# (mawk's length, cut -c) agree with the width; a terminal gets rich's Unicode lines and "…".
ASCII_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
ASCII_ELLIPSIS = "~"
PIPED_WIDTH = 80  # piped without COLUMNS (`| less`, `| head`): a page an 80-column pager shows unwrapped
UNLIMITED_WIDTH = 4096  # the dump commands' listings piped without COLUMNS: every column, for grep


# ----------------------------------------------------------------------------- values

def wall_now_ms() -> int:
    """The wall clock in epoch ms (the default ``now`` for ages)."""
    return int(time.time() * 1000)


def size(n: int | None) -> str:
    """Bytes as ``512 B``, ``1.5 KiB``, ``20.0 MiB``."""
    if n is None:
        return NONE
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def tp(topic: str | None, partition: int | None) -> str:
    """A partition as one word, ``topic-N`` (Kafka's ``TopicPartition.toString``)."""
    if topic is None:
        return NONE
    return topic if partition is None else f"{topic}-{partition}"


def cell(value: Any) -> str:
    """A plain value for a cell: None -> ``-``, bools yes/no, lists comma-joined."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) if value else NONE
    return str(value)


# ----------------------------------------------------------------------------- severity

class Severity(enum.IntEnum):
    """How bad a row is; higher is worse. Rows are sorted worst first; the style colours them."""

    MUTED = 0  # nothing to see (empty partitions, finished transactions long ago)
    OK = 1
    INFO = 2
    WARNING = 3
    ERROR = 4
    CRITICAL = 5

    @property
    def style(self) -> str:
        return _STYLES[self]


_STYLES = {Severity.MUTED: "dim", Severity.OK: "green", Severity.INFO: "cyan", Severity.WARNING: "yellow",
           Severity.ERROR: "red", Severity.CRITICAL: "bold red"}


def styled(text: str, severity: Severity | None = None, style: str | None = None) -> Text:
    """A cell as rich ``Text`` (never parsed as markup, so ``[a,b]`` stays as it is)."""
    return Text(text, style=style or (severity.style if severity is not None else ""), no_wrap=True)


# ----------------------------------------------------------------------------- console

def colour_wanted(out: TextIO) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR", ""):
        return False
    return bool(getattr(out, "isatty", None) and out.isatty())


def unicode_ok(out: TextIO | IO[str]) -> bool:
    """Whether ``out`` can show the box and block characters the pictures draw: its encoding encodes them
    (not ``PYTHONIOENCODING=ascii``, not a C locale without UTF-8 mode) and it is no ``TERM=dumb`` terminal."""
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        "━▒█·░│─…".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return not (os.environ.get("TERM") == "dumb" and bool(getattr(out, "isatty", None) and out.isatty()))


def output_width(out: TextIO, width: int | None = None, piped: int = PIPED_WIDTH) -> int:
    """The width to fit: ``width`` if given, else ``COLUMNS``, else the terminal's, else ``piped`` (80 for
    the views: what a pager shows; ``--format json`` is the form with every field)."""
    if width:
        return width
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if getattr(out, "isatty", None) and out.isatty():
        return shutil.get_terminal_size().columns
    return piped


def output_console(out: TextIO, width: int | None = None, piped: int = PIPED_WIDTH) -> Console:
    """The rich console for human output on ``out``: fitted width, colour per :func:`colour_wanted`.

    Without colour no escape code at all is written (not even bold), so piped output greps cleanly.
    """
    colour = colour_wanted(out)
    return Console(file=out, width=output_width(out, width, piped), color_system="auto" if colour else None,
                   force_terminal=colour, no_color=not colour, highlight=False, soft_wrap=False,
                   emoji=False, markup=False, legacy_windows=False)


# ----------------------------------------------------------------------------- tables

class Column(Struct, frozen=True):
    """One column of a human table.

    ``priority``: 0 is always shown; when the table is too wide the highest number goes first.
    ``shrink``: the column may be cut with ``…`` (long names) when the columns chosen do not fit.
    ``fill``: a long text (a message, a path) that takes the room left: when choosing columns it
    counts only its floor, so it never crowds out the others; implies ``shrink``.
    ``cut_left``: a cut cell keeps its end (``…0000.snapshot``) rather than its start.
    ``justify``: ``right`` for numbers.
    """

    key: str
    header: str
    priority: int = 0
    shrink: bool = False
    justify: str = "left"
    min_width: int | None = None
    fill: bool = False
    cut_left: bool = False  # cut the start rather than the end (paths: the file name matters most)


class Rows(Struct):
    """Cells per column key, plus the row's severity (for colour and order)."""

    columns: Sequence[Column]
    rows: list[tuple[dict[str, Any], Severity]] = field(default_factory=list)

    def add(self, cells: dict[str, Any], severity: Severity = Severity.OK) -> None:
        self.rows.append((cells, severity))


def _cell_width(value: Any) -> int:
    """The terminal cells ``value`` takes (a wide character two, as rich measures and lays it out)."""
    if type(value) is str:
        return len(value) if value.isascii() else cell_len(value)  # cell() of a str is itself
    return value.cell_len if isinstance(value, Text) else cell_len(cell(value))


def _cell_text(value: Any, severity: Severity, colour_keys: Iterable[str], key: str) -> Text:
    if isinstance(value, Text):
        text = value.copy()
        text.no_wrap = True
        return text
    return styled(cell(value), severity if key in colour_keys else None)


BLANK = (None, "", NONE, False)


def informative(columns: Sequence[Column], rows: Iterable[dict[str, Any]]) -> list[Column]:
    """The columns where some row carries information (a value other than :data:`BLANK`);
    priority-0 columns always stay."""
    rows = list(rows)
    return [c for c in columns if c.priority == 0 or any(not _is_blank(r.get(c.key)) for r in rows)]


def _is_blank(value: Any) -> bool:
    plain = value.plain if isinstance(value, Text) else value
    return any(plain is b or (type(plain) is type(b) and plain == b) for b in BLANK)


GAP = 2  # blanks between two columns
SHRINK_FLOOR = 12  # a shrinkable column is never cut narrower than this (or its header)


def table(data: Rows, width: int, *, title: str | None = None, boxed: bool = True,
          colour_keys: Iterable[str] = (), ascii_only: bool = False) -> RenderableType:
    """A rich table of ``data`` that fits ``width`` columns with every row on one line (a
    :class:`LineTable`: without colour its lines are written straight, not laid out cell by cell).

    Columns where no row carries information (:func:`informative`) are left out. The
    priority-0 columns are always shown; the others are added most important first (lowest
    priority number), each only if the table still fits, so a wide column that does not fit
    leaves room for narrower, less important ones. A ``fill`` column counts only its floor
    (:data:`SHRINK_FLOOR`) there; when the chosen columns are too wide, the widest ``shrink``/
    ``fill`` ones are cut (with ``…``) down to what fits. Every other cell keeps its full text.
    ``colour_keys``: the columns painted with the row's severity colour (others stay plain).
    ``boxed`` False draws no lines (``--format text``: aligned columns only); ``ascii_only`` draws
    the header rule with ``-`` (see :func:`plain_lines` for the rest of the ASCII promise).
    ``title``: a line above the table (wrapped, never widening it).
    """
    order = informative(data.columns, (cells for cells, _ in data.rows))
    natural = {c.key: max([len(c.header)] + [_cell_width(cells.get(c.key)) for cells, _ in data.rows])
               for c in order}
    floor = {c.key: min(natural[c.key], max(len(c.header), c.min_width or SHRINK_FLOOR))
             if c.shrink or c.fill else natural[c.key] for c in order}
    budget = {c.key: floor[c.key] if c.fill else natural[c.key] for c in order}

    def needed(columns: list[Column], widths: dict[str, int]) -> int:
        return sum(widths[c.key] for c in columns) + GAP * max(len(columns) - 1, 0)

    chosen = [c for c in order if c.priority == 0]
    for col in sorted((c for c in order if c.priority > 0), key=lambda c: (c.priority, order.index(c))):
        trial = [c for c in order if c in chosen or c is col]
        if needed(trial, budget) <= width:
            chosen = trial
    widths = {c.key: natural[c.key] for c in chosen}
    excess = needed(chosen, widths) - width
    while excess > 0:
        cuttable = [c for c in chosen if (c.shrink or c.fill) and widths[c.key] > floor[c.key]]
        if not cuttable:
            break  # the priority-0 columns alone are wider than the terminal: the terminal wraps
        widest = max(cuttable, key=lambda c: widths[c.key])
        widths[widest.key] -= 1
        excess -= 1
    rule = (ASCII_HEAD if ascii_only else box.SIMPLE_HEAD) if boxed else None
    tbl = LineTable(data, chosen, widths, rule, tuple(colour_keys))
    if title is None:
        return tbl
    return Group(Text(title), tbl)


def _build(data: Rows, columns: list[Column], widths: dict[str, int], rule: box.Box | None,
           colour_keys: tuple[str, ...]) -> Table:
    # GAP blanks between columns: one of padding and the (blank) divider, or two of padding unboxed
    boxed = rule is not None
    tbl = Table(box=rule, safe_box=False, show_edge=False, pad_edge=False,
                padding=(0, 1, 0, 0) if boxed else (0, 1), header_style="bold" if boxed else "",
                expand=False, show_header=True, collapse_padding=False)
    for col in columns:
        tbl.add_column(col.header, justify=col.justify, no_wrap=True, overflow="ellipsis",  # type: ignore[arg-type]
                       width=widths[col.key])
    for cells, severity in data.rows:
        texts = []
        for c in columns:
            text = _cell_text(cells.get(c.key), severity, colour_keys, c.key)
            if c.cut_left and text.cell_len > widths[c.key]:
                text = Text(cut_path(text.plain, widths[c.key]), style=text.style)
            texts.append(text)
        tbl.add_row(*texts)
    return tbl


class LineTable:
    """The rich ``Table`` :func:`_build` makes, as a renderable that writes its lines itself: every cell
    fits one line in a fixed width, so a row is its cells cut (``…``) and padded to their widths, joined
    by :data:`GAP` blanks, and the header rule a run of the box's horizontal, as rich lays them out (``tests/render/test_line_table.py`` holds the two
    equal), and on a console with colour rich's very segments (:meth:`styled_segments`). rich's own
    layout costs ~0.3 ms a row (minutes at 200,000 rows); this a few us. A cell beyond
    printable ASCII, a text with spans or a table wider than the console: rich's table itself."""

    __slots__ = ("data", "columns", "widths", "rule", "colour_keys", "_table")

    def __init__(self, data: Rows, columns: list[Column], widths: dict[str, int], rule: box.Box | None,
                 colour_keys: tuple[str, ...]) -> None:
        self.data, self.columns, self.widths, self.rule, self.colour_keys = data, columns, widths, rule, colour_keys
        self._table: Table | None = None

    def rich_table(self) -> Table:
        """rich's table of the same rows (built once, when needed)."""
        if self._table is None:
            self._table = _build(self.data, self.columns, self.widths, self.rule, self.colour_keys)
        return self._table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if console.no_color and console.color_system is None:
            lines = self.plain_lines(options.max_width)
            if lines is not None:
                newline = Segment.line()
                for line in lines:
                    yield Segment(line)
                    yield newline
                return
        else:
            segments = self.styled_segments(console, options.max_width)
            if segments is not None:
                yield from segments
                return
        yield self.rich_table()

    def styled_segments(self, console: Console, max_width: int) -> list[Segment] | None:
        """The segments rich's table yields on a console with colour, for the tables :meth:`plain_lines`
        writes (None for the others, and where a cell's text carries spans): each cell's text cut and
        padded as there, in the row's style where its column is a colour key (the header bold when boxed),
        each cell's right padding in the cell's style, the dividers and the rule plain. What is plain is
        joined into one segment (the console writes plain segments as their text alone)."""
        keys, colour_keys, get_style = [c.key for c in self.columns], self.colour_keys, console.get_style
        styles: dict[str, Style | None] = {"": None}
        texts: list[list[str]] = []
        row_styles: list[list[Style | None]] = []
        for cells, severity in self.data.rows:
            row = _cell_texts(cells, keys)
            if row is None:
                return None
            texts.append(row)
            row_style: list[Style | None] = []
            for key in keys:
                value = cells.get(key)
                if isinstance(value, Text):
                    if value.spans:
                        return None
                    name = value.style
                else:
                    name = severity.style if key in colour_keys else ""
                if isinstance(name, Style):
                    row_style.append(name or None)
                    continue
                if name not in styles:
                    styles[name] = get_style(name) or None
                row_style.append(styles[name])
            row_styles.append(row_style)
        lines = self.plain_lines(max_width, rows=texts)
        return None if lines is None else self._segments(lines, row_styles)

    def _segments(self, lines: list[str], row_styles: list[list[Style | None]]) -> list[Segment]:
        ws = [self.widths[c.key] for c in self.columns]
        starts, at = [], 0
        for w in ws:
            starts.append(at)
            at += w + GAP
        newline = Segment.line()
        out: list[Segment] = []
        boxed = self.rule is not None
        bold = Style(bold=True)
        head = [bold if boxed else None] * len(ws)
        body = lines[2:] if boxed else lines[1:]
        for line, styles, header in [(lines[0], head, True)] + [(b, s, False) for b, s in zip(body, row_styles,
                                                                                             strict=True)]:
            plain = ""
            for i, (start, w, style) in enumerate(zip(starts, ws, styles, strict=True)):
                text = line[start:start + w]
                pad = " " if i < len(ws) - 1 else ""
                if style is None:
                    plain += text + pad + pad
                    continue
                if plain:
                    out.append(Segment(plain))
                out.append(Segment(text, style))
                if header and pad:  # the header cell's padding is in its (bold) style
                    out.append(Segment(pad, style))
                    plain = pad
                else:
                    plain = pad + pad
            out.append(Segment(plain))
            out.append(newline)
            if header and boxed:
                out.append(Segment(lines[1]))
                out.append(newline)
        return out

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.rich_table())

    def plain_lines(self, max_width: int, rows: list[list[str]] | None = None) -> list[str] | None:
        """The table's lines as rich writes them without colour; None where rich must lay them out: a
        table wider than ``max_width`` (rich narrows its columns), a width under 2, a cell that is not
        printable ASCII (cell widths, wide characters) or whose text sets its own justify/overflow."""
        columns, widths = self.columns, self.widths
        ws = [widths[c.key] for c in columns]
        if not columns or min(ws) < 2 or sum(ws) + GAP * (len(ws) - 1) > max_width:
            return None
        justify = [c.justify for c in columns]
        if any(j not in ("left", "right") for j in justify):
            return None
        cut_left = [c.cut_left for c in columns]
        sep = " " * GAP
        header = _plain_row([c.header for c in columns], ws, justify, [False] * len(ws))
        if header is None:
            return None
        lines = [header]
        if self.rule is not None:
            cross = self.rule.head_row_cross
            lines.append(cross.join(self.rule.head_row_horizontal * (w + (GAP - 1 if i < len(ws) - 1 else 0))
                                    for i, w in enumerate(ws)))
        if rows is None:
            rows = []
            keys = [c.key for c in columns]
            for cells, _severity in self.data.rows:
                row = _cell_texts(cells, keys)
                if row is None:
                    return None
                rows.append(row)
        for texts in rows:
            line = _plain_row(texts, ws, justify, cut_left, sep)
            if line is None:
                return None
            lines.append(line)
        return lines


def _cell_texts(cells: dict[str, Any], keys: list[str]) -> list[str] | None:
    """The text of each cell as :func:`_build` gives rich (``cell()``, or a ``Text``'s plain); None when a
    ``Text`` sets its own justify or overflow (rich's to lay out)."""
    texts: list[str] = []
    for key in keys:
        value = cells.get(key)
        if type(value) is str:
            texts.append(value)  # cell(value) of a str
        elif isinstance(value, Text):
            if value.justify is not None or value.overflow not in (None, "ellipsis"):
                return None
            texts.append(value.plain)
        else:
            texts.append(cell(value))
    return texts


def _plain_row(texts: list[str], widths: list[int], justify: list[str], cut_left: list[bool],
               sep: str = " " * GAP) -> str | None:
    """One row of :meth:`LineTable.plain_lines`: each printable-ASCII text cut to its width with ``…``
    (``cut_left``: by :func:`cut_path`, as :func:`_build` cuts it) and padded (``right``: rich strips
    its trailing blanks first); None for a text rich must measure."""
    out: list[str] = []
    for text, w, j, left in zip(texts, widths, justify, cut_left, strict=True):
        if not (text.isascii() and text.isprintable()):
            return None
        if left and len(text) > w:
            text = cut_path(text, w)  # its "…" is one cell, as rich counts it: the text fits w
        if j == "right":
            text = text.rstrip()
        if len(text) > w:
            text = text[:w - 1] + "\u2026"
        out.append(text.ljust(w) if j == "left" else text.rjust(w))
    return sep.join(out)


# the zero padding of a Kafka file name (00000000000000000109.log): what a cut path gives up first
_ZERO_PADDING = re.compile(r"(?:^|/)(0+)(?=\d*\.[a-z]+(?:@\d+)?$)")


def cut_path(path: str, width: int) -> str:
    """``path`` cut to ``width`` cells, marked with ``…``: the zero padding of its file name goes
    first (``orders-0/…0109.log@434``: the partition and the offset stay readable), then its start
    (``…tate-0/…109.timeindex@0``). A cell's single style is kept by the caller."""
    if len(path) <= width:
        return path
    if width <= 0:
        return ""
    m = _ZERO_PADDING.search(path)
    if m is not None:
        start, end = m.span(1)
        if path[end] == ".":
            end -= 1  # an all-zero name keeps one 0
        drop = len(path) - width + 1  # + 1 for the ellipsis
        if drop <= end - start:
            return path[:start] + "\u2026" + path[start + drop:]
        path = path[:start] + "\u2026" + path[end:]
    return "\u2026" + path[len(path) - (width - 1):] if width > 1 else "\u2026"


_Item = TypeVar("_Item")


def by_severity(items: Iterable[_Item], severity: Callable[[_Item], Severity], *then: Callable[[_Item], Any]
                ) -> list[_Item]:
    """``items`` worst first (``severity(item)`` descending), ties by the ``then`` keys ascending."""
    return sorted(items, key=lambda i: (-int(severity(i)),) + tuple(k(i) for k in then))


