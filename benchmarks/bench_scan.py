"""``kafkatx scan`` on Spark (local[1], local[2], optionally a 2-worker standalone cluster) against single-process ``lag`` + ``find-hanging``.

Generates (once; cached under the temp dir by size) a broker log dir of ``--size-gb`` GB
with many small partitions and one partition holding half of the data, in ~``--segment-mb``
MB segments, written with kafkatx's own encoders (``build_batch``/``build_control_batch``):
transactional producers that commit, one transaction per partition left open (so
find-hanging has work), a ``replication-offset-checkpoint``. Then, for the full size and
for half of it (cost should be linear in the data), prints wall time and MB/s of:

  scan local[1]   scan local[2]   [scan standalone 2x1 core]   lag + find-hanging (one process)

and the speed-up of each 2-core scan over local[1] (target >= 1.8x on a machine with 2 idle
cores: figures taken while others load the machine say nothing).
Spark start-up is timed separately (it does not grow with the data); each scan first runs a
warm-up job on fixtures/clean, and the page cache is warmed before every timed run, so the
figures are steady state (the first configuration does not pay for the cold disk read).

``--trace`` also prints, per scan, the driver's phases and every Spark task's duration
(``kafkatx.spark.trace``), to see where local[2] loses time against local[1].

With ``--standalone``, the same scans also run on a Spark standalone cluster of two 1-core
workers (separate executor JVMs and Python workers, shuffle through the workers' block
managers) started on 127.0.0.1 from pyspark's own distribution, to compare with local[2].

    PYTHONPATH=. python benchmarks/bench_scan.py [--size-gb 2] [--segment-mb 64] [--no-half] [--standalone] [--trace]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kafkatx.format.checkpoint import encode_offset_checkpoint
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import Record, build_batch, build_control_batch

T0 = 1_700_000_000_000
RECORDS_PER_BATCH = 100
VALUE = b"v" * 120
SMALL_PARTITIONS = 16
TXN_BATCHES = 8  # data batches per transaction before its COMMIT marker


def _write_partition(root: Path, topic: str, partition: int, target_bytes: int, segment_bytes: int,
                     producer_id: int) -> int:
    """Transactions of TXN_BATCHES batches + COMMIT; the last transaction stays open. Returns the log end."""
    pdir = root / f"{topic}-{partition}"
    pdir.mkdir(parents=True, exist_ok=True)
    offset = 0
    written = 0
    seg_file = None
    seg_size = 0
    n = 0
    seq = 0
    while written < target_bytes or n % (TXN_BATCHES + 1) == 0:
        if seg_file is None or seg_size >= segment_bytes:
            if seg_file is not None:
                seg_file.close()
            seg_file = open(pdir / f"{offset:020d}.log", "wb")  # noqa: SIM115 - rolled below
            seg_size = 0
        ts = T0 + offset
        if n % (TXN_BATCHES + 1) == TXN_BATCHES and written < target_bytes:
            data = build_control_batch(offset=offset, control_type=ControlType.COMMIT, producer_id=producer_id,
                                       producer_epoch=0, coordinator_epoch=0, timestamp=ts)
            offset += 1
        else:
            recs = [Record(offset=offset + i, timestamp=ts, key=b"k%d" % (offset + i), value=VALUE)
                    for i in range(RECORDS_PER_BATCH)]
            data = build_batch(recs, producer_id=producer_id, producer_epoch=0, base_sequence=seq,
                               is_transactional=True)
            seq += RECORDS_PER_BATCH
            offset += RECORDS_PER_BATCH
        seg_file.write(data)
        seg_size += len(data)
        written += len(data)
        n += 1
        if written >= target_bytes and n % (TXN_BATCHES + 1) != 0:
            break  # leave the last transaction open: a hanging one for find-hanging
    if seg_file is not None:
        seg_file.close()
    return offset


def generate(root: Path, size_gb: float, segment_mb: int) -> Path:
    done = root / ".complete"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    total = int(size_gb * (1 << 30))
    seg = segment_mb << 20
    hws = {("big", 0): _write_partition(root, "big", 0, total // 2, seg, 1000)}
    for p in range(SMALL_PARTITIONS):
        hws[("bench", p)] = _write_partition(root, "bench", p, total // 2 // SMALL_PARTITIONS, seg, 2000 + p)
    (root / "replication-offset-checkpoint").write_text(encode_offset_checkpoint(hws))
    done.write_text("")
    return root


def _data_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*.log"))


def warm_page_cache(root: Path) -> None:
    """Read every file once so no configuration pays for the first (cold) disk read of the data."""
    for path in sorted(root.glob("*/*")):
        with open(path, "rb") as f:
            while f.read(8 << 20):
                pass


def print_trace(path: Path, t_start: float) -> None:
    """The breakdown of one traced scan: driver phases, then every task (seconds from the scan's start)."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    lines.sort(key=lambda x: x["t0"])
    busy: dict[str, float] = {}
    for x in lines:
        d = x["t1"] - x["t0"]
        if x["what"].endswith("-task"):
            busy[x["what"]] = busy.get(x["what"], 0.0) + d
        extra = {k: v for k, v in x.items() if k not in ("what", "t0", "t1", "pid")}
        if x["what"] != "fold-partition" or d > 0.05:
            print(f"    {x['what']:<20} {x['t0'] - t_start:7.2f} -> {x['t1'] - t_start:7.2f}  {d:6.2f} s  "
                  f"pid={x['pid']} {extra}")
    for what, total in busy.items():
        print(f"    sum of {what} durations: {total:.2f} s")


@dataclass(frozen=True)
class Config:
    """One way of running the scan: a label, a master URL, extra Spark settings."""

    label: str
    master: str
    conf: dict[str, str]


def local_config(cores: int) -> Config:
    return Config(f"local[{cores}]", f"local[{cores}]", {"spark.sql.shuffle.partitions": str(2 * cores)})


def standalone_config(master_url: str, workers: int) -> Config:
    # Workers on this machine run this interpreter with this checkout on PYTHONPATH (they inherit
    # the benchmark's environment): kafkatx is installed there, C extension included, so no zip
    # (which would put the pure-Python decoders first, docs/scan.md) -- the same code as local[N].
    return Config(f"standalone {workers}x1 core", master_url, {
        "spark.sql.shuffle.partitions": str(2 * workers), "spark.pyspark.python": sys.executable,
        "spark.kafkatx.shipPackage": "false", "spark.cores.max": str(workers),
        "spark.executor.memory": "1g"})


def bench_scan(log_dir: Path, config: Config, now: int, trace: Path | None = None) -> tuple[float, float, int]:
    from kafkatx.spark.job import run_scan, start_spark
    from kafkatx.spark.trace import ENV

    conf = dict(config.conf)
    if trace is not None:
        # before Spark starts: local Python workers inherit it (from the JVM, which outlives
        # spark.stop(), so the path must be the same for every run); executors of a cluster get it
        # through spark.executorEnv
        os.environ[ENV] = str(trace)
        conf[f"spark.executorEnv.{ENV}"] = str(trace)
    t = time.monotonic()
    # the JVM's own output (executors lost at spark.stop() log stacks) to a file, not the figures
    spark = start_spark(config.master, conf, jvm_log=Path(tempfile.gettempdir()) / "kafkatx-bench-spark.log")
    startup = time.monotonic() - t
    out = Path(tempfile.mkdtemp(prefix="kafkatx-bench-out-"))
    try:
        # Warm-up on a tiny fixture: JVM class loading, Parquet writers and Python workers are
        # a fixed cost that would otherwise be charged to whichever configuration runs first.
        warm = Path(__file__).resolve().parents[1] / "fixtures" / "clean"
        if warm.exists():
            run_scan([warm], out / "warm", now=now, spark=spark)
        warm_page_cache(log_dir)
        if trace is not None:
            trace.write_text("")
        t_wall = time.time()
        t = time.monotonic()
        result = run_scan([log_dir], out, now=now, spark=spark)
        wall = time.monotonic() - t
        if trace is not None:
            print(f"  trace of scan {config.label} ({wall:.2f} s):")
            print_trace(trace, t_wall)
    finally:
        os.environ.pop(ENV, None)
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)
    return wall, startup, result.summary.hanging


def bench_single(log_dir: Path, now: int) -> tuple[float, int]:
    from kafkatx.txn import offline

    warm_page_cache(log_dir)
    t = time.monotonic()
    offline.lag([log_dir])
    rows = offline.find_hanging([log_dir], now=now).rows
    return time.monotonic() - t, len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "kafkatx-bench-scan")
    ap.add_argument("--no-half", action="store_true", help="skip the half-size run")
    ap.add_argument("--standalone", action="store_true",
                    help="also run on a Spark standalone cluster of two 1-core workers on 127.0.0.1 "
                         "(kafkatx.spark.standalone: pyspark's own master and worker JVMs)")
    ap.add_argument("--trace", action="store_true",
                    help="print each scan's driver phases and per-task durations (kafkatx.spark.trace)")
    args = ap.parse_args()
    now = T0 + 10 * 3_600_000
    sizes = [args.size_gb] + ([] if args.no_half else [args.size_gb / 2])
    cluster = None
    configs = [local_config(1), local_config(2)]
    if args.standalone:
        from kafkatx.spark.standalone import start_standalone

        t = time.monotonic()
        import kafkatx

        # absolute: the workers run in their own directories (PYTHONPATH=. would not find kafkatx)
        cluster = start_standalone(workers=2, cores=1, memory="1536m",
                                   env={"PYTHONPATH": str(Path(kafkatx.__file__).resolve().parents[1])})
        print(f"standalone cluster {cluster.master_url} (2 workers x 1 core) up in {time.monotonic() - t:.1f} s")
        configs.append(standalone_config(cluster.master_url, 2))
    try:
        print(f"{'size':>8} {'what':<30} {'wall s':>8} {'MB/s':>8}  notes")
        for size in sizes:
            t = time.monotonic()
            root = generate(args.cache / f"{size:g}gb-{args.segment_mb}mb", size, args.segment_mb)
            gen = time.monotonic() - t
            mb = _data_bytes(root) / (1 << 20)
            label = f"{mb:.0f}MB"
            if gen > 1:
                print(f"{label:>8} {'(generate)':<30} {gen:8.1f}")
            walls: dict[str, float] = {}
            for config in configs + configs:  # twice each, interleaved; the best of two is reported
                trace = Path(tempfile.gettempdir()) / "kafkatx-scan-trace.jsonl" if args.trace else None
                wall, startup, hanging = bench_scan(root, config, now, trace)
                if config.label in walls and walls[config.label] <= wall:
                    continue
                walls[config.label] = wall
                print(f"{label:>8} {'scan ' + config.label:<30} {wall:8.1f} {mb / wall:8.1f}  "
                      f"(+{startup:.1f} s Spark start-up) hanging={hanging}")
            single, hanging = bench_single(root, now)
            print(f"{label:>8} {'lag + find-hanging':<30} {single:8.1f} {mb / single:8.1f}  hanging={hanging}")
            one = walls["local[1]"]
            for config in configs[1:]:
                print(f"{label:>8} {'speed-up ' + config.label:<30} {one / walls[config.label]:8.2f}x vs local[1]")
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
