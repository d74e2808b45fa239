"""The human views on rows the fixtures do not have: online rows (absent values), refusals, failures,
expired producers, narrow terminals. Expected texts are written by hand from the rows given."""

from __future__ import annotations

import io

from kafkatx.render import describe_views, repair_views, verify_views, views
from kafkatx.render.descriptions import abort_selection, invocation
from kafkatx.rows import AbortPlanRow, LagRow, ProducerRowWithExpiry, TransactionRow

NOW = 1_700_007_200_000  # 2023-11-15 00:13:20Z
ONLINE = invocation(bootstrap_server="kafka-1:9092", command_config="client.properties")


def render(show, *args, width: int = 80, **kw) -> list[str]:
    out = io.StringIO()
    show(*args, out=out, width=width, **kw)
    return out.getvalue().splitlines()


def _lag(topic, partition, lso, hw, open_=None, pid=None, first=None, ghost=None) -> LagRow:
    return LagRow(topic=topic, partition=partition, log_start_offset=None, lso=lso, high_watermark=hw,
                  log_end_offset=hw, lag=None if lso is None else hw - lso, open_transactions=open_,
                  oldest_open_producer_id=pid, oldest_open_first_offset=first, held_by_ghost=ghost)


def test_online_lag_without_describe_producers_shows_what_it_has():
    rows = [_lag("a", 0, 10, 10), _lag("b", 3, 5, 90), _lag("a", 1, 7, 9)]
    lines = render(views.show_lag, rows, "table", ONLINE)
    # no column of only "-" (log start, open, oldest open, ghost are unknown online without DescribeProducers)
    assert lines[0].split() == ["partition", "LSO", "HW", "end", "lag"]
    assert [line.split()[0] for line in lines[2:5]] == ["b-3", "a-1", "a-0"]  # worst first
    assert "2 of 3 partitions held back: 87 offsets" in " ".join(lines)
    # the next step repeats the online source flags (continued with " \\" past 80 columns)
    assert "kafkatx find-hanging --bootstrap-server kafka-1:9092 --command-config client.properties" in \
        " ".join(line.strip().rstrip("\\").strip() for line in lines)


def test_list_txn_online_names_the_coordinator_broker_and_marks_late_transactions():
    rows = [TransactionRow(transactional_id="t-ok", producer_id=1, producer_epoch=0, state="CompleteCommit",
                           timeout_ms=60_000, start_timestamp_ms=NOW - 10_000, last_update_timestamp_ms=NOW - 9_000,
                           partitions=[], coordinator_id=2),
            TransactionRow(transactional_id="t-late", producer_id=2, producer_epoch=3, state="Ongoing",
                           timeout_ms=60_000, start_timestamp_ms=NOW - 6_600_000, last_update_timestamp_ms=-1,
                           partitions=["x-0"], coordinator_id=1)]
    lines = render(views.show_list, rows, "table", ONLINE, NOW, online=True, width=160)
    assert lines[0].split()[-1] == "coordinator"
    assert lines[2].startswith("t-late") and "Ongoing (late)" in lines[2]
    assert "2023-11-14 22:23Z (1h50m ago)" in lines[2]  # NOW - 1h50m
    assert "2 transactional ids, 1 Ongoing (1 past its timeout)." in lines


def test_refused_plan_says_the_reason_in_full_even_when_the_table_cuts_it():
    why = "refused: producer epoch 32767 is Short.MaxValue: Kafka cannot bump it (prepareFenceProducerEpoch)"
    row = AbortPlanRow(kind="timed-out", topic="orders", partition=0, producer_id=7, producer_epoch=32767,
                       transactional_id="stuck", coordinator_state="Ongoing", first_offset=5, start_ms=1,
                       duration_ms=2, action=why)
    lines = render(repair_views.show_abort, [row], "table", invocation(["/data"]), title="refused: nothing will be changed")
    assert all(len(line) <= 80 for line in lines)
    assert lines[0] == "refused: nothing will be changed"
    assert "First: " + why in " ".join(lines)  # wrapped, but all of it
    assert not any("--execute" in line for line in lines)


def test_failed_execution_is_said_with_its_first_failure():
    row = AbortPlanRow(kind="orphaned", topic="o", partition=1, producer_id=1, producer_epoch=0,
                       transactional_id=None, coordinator_state=None, first_offset=3, start_ms=None,
                       duration_ms=None, action="write-abort-marker", result="failed: NOT_LEADER_OR_FOLLOWER")
    text = "\n".join(render(repair_views.show_abort, [row], "text", ONLINE, applied=True))
    assert "1 row of 1 failed" in text and "First: failed: NOT_LEADER_OR_FOLLOWER" in text


def test_expired_and_ghost_producers_get_their_columns_only_when_present():
    rows = [ProducerRowWithExpiry(producer_id=9, producer_epoch=0, coordinator_epoch=0, last_sequence=4,
                                  last_timestamp_ms=NOW - 90_000_000, current_txn_first_offset=None, expired=True),
            ProducerRowWithExpiry(producer_id=3, producer_epoch=1, coordinator_epoch=0, last_sequence=1,
                                  last_timestamp_ms=NOW - 60_000, current_txn_first_offset=12)]
    lines = render(describe_views.show_producers, rows, "text", invocation(["d"]), NOW, topic="t", partition=0, width=120)
    header = lines[1].split()
    assert "expired" in header and "ghost" not in header
    assert lines[2].split()[0] == "3"  # the open transaction first, the expired producer last
    assert "1d1h ago" in lines[3] and lines[3].split()[-1] == "expired"


def test_abort_selection_flags():
    assert abort_selection(["a", "b"]) == ["--transactional-id", "a", "--transactional-id", "b"]
    assert abort_selection((), "t", 0, 5) == ["--topic", "t", "--partition", "0", "--producer-id", "5"]
    assert abort_selection(all_=True) == ["--all"]


def _note(partition: str, file: str, message: str, check: str = "startup-rebuild-index") -> dict:
    path = f"/d/{partition}/{file}"
    return {"check": check, "severity": "info", "file": path, "position": 8, "partition": partition,
            "message": f"{path}: {message}"}


def test_many_startup_notes_of_one_kind_are_one_row_with_their_count():
    """A crashed broker leaves hundreds of preallocated indexes: the table says how many, once, and
    keeps a real problem first; few notes of a kind stay one row each."""
    preallocated = [_note(f"t-{i}", "00000000000000000000.index",
                          f"index preallocated, rebuilt at startup (10485760 bytes, zero-filled after {i} entries)")
                    for i in range(7)]
    stray = [_note("s-0", "00000000000000000005.snapshot", "is above the log end offset 3 (removeStraySnapshots)",
                   check="startup-delete-snapshot")]
    error = {"check": "index-position", "severity": "error", "file": "/d/x-0/00000000000000000000.index",
             "position": 16, "partition": "x-0", "message": "entry 2 points at byte 99, not a batch start"}
    lines = render(verify_views.show_verify, [*preallocated, *stray, error], "table", width=120)
    # each row: its head (severity, check, where), then its message indented under it
    heads = [i for i, line in enumerate(lines) if line.strip() and not line.startswith(" ")
             and line.split()[0] in ("error", "warning", "info")]
    assert [lines[i].split()[0] for i in heads] == ["error", "info", "info"]
    [grouped] = [i for i in heads if "7 files" in lines[i]]
    assert "index preallocated" in lines[grouped + 1] and "rebuilt at startup" in lines[grouped + 1]
    assert "zero-filled after" not in " ".join(lines)  # the per-file details stay in --format json
    assert sum("removeStraySnapshots" in line or "above the log end" in line for line in lines) == 1
    assert "7 startup notes" not in " ".join(lines)  # the summary counts all of them
    assert "8 startup notes" in " ".join(lines)
