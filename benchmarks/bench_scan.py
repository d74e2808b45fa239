"""``kafkatx scan`` over a simulated fleet against the single-process ``find-hanging``: whole processes.

    PYTHONPATH=. python benchmarks/bench_scan.py                          # 20 brokers x 500 partitions, 1,000,000 ids
    PYTHONPATH=. python benchmarks/bench_scan.py --quick                  # a smoke run (2 x 50, 20,000 ids)
    PYTHONPATH=. python benchmarks/bench_scan.py --baseline /path/to/older/checkout   # before/after in one run

Shapes (generated once under ``--work-dir``; reused while their parameters match):

* ``one``: one data partition (start-up: what no amount of data changes).
* ``fleet``: ``--brokers`` log dirs of ``--partitions-per-broker`` data partitions each (fixtures/sim.py's
  simulated broker, as ``bench_scale.py``'s partitions shape: one transactional id per topic of 50
  partitions, two rounds, the last topic's second transaction left open), and the internal topics
  (50 ``__transaction_state`` and 50 ``__consumer_offsets`` partitions) replicated on 3 brokers each, so
  the replica choice has copies to choose between.
* ``ids``: ``--ids`` transactional ids over 50 ``__transaction_state`` partitions (``bench_scale.py``'s
  ids shape: 4 records per id up to 200,000 ids, else 2).

Each row is a whole process (``python -m kafkatx scan ...``, ``find-hanging``), page cache warm; best of
``--repeat``. Configurations: ``local[1]``, ``local[2]``, and a standalone cluster started from pyspark's own
scripts (``kafkatx.spark.standalone``: a master and 2 one-core workers on 127.0.0.1) used with 1 and with 2
executors (``spark.cores.max``). Printed:

* wall seconds per shape and configuration, with the load average (``os.getloadavg``) beside each;
* fitted slopes: start-up (the ``one`` shape), per partition ((fleet - one) / partitions), per coordinator
  record ((ids - one) / records), beside find-hanging's;
* Spark's event log of each scan (``spark.eventLog.enabled``): the phases (before the SparkContext,
  SparkContext to the first job, each job, the time no job ran, the writes, after the last job), the
  summed task time and the serial fraction ``s`` = 1 - task time / wall (of the whole process, and of the
  jobs' own span from the first job's submission to the last job's end), with Amdahl's projection
  ``1 / (s + (1 - s) / N)`` for 16 and 64 cores;
* a floor measured in the same run (``--writer-floor``, a process of its own after the first configuration's
  scan of each shape): a SparkSession and a first empty Python job (what any Spark job pays before its
  work), and Spark's writer alone writing that scan's own ``batches/`` rows handed over as Arrow record
  batches (``mapInArrow``, the JVM cold as in a scan), its slopes beside the scan's;
* peak RSS (``VmHWM``) of the driver's Python, the driver's JVM, and each executor (its JVM on a cluster;
  the Python workers);
* the answers: ``hanging/`` and ``partitions/`` of every scan compared with find-hanging and lag
  (``--format json``) on the same shape, and the datasets' file counts.

Timings on a shared machine are noisy: compare ratios from one run, with the load beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import (  # noqa: E402
    NOW,
    T0,
    TXN_STATE,
    TXN_STATE_PARTITIONS,
    gen_ids,
    records_per_id,
    topic_transactions,
)

REPLICAS = 3  # copies of each internal partition in the fleet


# ------------------------------------------------------------------ shapes


def gen_one(out: Path) -> None:
    from fixtures.sim import PartitionLog, Producer, write_log_dir

    log = PartitionLog("single", 0)
    prod = Producer()
    prod.send(log, [(None, b"v" * 40)] * 3, timestamp=T0)
    write_log_dir(out, [log], node_id=1, cluster_id="bench-scan-cluster0000", directory_id="bench-scan-directory00")


def gen_fleet(out: Path, brokers: int, per_broker: int) -> int:
    """``brokers`` log dirs under ``out``; returns the number of data partitions."""
    from fixtures.sim import PartitionLog, Producer, TxnCoordinator, write_log_dir

    per_topic = 50 if per_broker % 50 == 0 else per_broker
    topics = brokers * per_broker // per_topic
    txn_logs = {p: PartitionLog(TXN_STATE, p) for p in range(TXN_STATE_PARTITIONS)}
    coord = TxnCoordinator(txn_logs)
    plain = Producer()
    by_broker: list[list[PartitionLog]] = [[] for _ in range(brokers)]
    t = T0
    for ti in range(topics):
        topic = f"topic-{ti:04d}"
        tlogs = [PartitionLog(topic, p) for p in range(per_topic)]
        by_broker[ti * per_topic // per_broker].extend(tlogs)  # a topic's partitions on one broker
        t = topic_transactions(coord, plain, ti, tlogs, t, last=ti == topics - 1)
    internal = [*(PartitionLog("__consumer_offsets", p) for p in range(50)), *txn_logs.values()]
    for i, log in enumerate(internal):
        for k in range(REPLICAS):
            by_broker[(i + k) % brokers].append(log)
    for b, logs in enumerate(by_broker):
        write_log_dir(out / f"broker-{b:02d}", logs, node_id=b, cluster_id="bench-scan-cluster0000",
                      directory_id=f"bench-scan-directory{b:02d}")
    return topics * per_topic


def shapes(work: Path, brokers: int, per_broker: int, ids: int) -> dict[str, tuple[list[Path], int]]:
    """name -> (log dirs, units): partitions for one/fleet, coordinator records for ids."""
    out: dict[str, tuple[list[Path], int]] = {}
    one = work / "one"
    if not (one / ".complete").exists():
        shutil.rmtree(one, ignore_errors=True)
        gen_one(one / "broker-00")
        (one / ".complete").write_text("")
    out["one"] = ([one / "broker-00"], 1)
    fleet = work / f"fleet-{brokers}x{per_broker}"
    if not (fleet / ".complete").exists():
        shutil.rmtree(fleet, ignore_errors=True)
        t = time.monotonic()
        gen_fleet(fleet, brokers, per_broker)
        (fleet / ".complete").write_text("")
        print(f"(generated the fleet in {time.monotonic() - t:.0f} s)", flush=True)
    out["fleet"] = (sorted(fleet.glob("broker-*")), brokers * per_broker)
    idd = work / f"ids-{ids}"
    if not (idd / ".complete").exists():
        shutil.rmtree(idd, ignore_errors=True)
        t = time.monotonic()
        gen_ids(idd / "broker-00", ids)
        (idd / ".complete").write_text("")
        print(f"(generated {ids} ids in {time.monotonic() - t:.0f} s)", flush=True)
    out["ids"] = ([idd / "broker-00"], ids * records_per_id(ids))
    return out


# ------------------------------------------------------------------ processes and memory


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (a JVM starts its executors and Python workers from other threads)."""
    out: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _tree(pid: int) -> list[int]:
    return [pid, *(p for c in _children(pid) for p in _tree(c))]


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _role(pid: int, root: int, cmd: str) -> str:
    if pid == root:
        return "driver python"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executor JVM"
    if "java" in cmd.split(" ", 1)[0] and "SparkSubmit" in cmd:
        return "driver JVM"
    if "pyspark.daemon" in cmd or "pyspark/daemon" in cmd or "pyspark.worker" in cmd:
        return "python worker"
    return "other"


@dataclass
class Run:
    secs: float
    code: int
    stdout: str
    peaks: dict[str, list[int]]  # role -> peak kB of each process of that role
    load: float
    events: Path | None = None


def run(argv: list[str], env: dict[str, str], extra_roots: list[int] = ()) -> Run:  # type: ignore[assignment]
    """One whole process; every 100 ms the ``VmHWM`` of it, its descendants and the descendants of
    ``extra_roots`` (a standalone cluster's workers: their executors)."""
    peaks: dict[int, tuple[str, int]] = {}
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tempfile.gettempdir())
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            pids = _tree(proc.pid) + [p for r in extra_roots for p in _tree(r)[1:]]
            for p in pids:
                kb = _hwm_kb(p)
                if kb:
                    role = _role(p, proc.pid, _cmdline(p))  # asked again: spark-class execs java
                    peaks[p] = (role, max(kb, peaks.get(p, ("", 0))[1]))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    secs = time.perf_counter() - t
    done.set()
    sampler.join()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')[-3000:]}")
    by_role: dict[str, list[int]] = {}
    for role, kb in peaks.values():
        by_role.setdefault(role, []).append(kb)
    return Run(secs=secs, code=proc.returncode, stdout=out.decode(), peaks=by_role, load=load)


# ------------------------------------------------------------------ Spark's event log


@dataclass
class Phases:
    app_start: float = 0.0
    app_end: float = 0.0
    jobs: list[tuple[str, float, float]] = field(default_factory=list)  # (description, submitted, completed)
    task_secs: float = 0.0
    tasks: int = 0
    executors_added: list[float] = field(default_factory=list)
    # per job (its submission time): what its tasks' time is made of, seconds summed over its tasks
    parts: dict[float, dict[str, float]] = field(default_factory=dict)


# The task metrics (ms) and SQL metrics of Spark's event log that say what a task's time is made of
TASK_PARTS = {"Executor Deserialize Time": "deserialize", "JVM GC Time": "GC",
              "Result Serialization Time": "result serialize"}
SQL_PARTS = {"time to start Python workers": "Python start",
             "time to execute Python code": "Python code", "shuffle write time": "shuffle write",
             "task commit time": "commit", "sort time": "sort"}
NS_PARTS = {"shuffle write time"}  # nanoseconds; the others ms


def read_event_log(path: Path) -> Phases:
    ph = Phases()
    open_jobs: dict[int, tuple[str, float]] = {}
    job_of_stage: dict[int, float] = {}
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerApplicationStart":
                ph.app_start = e["Timestamp"] / 1000
            elif kind == "SparkListenerApplicationEnd":
                ph.app_end = e["Timestamp"] / 1000
            elif kind == "SparkListenerJobStart":
                props = e.get("Properties") or {}
                what = props.get("spark.job.description") or props.get("callSite.short") or "?"
                open_jobs[e["Job ID"]] = (what, e["Submission Time"] / 1000)
                for sid in e.get("Stage IDs", []):
                    job_of_stage[sid] = e["Submission Time"] / 1000
            elif kind == "SparkListenerJobEnd":
                what, t0 = open_jobs.pop(e["Job ID"], ("?", 0.0))
                ph.jobs.append((what, t0, e["Completion Time"] / 1000))
            elif kind == "SparkListenerTaskEnd":
                info = e["Task Info"]
                ph.task_secs += (info["Finish Time"] - info["Launch Time"]) / 1000
                ph.tasks += 1
                parts = ph.parts.setdefault(job_of_stage.get(e.get("Stage ID", -1), 0.0), {})
                parts["task wall"] = parts.get("task wall", 0.0) + (info["Finish Time"] - info["Launch Time"]) / 1000
                metrics = e.get("Task Metrics") or {}
                for name, label in TASK_PARTS.items():
                    parts[label] = parts.get(label, 0.0) + (metrics.get(name) or 0) / 1000
                for a in info.get("Accumulables") or []:
                    label = SQL_PARTS.get(a.get("Name", ""))
                    if label is not None:
                        try:
                            v = float(a.get("Update") or 0)
                        except (TypeError, ValueError):
                            continue
                        parts[label] = parts.get(label, 0.0) + v / (1e9 if a["Name"] in NS_PARTS else 1000)
            elif kind == "SparkListenerExecutorAdded":
                ph.executors_added.append(e["Timestamp"] / 1000)
    ph.jobs.sort(key=lambda j: j[1])
    return ph


def idle_between_jobs(ph: Phases) -> float:
    """Seconds of the jobs' span in which no job ran (the driver's own work between them): jobs may overlap
    (scan writes batches/ beside the others), so this is the span minus the union of the jobs' intervals."""
    idle = 0.0
    reach = ph.jobs[0][2] if ph.jobs else 0.0
    for _what, t0, t1 in ph.jobs[1:]:
        if t0 > reach:
            idle += t0 - reach
        reach = max(reach, t1)
    return idle


def amdahl(s: float, n: int) -> float:
    return 1 / (s + (1 - s) / n)


def phase_lines(ph: Phases, launched: float, ended: float) -> list[str]:
    lines = [f"      before SparkContext {ph.app_start - launched:6.2f} s"]
    if not ph.jobs:
        return lines
    lines.append(f"      SparkContext -> job 1 {ph.jobs[0][1] - ph.app_start:6.2f} s")
    writes = 0.0
    first = ph.jobs[0][1]
    for i, (what, t0, t1) in enumerate(ph.jobs):
        if "write" in what.lower() or "parquet" in what.lower():
            writes += t1 - t0
        lines.append(f"      job {i + 1:<2} {t1 - t0:6.2f} s  {what[:52]:<52} (from +{t0 - first:.2f} s)")
        parts = ph.parts.get(t0)
        if parts:
            lines.append("             tasks: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items() if v >= 0.005))
    lines.append(f"      no job running (driver only) {idle_between_jobs(ph):6.2f} s;  of the jobs, writes {writes:6.2f} s")
    lines.append(f"      after the last job {ended - ph.jobs[-1][2]:6.2f} s (stop, exit)")
    return lines


# ------------------------------------------------------------------ the run


@dataclass
class Config:
    label: str
    master: str
    conf: dict[str, str]
    extra_roots: list[int] = field(default_factory=list)


def writer_floor(batches: Path) -> dict[str, float]:
    """``--writer-floor DIR``, run as a process of its own: what Spark alone costs on this machine for a
    scan's output (the floor the scan's slopes are measured against): a SparkSession started for
    ``local[1]`` as scan starts it, a first job (one Python task, nothing in it), then one Python task that
    hands ``DIR``'s rows (a scan's batches/, read into the Python worker's memory by a job before) to Spark's
    writer as Arrow record batches (``mapInArrow``), as the scan's batches/ job hands its rows over: the
    writer's own cost per row, the JVM cold as it is in a scan ("rows in memory" 1: the worker had them)."""
    from kafkatx.spark.job import _ddl_types, start_spark
    from kafkatx.spark.schema import COLUMNS

    t = time.perf_counter()
    spark = start_spark("local[1]", {})
    got = {"session": time.perf_counter() - t}
    ddl = ", ".join(f"`{c}` {f}" for c, f in zip(COLUMNS["batches"], _ddl_types("batches"), strict=True))
    work = spark.createDataFrame(spark.sparkContext.parallelize([(0, b"")], 1), "bin int, work binary")
    files = sorted(str(f) for f in batches.glob("*.parquet"))
    columns = list(COLUMNS["batches"])

    def nothing(it):  # type: ignore[no-untyped-def]
        yield from it

    # The rows are read from the Parquet files into the Python worker's memory by a job of their own
    # (untimed; Spark reuses its Python workers), so the timed job hands them straight to the writer
    # as the scan's task hands over the rows it built: its time is the writer's, not a Parquet read's.
    cache = "_kafkatx_bench_floor_rows"
    in_memory = spark.sparkContext.accumulator(0)

    def load(it):  # type: ignore[no-untyped-def]
        import pyarrow as pa
        import pyarrow.parquet as pq

        setattr(pa, cache, [b for f in files for b in pq.read_table(f).select(columns).to_batches(65_536)])
        yield from it

    def rows(it):  # type: ignore[no-untyped-def]
        import pyarrow as pa
        import pyarrow.parquet as pq

        for _b in it:
            pass
        got = getattr(pa, cache, None)
        if got is None:  # another worker than the one that loaded them: read here (the figure says so)
            got = [b for f in files for b in pq.read_table(f).select(columns).to_batches(65_536)]
        else:
            in_memory.add(1)
        yield from got

    t = time.perf_counter()
    work.mapInArrow(nothing, "bin int, work binary").count()
    got["first job"] = time.perf_counter() - t
    work.mapInArrow(load, "bin int, work binary").count()
    with tempfile.TemporaryDirectory(prefix="kafkatx-bench-floor-") as out:
        t = time.perf_counter()
        work.mapInArrow(rows, ddl).write.mode("overwrite").parquet(out)
        got["write"] = time.perf_counter() - t
    got["rows in memory"] = float(in_memory.value)
    spark.stop()
    return got


def run_floor(batches: Path, code: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--writer-floor", str(batches)],
                          env=env_for(code), capture_output=True, cwd=tempfile.gettempdir())
    if proc.returncode:
        return {}
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def scan_argv(dirs: list[Path], out: Path, config: Config, events: Path) -> list[str]:
    argv = [sys.executable, "-m", "kafkatx", "scan", *[a for d in dirs for a in ("--log-dir", str(d))],
            "--output", str(out), "--now", str(NOW), "--format", "json", "--master", config.master,
            "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{events}",
            "--conf", "spark.eventLog.rolling.enabled=false", "--conf", "spark.eventLog.compress=false"]
    for k, v in config.conf.items():
        argv += ["--conf", f"{k}={v}"]
    return argv


def env_for(code: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code)
    env.pop("KAFKATX_PURE_PYTHON", None)
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def answers_equal(out: Path, dirs: list[Path], code: Path) -> str:
    """scan's hanging/ and partitions/ against find-hanging and lag on the same input ("equal" or what differs)."""
    env = env_for(code)
    args = [a for d in dirs for a in ("--log-dir", str(d))]
    hang = json.loads(subprocess.run([sys.executable, "-m", "kafkatx", "find-hanging", *args, "--now", str(NOW),
                                      "--format", "json"], env=env, capture_output=True, check=False).stdout)
    lag = json.loads(subprocess.run([sys.executable, "-m", "kafkatx", "lag", *args, "--format", "json"], env=env,
                                    capture_output=True, check=False).stdout)
    import pyarrow as pa
    import pyarrow.dataset as ds

    def rows(name: str, key):  # type: ignore[no-untyped-def]
        part = ds.partitioning(pa.schema([pa.field("topic", pa.string())]), flavor="hive")
        path = out / name
        if not any(path.rglob("*.parquet")):
            return []
        return sorted(ds.dataset(str(path), format="parquet", partitioning=part).to_table().to_pylist(), key=key)

    got_h = rows("hanging", lambda r: (r["topic"], r["partition"], r["first_offset"], r["producer_id"]))
    got_l = rows("partitions", lambda r: (r["topic"], r["partition"]))
    bad = []
    if got_h != hang:
        bad.append(f"hanging/ {len(got_h)} rows vs find-hanging {len(hang)}")
    if got_l != lag:
        bad.append(f"partitions/ {len(got_l)} rows vs lag {len(lag)}")
    return "; ".join(bad) or "equal"


def file_counts(out: Path) -> str:
    parts = []
    for name in ("batches", "transactions", "partitions", "hanging"):
        files = [p for p in (out / name).rglob("*.parquet")] if (out / name).exists() else []
        size = sum(p.stat().st_size for p in files)
        parts.append(f"{name}/ {len(files)} files {size / max(1, len(files)) / 1024:.0f} KB avg")
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "kafkatx-bench-scan-fleet")
    ap.add_argument("--brokers", type=int, default=20)
    ap.add_argument("--partitions-per-broker", type=int, default=500)
    ap.add_argument("--ids", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="2 brokers x 50 partitions, 20,000 ids, no standalone")
    ap.add_argument("--no-standalone", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated configurations (local[1],local[2],sa1,sa2)")
    ap.add_argument("--baseline", type=Path, help="an older checkout (C extensions built): its scan as 'before'")
    ap.add_argument("--baseline-only", action="store_true", help="with --baseline: only the older checkout's scans")
    ap.add_argument("--start-once", action="store_true",
                    help="the one-partition shape with the first configuration only (a loaded machine's time)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose scan is 'after' (default: this one)")
    ap.add_argument("--writer-floor", type=Path, help=argparse.SUPPRESS)  # internal: one floor process
    args = ap.parse_args()
    if args.writer_floor is not None:
        print(json.dumps(writer_floor(args.writer_floor)))
        return
    if args.quick:
        args.brokers, args.partitions_per_broker, args.ids, args.no_standalone = 2, 50, 20_000, True
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    data = shapes(work, args.brokers, args.partitions_per_broker, args.ids)
    for dirs, _n in data.values():  # the page cache warm
        for d in dirs:
            for root, _ds, files in os.walk(d):
                for name in files:
                    with open(os.path.join(root, name), "rb") as f:
                        while f.read(8 << 20):
                            pass
    codes = {"after": args.code.resolve()}
    if args.baseline is not None:
        codes = {"before": args.baseline.resolve(), "after": args.code.resolve()}
        if args.baseline_only:
            del codes["after"]
    configs = [Config("local[1]", "local[1]", {})]
    cluster = None
    wanted = set(args.only.split(",")) if args.only else set()
    if wanted and not wanted & {"sa1", "sa2", "standalone 1 executor", "standalone 2 executors"}:
        args.no_standalone = True  # no cluster started for configurations --only leaves out
    if not args.no_standalone:
        from kafkatx.spark.standalone import start_standalone

        t = time.monotonic()
        cluster = start_standalone(workers=2, cores=1, memory="1536m")
        print(f"standalone cluster {cluster.master_url} (2 workers x 1 core) up in {time.monotonic() - t:.1f} s")
        roots = [p.pid for p in cluster.procs]
        common = {"spark.pyspark.python": sys.executable, "spark.kafkatx.shipPackage": "false",
                  "spark.executor.memory": "1g"}
        configs.append(Config("standalone 2 executors", cluster.master_url, {**common, "spark.cores.max": "2"},
                              roots))
        configs.append(Config("standalone 1 executor", cluster.master_url, {**common, "spark.cores.max": "1"}, roots))
    configs.append(Config("local[2]", "local[2]", {}))
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in configs if c.label in wanted or c.label.replace("standalone ", "sa")[:3] in wanted]
    results: dict[tuple[str, str, str], Run] = {}
    phases: dict[tuple[str, str, str], tuple[Phases, float, float]] = {}
    answers: dict[tuple[str, str, str], str] = {}
    files: dict[tuple[str, str, str], str] = {}
    floors: dict[str, dict[str, float]] = {}
    try:
        for shape, (dirs, _n) in data.items():
            fh = run([sys.executable, "-m", "kafkatx", "find-hanging", *[a for d in dirs for a in
                     ("--log-dir", str(d))], "--now", str(NOW), "--format", "json"], env_for(ROOT))
            results[("find-hanging", shape, "")] = fh
            print(f"  {'':<6} {shape:<5} {'find-hanging':<22} {fh.secs:7.2f} s  load {fh.load:.2f}", flush=True)
        for _ in range(args.repeat):
            for config in configs:
                for shape, (dirs, _n) in data.items():
                    if shape == "one" and config is not configs[0] and args.start_once:
                        continue  # the start-up is the first configuration's; the others' slopes need fleet, ids
                    for version, code in codes.items():
                        events = Path(tempfile.mkdtemp(prefix="kafkatx-bench-events-"))
                        out = Path(tempfile.mkdtemp(prefix="kafkatx-bench-out-"))
                        env = env_for(code)
                        # a cluster's Python workers import the same checkout (Spark merges spark.executorEnv's
                        # PYTHONPATH into theirs)
                        conf = dict(config.conf)
                        if config.label.startswith("standalone"):
                            conf["spark.executorEnv.PYTHONPATH"] = str(code)
                        cfg = Config(config.label, config.master, conf, config.extra_roots)
                        launched = time.time()
                        r = run(scan_argv(dirs, out, cfg, events), env, cfg.extra_roots)
                        ended = time.time()
                        logs = sorted(events.iterdir())
                        key = (version, shape, config.label)
                        if key not in results or r.secs < results[key].secs:
                            results[key] = r
                            if logs:
                                phases[key] = (read_event_log(logs[0]), launched, ended)
                            if shape != "one":
                                answers[key] = answers_equal(out, dirs, code)
                            files[key] = file_counts(out)
                        print(f"  {version:<6} {shape:<5} {config.label:<22} {r.secs:7.2f} s  load {r.load:.2f}  "
                              f"exit {r.code}", flush=True)
                        # each run's details at once (a long run on a loaded machine may be stopped early)
                        report_one(key, r, phases.get(key), answers.get(key), files.get(key))
                        if config is configs[0] and version == "after" and shape not in floors:
                            floors[shape] = run_floor(out / "batches", code)
                            print("      floor (Spark alone, local[1]): " + ", ".join(
                                f"{k} {'yes' if v else 'NO'}" if k == "rows in memory" else f"{k} {v:.2f} s"
                                for k, v in floors[shape].items()), flush=True)
                        shutil.rmtree(out, ignore_errors=True)
                        shutil.rmtree(events, ignore_errors=True)
    finally:
        if cluster is not None:
            cluster.stop()
    report(results, phases, answers, files, data, codes, configs, floors)


def report_one(key, r, ph, answer, files) -> None:  # type: ignore[no-untyped-def]
    if ph is not None:
        phases_, launched, ended = ph
        span = (phases_.jobs[-1][2] - phases_.jobs[0][1]) if phases_.jobs else 0.0
        s_all = max(0.0, 1 - phases_.task_secs / r.secs)
        s_jobs = max(0.0, 1 - phases_.task_secs / span) if span > 0 else 1.0
        print(f"      {len(phases_.jobs)} jobs over {span:.2f} s, {phases_.tasks} tasks summing {phases_.task_secs:.2f} s;"
              f" serial {s_all:.0%} of the process ({amdahl(s_all, 64):.1f}x at 64), {s_jobs:.0%} of the jobs' span "
              f"({amdahl(s_jobs, 16):.1f}x / {amdahl(s_jobs, 64):.1f}x at 16 / 64)")
        for line in phase_lines(phases_, launched, ended):
            print("  " + line)
    p = r.peaks
    execs = ", ".join(f"{kb / 1024:.0f}" for kb in sorted(p.get("executor JVM", []), reverse=True))
    print(f"      peak RSS MB: driver python {max(p.get('driver python', [0])) / 1024:.0f}, driver JVM "
          f"{max(p.get('driver JVM', [0])) / 1024:.0f}, executor JVMs [{execs}], python workers max "
          f"{max(p.get('python worker', [0])) / 1024:.0f}; answers {answer or '-'}; {files or ''}", flush=True)


def report(results, phases, answers, files, data, codes, configs, floors) -> None:  # type: ignore[no-untyped-def]
    n_fleet, n_records = data["fleet"][1], data["ids"][1]
    print(f"\n### wall seconds (whole processes; fleet = {n_fleet} data partitions, ids = {n_records} records)\n")
    head = ["shape", "find-hanging"] + [f"{v} {c.label}" for c in configs for v in codes]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for shape in data:
        fh = results[("find-hanging", shape, "")]
        cells = [shape, f"{fh.secs:.2f} (load {fh.load:.1f})"]
        for c in configs:
            for v in codes:
                r = results.get((v, shape, c.label))
                cells.append(f"{r.secs:.2f} (load {r.load:.1f})" if r else "")
        print("| " + " | ".join(cells) + " |")

    def slopes(get) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
        one, fleet, ids = get("one"), get("fleet"), get("ids")
        return one, (fleet - one) / max(1, n_fleet - 1) * 1e6, (ids - one) / n_records * 1e6

    print("\n### fitted: start-up s, per partition us, per coordinator record us (ratio to find-hanging)\n")
    fh = slopes(lambda s: results[("find-hanging", s, "")].secs)
    print(f"  find-hanging              start {fh[0]:.2f} s   {fh[1]:8.1f} us/partition   {fh[2]:6.2f} us/record")
    for c in configs:
        for v in codes:
            if all((v, s, c.label) in results for s in data):
                sl = slopes(lambda s, v=v, c=c: results[(v, s, c.label)].secs)
                print(f"  {v:<6} {c.label:<22} start {sl[0]:.2f} s   {sl[1]:8.1f} us/partition "
                      f"({sl[1] / fh[1]:.1f}x)   {sl[2]:6.2f} us/record ({sl[2] / fh[2]:.1f}x)")

    if all(floors.get(s, {}).get("write") is not None for s in data):
        w = slopes(lambda s: floors[s]["write"])
        print(f"  floor: Spark's writer alone, the same batches/ rows from Arrow (local[1], JVM cold): "
              f"{w[1]:8.1f} us/partition ({w[1] / fh[1]:.1f}x)   {w[2]:6.2f} us/record ({w[2] / fh[2]:.1f}x)")
        st = {s: floors[s]["session"] + floors[s]["first job"] for s in data}
        print(f"  floor: a SparkSession and a first Python job, nothing in it: {min(st.values()):.2f} s")

    print("\n### Spark's event log: phases, task time, serial fraction (Amdahl at 16 / 64 cores)\n")
    for key, (ph, launched, ended) in sorted(phases.items()):
        v, shape, label = key
        r = results[key]
        wall = r.secs
        s_all = max(0.0, 1 - ph.task_secs / wall)
        span = (ph.jobs[-1][2] - ph.jobs[0][1]) if ph.jobs else 0.0
        s_jobs = max(0.0, 1 - ph.task_secs / span) if span > 0 else 1.0
        print(f"  {v} {shape} {label}: wall {wall:.2f} s, {len(ph.jobs)} jobs over {span:.2f} s, {ph.tasks} tasks "
              f"summing {ph.task_secs:.2f} s")
        print(f"      serial fraction of the process {s_all:.0%} -> {amdahl(s_all, 16):.1f}x / {amdahl(s_all, 64):.1f}x;"
              f" of the jobs' span {s_jobs:.0%} -> {amdahl(s_jobs, 16):.1f}x / {amdahl(s_jobs, 64):.1f}x")
        for line in phase_lines(ph, launched, ended):
            print(line)
    for shape in ("fleet", "ids"):
        for v in codes:
            one = phases.get((v, shape, "standalone 1 executor"))
            two = phases.get((v, shape, "standalone 2 executors"))
            if one and two and one[0].jobs and two[0].jobs:
                s1 = one[0].jobs[-1][2] - one[0].jobs[0][1]
                s2 = two[0].jobs[-1][2] - two[0].jobs[0][1]
                print(f"  {v} {shape}: standalone jobs' own time, 2 executors / 1 executor = {s2:.2f} / {s1:.2f} s "
                      f"= {s2 / s1:.2f}x")

    print("\n### peak RSS MB (VmHWM): driver python, driver JVM, each executor JVM, python workers (max)\n")
    for key, r in sorted(results.items()):
        if key[0] == "find-hanging":
            print(f"  find-hanging {key[1]}: {max(r.peaks.get('driver python', [0])) / 1024:.0f}")
            continue
        p = r.peaks
        execs = ", ".join(f"{kb / 1024:.0f}" for kb in sorted(p.get("executor JVM", []), reverse=True))
        print(f"  {key[0]} {key[1]} {key[2]}: driver python {max(p.get('driver python', [0])) / 1024:.0f}, "
              f"driver JVM {max(p.get('driver JVM', [0])) / 1024:.0f}, executor JVMs [{execs}], "
              f"python workers max {max(p.get('python worker', [0])) / 1024:.0f} "
              f"({len(p.get('python worker', []))} seen)")

    print("\n### answers (scan vs find-hanging and lag) and datasets\n")
    for key in sorted(files):
        print(f"  {key[0]} {key[1]} {key[2]}: {answers.get(key, '-')}; {files[key]}")


if __name__ == "__main__":
    main()
