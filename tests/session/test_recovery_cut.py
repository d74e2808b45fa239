"""Bytes that the broker's recovery truncates are read by no replay: ``find-hanging``, ``timeline`` and
``kafkatx scan``'s partition replay tell the same open transactions.

The partition is ``fixtures/loading/torn-tail`` (an unclean shutdown, recovery point below the last
segment's batches: ``build_loading.torn_tail``) with its torn tail replaced by two whole batches: first a
batch whose CRC does not hold (offset 7), then a valid transactional batch of producer 9999 at offset 3.
Kafka's ``LogSegment.recover`` checks each batch (``ensureValid``) and truncates the segment at the first one
that fails, so the batch after it is gone with it, whatever offset it carries: the log ends at 7 and the
only open transaction is producer 5's from 5 (its COMMIT was the torn batch), as in the fixture itself.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.format.record_batch import Record, build_batch
from kafkatx.spark import tasks as X
from kafkatx.spark.job import plan_scan

REPO = Path(__file__).resolve().parents[2]
TORN = REPO / "fixtures" / "loading" / "torn-tail"
NOW = 1_700_007_200_000
T0 = 1_700_000_000_000


def _crafted(tmp_path: Path) -> Path:
    d = tmp_path / "torn-then-stale"
    shutil.copytree(TORN, d)
    log = d / "events-0" / "00000000000000000000.log"
    data = log.read_bytes()
    torn = build_batch([Record(offset=7, timestamp=T0 + 7_000, key=None, value=b"x")], producer_id=4242,
                       producer_epoch=0, base_sequence=0, is_transactional=True)
    bad = bytearray(torn)
    bad[-1] ^= 0xFF  # its CRC no longer holds
    stale = build_batch([Record(offset=3, timestamp=T0 + 3_000, key=None, value=b"y")], producer_id=9999,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    log.write_bytes(data[:_first_partial_batch(data)] + bytes(bad) + stale)
    return d


def _first_partial_batch(data: bytes) -> int:
    """Where the fixture's torn batch starts: after the last batch whose declared length fits the file."""
    pos = 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        if pos + size > len(data):
            break
        pos += size
    return pos


def _cli(*args: str) -> object:
    result = CliRunner().invoke(app, [*args, "--now", str(NOW), "--format", "json"], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_the_batches_after_a_failed_check_are_read_by_no_replay(tmp_path: Path) -> None:
    d = _crafted(tmp_path)
    hanging = _cli("find-hanging", "--log-dir", str(d))
    assert isinstance(hanging, list)
    assert {(h["producer_id"], h["first_offset"]) for h in hanging} == {(5, 5)}
    spans = _cli("timeline", "--log-dir", str(d))
    assert isinstance(spans, list)
    assert {(s["producer_id"], s["first_offset"]) for s in spans if s["outcome"] == "OPEN"} == {(5, 5)}
    pid = X._COLUMN_I["span_producer_id"]
    (info,) = plan_scan([d]).infos
    rows = list(X._replay_one(info, NOW))
    assert {row[pid] for row in rows if row[0] == X.OPEN} == {5}
    (lag,) = [row for row in rows if row[0] == X.LAG]
    assert lag[4 + X._LAG_I] is not None  # the partition was answered, not skipped
