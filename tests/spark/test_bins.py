"""The bins a scan's jobs are cut into (``job.contiguous_bins``, ``job._bins``): none planned lighter than
``MIN_BIN_WEIGHT``, so a small scan is a task per job; a large one is cut as it was without the minimum."""

from __future__ import annotations

from kafkatx.spark.job import MIN_BIN_WEIGHT, PARTITION_WEIGHT, _bins, bin_count, contiguous_bins


def test_many_tiny_units_are_one_bin():
    weights = [PARTITION_WEIGHT + 1_000] * 100  # 100 small partitions: ~6.5 MB of weight
    assert sum(weights) < MIN_BIN_WEIGHT
    assert contiguous_bins(weights, 8, MIN_BIN_WEIGHT) == [0] * 100
    assert _bins(list(range(100)), weights, 8) == [list(range(100))]
    assert bin_count(weights, 8, MIN_BIN_WEIGHT) == 1
    assert _bins(["one"], [0], 8) == [["one"]]  # nothing to weigh: still one bin


def test_no_bin_is_planned_lighter_than_the_minimum():
    # three minimums' worth in many units: three bins, each of them at least the minimum less one unit
    unit = MIN_BIN_WEIGHT // 50 + 1
    weights = [unit] * 150
    assert bin_count(weights, 8, MIN_BIN_WEIGHT) == 3
    bins = _bins(list(range(150)), weights, 8)
    assert [len(b) for b in bins] == [50, 50, 50]
    assert [b[0] for b in bins] == [0, 50, 100]  # runs of neighbours, in order


def test_weights_above_the_minimum_times_the_bins_are_cut_as_without_it():
    cases = [
        ([MIN_BIN_WEIGHT] * 8, 8),
        ([3 * MIN_BIN_WEIGHT, MIN_BIN_WEIGHT // 2, MIN_BIN_WEIGHT, 2 * MIN_BIN_WEIGHT, MIN_BIN_WEIGHT // 3] * 3, 4),
        ([MIN_BIN_WEIGHT // 7 + k for k in range(400)], 8),  # many units, ~57 minimums in all
        ([5 * MIN_BIN_WEIGHT], 3),  # fewer units than bins: as many bins as units
    ]
    for weights, n in cases:
        assert sum(weights) >= n * MIN_BIN_WEIGHT or len(weights) < n
        assert contiguous_bins(weights, n, MIN_BIN_WEIGHT) == contiguous_bins(weights, n)
        assert bin_count(weights, n, MIN_BIN_WEIGHT) == min(n, len(weights))
        items = list(range(len(weights)))
        without: list[list[int]] = [[] for _ in range(n)]
        for item, b in zip(items, contiguous_bins(weights, n), strict=True):
            without[b].append(item)
        assert _bins(items, weights, n) == [b for b in without if b]
