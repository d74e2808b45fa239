"""Online abort-hanging and prepared two-phase-commit transactions, against FakeCluster.

A transaction with timeout Integer.MAX_VALUE (``TransactionMetadata.isDistributedTwoPhaseCommitTxn``)
open 30 days is ``prepared-2pc``, never ``timed-out`` nor fenced by ``--all``; ``--force-terminate``
is ``Admin.forceTerminateTransaction``: an InitProducerId with keepPreparedTxn=false (the fence path),
which today's client libraries send.

Against a fake of the backend Protocol (tests/cluster/fakes.py), not Tansu: Tansu has no
DescribeTransactions (the plan's input) and no two-phase-commit transactions to terminate.
"""

from __future__ import annotations

import pytest

from kafkatx.cluster import abort as online_abort
from kafkatx.cluster import service
from kafkatx.errors import UsageError
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
    plan = online_abort.plan_abort(c, all_=True, now_ms=NOW)
    assert {(r.transactional_id, r.action) for r in plan} == {
        ("tx-2pc", "untouched: prepared-2pc"), ("tx-stuck", "fence-epoch")}
    done = online_abort.execute_abort(c, plan)
    assert c.transactions["tx-2pc"].state == "Ongoing"  # untouched
    assert c.transactions["tx-stuck"].state == "Empty"  # aborted, then the fence's retry bumps it to Empty
    assert [r.result for r in done if r.transactional_id == "tx-2pc"] == [None]
    # selecting it by id does not fence it either
    by_id = online_abort.plan_abort(c, transactional_ids=["tx-2pc"], now_ms=NOW)
    assert [r.action for r in by_id] == ["untouched: prepared-2pc"]


def test_force_terminate_goes_through_init_producer_id() -> None:
    """Kafka's coordinator, asked InitProducerId(keepPreparedTxn=false) for an Ongoing 2PC transaction,
    fences it (epoch 0 -> 1), aborts it (ABORT marker at the fenced epoch, CompleteAbort) and on the
    retry writes Empty at the next epoch (2) with the request's transaction timeout, replacing the
    Integer.MAX_VALUE sentinel (TransactionCoordinator.handleInitProducerId,
    TransactionMetadata.prepareIncrementProducerEpoch)."""
    c = scenario()
    plan = online_abort.plan_abort(c, force_terminate=["tx-2pc"], now_ms=NOW)
    assert [r.action for r in plan] == ["force-terminate"]
    done = online_abort.execute_abort(c, plan, transaction_timeout_ms=45_000)
    assert [r.result for r in done] == ["ok"] and "force-terminate:tx-2pc:45000" in c.calls
    t = c.transactions["tx-2pc"]
    assert (t.state, t.producer_epoch, t.timeout_ms, t.partitions) == ("Empty", 2, 45_000, frozenset())
    p = c.partitions[("orders", 0)].producers[7001]
    assert (p.producer_epoch, p.current_txn_start_offset) == (1, None)  # the ABORT marker closed it
    assert c.transactions["tx-stuck"].state == "Ongoing"  # only the named id


def test_force_terminate_refuses_an_ordinary_transaction() -> None:
    with pytest.raises(UsageError, match="not a prepared two-phase-commit"):
        online_abort.plan_abort(scenario(), force_terminate=["tx-stuck"], now_ms=NOW)


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
