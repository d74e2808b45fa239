"""The offline session: filters go down into it (only the asked partitions are replayed), lag's holder
lookup is the library's, one Report, one wording for a selection that names nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatx.errors import UsageError
from kafkatx.rows import Report
from kafkatx.session import offline
from kafkatx.session.partition_rows import held_producers
from tests.session.test_txn_offline import NOW, build

HANGING = Path(__file__).resolve().parents[2] / "fixtures" / "hanging"


def _replayed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The partitions the session replays, by name, as it replays them (in this process: jobs=1)."""
    seen: list[str] = []
    from kafkatx.session import session

    real = session.replay_partition

    def replay(part, **kw):  # type: ignore[no-untyped-def]
        seen.append(part.name)
        return real(part, **kw)

    monkeypatch.setattr(session, "replay_partition", replay)
    return seen


def test_find_hanging_partition_replays_only_that_partition(tmp_path, monkeypatch):
    root = build(tmp_path)
    whole = offline.find_hanging([root], now=NOW, topic="orders", jobs=1)
    seen = _replayed(monkeypatch)
    one = offline.find_hanging([root], now=NOW, topic="orders", partition=1, jobs=1)
    assert seen == ["orders-1"]  # not orders-0 (kafka-transactions.sh find-hanging --topic --partition)
    # the answer is the whole topic's answer cut to that partition
    assert one.rows == [r for r in whole.rows if r.partition == 1]
    assert one.rows  # "done"'s lost marker holds orders-1 (test_txn_offline.build)


def test_a_partition_matching_nothing_is_refused_once(tmp_path):
    root = build(tmp_path)
    with pytest.raises(Exception, match="topic 'orders' has partitions"):
        offline.find_hanging([root], now=NOW, topic="orders", partition=7)


def test_lag_holders_are_the_coordinators_open_transactions_of_the_held_partitions():
    answer = offline.lag([HANGING], now=NOW, holders=True)
    held = held_producers(answer.rows)
    assert held  # fixtures/hanging holds partitions back (its README)
    listed = offline.list_transactions([HANGING], states=["Ongoing", "PrepareCommit", "PrepareAbort"]).rows
    assert answer.holders == {r.producer_id: r for r in listed if r.producer_id in held}
    # without holders asked, none are looked up and the rows are the same partitions
    plain = offline.lag([HANGING], now=NOW)
    assert plain.holders == {} and [(r.topic, r.partition) for r in plain.rows] == \
        [(r.topic, r.partition) for r in answer.rows]


def test_lag_over_topics_is_one_answer_each_topic_in_turn():
    both = offline.lag([HANGING], now=NOW, topics=["payments", "orders"])
    assert [r.topic for r in both.rows] == ["payments"] * 2 + ["orders"] * 3
    assert both.rows == offline.lag([HANGING], now=NOW, topic="payments").rows + \
        offline.lag([HANGING], now=NOW, topic="orders").rows


def test_report_makes_the_skipped_line_once():
    report = Report()
    err = OSError(2, "No such file or directory", "/d/t-0/00.log")
    report.skip("t-0", "/d/t-0", err)
    assert report.skipped == [f"t-0 (/d/t-0): /d/t-0/00.log: {err}"]
    assert [u.partition for u in report.incomplete] == ["t-0"]


def test_nothing_selected_has_one_wording(tmp_path):
    from kafkatx.repair.analysis import analyse_abort_hanging

    with pytest.raises(UsageError) as library:
        analyse_abort_hanging([build(tmp_path)], now=NOW)
    with pytest.raises(UsageError) as session:
        offline.require_selection()
    assert str(library.value) == str(session.value)
    assert str(library.value).startswith("nothing selected: give --transactional-id ID")
