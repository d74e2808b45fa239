"""``kafkatx timeline``'s spans against what the fixture generators wrote, never against kafkatx's own output.

* ``fixtures/hanging``: the "Transactional spans" table of ``fixtures/README.md`` (written by
  ``build_fixtures.py`` from the simulator's bookkeeping) gives every span's partition, producer,
  data offsets, outcome/marker and start; the marker batches of ``expected/hanging/scenario.json``
  give the end timestamps; its coordinator table says which ids were tombstoned.
* ``fixtures/loading``: spans reasoned by hand from the comments of ``build_loading.py`` (ghost-clean:
  only the snapshot remembers producer 5's transaction from 2; torn-tail: recovery truncates the
  COMMIT marker, so the span is open again).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.session import offline

REPO = Path(__file__).resolve().parents[2]
HANGING = REPO / "fixtures" / "hanging"
EXPECTED = REPO / "fixtures" / "expected"
NOW = 1700007200000
KEYS = ["topic", "partition", "producer_id", "producer_epoch", "transactional_id", "first_offset", "last_offset",
        "outcome", "start_ms", "end_ms"]


def _readme_section(name: str) -> str:
    text = (REPO / "fixtures" / "README.md").read_text()
    start = text.index(f"### `{name}` (--now")
    end = text.find("\n### ", start + 1)
    return text[start:end if end >= 0 else None]


def _table(section: str, heading: str) -> list[list[str]]:
    block = section[section.index(heading):]
    rows = []
    for line in block.splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append(cells)
    return rows[2:]  # header and separator


def expected_hanging_spans() -> list[dict]:
    section = _readme_section("hanging")
    tombstoned = {r[0] for r in _table(section, "Coordinator (final state") if r[3] == "(tombstoned)"}
    scenario = json.loads((EXPECTED / "hanging" / "scenario.json").read_text())["partitions"]
    spans = []
    for name, tid, pid, epoch, data, end, start in _table(section, "Transactional spans"):
        if data == "(no data)":
            continue  # a marker that ends nothing in this partition: no span (and no .txnindex entry)
        topic, _, part = name.rpartition("-")
        first, last = (int(x) for x in data.split(".."))
        m = re.fullmatch(r"(\d+)(?: \(marker (\d+)\))?", epoch)
        assert m, epoch
        if end == "OPEN":
            outcome, marker, end_ms, span_epoch = "OPEN", None, None, int(m.group(1))
        else:
            outcome, at = end.split(" @ ")
            marker = int(at)
            batch = next(b for b in scenario[name]["batches"] if b["base_offset"] == marker)
            assert batch["control"] == outcome
            end_ms = batch["max_timestamp_ms"]
            span_epoch = int(m.group(2) or m.group(1))  # the marker's epoch ends the span
        spans.append({"topic": topic, "partition": int(part), "producer_id": int(pid), "producer_epoch": span_epoch,
                      "transactional_id": None if tid in tombstoned else tid, "first_offset": first,
                      "last_offset": last, "outcome": outcome, "start_ms": int(start), "end_ms": end_ms,
                      "marker_offset": marker})
    return spans


def _key(s: dict) -> tuple:
    return (s["topic"], s["partition"], s["first_offset"], s["producer_id"])


def _cli_json(*args: str) -> list[dict]:
    result = CliRunner().invoke(app, ["timeline", *args, "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_hanging_spans_equal_the_generators_bookkeeping():
    expected = expected_hanging_spans()
    assert len(expected) == 34  # the README table: 35 rows, one a marker without data
    got = _cli_json("--log-dir", str(HANGING), "--now", str(NOW))
    assert list(got[0])[: len(KEYS)] == KEYS  # cli.md's keys, in its order
    compared = [{k: s[k] for k in [*KEYS, "marker_offset"]} for s in got]
    assert sorted(compared, key=_key) == sorted(expected, key=_key)


def test_span_counts_per_partition_match_the_markers_dump_segment_decodes():
    """An independent decoder path: the COMMIT/ABORT markers `dump-segment` reports, per partition,
    equal the completed spans (every marker in these partitions ends a transaction with data)."""
    got = _cli_json("--log-dir", str(HANGING), "--now", str(NOW))
    for name in ("orders-0", "orders-1", "payments-0", "payments-1", "__consumer_offsets-1"):
        logs = sorted((HANGING / name).glob("*.log"))
        result = CliRunner().invoke(app, ["dump-segment", *map(str, logs), "--format", "json"],
                                    catch_exceptions=False)
        batches = json.loads(result.stdout)
        markers = {"COMMIT": 0, "ABORT": 0}
        for b in batches:
            if b["is_control"] and b["control_type"] in markers:
                markers[b["control_type"]] += 1
        topic, _, part = name.rpartition("-")
        spans = [s for s in got if (s["topic"], s["partition"]) == (topic, int(part))]
        assert {o: sum(1 for s in spans if s["outcome"] == o) for o in markers} == markers, name


def test_lag_and_hanging_rows_equal_the_expected_files():
    answer = offline.timeline([HANGING], now=NOW)
    from kafkatx.render import to_plain

    assert [to_plain(p.lag) for p in answer.rows] == json.loads((EXPECTED / "hanging" / "lag.json").read_text())
    hanging = [to_plain(h) for p in answer.rows for h in p.hanging]
    assert hanging == json.loads((EXPECTED / "hanging" / "find-hanging.json").read_text())


def test_ghost_span_starts_below_the_log_start():
    # build_loading.ghost_clean: producer 5's transaction from 2 survives only in the shutdown
    # snapshot 25; retention and DeleteRecords moved the log start to 20; producer 7 is idempotent only.
    got = _cli_json("--log-dir", str(REPO / "fixtures" / "loading" / "ghost-clean"), "--now", str(NOW))
    assert [{k: s[k] for k in KEYS} for s in got] == [
        {"topic": "events", "partition": 0, "producer_id": 5, "producer_epoch": 0, "transactional_id": None,
         "first_offset": 2, "last_offset": 2, "outcome": "OPEN", "start_ms": None, "end_ms": None}]
    part = offline.timeline([REPO / "fixtures" / "loading" / "ghost-clean"], now=NOW).rows[0]
    assert (part.lag.log_start_offset, part.lag.lso, part.lag.high_watermark) == (20, 20, 25)
    assert [h.kind for h in part.hanging] == ["ghost"]


def test_torn_commit_leaves_the_span_open():
    # build_loading.torn_tail: the COMMIT at 7 is torn and truncated by recovery: 5..6 is open again.
    got = _cli_json("--log-dir", str(REPO / "fixtures" / "loading" / "torn-tail"), "--now", str(NOW))
    assert [{k: s[k] for k in KEYS} for s in got] == [
        {"topic": "events", "partition": 0, "producer_id": 5, "producer_epoch": 0, "transactional_id": None,
         "first_offset": 5, "last_offset": 6, "outcome": "OPEN", "start_ms": 1700000005000, "end_ms": None}]


def test_topic_and_partition_filters():
    got = _cli_json("--log-dir", str(HANGING), "--now", str(NOW), "--topic", "orders", "--partition", "1")
    assert {(s["topic"], s["partition"]) for s in got} == {("orders", 1)}
    assert len(got) == sum(1 for s in expected_hanging_spans() if (s["topic"], s["partition"]) == ("orders", 1))


def test_unknown_partition_is_exit_3_one_line():
    result = CliRunner().invoke(app, ["timeline", "--log-dir", str(HANGING), "--topic", "nope"])
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1 and "nope" in result.stderr


def test_online_source_is_a_usage_error():
    result = CliRunner().invoke(app, ["timeline", "--bootstrap-server", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("kafkatx: timeline reads the partitions' log files")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("fmt", ["jsonl", "yaml"])
def test_other_machine_formats_carry_the_same_rows(fmt):
    import yaml

    result = CliRunner().invoke(app, ["timeline", "--log-dir", str(HANGING), "--now", str(NOW), "--format", fmt],
                                catch_exceptions=False)
    rows = ([json.loads(line) for line in result.stdout.splitlines()] if fmt == "jsonl"
            else yaml.safe_load(result.stdout))
    assert rows == _cli_json("--log-dir", str(HANGING), "--now", str(NOW))


def test_real_process_piped_text_has_no_ansi_and_fits_80_columns(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "80", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "timeline", "--log-dir", str(HANGING),
                           "--now", str(NOW), "--html", str(tmp_path / "t.html")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    assert "orders-0" in proc.stdout and (tmp_path / "t.html").stat().st_size > 10_000
    assert f"wrote {tmp_path / 't.html'}" in proc.stderr
