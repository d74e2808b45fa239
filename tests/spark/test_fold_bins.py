"""Fold-task assignment (job.fold_bins) and the opt-in timing trace (spark/trace.py): no Spark needed."""

from __future__ import annotations

import json

from kafkatx.spark import rows as R
from kafkatx.spark.job import ScanPlan, fold_bins
from kafkatx.spark.trace import ENV, span


def _task(path: str, size: int, *, chosen: bool = True, base: int = 0) -> R.SegmentTask:
    return R.SegmentTask(log_dir="/d", topic=path.rsplit("-", 1)[0], partition=int(path.rsplit("-", 1)[1]),
                         partition_path=path, segment_path=f"{path}/{base:020d}.log", segment_base_offset=base,
                         size=size, chosen=chosen)


def _info(path: str) -> R.PartitionInfo:
    return R.PartitionInfo(log_dir="/d", topic=path.rsplit("-", 1)[0], partition=int(path.rsplit("-", 1)[1]),
                           partition_path=path, log_start_offset=0, high_watermark=None)


def _plan(sizes: dict[str, list[int]], extra_infos: tuple[str, ...] = ()) -> ScanPlan:
    tasks = [_task(p, s, base=i * 1000) for p, segs in sizes.items() for i, s in enumerate(segs)]
    infos = [_info(p) for p in [*sizes, *extra_infos]]
    return ScanPlan(tasks=tasks, infos=infos, txn_state_partitions=[], notices=[])


def test_one_huge_partition_gets_its_own_first_task() -> None:
    sizes = {"big-0": [64 << 20] * 8}  # 512 MiB in one partition, 16 x 16 MiB elsewhere
    sizes.update({f"small-{i}": [16 << 20] for i in range(16)})
    bins = fold_bins(_plan(sizes), 4)
    assert set(bins) == set(sizes)
    assert bins["big-0"] == 0
    assert [p for p, b in bins.items() if b == 0] == ["big-0"]
    # the 16 small ones spread evenly over the other three tasks (LPT: 6/5/5)
    counts = sorted(sum(1 for b in bins.values() if b == k) for k in (1, 2, 3))
    assert counts == [5, 5, 6]


def test_bins_are_numbered_heaviest_first_and_balanced() -> None:
    sizes = {"a-0": [70], "a-1": [60], "a-2": [50], "a-3": [40], "a-4": [30], "a-5": [20]}
    bins = fold_bins(_plan(sizes), 3)
    loads = [0, 0, 0]
    for path, b in bins.items():
        loads[b] += sum(sizes[path])
    assert loads == sorted(loads, reverse=True)
    assert max(loads) - min(loads) <= 20  # LPT: 70+20, 60+30, 50+40


def test_partitions_without_chosen_bytes_still_get_a_task() -> None:
    plan = _plan({"a-0": [100]}, extra_infos=("empty-0", "empty-1"))
    plan.tasks.append(_task("a-0", 10_000, chosen=False, base=5000))  # another replica's copy: not folded
    bins = fold_bins(plan, 2)
    assert set(bins) == {"a-0", "empty-0", "empty-1"}
    # the unchosen copy's 10 000 bytes do not count: a-0 weighs 100, the empty ones share the other task
    assert bins == {"a-0": 0, "empty-0": 1, "empty-1": 1}


def test_single_bin() -> None:
    assert set(fold_bins(_plan({"a-0": [1], "b-0": [2]}), 1).values()) == {0}


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
