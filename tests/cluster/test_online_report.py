"""Online answers carry their Report as offline ones do: what the cluster did not answer.

Against FakeCluster (tests/cluster/fakes.py), because Tansu (the broker the online tests start) lacks the
KIP-664 APIs these answers ask (DescribeProducers, ListTransactions, DescribeTransactions); the one thing
Tansu shows, a broker without DescribeProducers, is checked against it in test_online_cli.py
(``test_lag_in_a_real_process``). The failures are made the way kafka-python raises them: the first
partition (or id) of a request that answers with an error fails the whole request.

The expectations are worked out from the scenario of test_service_fake.py (``scenario``) and from what the
CLI contract says an incomplete answer is (cli.md "Incomplete answers": the rows that could be read, an
``incomplete`` list beside them, exit 3).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.cluster import abort as online_abort
from kafkatx.cluster import service
from kafkatx.rows import Report, Unreadable
from tests.cluster.test_service_fake import MAX, NOW, scenario

BROKER = "fake:9092"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (s[0]*31^(n-1) + ... + s[n-1], int arithmetic)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_a_partition_whose_leader_does_not_answer_is_incomplete_and_the_rest_answered():
    """orders-1's leader fails DescribeProducers: its open transactions (200 orphaned, 400 incomplete-markers)
    cannot be seen, so orders-1 is the answer's incomplete entry; orders-0 (100 orphaned, 300 timed-out) and
    __consumer_offsets-0 (700 orphaned) are still answered."""
    c = scenario()
    c.unanswered[("orders", 1)] = "NOT_LEADER_OR_FOLLOWER"
    report = Report()
    rows = service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=report)
    assert sorted(r.producer_id for r in rows) == [100, 300, 700]
    (gap,) = report.incomplete
    assert (gap.partition, gap.file, gap.position) == ("orders-1", None, None)
    assert "NOT_LEADER_OR_FOLLOWER" in gap.reason and BROKER in gap.reason
    with pytest.raises(Exception, match="NOT_LEADER_OR_FOLLOWER"):  # no report: raised, as before
        service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW)


def test_every_partition_failing_is_the_error_itself():
    c = scenario()
    for tp in list(c.partitions):
        c.unanswered[tp] = "LEADER_NOT_AVAILABLE"
    with pytest.raises(Exception, match="LEADER_NOT_AVAILABLE"):
        service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=Report())


def test_a_coordinator_that_does_not_answer_leaves_its_transactions_unclassified():
    """app-b's coordinator (producer 300, the timed-out one) fails DescribeTransactions: 300's transaction is
    not classified (a note), its coordinator partition is the incomplete entry; the others are answered. The
    partition is ``TransactionStateManager.partitionFor``: abs(hashCode) % the topic's 50 partitions."""
    c = scenario()
    c.add_topic("__transaction_state", 50)
    c.coordinators_down["app-b"] = "COORDINATOR_LOAD_IN_PROGRESS"
    report = Report()
    rows = service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=report)
    assert sorted(r.producer_id for r in rows) == [100, 200, 400, 700]
    (gap,) = report.incomplete
    assert gap.partition == f"__transaction_state-{abs(java_string_hash('app-b')) % 50}"
    assert "COORDINATOR_LOAD_IN_PROGRESS" in gap.reason
    (note,) = [n for n in report.notices if "not classified" in n]
    assert note.startswith("orders-0: producer 300's open transaction (from offset ")
    assert "DescribeTransactions of 'app-b' was not answered (the answer is incomplete)" in note


def test_no_listtransactions_answer_classifies_nothing_and_says_so():
    """ListTransactions fails: no producer maps to a transactional id, so none of the open transactions
    may be called orphaned (no rows); each of the seven is a note, the coordinators the incomplete entry."""
    c = scenario()
    c.list_transactions_error = "REQUEST_TIMED_OUT"
    report = Report()
    assert service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=report) == []
    assert [u.partition for u in report.incomplete] == ["__transaction_state"]
    assert sum("not classified" in n for n in report.notices) == 7  # 100, 300, 600 | 200, 400, 500 | 700


def test_lag_without_describeproducers_says_why_its_columns_are_null():
    c = scenario()
    c.missing.add("DescribeProducers")
    report = Report()
    rows = service.lag(c, topic="orders", report=report)
    assert [r.open_transactions for r in rows] == [None, None] and report.incomplete == []
    assert report.notices == [f"broker {BROKER} has no DescribeProducers, which needs Kafka 3.0 (KIP-664): "
                              "open_transactions, oldest_open_* and held_by_ghost are null"]


def test_lag_of_a_partition_whose_leader_does_not_answer_is_unknown_not_zero():
    """orders-0 answers (3 open: 100 from offset 5, 300, 600); orders-1's open columns are null (unknown, never
    0 open) and orders-1 is incomplete."""
    c = scenario()
    c.unanswered[("orders", 1)] = "NOT_LEADER_OR_FOLLOWER"
    report = Report()
    by_partition = {r.partition: r for r in service.lag(c, topic="orders", report=report)}
    assert (by_partition[0].open_transactions, by_partition[0].oldest_open_producer_id) == (3, 100)
    assert (by_partition[1].open_transactions, by_partition[1].held_by_ghost) == (None, None)
    assert [u.partition for u in report.incomplete] == ["orders-1"]


def test_groups_the_coordinator_does_not_list_are_a_note_as_offline():
    c = scenario()
    c.groups_error = "COORDINATOR_NOT_AVAILABLE"
    report = Report()
    rows = service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=report)
    assert [r.blocked_groups for r in rows if r.topic == "__consumer_offsets"] == [None]
    (note,) = [n for n in report.notices if "blocked consumer groups" in n]
    assert note.startswith("__consumer_offsets-0: the blocked consumer groups are unknown: ")


def test_the_cli_says_an_online_gap_as_offline(monkeypatch):
    """find-hanging --bootstrap-server --format json with orders-1 unanswered: the rows that could be read and
    the ``incomplete`` list beside them, the one stderr line, exit 3 (cli.md "Incomplete answers");
    ``--allow-partial`` takes the answer (exit 1: hanging transactions found)."""
    c = scenario()
    c.unanswered[("orders", 1)] = "NOT_LEADER_OR_FOLLOWER"
    monkeypatch.setattr(service, "connect", lambda **kw: c)
    runner = CliRunner()
    # at the wall clock (--now takes epoch milliseconds, the scenario's clock is near 1970): every write is
    # older than MAX, so producer 600 (no transactional id) is orphaned too
    args = ["find-hanging", "--bootstrap-server", BROKER, "--max-transaction-timeout-ms", str(MAX), "--format", "json"]
    out = runner.invoke(app, args)
    assert out.exit_code == 3, out.output
    doc = json.loads(out.stdout)
    assert sorted(r["producer_id"] for r in doc["rows"]) == [100, 300, 600, 700]
    (gap,) = doc["incomplete"]
    assert gap == {"partition": "orders-1", "file": None, "position": None, "reason": gap["reason"]}
    assert "kafkatx: incomplete: 1 partition could not be read (left out above): orders-1: " in out.stderr
    assert runner.invoke(app, [*args, "--allow-partial"]).exit_code == 1
    Unreadable(**gap)  # the same four keys offline writes


def test_the_only_coordinator_asked_not_answering_still_leaves_an_answer():
    """--topic orders with orders-1 unanswered: app-b is the one id left to describe; its coordinator not
    answering leaves producer 300 unclassified, while 100 (no transactional id: orphaned) is still answered."""
    c = scenario()
    c.unanswered[("orders", 1)] = "NOT_LEADER_OR_FOLLOWER"
    c.coordinators_down["app-b"] = "COORDINATOR_LOAD_IN_PROGRESS"
    report = Report()
    rows = service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, topic="orders", report=report)
    assert [(r.producer_id, r.kind) for r in rows] == [(100, "orphaned")]
    assert [u.partition for u in report.incomplete] == ["orders-1", "__transaction_state"]  # no count: bare topic


def test_the_online_plan_says_why_an_asked_for_id_gets_no_row(monkeypatch):
    """abort-hanging --transactional-id of an id the coordinator does not know (TransactionsCommand treats
    TransactionalIdNotFound as none) and of one already ended (app-a: CompleteCommit): nothing to abort, said as
    the offline answer says its notes (``kafkatx: note:``), into the plan's report."""
    c = scenario()
    monkeypatch.setattr(service, "connect", lambda **kw: c)
    out = CliRunner().invoke(app, ["abort-hanging", "--bootstrap-server", BROKER, "--transactional-id", "zzz",
                                   "--transactional-id", "app-a"])
    assert "kafkatx: note: transactional id 'zzz' is unknown to its coordinator; nothing to abort" in out.stderr
    assert "kafkatx: note: transactional id 'app-a' is CompleteCommit; nothing to abort" in out.stderr
    report = Report()
    assert online_abort.plan_abort(c, transactional_ids=["zzz"], now_ms=NOW, report=report) == []
    assert report.notices == ["transactional id 'zzz' is unknown to its coordinator; nothing to abort"]


def test_one_leader_not_answering_among_many_partitions_costs_a_few_requests_not_one_per_partition():
    """kafka-python fails a whole DescribeProducers on its first erroring partition; asked again in halves,
    one partition failing among 1,024 is found in about 2·log2(1024) = 20 requests (asked one partition at a
    time it would be 1,024 more), and every other partition is still answered."""
    c = scenario()
    c.add_topic("wide", 1024)
    c.unanswered[("wide", 777)] = "NOT_LEADER_OR_FOLLOWER"
    report = Report()
    before = c.calls.count("DescribeProducers")
    service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=report)
    asked = c.calls.count("DescribeProducers") - before
    assert [g.partition for g in report.incomplete] == ["wide-777"]
    assert asked <= 2 + 2 * 11, asked


def test_a_coordinator_down_for_many_ids_is_one_incomplete_entry():
    """Two transactional ids of one coordinator partition, both failing DescribeTransactions: the answer is
    incomplete for that one partition, named once (a coordinator counted once, however many ids it holds)."""
    c = scenario()
    c.add_topic("__transaction_state", 1)  # one partition: every id hashes to __transaction_state-0
    for tid in ("app-a", "app-b"):
        c.coordinators_down[tid] = "COORDINATOR_LOAD_IN_PROGRESS"
    report = Report()
    service.find_hanging(c, max_timeout_ms=MAX, now_ms=NOW, report=report)
    (gap,) = report.incomplete
    assert gap.partition == "__transaction_state-0"
    assert "COORDINATOR_LOAD_IN_PROGRESS" in gap.reason and gap.reason.endswith("(and 1 more transactional id it coordinates)")
