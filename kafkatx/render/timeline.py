"""``kafkatx timeline`` for people: lanes in the terminal (rich) and one self-contained HTML page.

Input is ``txn.offline.timeline``'s :class:`~kafkatx.session.timeline.PartitionTimeline` list.

Text (:func:`timeline_text`): per partition a header (log start, LSO, high watermark, log end,
lag), the hanging transactions under it, then one lane per producer over the partition's
offsets, scaled to the width, and a ruler with the four markers. Committed, aborted and open
spans have their own glyphs, so the picture reads without colour; colour is added on a
terminal only (rich's console decides: not when piped, not with ``NO_COLOR``).

HTML (:func:`timeline_html`): the same per partition as inline SVG plus the ``lag`` and
``find-hanging`` tables; inline CSS, no script, no font or image fetched, no URL at all.
Stable ids and classes for tests and stylesheets: ``svg#partition-<topic>-<n>.timeline``,
``g.lane[data-producer-id]``, ``rect.span.commit|abort|open`` (``.hanging`` too when
find-hanging lists it) with ``data-first-offset``/``data-last-offset``/``data-outcome`` and
``data-count`` (the spans it stands for: touching spans under 3 px are drawn as one),
``g.marker.log-start|lso|high-watermark|log-end[data-offset]``, ``table#lag-table``,
``table#hanging-table`` (``tr.row``).

Times with their age and durations come from :mod:`kafkatx.render.human`, as in every
command's tables.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Sequence

from msgspec import Struct
from rich.console import Console, Group, RenderableType
from rich.text import Text

from kafkatx.render.human import count, duration, unicode_ok, utc, when
from kafkatx.render.plain import partitions_of, transactions
from kafkatx.rows import HangingRow, LagRow, Unreadable
from kafkatx.session.timeline import PartitionTimeline, TransactionSpan

# ----------------------------------------------------------------------------- shared helpers

GLYPH = {"COMMIT": "━", "ABORT": "x", "OPEN": "▒", "HANGING": "█"}
EMPTY, DELETED, GHOST, DIVIDER = "·", " ", "░", "│"
STYLE = {"COMMIT": "green", "ABORT": "red", "OPEN": "yellow", "HANGING": "bold red"}
OUTCOME_RANK = {"COMMIT": 0, "ABORT": 1, "OPEN": 2, "HANGING": 3}  # the worst wins a shared cell
MARKERS = (("log-start", "S", "log start"), ("lso", "L", "LSO"), ("high-watermark", "H", "high watermark"),
           ("log-end", "E", "log end"))
MARKER_STYLE = {"S": "dim", "L": "bold cyan", "H": "magenta", "E": "dim"}
# Where the output cannot show them (human.unicode_ok): one ASCII character for each, so every cell stays
# one column and the styled spans keep their places.
ASCII = str.maketrans({"━": "=", "▒": "o", "█": "#", "·": ".", "░": ":", "│": "|", "─": "-", "…": "~"})


def _duration(ms: int) -> str:
    """``1h50m``, ``3d4h``, ``45s``: the two largest units (:func:`kafkatx.render.human.duration`)."""
    return duration(max(0, ms))


def _when(ms: int | None, now: int) -> str:
    """``2023-11-14 22:30Z (1h50m ago)`` (:func:`kafkatx.render.human.when`)."""
    return "unknown" if ms is None else when(ms, now)


def _label(producer_id: int, transactional_id: str | None) -> str:
    return f"{producer_id} {transactional_id if transactional_id is not None else '(no id)'}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


class _Axis(Struct, frozen=True):
    """Offsets ``lo`` .. ``hi`` (the log end: the next offset) over ``cells`` cells (text) or pixels."""

    lo: int
    hi: int
    cells: int

    @classmethod
    def of(cls, p: PartitionTimeline, cells: int) -> _Axis:
        lag = p.lag
        starts = [s.first_offset for s in p.spans if s.first_offset is not None]
        ends = [s.marker_offset if s.marker_offset is not None else (s.last_offset or 0) for s in p.spans]
        lo = min([v for v in (lag.log_start_offset,) if v is not None] + starts, default=0)
        hi = max([v for v in (lag.log_end_offset, lag.high_watermark) if v is not None] + [e + 1 for e in ends],
                 default=lo)
        return cls(lo=lo, hi=max(hi, lo + 1), cells=max(cells, 1))

    def at(self, offset: int) -> int:
        """The cell holding ``offset`` (``hi`` maps to the last cell)."""
        pos = (offset - self.lo) * (self.cells - 1) // (self.hi - self.lo)
        return min(max(pos, 0), self.cells - 1)

    def x(self, offset: int) -> float:
        """Pixel position of the boundary before ``offset``."""
        return (offset - self.lo) * self.cells / (self.hi - self.lo)


def _span_end(s: TransactionSpan, p: PartitionTimeline) -> int:
    """The last offset a span covers: its marker, or for an open one the log end (it is still open)."""
    if s.marker_offset is not None:
        return s.marker_offset
    end = p.lag.log_end_offset
    return max(end if end is not None else 0, s.last_offset or 0, s.first_offset or 0)


def _hanging_keys(p: PartitionTimeline) -> set[int]:
    return {h.producer_id for h in p.hanging}


_Lane = tuple[int, str | None, list[TransactionSpan]]


def _lanes(p: PartitionTimeline) -> list[_Lane]:
    """One lane per producer, ordered by its first span."""
    lanes: dict[int, list[TransactionSpan]] = {}
    for s in p.spans:
        lanes.setdefault(s.producer_id, []).append(s)
    out = []
    for pid, spans in lanes.items():
        tid = next((s.transactional_id for s in reversed(spans) if s.transactional_id is not None), None)
        out.append((pid, tid, spans))
    return out


def _counts(partitions: Sequence[PartitionTimeline]) -> dict[str, int]:
    counts = {"COMMIT": 0, "ABORT": 0, "OPEN": 0}
    for p in partitions:
        for s in p.spans:
            counts[s.outcome] = counts.get(s.outcome, 0) + 1
    return counts


def _summary(partitions: Sequence[PartitionTimeline], now: int) -> list[str]:
    drawn = [p for p in partitions if p.spans]
    c = _counts(partitions)
    hanging = [h for p in partitions for h in p.hanging]
    held = sum(1 for p in partitions if p.lag.lag)
    # the spans are counted per partition (a span is one transaction's part in one partition); the hanging
    # ones as transactions (one producer id and epoch, however many partitions it holds), as find-hanging
    where = f" on {count(partitions_of(hanging), 'partition')}" if partitions_of(hanging) != transactions(hanging) \
        else ""
    return [f"{len(drawn)} of {len(partitions)} partitions with transactions: {c['COMMIT']} committed, "
            f"{c['ABORT']} aborted, {c['OPEN']} open",
            f"{count(transactions(hanging), 'hanging transaction')}{where}; {count(held, 'partition')} held back "
            "(LSO below HW)",
            f"now {utc(now)}; spans are counted per partition"]


def _stats(lag: LagRow) -> str:
    def v(x: int | None) -> str:
        return "?" if x is None else str(x)

    return (f"start {v(lag.log_start_offset)}  LSO {v(lag.lso)}  HW {v(lag.high_watermark)}  "
            f"end {v(lag.log_end_offset)}  lag {v(lag.lag)}")


def _hanging_line(h: HangingRow, now: int, width: int = 1000) -> str:
    """``timed-out: 1004 stale-loader from offset 137, open 1h37m (since 2023-11-14 22:23Z)``, shorter
    when that does not fit ``width``."""
    who = _label(h.producer_id, h.transactional_id)
    if h.start_ms is None:
        return f"{h.kind}: {who} from offset {h.first_offset}, below the log start (data deleted)"
    full = (f"{h.kind}: {who} from offset {h.first_offset}, open {_duration(now - h.start_ms)} "
            f"(since {utc(h.start_ms)})")
    if len(full) <= width:
        return full
    return f"{h.kind}: {who} @{h.first_offset}, open {_duration(now - h.start_ms)}"


# ----------------------------------------------------------------------------- text

def _runs(cells: list[str], styles: list[str | None]) -> Text:
    """One rich span per run of equally styled cells (not one escape sequence per cell)."""
    text = Text()
    i = 0
    while i < len(cells):
        j = i
        while j < len(cells) and styles[j] == styles[i]:
            j += 1
        text.append("".join(cells[i:j]), style=styles[i] or "")
        i = j
    return text


def _lane_text(p: PartitionTimeline, spans: list[TransactionSpan], axis: _Axis, hanging: bool) -> Text:
    cells = [EMPTY] * axis.cells
    rank = [-1] * axis.cells
    style: list[str | None] = ["dim"] * axis.cells
    start = p.lag.log_start_offset
    if start is not None and start > axis.lo:
        for i in range(axis.at(start)):
            cells[i], style[i] = DELETED, None
    for s in spans:
        kind = "HANGING" if s.outcome == "OPEN" and hanging else s.outcome
        first = s.first_offset if s.first_offset is not None else axis.lo
        lo = axis.at(first)
        # a completed span covers its marker's whole cell width (up to the next offset's cell); an open
        # one runs to the log end, the last cell
        hi = (axis.at(_span_end(s, p)) if s.marker_offset is None
              else max(axis.at(s.marker_offset), axis.at(s.marker_offset + 1) - 1))
        # a span of several cells right after another of its kind starts with a divider, so back-to-back
        # transactions stay countable
        divide = hi > lo and lo > 0 and rank[lo - 1] == OUTCOME_RANK[kind] and rank[lo] < OUTCOME_RANK[kind]
        for i in range(lo, hi + 1):
            if OUTCOME_RANK[kind] > rank[i]:
                rank[i], cells[i], style[i] = OUTCOME_RANK[kind], GLYPH[kind], STYLE[kind]
        if divide:
            cells[lo] = DIVIDER
    if start is not None and start > axis.lo:
        for i in range(axis.at(start)):  # what a ghost span covers below the log start is deleted
            if cells[i] != DELETED:
                cells[i], style[i] = GHOST, "dim red"
    return _runs(cells, style)


def _ruler(p: PartitionTimeline, axis: _Axis) -> Text:
    line = ["─"] * axis.cells
    styles: list[str | None] = ["dim"] * axis.cells
    at: dict[int, str] = {}
    lag = p.lag
    for (_key, letter, _name), offset in zip(MARKERS, (lag.log_start_offset, lag.lso, lag.high_watermark,
                                                       lag.log_end_offset), strict=True):
        if offset is not None:
            col = axis.at(offset)
            at[col] = at.get(col, "") + letter
    for col, letters in sorted(at.items()):
        begin = min(col, axis.cells - len(letters))
        for i, letter in enumerate(letters):
            line[begin + i], styles[begin + i] = letter, MARKER_STYLE[letter]
    return _runs(line, list(styles))


def _text_lanes(p: PartitionTimeline, max_lanes: int) -> tuple[list[_Lane], list[_Lane]]:
    """At most ``max_lanes`` lanes: every producer with an open span, then the most recently active
    ones; shown in first-span order. The rest (committed/aborted only) are summed up in one line."""
    lanes = _lanes(p)
    if len(lanes) <= max_lanes:
        return lanes, []
    def weight(lane: _Lane) -> tuple[bool, int]:
        spans = lane[2]
        last = max((s.marker_offset if s.marker_offset is not None else s.first_offset or 0) for s in spans)
        return (any(s.outcome == "OPEN" for s in spans), last)
    keep = {lane[0] for lane in sorted(lanes, key=weight, reverse=True)[:max_lanes]}
    return [lane for lane in lanes if lane[0] in keep], [lane for lane in lanes if lane[0] not in keep]


def timeline_text(partitions: Sequence[PartitionTimeline], *, now: int, width: int,
                  max_lanes: int = 12, ascii_only: bool = False) -> RenderableType:
    """The terminal picture, every line at most ``width`` columns, at most ``max_lanes`` lanes per partition
    (every producer with an open span is among them when they fit); ``ascii_only``: no character above
    U+007F (:data:`ASCII`)."""
    width = max(width, 40)
    label_w = min(max(12, width // 4), 28)
    cells = width - 2 - label_w - 1 - 1  # indent, labels, gap, a free last column
    lines: list[RenderableType] = [Text(line, style="bold") for line in _summary(partitions, now)]
    for p in partitions:
        if not p.spans:
            continue
        axis = _Axis.of(p, cells)
        head = Text()
        head.append(p.name, style="bold")
        head.append("  " + _stats(p.lag), style="red" if p.lag.lag else "")
        lines.append(Text(""))
        lines.append(head)
        for h in p.hanging:
            lines.append(Text("  ! " + _hanging_line(h, now, width - 5), style="red"))
        held = _hanging_keys(p)
        shown, hidden = _text_lanes(p, max_lanes)
        for pid, tid, spans in shown:
            lane = Text("  " + _clip(_label(pid, tid), label_w).ljust(label_w) + " ")
            lane.append_text(_lane_text(p, spans, axis, pid in held))
            lines.append(lane)
        if hidden:
            c = Counter(s.outcome for _pid, _tid, spans in hidden for s in spans)
            lines.append(Text(_clip(f"  + {len(hidden)} more producers ({c['COMMIT']} committed, {c['ABORT']} "
                                    f"aborted; --format json lists every span)", width - 1), style="dim"))
        ruler = Text()
        ruler.append("  " + _clip(f"offsets {axis.lo}-{axis.hi}", label_w).ljust(label_w) + " ", style="dim")
        ruler.append_text(_ruler(p, axis))
        lines.append(ruler)
    quiet = [p.name for p in partitions if not p.spans]
    if quiet:
        lines.append(Text(""))
        lines.append(Text(_clip(f"no transactions: {', '.join(quiet)}", width - 1), style="dim"))
    lines.append(Text(""))
    legend = Text("legend")
    for outcome, name in (("COMMIT", "committed"), ("ABORT", "aborted"), ("OPEN", "open"),
                          ("HANGING", "open, hanging (the ! lines)")):
        legend.append("  " if outcome != "COMMIT" else " ")
        legend.append(GLYPH[outcome], style=STYLE[outcome])
        legend.append(f" {name}")
    legend.append("  ")
    legend.append(DIVIDER)
    legend.append(" next txn")  # where a span starts right after another of its kind
    lines.append(legend)
    markers = Text("      ")
    for _key, letter, name in MARKERS:
        markers.append(" ")
        markers.append(letter, style=MARKER_STYLE[letter])
        markers.append(f" {name} ")
    markers.append(" ")
    markers.append(EMPTY, style="dim")
    markers.append(" offsets")
    if any(p.spans and p.lag.log_start_offset is not None and _Axis.of(p, 2).lo < p.lag.log_start_offset
           for p in partitions):
        markers.append("  ")
        markers.append(GHOST, style="dim red")
        markers.append(" deleted")
    lines.append(markers)
    for line in lines:
        if isinstance(line, Text):
            line.no_wrap = True
            line.overflow = "ellipsis"
            if ascii_only:
                line.plain = line.plain.translate(ASCII)  # same length: the styles stay where they were
                line.overflow = "crop"
    return Group(*lines)


def print_timeline(partitions: Sequence[PartitionTimeline], *, now: int, console: Console) -> None:
    """Print :func:`timeline_text` on ``console`` at its width, in ASCII where the console's file cannot
    show the block characters (``human.unicode_ok``)."""
    ascii_only = not unicode_ok(console.file)
    console.print(timeline_text(partitions, now=now, width=console.width, ascii_only=ascii_only),
                  no_wrap=True, crop=True)


# ----------------------------------------------------------------------------- HTML

_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px 32px; color: #1f2328;
       background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 2px; font-family: monospace; }
.summary, .stats { color: #57606a; margin: 2px 0; } .stats.held { color: #b42318; font-weight: 600; }
.finding { color: #b42318; margin: 2px 0 2px 12px; font-size: 13px; }
.incomplete { border: 2px solid #b42318; padding: 4px 12px; color: #b42318; }
svg.timeline { display: block; margin-top: 6px; }
svg text { font: 12px monospace; fill: #1f2328; }
.lane-bg { fill: #f3f4f6; } .deleted { fill: #ffffff; fill-opacity: 0.7; stroke: #8c959f; stroke-dasharray: 3 3; }
.span { stroke-width: 1; } .span.commit { fill: #2da44e; stroke: #1a7f37; }
.span.abort { fill: #f4a5a5; stroke: #cf222e; } .span.open { fill: #e3b341; stroke: #9a6700; }
.span.open.hanging { fill: #cf222e; stroke: #82071e; }
.marker line { stroke-width: 2; } .marker text { font-size: 11px; }
.marker.log-start line, .marker.log-end line { stroke: #6e7781; stroke-dasharray: 4 3; }
.marker.lso line { stroke: #0969da; } .marker.lso text { fill: #0969da; font-weight: bold; }
.marker.high-watermark line { stroke: #8250df; } .marker.high-watermark text { fill: #8250df; }
.axis line { stroke: #8c959f; } .axis text { fill: #57606a; font-size: 11px; }
.legend span { display: inline-block; margin-right: 18px; } .swatch { display: inline-block; width: 22px;
       height: 10px; margin-right: 6px; vertical-align: middle; border: 1px solid #888; }
.swatch.commit { background: #2da44e; } .swatch.abort { background: #f4a5a5; }
.swatch.open { background: #e3b341; } .swatch.hanging { background: #cf222e; }
table { border-collapse: collapse; margin-top: 8px; font-size: 13px; }
th, td { border-bottom: 1px solid #d8dee4; padding: 4px 10px; text-align: left; white-space: nowrap; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.held td { color: #b42318; } .quiet { color: #57606a; }
#next-step pre { white-space: pre-wrap; background: #f6f8fa; padding: 8px 12px; font-size: 13px; }
.axis-label { font-style: italic; }
"""

_SVG_W, _LABEL_W, _LANE_H, _TOP, _BOTTOM = 1180, 230, 20, 34, 24


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pixel_groups(spans: list[TransactionSpan], p: PartitionTimeline,
                  x: Callable[[int], float]) -> list[list[TransactionSpan]]:
    """Consecutive spans of one outcome that are each under 3 px wide and touch, as one group (one
    ``rect`` with ``data-count``): a producer with 100k small transactions is not 100k elements."""
    groups: list[list[TransactionSpan]] = []
    prev_end = 0.0
    for s in spans:
        first = x(s.first_offset if s.first_offset is not None else 0)
        end = x(_span_end(s, p) + 1)
        narrow = end - first < 3.0
        if (groups and narrow and groups[-1][-1].outcome == s.outcome and s.outcome != "OPEN"
                and first - prev_end < 1.0 and x(_span_end(groups[-1][-1], p) + 1) - x(
                    groups[-1][-1].first_offset or 0) < 3.0):
            groups[-1].append(s)
        else:
            groups.append([s])
        prev_end = end
    return groups


def _svg(p: PartitionTimeline, now: int) -> str:
    axis = _Axis.of(p, _SVG_W - _LABEL_W - 20)
    lanes = _lanes(p)
    height = _TOP + len(lanes) * _LANE_H + _BOTTOM
    x0 = _LABEL_W

    def x(offset: int) -> float:
        return round(x0 + axis.x(offset), 1)

    out = [f'<svg id="partition-{_e(p.name)}" class="timeline" data-partition="{_e(p.name)}" '
           f'width="{_SVG_W}" height="{height}" viewBox="0 0 {_SVG_W} {height}" role="img" '
           f'aria-label="transactions of {_e(p.name)}">']
    start = p.lag.log_start_offset
    held = _hanging_keys(p)
    for i, (pid, tid, spans) in enumerate(lanes):
        y = _TOP + i * _LANE_H
        out.append(f'<g class="lane" id="lane-{_e(p.name)}-{pid}" data-producer-id="{pid}">')
        out.append(f'<text class="lane-label" x="4" y="{y + 14}">{_e(_clip(_label(pid, tid), 30))}</text>')
        out.append(f'<rect class="lane-bg" x="{x0}" y="{y + 2}" width="{x(axis.hi) - x0}" height="{_LANE_H - 4}"/>')
        for group in _pixel_groups(spans, p, x):
            s, last = group[0], group[-1]
            first = s.first_offset if s.first_offset is not None else axis.lo
            end = _span_end(last, p) + (1 if last.marker_offset is not None else 0)
            w = max(x(end) - x(first), 2.0)
            cls = "span " + s.outcome.lower() + (" hanging" if s.outcome == "OPEN" and pid in held else "")
            if len(group) > 1:
                tip = (f"{len(group)} {s.outcome} transactions of {_label(pid, tid)} in offsets {s.first_offset}.."
                       f"{last.marker_offset} (too narrow to draw one by one)")
            else:
                when = (f"{_when(s.start_ms, now)} to {utc(s.end_ms)}"
                        if s.end_ms is not None and s.start_ms is not None else f"since {_when(s.start_ms, now)}")
                tip = (f"{s.outcome} {_label(pid, tid)} epoch {s.producer_epoch}: offsets {s.first_offset}.."
                       f"{s.last_offset}" + (f", marker {s.marker_offset}" if s.marker_offset is not None else "")
                       + f"; {when}")
            out.append(f'<rect class="{cls}" x="{x(first)}" y="{y + 3}" width="{round(w, 1)}" '
                       f'height="{_LANE_H - 6}" rx="2" data-outcome="{s.outcome}" data-producer-id="{pid}" '
                       f'data-count="{len(group)}" data-first-offset="{_e(s.first_offset)}" '
                       f'data-last-offset="{_e(last.last_offset)}" data-marker-offset="{_e(last.marker_offset)}">'
                       f'<title>{_e(tip)}</title></rect>')
        if start is not None and start > axis.lo:  # over the spans: what lies below the log start is gone
            out.append(f'<rect class="deleted" x="{x0}" y="{y + 2}" width="{round(x(start) - x0, 1)}" '
                       f'height="{_LANE_H - 4}"><title>below the log start {start}: deleted</title></rect>')
        out.append("</g>")
    bottom = _TOP + len(lanes) * _LANE_H
    out.append(f'<g class="axis"><line x1="{x0}" y1="{bottom + 2}" x2="{x(axis.hi)}" y2="{bottom + 2}"/>'
               f'<text x="{x0}" y="{bottom + 16}">{axis.lo}</text>'
               f'<text x="{x(axis.hi)}" y="{bottom + 16}" text-anchor="end">{axis.hi}</text>'
               f'<text class="axis-label x-label" x="{round((x0 + x(axis.hi)) / 2, 1)}" y="{bottom + 16}" '
               f'text-anchor="middle">offset</text>'
               f'<text class="axis-label y-label" x="4" y="{_TOP - 8}">producer id, transactional id</text></g>')
    lag = p.lag
    groups: list[tuple[float, list[tuple[str, str, int]]]] = []
    for (key, _letter, name), offset in zip(MARKERS, (lag.log_start_offset, lag.lso, lag.high_watermark,
                                                      lag.log_end_offset), strict=True):
        if offset is None:
            continue
        mx = x(offset)
        out.append(f'<g class="marker {key}" data-offset="{offset}"><line x1="{mx}" y1="{_TOP - 4}" x2="{mx}" '
                   f'y2="{bottom + 2}"/><title>{_e(name)} {offset}</title></g>')
        if groups and abs(groups[-1][0] - mx) < 1:
            groups[-1][1].append((key, name, offset))
        else:
            groups.append((mx, [(key, name, offset)]))
    for i, (mx, members) in enumerate(groups):
        label = " = ".join(n for _k, n, _o in members) + f" {members[-1][2]}"
        anchor = "end" if mx > _SVG_W - 160 else ("start" if mx < x0 + 60 else "middle")
        y = 12 if i % 2 == 0 else 26
        out.append(f'<text class="marker-label {members[0][0]}" x="{mx}" y="{y}" text-anchor="{anchor}">'
                   f'{_e(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _cell(value: object, num: bool = False) -> str:
    text = "" if value is None else str(value)
    return f'<td class="num">{_e(text)}</td>' if num else f"<td>{_e(text)}</td>"


def _lag_table(rows: Sequence[LagRow]) -> str:
    head = ("partition", "log start", "LSO", "high watermark", "log end", "lag", "open", "oldest open")
    out = ['<table id="lag-table"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in sorted(rows, key=lambda r: (-(r.lag or 0), r.topic, r.partition)):
        oldest = ("" if r.oldest_open_producer_id is None
                  else f"{r.oldest_open_producer_id} from {r.oldest_open_first_offset}"
                  + (" (ghost)" if r.held_by_ghost else ""))
        out.append(f'<tr class="row{" held" if r.lag else ""}" data-partition="{_e(f"{r.topic}-{r.partition}")}">'
                   + _cell(f"{r.topic}-{r.partition}") + _cell(r.log_start_offset, True) + _cell(r.lso, True)
                   + _cell(r.high_watermark, True) + _cell(r.log_end_offset, True) + _cell(r.lag, True)
                   + _cell(r.open_transactions, True) + _cell(oldest) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _hanging_table(rows: Sequence[HangingRow], now: int) -> str:
    if not rows:
        return '<p id="hanging-table" class="quiet">No hanging transactions.</p>'
    head = ("kind", "partition", "producer", "transactional id", "coordinator", "first offset", "open since",
            "for")
    out = ['<table id="hanging-table"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for r in rows:
        out.append(f'<tr class="row {_e(r.kind)}" data-partition="{_e(f"{r.topic}-{r.partition}")}" '
                   f'data-producer-id="{r.producer_id}">'
                   + _cell(r.kind) + _cell(f"{r.topic}-{r.partition}") + _cell(f"{r.producer_id}/{r.producer_epoch}")
                   + _cell(r.transactional_id or "(no id)") + _cell(r.coordinator_state or "")
                   + _cell(r.first_offset, True)
                   + _cell("before the log start" if r.start_ms is None else _when(r.start_ms, now))
                   + _cell("" if r.duration_ms is None else _duration(r.duration_ms), True) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def worst_first(partitions: Sequence[PartitionTimeline]) -> list[PartitionTimeline]:
    """The page's order: partitions in the order of their worst hanging transaction as find-hanging lists
    them (``views.order_hanging``), then the others by lag (largest first), then by name."""
    from kafkatx.render.views import order_hanging

    rank: dict[str, int] = {}
    for i, h in enumerate(order_hanging([h for p in partitions for h in p.hanging])):
        rank.setdefault(f"{h.topic}-{h.partition}", i)
    return sorted(partitions, key=lambda p: (rank.get(p.name, len(rank)), -(p.lag.lag or 0), p.lag.topic,
                                             p.lag.partition))


def timeline_html(partitions: Sequence[PartitionTimeline], *, now: int, lag_rows: Sequence[LagRow],
                  hanging_rows: Sequence[HangingRow], title: str = "kafkatx timeline",
                  next_steps: Sequence[str] = (), incomplete: Sequence[Unreadable] = ()) -> str:
    """The whole page: the summary and the next step (``next_steps``: find-hanging's summary lines), the
    timelines per partition with transactions, worst first, then the lag and hanging tables.

    ``incomplete``: partitions the answer could not read (cli.md "Incomplete answers"): said first, and
    the page never says "nothing is hanging" then, since it did not look at everything."""
    partitions = worst_first(partitions)
    unread: dict[str, Unreadable] = {}
    for u in incomplete:
        unread.setdefault(u.partition, u)
    body = [f"<h1>{_e(title)}</h1>", f'<p class="summary" id="summary">{_e("; ".join(_summary(partitions, now)))}</p>',
            '<p class="legend"><span><i class="swatch commit"></i>committed</span>'
            '<span><i class="swatch abort"></i>aborted</span><span><i class="swatch open"></i>open</span>'
            '<span><i class="swatch hanging"></i>open and hanging (find-hanging)</span>'
            "<span>lines: log start, LSO (blue), high watermark (violet), log end</span></p>"]
    if unread:
        n = len(unread)
        items = "".join(f"<li>{_e(name)}: {_e(u.file or '')}{_e(f' byte {u.position}' if u.position is not None else '')}"
                        f" {_e(u.reason)}</li>" for name, u in unread.items())
        body.append(f'<section id="incomplete" class="incomplete"><h2>incomplete: {n} partition'
                    f'{"s" if n != 1 else ""} could not be read</h2><p>They are left out of everything below: '
                    f"this page is not an all-clear for them.</p><ul>{items}</ul></section>")
    if next_steps:
        body.append('<section id="next-step"><h2>next step</h2><pre>' + _e("\n".join(next_steps)) + "</pre></section>")
    elif unread:
        body.append('<p id="next-step" class="quiet">Nothing is hanging in the partitions read; fix or check the '
                    "unreadable ones above first.</p>")
    else:
        body.append('<p id="next-step" class="quiet">Nothing is hanging: no repair to run.</p>')
    for p in partitions:
        if not p.spans:
            continue
        body.append(f'<section class="partition" id="section-{_e(p.name)}"><h2>{_e(p.name)}</h2>')
        body.append(f'<p class="stats{" held" if p.lag.lag else ""}">{_e(_stats(p.lag))}</p>')
        body.extend(f'<p class="finding">{_e(_hanging_line(h, now))}</p>' for h in p.hanging)
        body.append(_svg(p, now))
        body.append("</section>")
    quiet = [p.name for p in partitions if not p.spans]
    if quiet:
        body.append(f'<p class="quiet" id="quiet">No transactions in: {_e(", ".join(quiet))}</p>')
    body.append('<h2 id="lag">lag</h2>')
    body.append(_lag_table(lag_rows))
    body.append('<h2 id="hanging">find-hanging</h2>')
    body.append(_hanging_table(hanging_rows, now))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


__all__ = ["print_timeline", "timeline_html", "timeline_text"]
