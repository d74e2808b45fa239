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


@pytest.mark.parametrize("fixture", ["hanging", "two-brokers", "ghost", "twopc"])
def test_coordinator_rows_are_the_offline_replay(fixture):
    """Each __transaction_state partition folded by its own task: its live ids' latest values are
    replay_transaction_log's transactions, its findings the replay's findings."""
    root = FIXTURES / fixture
    if not root.exists():
        pytest.skip(f"fixtures/{fixture} not built")
    dirs = sorted(root.glob("broker-*")) or [root]
    plan = plan_scan(dirs)
    infos = {i.partition_path: i for i in plan.infos}
    n = max(num for num, _p in plan.txn_state_partitions) + 1
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
