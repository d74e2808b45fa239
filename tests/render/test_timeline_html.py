"""``kafkatx timeline --html``: one self-contained page, opened in a real headless browser (Debian's chromium).

The page is written by the CLI from ``fixtures/hanging``; the browser loads it from a file URL,
dumps the DOM it parsed and takes a screenshot. The expected values come from other commands and
files, not from the HTML renderer: span counts from ``timeline --format json``, markers from ``lag
--format json``, the hanging table from ``fixtures/expected/hanging/find-hanging.json``. The
screenshot is decoded here (a small PNG reader) and must show the span colours of the page's CSS.
Skipped, saying why, when no chromium is installed (``.ci/run`` installs it where apt works).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

REPO = Path(__file__).resolve().parents[2]
HANGING = REPO / "fixtures" / "hanging"
NOW = "1700007200000"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium): "
                                                            "the page cannot be opened in a real browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "timeline.html"
    _cli("timeline", "--log-dir", str(HANGING), "--now", NOW, "--html", str(out), "--format", "json")
    return out


def _browser(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([CHROMIUM or "chromium", *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=180, cwd=tmp)


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the enclosing ``svg.timeline`` id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str], str | None]] = []
        self._svg: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self._svg = a.get("id")
        self.tags.append((tag, a, self._svg))

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg = None

    def find(self, tag: str, cls: str) -> list[tuple[dict[str, str], str | None]]:
        return [(a, svg) for t, a, svg in self.tags if t == tag and cls in a.get("class", "").split()]


def test_page_is_self_contained(page):
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    for bad in ("http:", "https:", "//", "<script", "src=", "@import", "url(", "<link"):
        assert bad not in text, bad


@needs_chromium
def test_browser_dom_has_one_lane_group_per_partition_and_the_spans_of_the_json(page, tmp_path):
    proc = _browser(page, tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Elements()
    dom.feed(proc.stdout)
    spans = json.loads(_cli("timeline", "--log-dir", str(HANGING), "--now", NOW, "--format", "json"))
    lag = {f"{r['topic']}-{r['partition']}": r
           for r in json.loads(_cli("lag", "--log-dir", str(HANGING), "--format", "json"))}
    by_partition: dict[str, list[dict]] = {}
    for s in spans:
        by_partition.setdefault(f"{s['topic']}-{s['partition']}", []).append(s)

    svgs = {a["id"] for a, _svg in dom.find("svg", "timeline")}
    assert svgs == {f"partition-{name}" for name in by_partition}
    for name, rows in by_partition.items():
        sid = f"partition-{name}"
        lanes = [a for a, svg in dom.find("g", "lane") if svg == sid]
        assert sorted(int(a["data-producer-id"]) for a in lanes) == sorted({r["producer_id"] for r in rows})
        drawn: Counter[str] = Counter()
        for a, svg in dom.find("rect", "span"):
            if svg == sid:
                drawn[a["data-outcome"]] += int(a["data-count"])  # touching spans under 3 px are one rect
        assert drawn == Counter(r["outcome"] for r in rows), name
        for outcome in ("commit", "abort", "open"):
            assert sum(int(a["data-count"]) for a, svg in dom.find("rect", outcome) if svg == sid) == drawn[
                outcome.upper()]
        markers = {a["class"].split()[1]: int(a["data-offset"]) for a, svg in dom.find("g", "marker") if svg == sid}
        assert markers == {"log-start": lag[name]["log_start_offset"], "lso": lag[name]["lso"],
                           "high-watermark": lag[name]["high_watermark"], "log-end": lag[name]["log_end_offset"]}

    hanging = json.loads((REPO / "fixtures" / "expected" / "hanging" / "find-hanging.json").read_text())
    rows = [a for a, _svg in dom.find("tr", "row") if a.get("data-producer-id")]
    assert sorted((a["data-partition"], int(a["data-producer-id"]), a["class"].split()[1]) for a in rows) == sorted(
        (f"{h['topic']}-{h['partition']}", h["producer_id"], h["kind"]) for h in hanging)
    assert len(dom.find("rect", "hanging")) == len(hanging)
    lag_rows = [a for t, a, _svg in dom.tags if t == "tr" and "row" in a.get("class", "") and
                "data-producer-id" not in a]
    assert sorted(a["data-partition"] for a in lag_rows) == sorted(lag)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _c, _f, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
        prev = line
    return width, height, rows


@needs_chromium
def test_screenshot_shows_the_span_colours(page, tmp_path):
    shot = tmp_path / "shot.png"
    proc = _browser(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", "--hide-scrollbars")
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    counts: Counter[bytes] = Counter()
    for row in rows[::2]:
        for x in range(0, len(row), 6):  # every other pixel
            counts[row[x:x + 3]] += 1
    total = sum(counts.values())
    white = counts[bytes((255, 255, 255))]
    assert white < total * 0.97, "the page is (almost) blank"
    assert len(counts) > 50, "too few colours for a drawn page"
    css = page.read_text()
    # each span fill of the page's CSS covers far more than its legend swatch (about 50 samples)
    for name in ("commit", "abort", "open", "open.hanging"):
        m = re.search(r"\.span\." + re.escape(name) + r" \{ fill: #([0-9a-f]{6})", css)
        assert m, name
        rgb = bytes.fromhex(m.group(1))
        assert counts[rgb] > 250, f"{name} spans ({m.group(1)}) not visible in the screenshot"


def test_thousands_of_narrow_spans_are_grouped_and_counted():
    from kafkatx.render.timeline import timeline_html
    from kafkatx.rows import LagRow
    from kafkatx.session.timeline import PartitionTimeline, TransactionSpan

    # 2000 committed transactions of 3 offsets (2 data + marker) each, 0..5999: 6000 offsets over about
    # 930 px, so each is under 1 px wide and touches the next; then one wide abort and an open span.
    spans = [TransactionSpan(topic="t", partition=0, producer_id=1, producer_epoch=0, transactional_id="a",
                             first_offset=3 * i, last_offset=3 * i + 1, outcome="COMMIT", start_ms=1, end_ms=2,
                             marker_offset=3 * i + 2, coordinator_epoch=0, duration_ms=1) for i in range(2000)]
    spans.append(TransactionSpan(topic="t", partition=0, producer_id=1, producer_epoch=0, transactional_id="a",
                                 first_offset=6000, last_offset=6998, outcome="ABORT", start_ms=1, end_ms=2,
                                 marker_offset=6999, coordinator_epoch=0, duration_ms=1))
    lag = LagRow(topic="t", partition=0, log_start_offset=0, lso=7000, high_watermark=7000, log_end_offset=7000,
                 lag=0, open_transactions=0, oldest_open_producer_id=None, oldest_open_first_offset=None)
    part = PartitionTimeline(topic="t", partition=0, lag=lag, spans=spans, hanging=[])
    dom = _Elements()
    dom.feed(timeline_html([part], now=3, lag_rows=[lag], hanging_rows=[]))
    rects = dom.find("rect", "span")
    assert len(rects) < 50
    assert sum(int(a["data-count"]) for a, _svg in rects if a["data-outcome"] == "COMMIT") == 2000
    assert [a["data-count"] for a, _svg in rects if a["data-outcome"] == "ABORT"] == ["1"]


# ------------------------------------------------------------------ a report to share, read by the on-call

@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640)])
def test_page_mode_follows_the_umask(tmp_path, umask, mode):
    """Written like any report (0666 less the umask), not 0600 as the temporary file it starts as."""
    import os

    out = tmp_path / "t.html"
    old = os.umask(umask)
    try:
        _cli("timeline", "--log-dir", str(HANGING), "--now", NOW, "--html", str(out), "--format", "json")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == mode


def test_page_puts_the_worst_partition_first_with_the_next_step(page):
    text = page.read_text()
    tags = _Elements()
    tags.feed(text)
    sections = [a["id"].removeprefix("section-") for a, _svg in tags.find("section", "partition")]
    # find-hanging's order (fixtures/expected/hanging/find-hanging.json sorted as its table: orphaned before
    # timed-out before incomplete-markers, the longest open first): orders-1 (inventory-sync, 105 min), then
    # payments-1 (1007), __consumer_offsets-2 (1010), then orders-0 (timed-out stale-loader).
    expected = json.loads((REPO / "fixtures" / "expected" / "hanging" / "find-hanging.json").read_text())
    held = {f"{r['topic']}-{r['partition']}" for r in expected}
    assert sections[:4] == ["orders-1", "payments-1", "__consumer_offsets-2", "orders-0"]
    assert set(sections[:len(held)]) == held  # every held partition before any healthy one
    step = text.split('id="next-step"', 1)[1].split("</section>", 1)[0]
    assert "kafkatx abort-hanging --log-dir" in step and "--transactional-id inventory-sync" in step
    assert text.index('id="next-step"') < text.index('class="partition"')


def test_page_axes_are_labelled(page):
    tags = _Elements()
    tags.feed(page.read_text())
    svgs = {svg for _a, svg in tags.find("g", "lane")}
    x_labels = {svg for _a, svg in tags.find("text", "x-label")}
    y_labels = {svg for _a, svg in tags.find("text", "y-label")}
    assert svgs and svgs == x_labels == y_labels
    assert ">offset</text>" in page.read_text()
