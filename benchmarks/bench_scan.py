"""``kafkatx scan`` on Spark (local[1] vs local[2]) against single-process ``lag`` + ``find-hanging``.

Generates (once; cached under the temp dir by size) a broker log dir of ``--size-gb`` GB
with many small partitions and one partition holding half of the data, in ~``--segment-mb``
MB segments, written with kafkatx's own encoders (``build_batch``/``build_control_batch``):
transactional producers that commit, one transaction per partition left open (so
find-hanging has work), a ``replication-offset-checkpoint``. Then, for the full size and
for half of it (cost should be linear in the data), prints wall time and MB/s of:

  scan local[1]   scan local[2]   lag + find-hanging (one process)

and the 2-core/1-core speed-up of scan (target >= 1.6x on a machine with 2 free cores).
Spark start-up is timed separately (it does not grow with the data); each scan first runs a
warm-up job on fixtures/clean, and the page cache is warmed before every timed run, so the
figures are steady state (the first configuration does not pay for the cold disk read).

``--trace`` also prints, per scan, the driver's phases and every Spark task's duration
(``kafkatx.spark.trace``), to see where local[2] loses time against local[1].

    PYTHONPATH=. python benchmarks/bench_scan.py [--size-gb 2] [--segment-mb 64] [--no-half] [--trace]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
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


def bench_scan(log_dir: Path, cores: int, now: int, trace: Path | None = None) -> tuple[float, float, int]:
    from kafkatx.spark.job import run_scan, start_spark
    from kafkatx.spark.trace import ENV

    if trace is not None:
        # before Spark starts: local Python workers inherit it (from the JVM, which outlives
        # spark.stop(), so the path must be the same for every run)
        os.environ[ENV] = str(trace)
    t = time.monotonic()
    spark = start_spark(f"local[{cores}]", {"spark.sql.shuffle.partitions": str(2 * cores)})
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
            print(f"  trace of scan local[{cores}] ({wall:.2f} s):")
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
    ap.add_argument("--trace", action="store_true",
                    help="print each scan's driver phases and per-task durations (kafkatx.spark.trace)")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    now = T0 + 10 * 3_600_000
    sizes = [args.size_gb] + ([] if args.no_half else [args.size_gb / 2])
    print(f"{'size':>8} {'what':<22} {'wall s':>8} {'MB/s':>8}  notes")
    for size in sizes:
        t = time.monotonic()
        root = generate(args.cache / f"{size:g}gb-{args.segment_mb}mb", size, args.segment_mb)
        gen = time.monotonic() - t
        mb = _data_bytes(root) / (1 << 20)
        label = f"{mb:.0f}MB"
        if gen > 1:
            print(f"{label:>8} {'(generate)':<22} {gen:8.1f}")
        walls = {}
        for cores in (1, 2, 1, 2):  # twice each, interleaved; the best of two is reported
            trace = Path(tempfile.gettempdir()) / "kafkatx-scan-trace.jsonl" if args.trace else None
            wall, startup, hanging = bench_scan(root, cores, now, trace)
            if cores in walls and walls[cores] <= wall:
                continue
            walls[cores] = wall
            print(f"{label:>8} {f'scan local[{cores}]':<22} {wall:8.1f} {mb / wall:8.1f}  "
                  f"(+{startup:.1f} s Spark start-up) hanging={hanging}")
        single, hanging = bench_single(root, now)
        print(f"{label:>8} {'lag + find-hanging':<22} {single:8.1f} {mb / single:8.1f}  hanging={hanging}")
        print(f"{label:>8} {'speed-up 2/1 cores':<22} {walls[1] / walls[2]:8.2f}x")


if __name__ == "__main__":
    main()
