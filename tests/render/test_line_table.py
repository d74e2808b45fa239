"""``human.LineTable`` writes a table's lines itself on a console without colour; they are the
lines rich's own ``Table`` (``human._build``) lays out for the same rows, byte for byte, boxed or not,
cut or not (the property below), and it hands the table to rich wherever rich must measure (wide
characters, a table wider than the console, colour)."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from kafkatx.render import human, printing
from kafkatx.render.human import ASCII_HEAD, Column, LineTable, Rows, Severity


def _console(buf: io.StringIO, width: int, *, colour: bool = False) -> Console:
    return Console(file=buf, width=width, color_system="truecolor" if colour else None, force_terminal=colour,
                   no_color=not colour, highlight=False, soft_wrap=False, emoji=False, markup=False,
                   legacy_windows=False)


def _render(renderable: object, width: int, *, colour: bool = False) -> str:
    buf = io.StringIO()
    _console(buf, width, colour=colour).print(renderable)
    return buf.getvalue()


_ascii = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
_cell = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), _ascii,
                  st.lists(_ascii, max_size=3), _ascii.map(lambda s: Text(s, style="red")))


@st.composite
def _tables(draw: st.DrawFn) -> tuple[LineTable, int]:
    n = draw(st.integers(1, 5))
    columns = [Column(f"c{i}", draw(_ascii.filter(bool)), 0, justify=draw(st.sampled_from(["left", "right"])),
                      cut_left=draw(st.booleans())) for i in range(n)]
    data = Rows(columns)
    for _ in range(draw(st.integers(0, 6))):
        data.add({c.key: draw(_cell) for c in columns}, draw(st.sampled_from(list(Severity))))
    # widths at least the header's (as human.table chooses them), cells longer than them are cut
    widths = {c.key: draw(st.integers(max(2, len(c.header)), 40)) for c in columns}
    rule = draw(st.sampled_from([None, ASCII_HEAD, human.box.SIMPLE_HEAD]))
    needed = sum(widths.values()) + human.GAP * (n - 1)
    return LineTable(data, columns, widths, rule, ("c0",)), draw(st.integers(needed, needed + 20))


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_its_lines_are_richs_lines(case: tuple[LineTable, int]) -> None:
    table, width = case
    assert table.plain_lines(width) is not None  # printable ASCII that fits: written straight
    assert _render(table, width) == _render(table.rich_table(), width)


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_its_colour_is_richs_colour(case: tuple[LineTable, int]) -> None:
    # on a terminal: the same escape codes around the same text (the header bold when boxed, the colour
    # keys in the row's severity colour, a Text cell in its own style)
    table, width = case
    console = _console(io.StringIO(), width, colour=True)
    assert table.styled_segments(console, width) is not None
    assert _render(table, width, colour=True) == _render(table.rich_table(), width, colour=True)


def test_a_realistic_table_is_written_straight_and_equals_rich() -> None:
    columns = [Column("partition", "partition", 0, shrink=True), Column("lag", "lag", 0, justify="right"),
               Column("oldest", "oldest open", 2), Column("path", "file", 3, fill=True, cut_left=True)]
    data = Rows(columns)
    for i in range(50):
        data.add({"partition": f"orders-{i}", "lag": i * 7, "oldest": None if i % 3 else f"{i} from 5",
                  "path": f"/var/lib/kafka/orders-{i}/{i:020d}.log@{i}"}, Severity.WARNING if i % 4 else Severity.OK)
    built = human.table(data, 60)
    assert isinstance(built, LineTable)
    lines = built.plain_lines(60)
    assert lines is not None and len(lines) == 52
    assert _render(built, 60) == _render(built.rich_table(), 60)
    assert "\u2026" in _render(built, 60)  # the paths were cut, as rich cuts them


def test_rich_lays_out_what_it_must() -> None:
    columns = [Column("a", "name", 0), Column("b", "n", 0, justify="right")]
    wide = Rows(columns)
    wide.add({"a": "トピック-0", "b": 1})  # wide characters: two cells each
    t = LineTable(wide, columns, {"a": 12, "b": 3}, ASCII_HEAD, ())
    assert t.plain_lines(80) is None
    assert _render(t, 80) == _render(t.rich_table(), 80)
    narrow = Rows(columns)
    narrow.add({"a": "orders-0", "b": 1})
    t = LineTable(narrow, columns, {"a": 12, "b": 3}, None, ())
    assert t.plain_lines(10) is None  # wider than the console: rich narrows the columns
    assert _render(t, 10) == _render(t.rich_table(), 10)
    # with colour: a cell whose text carries spans (parts in other styles) is rich's to lay out
    spans = Rows(columns)
    text = Text("late: 5m")
    text.stylize("bold", 0, 4)
    spans.add({"a": text, "b": 1})
    t = LineTable(spans, columns, {"a": 12, "b": 3}, human.box.SIMPLE_HEAD, ("a",))
    assert t.styled_segments(_console(io.StringIO(), 40, colour=True), 40) is None
    assert _render(t, 40, colour=True) == _render(t.rich_table(), 40, colour=True)
    assert "\x1b[1m" in _render(t, 40, colour=True)


def test_a_wide_character_id_gets_the_cells_it_takes() -> None:
    # a transactional id in CJK (two terminal cells a character) is measured in cells, as rich lays it
    # out: shown whole where the terminal has room (it was measured by len() and cut: "注文処理ジョブ-東 …")
    columns = [Column("id", "transactional id", 0, shrink=True), Column("n", "n", 0, justify="right")]
    data = Rows(columns)
    data.add({"id": "注文処理ジョブ-東京リージョン-001", "n": 1})
    data.add({"id": "orders", "n": 2})
    buf = io.StringIO()
    printing.print_view(buf, human.table(data, 80, ascii_only=True), [], width=80)
    lines = buf.getvalue().splitlines()
    assert lines[2] == "注文処理ジョブ-東京リージョン-001  1"
    assert lines[3] == "orders                             2"
