"""Online abort-hanging and prepared two-phase-commit transactions (issue 27), against FakeCluster.

A transaction with timeout Integer.MAX_VALUE (``TransactionMetadata.isDistributedTwoPhaseCommitTxn``)
open 30 days is ``prepared-2pc``, never ``timed-out`` nor fenced by ``--all``; ``--force-terminate``
calls ``Admin.forceTerminateTransaction`` where the client library has it, and otherwise fails with
one line before anything is touched.
"""

from __future__ import annotations

import pytest

from kafkatx.cluster import service
from kafkatx.errors import UnsupportedApi, UsageError
from tests.cluster.fakes import FakeCluster

DAY = 86_400_000
NOW = 100 * DAY
INT_MAX = 2**31 - 1


def scenario() -> FakeCluster:
    c = FakeCluster()
    c.add_topic("orders", 1)
    c.append(("orders", 0), 3, producer_id=7001, transactional=True, timestamp=NOW - 30 * DAY)
    c.set_txn("tx-2pc", producer_id=7001, state="Ongoing", partitions=[("orders", 0)], start=NOW - 30 * DAY,
              timeout_ms=INT_MAX)
    c.append(("orders", 0), 2, producer_id=7002, transactional=True, timestamp=NOW - 2 * DAY)
    c.set_txn("tx-stuck", producer_id=7002, state="Ongoing", partitions=[("orders", 0)], start=NOW - 2 * DAY,
              timeout_ms=60_000)
    return c


def test_find_hanging_says_prepared_2pc() -> None:
    rows = service.find_hanging(scenario(), now_ms=NOW)
    assert {(r.transactional_id, r.kind) for r in rows} == {("tx-2pc", "prepared-2pc"), ("tx-stuck", "timed-out")}
    two = next(r for r in rows if r.kind == "prepared-2pc")
    assert (two.start_ms, two.duration_ms) == (NOW - 30 * DAY, 30 * DAY)


def test_all_never_fences_it() -> None:
    c = scenario()
    plan = service.plan_abort(c, all_=True, now_ms=NOW)
    assert {(r.transactional_id, r.action) for r in plan} == {
        ("tx-2pc", "untouched: prepared-2pc"), ("tx-stuck", "fence-epoch")}
    done = service.execute_abort(c, plan)
    assert c.transactions["tx-2pc"].state == "Ongoing"  # untouched
    assert c.transactions["tx-stuck"].state == "Empty"  # aborted, then the fence's retry bumps it to Empty
    assert [r.result for r in done if r.transactional_id == "tx-2pc"] == [None]
    # selecting it by id does not fence it either
    by_id = service.plan_abort(c, transactional_ids=["tx-2pc"], now_ms=NOW)
    assert [r.action for r in by_id] == ["untouched: prepared-2pc"]


def test_force_terminate_needs_the_admin_call() -> None:
    c = scenario()
    plan = service.plan_abort(c, force_terminate=["tx-2pc"], now_ms=NOW)
    assert [r.action for r in plan] == ["force-terminate"]
    with pytest.raises(UnsupportedApi, match="forceTerminateTransaction"):
        service.execute_abort(c, plan)
    assert c.transactions["tx-2pc"].state == "Ongoing"  # nothing was sent
    assert not any(call.startswith(("force-terminate", "marker")) for call in c.calls)
    c.has_force_terminate = True
    done = service.execute_abort(c, plan)
    assert [r.result for r in done] == ["ok"] and "force-terminate:tx-2pc" in c.calls
    assert c.transactions["tx-2pc"].state == "Empty"  # aborted, then the admin's retry: Empty at the next epoch


def test_force_terminate_refuses_an_ordinary_transaction() -> None:
    with pytest.raises(UsageError, match="not a prepared two-phase-commit"):
        service.plan_abort(scenario(), force_terminate=["tx-stuck"], now_ms=NOW)


def test_the_exporter_counts_prepared_2pc_apart() -> None:
    """kafkatx_hanging_transactions{kind="prepared-2pc"} is its own series (never added to timed-out)."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from kafkatx.cluster import exporter as lib

    exp = lib.Exporter(lambda: scenario(), clock=lambda: NOW / 1000, notify=lambda line: None)
    exp.refresh()
    text = generate_latest(lib.registry_for(exp)).decode()
    counts = {s.labels["kind"]: s.value for fam in text_string_to_metric_families(text) for s in fam.samples
              if s.name == "kafkatx_hanging_transactions"}
    assert counts["prepared-2pc"] == 1 and counts["timed-out"] == 1
