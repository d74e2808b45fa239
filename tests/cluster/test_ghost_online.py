"""Ghost transactions online: find-hanging kind ``ghost``, ``ghost`` in
describe-producers, ``held_by_ghost`` in lag, and abort-hanging clearing them.

These run against FakeCluster (tests/cluster/fakes.py), not Tansu: Tansu has no
DescribeProducers (nor the other KIP-664 APIs), and a ghost can only be seen through it.
The fake models what matters here as Kafka 3.x does: DeleteRecords/retention raises the log
start without touching the leader's producer state (as when a broker loads a ``.snapshot``
whose data retention deleted), and ListOffsets read_committed answers the first unstable
offset clamped to the log start (``UnifiedLog.maybeIncrementFirstUnstableOffset``).

Expected rows are worked out by hand from the scenario below, with the offline ghost rule
(``kafkatx.checks.ghost``): an orphaned open transaction whose first offset is strictly below the
log start is a ghost, with ``start_ms``/``duration_ms`` null.
"""

from __future__ import annotations

from kafkatx.cluster import abort as online_abort
from kafkatx.cluster import service
from kafkatx.rows import AbortPlanRow, HangingRow
from tests.cluster.fakes import FakeCluster

NOW = 10_000_000
MAX = 900_000
OLD = NOW - 1_000_000  # older than MAX
RECENT = NOW - 1_000


def scenario() -> FakeCluster:
    c = FakeCluster()
    c.add_topic("events", 2)
    c.add_topic("audit", 1)
    ev0, ev1, audit = ("events", 0), ("events", 1), ("audit", 0)
    # events-0: offsets 0-9 plain; 10-14 producer 900's transaction (no id maps to it);
    # 15 producer 906's transaction, whose id app-done the coordinator already completed;
    # 16-29 plain; 30-31 producer 901's transaction. Retention then deletes below 30.
    c.append(ev0, 10, producer_id=10, timestamp=OLD)
    c.append(ev0, 5, producer_id=900, producer_epoch=3, transactional=True, timestamp=OLD, coordinator_epoch=2)
    c.append(ev0, 1, producer_id=906, producer_epoch=1, transactional=True, timestamp=OLD)
    c.set_txn("app-done", producer_id=906, producer_epoch=1, state="CompleteAbort", partitions=[], start=OLD)
    c.append(ev0, 14, producer_id=11, timestamp=OLD)
    c.append(ev0, 2, producer_id=901, transactional=True, timestamp=OLD)
    c.delete_records(ev0, 30)
    # events-1: offsets 0-2 plain, 3 a recent open transaction of producer 905; log start -> 4.
    c.append(ev1, 3, producer_id=12, timestamp=OLD)
    c.append(ev1, 1, producer_id=905, transactional=True, timestamp=RECENT)
    c.delete_records(ev1, 4)
    # audit-0: producer 903's transaction (0-1) is Ongoing at its coordinator, 120 s old with
    # a 60 s timeout; offsets 2-4 plain; log start -> 3.
    c.append(audit, 2, producer_id=903, transactional=True, timestamp=OLD)
    c.set_txn("app-t", producer_id=903, state="Ongoing", partitions=[audit], start=NOW - 120_000,
              timeout_ms=60_000)
    c.append(audit, 3, producer_id=13, timestamp=OLD)
    c.delete_records(audit, 3)
    return c


def test_find_hanging_reports_ghosts():
    c = scenario()
    by_pid = {r.producer_id: r for r in service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)}
    assert sorted(by_pid) == [900, 901, 903, 906]
    # first offset 10 < log start 30, no coordinator transaction: a ghost, times unknowable
    assert by_pid[900] == HangingRow(kind="ghost", topic="events", partition=0, producer_id=900, producer_epoch=3,
                                     transactional_id=None, coordinator_state=None, first_offset=10,
                                     start_ms=None, duration_ms=None)
    # the id maps, but its coordinator finished: still nothing will send a marker
    assert (by_pid[906].kind, by_pid[906].transactional_id, by_pid[906].coordinator_state,
            by_pid[906].first_offset, by_pid[906].start_ms) == ("ghost", "app-done", "CompleteAbort", 15, None)
    # first offset == log start: the batch is still readable, an ordinary orphan
    assert (by_pid[901].kind, by_pid[901].first_offset, by_pid[901].start_ms, by_pid[901].duration_ms) == (
        "orphaned", 30, OLD, 1_000_000)
    # below the log start but the coordinator still holds it Ongoing past its timeout: it
    # stays timed-out (the coordinator-side repair closes it), as offline
    assert (by_pid[903].kind, by_pid[903].first_offset, by_pid[903].start_ms) == ("timed-out", 0, NOW - 120_000)


def test_recent_ghost_waits_for_the_max_timeout_like_an_orphan():
    c = scenario()
    # producer 905 (first offset 3 < log start 4) last wrote 1 s ago: not hanging yet ...
    assert 905 not in {r.producer_id for r in service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)}
    # ... but a ghost once older than the max timeout
    rows = service.find_hanging(c, max_timeout_ms=500, now_ms=NOW, topic="events")
    assert {(r.producer_id, r.kind) for r in rows} == {(900, "ghost"), (906, "ghost"), (901, "orphaned"),
                                                       (905, "ghost")}


def test_find_hanging_asks_log_start_only_when_something_is_open():
    c = FakeCluster()
    c.add_topic("quiet", 1)
    c.append(("quiet", 0), 10, producer_id=1, timestamp=OLD)
    c.delete_records(("quiet", 0), 5)
    assert service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW) == []
    assert "ListOffsets" not in c.calls


def test_describe_producers_marks_ghosts():
    c = scenario()
    rows = service.describe_producers(c, topic="events", partition=0)
    assert [(r.producer_id, r.current_txn_first_offset, r.ghost) for r in rows] == [
        (10, None, False), (11, None, False), (900, 10, True), (901, 30, False), (906, 15, True)]
    # a recent one is still a ghost here: describe-producers states a fact, not a verdict
    (r905,) = [r for r in service.describe_producers(c, topic="events", partition=1) if r.producer_id == 905]
    assert r905.ghost is True


def test_describe_producers_with_nothing_open_skips_list_offsets():
    c = FakeCluster()
    c.add_topic("quiet", 1)
    c.append(("quiet", 0), 3, producer_id=1, timestamp=OLD)
    assert [r.ghost for r in service.describe_producers(c, topic="quiet", partition=0)] == [False]
    assert "ListOffsets" not in c.calls


def test_lag_held_by_ghost():
    c = scenario()
    rows = {(r.topic, r.partition): r for r in service.lag(c)}
    e0 = rows[("events", 0)]
    # log start 30, high watermark 32; the ghost at 10 holds the LSO at the log start
    assert (e0.log_start_offset, e0.lso, e0.high_watermark, e0.lag) == (30, 30, 32, 2)
    assert (e0.open_transactions, e0.oldest_open_producer_id, e0.oldest_open_first_offset) == (3, 900, 10)
    assert e0.held_by_ghost is True
    # events-1: the ghost's clamped first unstable offset (4) is the high watermark: nothing held
    e1 = rows[("events", 1)]
    assert (e1.log_start_offset, e1.lso, e1.high_watermark, e1.held_by_ghost) == (4, 4, 4, False)
    # audit-0: the oldest open transaction is below the log start too, so its LSO is held there
    a0 = rows[("audit", 0)]
    assert (a0.lso, a0.high_watermark, a0.held_by_ghost) == (3, 5, True)


def test_lag_without_describe_producers_never_claims_a_ghost():
    c = scenario()
    c.missing.add("DescribeProducers")
    rows = service.lag(c)
    assert all(r.open_transactions is None and r.held_by_ghost is None for r in rows)


def test_abort_all_clears_ghosts():
    c = scenario()
    plan = online_abort.plan_abort(c, all_=True, max_timeout_ms=MAX, now_ms=NOW)
    ghosts = {r.producer_id: r for r in plan if r.kind == "ghost"}
    assert ghosts[900] == AbortPlanRow(
        kind="ghost", topic="events", partition=0, producer_id=900, producer_epoch=3, transactional_id=None,
        coordinator_state=None, first_offset=10, start_ms=None, duration_ms=None, action="write-abort-marker",
        coordinator_epoch=2, control_type="ABORT", marker_offset=None, marker_epoch=3)
    assert ghosts[906].action == "write-abort-marker"
    done = online_abort.execute_abort(c, plan)
    assert {r.result for r in done} == {"ok"}
    assert "marker:ABORT:events-0:900" in c.calls and "marker:ABORT:events-0:906" in c.calls
    assert service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW) == []
    e0 = next(r for r in service.lag(c, topic="events") if r.partition == 0)
    # three markers appended (900, 906, 901): LSO = high watermark = 35, nothing open
    assert (e0.lso, e0.high_watermark, e0.open_transactions, e0.held_by_ghost) == (35, 35, 0, False)
