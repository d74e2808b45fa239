"""The terminal timeline on made-up partitions: many producers, narrow terminals, a ghost.

Spans are written here by hand; what is checked is the drawing (widths, glyph counts, lane cap),
whose expected values follow from the axis arithmetic stated in each test.
"""

from __future__ import annotations

import io

from rich.console import Console

from kafkatx.render.timeline import GLYPH, print_timeline
from kafkatx.rows import LagRow
from kafkatx.session.timeline import PartitionTimeline, TransactionSpan

NOW = 1_700_007_200_000


def span(pid: int, first: int, last: int, outcome: str, marker: int | None = None) -> TransactionSpan:
    return TransactionSpan(topic="t", partition=0, producer_id=pid, producer_epoch=0, transactional_id=f"id-{pid}",
                           first_offset=first, last_offset=last, outcome=outcome, start_ms=NOW - 60_000,
                           end_ms=None if marker is None else NOW - 30_000, marker_offset=marker,
                           coordinator_epoch=0, duration_ms=None)


def partition(spans: list[TransactionSpan], *, start: int = 0, lso: int, end: int) -> PartitionTimeline:
    lag = LagRow(topic="t", partition=0, log_start_offset=start, lso=lso, high_watermark=end, log_end_offset=end,
                 lag=end - lso, open_transactions=sum(s.outcome == "OPEN" for s in spans),
                 oldest_open_producer_id=None, oldest_open_first_offset=None)
    return PartitionTimeline(topic="t", partition=0, lag=lag, spans=spans, hanging=[])


def render(parts: list[PartitionTimeline], width: int) -> str:
    out = io.StringIO()
    print_timeline(parts, now=NOW, console=Console(file=out, width=width, no_color=True, highlight=False))
    return out.getvalue()


def test_many_producers_are_capped_and_open_ones_kept():
    spans = [span(pid, pid * 10, pid * 10 + 5, "COMMIT", pid * 10 + 6) for pid in range(1, 31)]
    spans.append(span(2, 400, 405, "OPEN"))  # producer 2 is old but holds the LSO: it must stay
    text = render([partition(spans, lso=400, end=410)], 80)
    lanes = [line for line in text.splitlines() if line.startswith("  ") and " id-" in line]
    assert len(lanes) == 12
    assert any(line.startswith("  2 id-2 ") for line in lanes)
    assert "+ 18 more producers (18 committed, 0 aborted" in text


def test_every_line_fits_narrow_and_wide_terminals():
    spans = [span(7, 0, 3, "COMMIT", 4), span(8, 5, 6, "ABORT", 7), span(9, 8, 9, "OPEN")]
    part = partition(spans, lso=8, end=10)
    for width in (40, 60, 80, 132, 200):
        text = render([part], width)
        assert max(len(line) for line in text.splitlines()) <= width, width


def test_cells_follow_the_offsets():
    # 80 columns: labels 20 wide, so 80 - 2 - 20 - 1 - 1 = 56 cells for offsets 0..56 (hi = log end 56):
    # offset o sits in cell o * 55 // 56. Producer 1 commits 0..27 (marker 27): cells 0..26 (27 cells).
    part = partition([span(1, 0, 26, "COMMIT", 27), span(2, 28, 40, "OPEN")], lso=28, end=56)
    lines = render([part], 80).splitlines()
    lane1 = next(line for line in lines if line.startswith("  1 id-1"))
    lane2 = next(line for line in lines if line.startswith("  2 id-2"))
    cells1, cells2 = lane1[23:], lane2[23:]
    assert len(cells1) == 56
    assert cells1.count(GLYPH["COMMIT"]) == 27 and cells1.startswith(GLYPH["COMMIT"] * 27)
    # the open span runs from 28 (cell 27) to the log end 56 (the last cell, 55): 29 cells
    assert cells2.count(GLYPH["OPEN"]) == 29 and cells2.endswith(GLYPH["OPEN"] * 29)
    ruler = next(line for line in lines if line.startswith("  offsets 0-56"))[23:]
    assert ruler.index("S") == 0 and ruler.index("L") == 27 and ruler.endswith("HE")


def test_ghost_span_is_shaded_below_the_log_start():
    # offsets 0..20 over 56 cells; the log start 10 is cell 10 * 55 // 20 = 27: cells 0..26 are deleted.
    part = partition([span(5, 0, 0, "OPEN")], start=10, lso=10, end=20)
    lane = next(line for line in render([part], 80).splitlines() if line.startswith("  5 id-5"))[23:]
    assert lane[:27] == "░" * 27 and lane[27:] == GLYPH["OPEN"] * 29


def test_back_to_back_transactions_stay_countable():
    # three commits 0..9, 10..19, 20..29 (markers 9, 19, 29) over 56 cells for offsets 0..30: each covers
    # about 18 cells and touches the next, so the 2nd and 3rd start with a divider.
    part = partition([span(1, 0, 8, "COMMIT", 9), span(1, 10, 18, "COMMIT", 19), span(1, 20, 28, "COMMIT", 29)],
                     lso=30, end=30)
    lane = next(line for line in render([part], 80).splitlines() if line.startswith("  1 id-1"))[23:]
    assert lane.count("│") == 2
    assert lane.startswith(GLYPH["COMMIT"]) and "·" not in lane.rstrip("·")  # no gap between them
