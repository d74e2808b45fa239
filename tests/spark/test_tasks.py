"""The executors' Arrow tasks of ``kafkatx scan`` (spark/tasks.py) and the driver's bins, without Spark.

The references are the per-batch decoder (rows.decode_segment), the offline coordinator replay
(``replay_transaction_log``) and ``coordinator_from_folds``, never scan's own output.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import msgspec
import pytest

pa = pytest.importorskip("pyarrow")

from fixtures.corrupt import bad_batch_crc, trailing_garbage, truncated_tail  # noqa: E402
from kafkatx.coordinator.state import TransactionMetadata  # noqa: E402
from kafkatx.coordinator.state_manager import TxnPartitionFold, coordinator_from_folds, replay_transaction_log  # noqa: E402
from kafkatx.coordinator.txn_fold import TxnIds  # noqa: E402
from kafkatx.spark import rows as R  # noqa: E402
from kafkatx.spark import tasks as X  # noqa: E402
from kafkatx.spark.job import _misplaced, contiguous_bins, partition_units, plan_scan  # noqa: E402
from kafkatx.spark.trace import ENV, span  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
NOW = 1_700_007_200_000


def _work(items) -> list:
    return [pa.record_batch({"work": [msgspec.msgpack.encode(items)]})]


def _reference(tasks) -> list[tuple]:
    return [p for t in tasks for k, p in R.decode_segment(t) if k == R.BATCH]


def _columnar(tasks) -> list[tuple]:
    return [tuple(r.values()) for b in X.batch_rows(_work(tasks)) for r in b.to_pylist()]


@pytest.mark.parametrize("fixture", ["hanging", "clean", "two-brokers", "ghost", "kraft", "twopc"])
def test_columnar_batch_rows_equal_the_per_batch_reference(fixture):
    root = FIXTURES / fixture
    if not root.exists():
        pytest.skip(f"fixtures/{fixture} not built")
    tasks = plan_scan(sorted(root.glob("broker-*")) or [root]).tasks
    assert _columnar(tasks) == _reference(tasks)


def test_columnar_batch_rows_on_damaged_segments_equal_the_reference(tmp_path):
    for make, name in ((bad_batch_crc, "a"), (truncated_tail, "b"), (trailing_garbage, "c")):
        tasks = plan_scan([make(tmp_path / name).log_dir]).tasks
        got, want = _columnar(tasks), _reference(tasks)
        assert got == want
        assert any(r[-1] is not None or r[15] is False for r in got)  # the damage is in the rows


def test_batch_counts_are_told_per_segment(tmp_path):
    crc = bad_batch_crc(tmp_path / "a")
    tasks = plan_scan([crc.log_dir]).tasks
    told: list[tuple[int, int, int, int]] = []
    rows = [r for b in X.batch_rows(_work(tasks), lambda *c: told.append(c)) for r in b.to_pylist()]
    assert sum(c[0] for c in told) == sum(1 for r in rows if r["error"] is None)
    assert sum(c[1] for c in told) == 1
    assert sum(c[3] for c in told) == sum(t.size for t in tasks)


def test_contiguous_bins_balance_neighbours():
    assert contiguous_bins([1] * 8, 4) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert contiguous_bins([100, 1, 1, 1], 2) == [0, 1, 1, 1]
    assert contiguous_bins([5], 3) == [0]
    bins = contiguous_bins([3, 1, 1, 1, 1, 1, 1, 3], 3)
    assert bins == sorted(bins) and set(bins) == {0, 1, 2}


def test_partition_units_keep_partitions_whole_unless_above_the_split():
    tasks = plan_scan([FIXTURES / "hanging"]).tasks
    whole = partition_units(tasks, None)
    assert sorted(t.segment_path for u in whole for t in u) == sorted(t.segment_path for t in tasks)
    assert all(len({t.partition_path for t in u}) == 1 for u in whole)
    assert len(whole) == len({t.partition_path for t in tasks})
    split = partition_units(tasks, 1)  # every partition above the split: one unit per segment
    assert len(split) == len(tasks)


def _coordinator_fixture(fixture: str) -> tuple[list[Path], object, dict, int]:
    """A fixture's log dirs, their plan, its partitions by path and the __transaction_state partition count."""
    root = FIXTURES / fixture
    if not root.exists():
        pytest.skip(f"fixtures/{fixture} not built")
    dirs = sorted(root.glob("broker-*")) or [root]
    plan = plan_scan(dirs)
    infos = {i.partition_path: i for i in plan.infos}
    return dirs, plan, infos, max(num for num, _p in plan.txn_state_partitions) + 1


@pytest.mark.parametrize("fixture", ["hanging", "two-brokers", "ghost", "twopc"])
def test_coordinator_rows_are_the_offline_replay(fixture):
    """Each __transaction_state partition folded by its own task: its live ids' latest values are
    replay_transaction_log's transactions, its findings the replay's findings."""
    dirs, plan, infos, n = _coordinator_fixture(fixture)
    rows = [r for _num, path in plan.txn_state_partitions
            for b in X.fold_coordinator(_work(X.TxnPartitionWork(infos[path], n)), now=NOW) for r in b.to_pylist()]
    offline = replay_transaction_log(dirs, partitions_count=n)
    live = {r["tid"]: TransactionMetadata.from_fields(r["tid"], pickle.loads(r["fields"]), offset=r["offset"],
                                                      coordinator_partition=r["fold"])
            for r in rows if r["kind"] == X.ID and not r["tomb"] and r["home"]}
    assert live == dict(offline.transactions.items())
    assert {r["tid"]: r["offset"] for r in rows if r["kind"] == X.ID and r["tomb"]} == offline.tombstoned
    assert [r["text"] for r in rows if r["kind"] == X.FINDING] == \
        [f"{f.severity}: {f.message}" for f in offline.findings]
    timed_out = {m.transactional_id for m in offline.timed_out({1}, NOW)}  # TxnState.ONGOING
    assert {r["tid"] for r in rows if r["kind"] == X.ID and r["timed_out"]} == timed_out


@pytest.mark.parametrize("fixture", ["hanging", "two-brokers", "ghost", "twopc"])
def test_coordinator_rows_compiled_equal_the_pure_python_rows(fixture):
    """A partition's COORDINATOR rows made by the C fold's table (TxnTable.id_rows) are the Python loop's over
    the Python fold (KAFKATX_PURE_PYTHON's path), pickled values byte for byte."""
    from kafkatx.coordinator import txn_fold
    from kafkatx.format import compiled

    if txn_fold._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    _dirs, plan, infos, n = _coordinator_fixture(fixture)
    late = {}
    for now in (NOW, 0):
        fast = [X._fold_one(infos[path], n, now) for _num, path in plan.txn_state_partitions]
        with compiled.pure_python():
            pure = [X._fold_one(infos[path], n, now) for _num, path in plan.txn_state_partitions]
        assert fast == pure
        assert any(r[0] == X.ID for rows in fast for r in rows)
        late[now] = {r[3] for rows in fast for r in rows if r[0] == X.ID and r[7]}
    assert not late[0] and (late[NOW] or fixture != "hanging")  # the hanging fixture's ids past their timeout


def _fold_rows(plan, infos, n, said=None) -> list[dict]:
    return [r for _num, path in plan.txn_state_partitions
            for b in X.fold_coordinator(_work(X.TxnPartitionWork(infos[path], n)), now=NOW, said=said)
            for r in b.to_pylist()]


def _named(plan) -> set[int]:
    return {r["span_producer_id"] for i in plan.infos if not i.topic.startswith("__transaction_state")
            for b in X.replay_partitions(_work([i]), now=NOW) for r in b.to_pylist() if r["kind"] in (X.SPAN, X.OPEN)}


@pytest.mark.parametrize("fixture", ["hanging", "two-brokers", "ghost", "twopc"])
def test_producer_ids_resolve_in_their_join_group_as_the_offline_coordinator(fixture):
    """Each named producer id's group (the taken ID rows claiming it or whose history used it: what the join
    by producer id brings together) resolves as replay_transaction_log's CoordinatorState resolves it
    (transactional_id_for, else the expired id a notice names), through the Arrow group function."""
    dirs, plan, infos, n = _coordinator_fixture(fixture)
    offline = replay_transaction_log(dirs, partitions_count=n)
    named = _named(plan)
    assert named
    rows = [r for r in _fold_rows(plan, infos, n) if r["kind"] == X.ID and r["home"]]
    for pid in named:
        group = [{**r, "pid": pid} for r in rows if pid in {*r["claims"], *r["hist"]}]
        tid = offline.transactional_id_for(pid)
        want = (tid, None) if tid is not None else (None, offline.expired_transactional_id_for(pid))
        if not group:  # no row names it: no group, the left join leaves it null
            assert want == (None, None), pid
            continue
        got = X.resolve_groups(pa.Table.from_pylist(group), partitions_count=n).to_pylist()
        assert len(got) == 1 and got[0]["pid"] == pid
        assert (got[0]["tid"], got[0]["expired"]) == want, pid
        if tid is not None:
            meta = TransactionMetadata.from_fields(tid, pickle.loads(got[0]["rfields"]), offset=got[0]["roffset"],
                                                   coordinator_partition=got[0]["rfold"])
            assert meta == offline.transactions[tid]


def test_the_fold_says_its_notes_and_misplaced_ids_once():
    """fold_coordinator tells the driver, once per task, the rows it prints (findings, skips, the loader's
    notices) and the ids found in a partition they do not hash to."""
    _dirs, plan, infos, n = _coordinator_fixture("hanging")
    told: list = []
    rows = [r for b in X.fold_coordinator(_work([X.TxnPartitionWork(infos[p], n) for _num, p in
                                                 plan.txn_state_partitions]), now=NOW, said=lambda *a: told.append(a))
            for r in b.to_pylist()]
    assert len(told) == 1
    notes, misplaced = told[0]
    assert notes == [(r["kind"], r["fold"], r["seq"], r["text"]) for r in rows if r["kind"] != X.ID]
    assert misplaced == [(r["tid"], r["fold"]) for r in rows if r["kind"] == X.ID and not r["home"]]


def test_an_owed_abort_is_said_in_its_ids_group_unless_a_partition_holds_it_open():
    """The cogroup of one transactional id: its timed-out row alone gets find-hanging's owed-abort notice
    (``hanging.owed_abort_notices`` over the offline coordinator); with an open transaction its producer
    resolves to and the coordinator's partitions include, none (fixtures/README.md: stale-loader)."""
    from kafkatx.checks.hanging import owed_abort_notices
    from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS

    dirs, plan, infos, n = _coordinator_fixture("hanging")
    offline = replay_transaction_log(dirs, partitions_count=n)
    want = owed_abort_notices(offline, set(), now=NOW)
    assert len(want) == 1 and "'stale-loader'" in want[0]
    rows = [r for r in _fold_rows(plan, infos, n) if r["kind"] == X.ID and r["home"] and r["timed_out"]]
    assert [r["tid"] for r in rows] == ["stale-loader"]
    timed = pa.Table.from_pylist([{k: r[k] for k in X.TIMED} for r in rows])
    empty = pa.Table.from_pylist([], schema=X.arrow_schema([("open_txn", "binary"), ("snapshot_offset", "bigint"),
                                                            ("log_start_offset", "bigint"), ("info", "binary"),
                                                            *X.RESOLVED]))
    said: list = []
    X.classify_groups(empty, timed, now=NOW, max_timeout_ms=DEFAULT_MAX_TIMEOUT_MS, partitions_count=n,
                      said=lambda *a: said.append(a))
    assert said == [([], [("stale-loader", want[0])])]
    # the same id with its open transaction in orders-0, resolved by the join to stale-loader
    pid = offline.transactions["stale-loader"].producer_id
    opens = [r for i in plan.infos if (i.topic, i.partition) == ("orders", 0)
             for b in X.replay_partitions(_work([i]), now=NOW) for r in b.to_pylist()
             if r["kind"] == X.OPEN and r["span_producer_id"] == pid]
    assert opens
    stale = rows[0]
    opened = pa.Table.from_pylist([{"open_txn": o["open_txn"], "snapshot_offset": o["snapshot_offset"],
                                    "log_start_offset": o["lag_log_start_offset"], "info": o["info"], "pid": pid,
                                    "tid": "stale-loader", "rfold": stale["fold"], "roffset": stale["offset"],
                                    "rfields": stale["fields"], "expired": None, "expired_offset": None}
                                   for o in opens])
    said.clear()
    got = X.classify_groups(opened, timed, now=NOW, max_timeout_ms=DEFAULT_MAX_TIMEOUT_MS, partitions_count=n,
                            said=lambda *a: said.append(a))
    assert all(owed == [] for _notes, owed in said)
    assert {(r["topic"], r["partition"], r["transactional_id"]) for r in got.to_pylist()} <= {("orders", 0, "stale-loader")}


def test_each_task_says_its_notes_once():
    """replay_partitions tells the driver, once per task, the notes it prints."""
    dirs = sorted((FIXTURES / "hanging").glob("broker-*")) or [FIXTURES / "hanging"]
    plan = plan_scan(dirs)
    told: list = []
    rows = [r for b in X.replay_partitions(_work(plan.infos), now=NOW, said=lambda *a: told.append(a))
            for r in b.to_pylist()]
    assert len(told) == 1
    (notes,) = told[0]
    assert [(k, t, p, s, x) for k, t, p, s, x in notes if k != X.LAG] == \
        [(r["kind"], r["topic"], r["partition"], r["seq"], r["text"]) for r in rows if r["kind"] in (X.NOTE, X.SKIP)]


def test_misplaced_ids_are_taken_as_coordinator_from_folds_takes_them():
    """An id in two __transaction_state partitions: the one it hashes to wins, else the first; the
    duplicate note as coordinator_from_folds says it (here over hand-made folds of 5 partitions)."""
    from kafkatx.format.txn_log import coordinator_partition

    n = 5
    a = next(f"id-{i}" for i in range(100) if coordinator_partition(f"id-{i}", n) == 3)
    b = next(f"id-{i}" for i in range(100) if coordinator_partition(f"id-{i}", n) == 4)
    # a: misplaced in 0 and 1, home 3 holds it too; b: misplaced in 1 and 2 only
    mis = [{"tid": a, "fold": 0}, {"tid": a, "fold": 1}, {"tid": b, "fold": 1}, {"tid": b, "fold": 2}]
    chosen, notes = _misplaced(mis, [{"tid": a, "fold": 3}], (0, 1, 2, 3, 4), n)
    assert chosen == {a: 3, b: 1}
    folds = [TxnPartitionFold(partition=p, name=f"__transaction_state-{p}", path="",
                              ids=TxnIds(p, held, {}, {}, {t: None for t in held if coordinator_partition(t, n) != p}))
             for p, held in ((0, {a: (0, None)}), (1, {a: (0, None), b: (0, None)}), (2, {b: (0, None)}),
                             (3, {a: (0, None)}))]
    want = coordinator_from_folds(folds, partitions_count=n, partitions_found=(0, 1, 2, 3, 4))
    assert [x for p in sorted(notes) for x in notes[p]] == [f"{f.severity}: {f.message}" for f in want.findings]


def test_trace_off_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with span("x") as info:
        info["k"] = 1
    assert list(tmp_path.iterdir()) == []


def test_trace_on_appends_one_json_line_per_span(tmp_path, monkeypatch) -> None:
    path = tmp_path / "trace.jsonl"
    monkeypatch.setenv(ENV, str(path))
    with span("outer", index=3) as info:
        with span("inner"):
            pass
        info["rows"] = 7
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["what"] for x in lines] == ["inner", "outer"]
    outer = lines[1]
    assert outer["index"] == 3 and outer["rows"] == 7
    assert outer["t0"] <= lines[0]["t0"] <= lines[0]["t1"] <= outer["t1"]
