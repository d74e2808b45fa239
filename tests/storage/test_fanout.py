"""``log.fanout``: a log dir's partitions checked by forked processes give the answer one process gives, in
the same order; a child that fails has its run done again by the parent (the same answer, or the same
error); no child outlives the call. ``verify`` over damaged log dirs with ``jobs`` 1, 2 and 5: equal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec import Struct

from kafkatx.session import offline
from kafkatx.storage import fanout

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: the fan-out is one process here")


class Item(Struct, frozen=True):
    n: int
    text: str


def test_runs_cut_in_order():
    assert fanout.runs(10, 3) == [range(0, 4), range(4, 7), range(7, 10)]
    assert fanout.runs(2, 5) == [range(0, 1), range(1, 2)]
    assert fanout.runs(0, 2) == [range(0, 0)]
    for count in range(0, 40):
        for jobs in range(1, 9):
            cuts = fanout.runs(count, jobs)
            assert [i for r in cuts for i in r] == list(range(count))
            assert max(len(r) for r in cuts) - min(len(r) for r in cuts) <= 1


def test_jobs_policy(monkeypatch):
    monkeypatch.delenv("KAFKATX_JOBS", raising=False)
    assert fanout.jobs_for(5000, 1) == 1
    assert fanout.jobs_for(3, 8) == 3  # never more processes than items
    assert fanout.jobs_for(1, 4) == 1
    assert fanout.jobs_for(fanout.FANOUT_MIN - 1, None) == 1  # few partitions: this process only
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(32)))
    assert fanout.jobs_for(fanout.FANOUT_MIN, None) == fanout.MAX_JOBS
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert fanout.jobs_for(10 * fanout.FANOUT_MIN, None) == 1
    assert fanout.jobs_for(50, None, at_least=50) == 1  # one CPU
    monkeypatch.setenv("KAFKATX_JOBS", "3")  # the default's override: a number of processes
    assert fanout.jobs_for(10 * fanout.FANOUT_MIN, None) == 3
    assert fanout.jobs_for(10 * fanout.FANOUT_MIN, 2) == 2  # an explicit --jobs wins
    assert fanout.jobs_for(fanout.FANOUT_MIN - 1, None) == 1  # still: few items, one process
    monkeypatch.setenv("KAFKATX_JOBS", "many")  # not a number: ignored
    assert fanout.jobs_for(10 * fanout.FANOUT_MIN, None) == 1
    monkeypatch.delattr(os, "fork")
    assert fanout.jobs_for(5000, 4) == 1


@pytest.mark.parametrize("jobs", [1, 2, 3, 7])
def test_results_in_order_and_done_called_in_order(jobs, forked):
    items = list(range(23))
    seen: list[int] = []
    got = fanout.fan_out(lambda i: [Item(i, f"é{i}" * (i % 4))], items, list[Item], jobs=jobs, done=seen.append)
    assert got == [[Item(i, f"é{i}" * (i % 4))] for i in items]
    assert sorted(seen) == items  # each told once
    for run in fanout.runs(len(items), jobs):  # each run's in its order
        assert [i for i in seen if i in run] == list(run)
    assert len(forked) == jobs - 1 and forked.all_reaped()


def test_progress_of_the_other_processes_is_heard_while_this_one_works():
    """A progress bar moves with every process: the others' items are told between this process's own,
    not all at the end (its time remaining would read N times too long)."""
    import time

    parent = os.getpid()
    told: list[tuple[int, int]] = []  # (item, how many of this process's own items were done then)
    mine = [0]

    def each(i: int) -> int:
        if os.getpid() == parent:
            time.sleep(0.01)  # this process is the slow one: the other's ticks arrive meanwhile
        return i

    def done(i: int) -> None:
        if i < 50:
            mine[0] += 1
        told.append((i, mine[0]))

    assert fanout.fan_out(each, list(range(100)), int, jobs=2, done=done) == list(range(100))
    assert sorted(i for i, _ in told) == list(range(100))
    assert any(i >= 50 and n < 50 for i, n in told)  # the other's items told before this one's run ended


def test_a_failed_childs_items_are_told_once():
    parent = os.getpid()
    seen: list[int] = []

    def each(i: int) -> int:
        if os.getpid() != parent and i == 7:
            os.kill(os.getpid(), 9)  # after ticking 5 and 6: the parent redoes the run, telling 7-9 only
        return i

    assert fanout.fan_out(each, list(range(10)), int, jobs=2, done=seen.append) == list(range(10))
    assert sorted(seen) == list(range(10))


def test_children_do_the_work():
    parent = os.getpid()
    got = fanout.fan_out(lambda _i: os.getpid(), list(range(6)), int, jobs=3)
    assert got[:2] == [parent, parent]
    assert len(set(got)) == 3 and parent in got


def test_a_failing_child_has_its_run_done_here(forked):
    parent = os.getpid()

    def each(i: int) -> int:
        if os.getpid() != parent and i == 5:
            os.kill(os.getpid(), 9)  # the child dies as if killed
        return i * i

    assert fanout.fan_out(each, list(range(8)), int, jobs=2) == [i * i for i in range(8)]
    assert len(forked) == 1 and forked.all_reaped()


def test_a_result_msgspec_cannot_send_is_done_here():
    parent = os.getpid()

    def each(i: int) -> object:
        return object() if os.getpid() != parent else i  # the child's cannot be encoded

    assert fanout.fan_out(each, list(range(4)), int, jobs=2) == [0, 1, 2, 3]


def test_an_error_in_a_childs_run_raises_here_as_with_one_process(forked):
    def each(i: int) -> int:
        if i == 6:
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 6"):
        fanout.fan_out(each, list(range(8)), int, jobs=2)
    assert len(forked) == 1 and forked.all_reaped()


def test_an_error_in_the_parents_run_leaves_no_child(forked):
    def each(i: int) -> int:
        if i == 0 and os.getpid() == parent:
            raise KeyError("here")
        return i

    parent = os.getpid()
    with pytest.raises(KeyError):
        fanout.fan_out(each, list(range(9)), int, jobs=3)
    assert len(forked) == 2 and forked.all_reaped()


# ----------------------------------------------------------------------------- verify with jobs

def _damaged_log_dir(tmp: Path) -> Path:
    """The benchmark's partitions shape (3 topics x 5 partitions and the internal topics), with files
    damaged in partitions spread over the list: a torn log tail, a corrupt batch, an index entry past
    the log, a truncated snapshot, a high watermark past the log end."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules.setdefault("bench_scale", bench)
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    bench.gen_partitions(tmp / "shape", 3, 5)
    logs = next(p.parent for p in (tmp / "shape").rglob("meta.properties"))
    parts = sorted(p for p in logs.iterdir() if p.is_dir() and p.name.startswith("topic-"))
    first_log = lambda part: sorted(part.glob("*.log"))[0]  # noqa: E731
    with open(first_log(parts[0]), "ab") as f:  # a torn tail
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01")
    data = bytearray(first_log(parts[4]).read_bytes())  # a corrupt batch (its CRC no longer matches)
    data[-3] ^= 0xFF
    first_log(parts[4]).write_bytes(bytes(data))
    index = sorted(parts[8].glob("*.index"))[0]
    index.write_bytes(index.read_bytes() + (10**6).to_bytes(4, "big") + (10**7).to_bytes(4, "big"))
    for snap in parts[11].glob("*.snapshot"):
        snap.write_bytes(snap.read_bytes()[:-5])
    hw = logs / "replication-offset-checkpoint"
    lines = hw.read_text().splitlines()
    lines = [f"{ln.rsplit(' ', 1)[0]} 999999" if ln.startswith(parts[13].name.rsplit("-", 1)[0] + " ")
             and ln.split()[1] == parts[13].name.rsplit("-", 1)[1] else ln for ln in lines]
    hw.write_text("\n".join(lines) + "\n")
    return logs


def test_verify_with_jobs_is_the_same_answer(tmp_path, forked):
    logs = _damaged_log_dir(tmp_path)
    one = offline.verify([logs], jobs=1)
    assert {p.check for p in one.rows} - {"startup-truncate", "startup-recover"}  # damage was seen
    assert len({p.partition for p in one.rows if p.partition}) >= 3
    for jobs in (2, 5):
        many = offline.verify([logs], jobs=jobs)
        assert many.rows == one.rows and many.incomplete == one.incomplete and many.notices == one.notices
    assert len(forked) == 1 + 4 and forked.all_reaped()


def test_cli_jobs_same_output_and_bad_value_refused(tmp_path):
    logs = _damaged_log_dir(tmp_path)
    kx = [sys.executable, "-m", "kafkatx", "verify", "--log-dir", str(logs), "--format", "json"]
    env = dict(os.environ, COLUMNS="80")
    one = subprocess.run([*kx, "--jobs", "1"], capture_output=True, env=env, cwd=ROOT)
    three = subprocess.run([*kx, "-j", "3"], capture_output=True, env=env, cwd=ROOT)
    assert one.returncode == three.returncode == 3  # a corrupt batch: that partition could not be read to its end
    assert one.stdout == three.stdout and b"checkpoint-high-watermark" in one.stdout
    assert three.stderr == one.stderr
    bad = subprocess.run([*kx, "--jobs", "0"], capture_output=True, env=env, cwd=ROOT)
    assert bad.returncode == 2 and b"--jobs" in bad.stderr
    shutil.rmtree(tmp_path / "shape")


# ----------------------------------------------------------------------------- lag and find-hanging with jobs

NOW = 1_700_007_200_000


def _fixture_dirs() -> list[list[Path]]:
    """The repository's fixture log dirs (a case each: one dir, or a broker's several)."""
    fx = ROOT / "fixtures"
    cases = [[fx / n] for n in ("clean", "hanging", "ghost", "kraft", "twopc")]
    cases += [[d] for d in sorted((fx / "loading").iterdir()) if d.is_dir()]
    cases += [sorted(d for d in (fx / "two-brokers").iterdir() if d.is_dir())]
    return [c for c in cases if c and all(p.is_dir() for p in c)]


def _answer(a):  # type: ignore[no-untyped-def]
    return a.rows, a.notices, a.skipped, a.incomplete


@pytest.mark.parametrize("case", _fixture_dirs(), ids=lambda c: "+".join(p.name for p in c))
def test_lag_and_find_hanging_with_jobs_are_the_same_answer(case, forked):  # type: ignore[no-untyped-def]
    for jobs in (2, 3):
        assert _answer(offline.lag(case, now=NOW, jobs=jobs)) == _answer(offline.lag(case, now=NOW, jobs=1))
        assert _answer(offline.find_hanging(case, now=NOW, jobs=jobs)) == \
            _answer(offline.find_hanging(case, now=NOW, jobs=1))
    assert forked.all_reaped()


def test_lag_and_find_hanging_jobs_on_damaged_partitions(tmp_path, forked):  # type: ignore[no-untyped-def]
    logs = _damaged_log_dir(tmp_path)
    one_lag, one_hanging = offline.lag([logs], now=NOW, jobs=1), offline.find_hanging([logs], now=NOW, jobs=1)
    assert one_lag.incomplete and one_hanging.rows  # a partition that does not decode; open transactions
    for jobs in (2, 4):
        assert _answer(offline.lag([logs], now=NOW, jobs=jobs)) == _answer(one_lag)
        assert _answer(offline.find_hanging([logs], now=NOW, jobs=jobs)) == _answer(one_hanging)
        topic = offline.find_hanging([logs], now=NOW, topic="topic-002", jobs=jobs)
        assert _answer(topic) == _answer(offline.find_hanging([logs], now=NOW, topic="topic-002", jobs=1))
    assert len(forked) == 3 * (1 + 3) and forked.all_reaped()  # three answers with jobs 2, three with 4
