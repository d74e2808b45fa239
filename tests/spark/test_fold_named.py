"""``kafkatx scan``'s fold tasks filtered where they fold (spark/tasks.py ``fold_coordinator``), without Spark.

The driver joins one row, the sorted set of the producer ids the partitions' spans and open transactions
name, onto each fold task's work row (column ``named``): the task makes an ID row only for an id one of
those producer ids could resolve to (``CoordinatorState.transactional_id_for``: one it claims, or one its
history used) and for an id past its timeout (``TransactionStateManager.timedOutTransactions``, what the
owed-abort check reads). Expectations are reasoned from how the shapes are written: in bench_scale.py's ids
shape id ``txn-i`` is producer id 1,000,000 + i and one id in 100 is left Ongoing (timeout 60 s).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
import pytest

pa = pytest.importorskip("pyarrow")

from kafkatx.format import compiled  # noqa: E402
from kafkatx.spark import tasks as X  # noqa: E402
from kafkatx.spark.job import plan_scan  # noqa: E402
from tests.session.test_scale_shapes import _bench  # noqa: E402  (benchmarks/bench_scale.py as a module)

ROOT = Path(__file__).resolve().parents[2]
IDS = 3_000


@pytest.fixture(scope="module")
def ids_shape(tmp_path_factory):  # type: ignore[no-untyped-def]
    bench = _bench()
    root = tmp_path_factory.mktemp("ids") / "broker-00"
    bench.gen_ids(root, IDS)
    plan = plan_scan([root])
    infos = {i.partition_path: i for i in plan.infos}
    work = [X.TxnPartitionWork(infos[p], bench.TXN_STATE_PARTITIONS) for _num, p in plan.txn_state_partitions]
    return bench, work


def _fold(work, now: int, named: list[int] | None = None, said=None) -> list[dict]:  # type: ignore[no-untyped-def]
    """fold_coordinator's rows over one bin of ``work``; ``named``: the column Spark's join adds (None: none)."""
    cols = {"work": [msgspec.msgpack.encode(work)]}
    if named is not None:
        cols["named"] = [named]  # type: ignore[list-item]
    return [r for b in X.fold_coordinator([pa.record_batch(cols)], now=now, said=said) for r in b.to_pylist()]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure-python"])
def test_fold_tasks_make_rows_only_for_named_and_timed_out_ids(ids_shape, pure):  # type: ignore[no-untyped-def]
    bench, work = ids_shape
    now = bench.T0 + 10 * IDS + 600_000  # past every Ongoing id's start + 60 s
    named = [1_000_000 + 5, 1_000_000 + 17, 1_000_000 + 250, 1_000_000 + 400, 7]  # 400: left Ongoing; 7: no id's
    with compiled.pure_python() if pure else contextlib.nullcontext():
        every = _fold(work, now)
        kept = _fold(work, now, named)
        none_named = _fold(work, now, [])
    ids = [r for r in every if r["kind"] == X.ID]
    assert len(ids) == IDS  # no filter: one row per id
    ongoing = {f"txn-{i:07d}" for i in range(0, IDS, 100)}
    assert {r["tid"] for r in ids if r["timed_out"]} == ongoing
    want = ongoing | {"txn-0000005", "txn-0000017", "txn-0000250"}
    got = [r for r in kept if r["kind"] == X.ID]
    assert len(got) == len(want) == IDS // 100 + 3
    assert {r["tid"] for r in got} == want
    # each the unfiltered row, its pids the named producer ids it claims or used
    by_tid = {r["tid"]: r for r in ids}
    for r in got:
        i = int(r["tid"][4:])
        assert r["pids"] == ([1_000_000 + i] if 1_000_000 + i in named else [])
        assert {**r, "pids": by_tid[r["tid"]]["pids"]} == by_tid[r["tid"]]
    assert {r["tid"] for r in none_named if r["kind"] == X.ID} == ongoing  # nothing named: the timed-out ids
    assert [r for r in kept if r["kind"] != X.ID] == [r for r in every if r["kind"] != X.ID]


def test_misplaced_ids_are_told_for_every_id_not_only_the_kept_rows():
    """With fewer __transaction_state partitions than the dir holds, ids sit where they do not hash: the task
    tells the driver every one of them (wrong-coordinator-partition, decided by coordinator_from_folds), the
    same with nothing named as with no filter; the filter by wanted ids keeps exactly those ids' rows."""
    root = ROOT / "fixtures" / "hanging"
    if not root.exists():
        pytest.skip("fixtures/hanging not built")
    plan = plan_scan(sorted(root.glob("broker-*")) or [root])
    infos = {i.partition_path: i for i in plan.infos}
    work = [X.TxnPartitionWork(infos[p], 3) for _num, p in plan.txn_state_partitions]
    now = 1_700_007_200_000
    told: dict[str, list] = {"every": [], "none": []}
    every = _fold(work, now, said=lambda *a: told["every"].append(a))
    kept = _fold(work, now, [], said=lambda *a: told["none"].append(a))
    misplaced = [(r["tid"], r["fold"]) for r in every if r["kind"] == X.ID and not r["home"]]
    assert misplaced
    assert told["every"] == told["none"] == [([(r["kind"], r["fold"], r["seq"], r["text"]) for r in every
                                               if r["kind"] != X.ID], misplaced)]
    assert len([r for r in kept if r["kind"] == X.ID]) < len([r for r in every if r["kind"] == X.ID])
    wanted = sorted({t for t, _f in misplaced})
    by_tids = _fold([X.TxnPartitionWork(w.info, 3, wanted) for w in work], now)
    assert [r for r in by_tids if r["kind"] == X.ID] == [r for r in every if r["kind"] == X.ID and r["tid"] in wanted]

