"""The benchmark script at a tiny size, and the CLI's progress adapter (it must never break a command)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_smoke(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_replay", ROOT / "benchmarks" / "bench_replay.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--size-gb", "0.002", "--partitions", "2", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # two data partitions, one hanging transaction left open in each
    assert "find-hanging" in out and "rows=2 skipped=0" in out and "peak RSS" in out


def test_progress_adapter(monkeypatch):
    from kafkatx.cli import progress

    monkeypatch.setattr(progress.ProgressBar, "DELAY_S", 0.0)
    bar = progress.ProgressBar()
    bar.start(100, "replaying")
    bar.advance(40)
    assert bar._bar is not None and bar._done == 40
    bar.start(10, "again")  # a second phase resets the bar
    bar.advance(10)
    bar.close()
    assert bar._bar is None


def test_progress_tells_rich_at_most_every_few_hundredths(monkeypatch):
    """10,000 partitions advance the bar 10,000 times: rich is told at most every EVERY_S (it redraws 10 times
    a second), the count always kept whole."""
    from kafkatx.cli import progress

    monkeypatch.setattr(progress.ProgressBar, "DELAY_S", -1.0)  # shown at once (the clock stands still)
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar()
    bar.start(10_000, "verifying")
    bar.advance(1)  # opens the bar and tells it
    told: list[int] = []
    monkeypatch.setattr(bar._bar, "update", lambda _task, completed: told.append(completed))
    for _ in range(999):
        bar.advance(1)  # no time passes: not told
    assert told == [] and bar._done == 1000
    clock[0] += progress.ProgressBar.EVERY_S + 0.001
    bar.advance(1)
    assert told == [1001]
    bar.close()
