"""Benchmark the offline replay (``lag`` + ``find-hanging``) over a generated log dir.

    python benchmarks/bench_replay.py                 # 1 GB across 32 partitions
    python benchmarks/bench_replay.py --size-gb 0.1   # quicker
    python benchmarks/bench_replay.py --partitions 200 --cache-dir /var/tmp/kafkatx-bench

The log dir is generated once with kafkatx's own writers (``build_batch``,
``build_control_batch``, ``encode_txn_log_*``) and cached under the cache dir
(default: the system temp dir), keyed by its parameters. Each partition gets a
mix of transactional producers (committed and aborted transactions, one left
open per partition so find-hanging has work), plain batches and idempotent
batches; one ``__transaction_state`` partition knows the producers. No
snapshots are written, so the replay reads every batch header (the worst case).

Generation runs in a child process and the measurement in this one, so the
reported peak RSS (``ru_maxrss``) is the replay's, not the generator's. Batches
are templates with only the base offset patched (Kafka's CRC-32C does not cover
the base offset), so generating a gigabyte takes seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

T0 = 1_700_000_000_000
RECORDS_PER_BATCH = 50
VALUE_SIZE = 200
SEGMENT_BYTES = 256 << 20


def _generate(out: Path, size_gb: float, partitions: int) -> None:
    from kafkatx.format.checkpoint import encode_offset_checkpoint
    from kafkatx.format.control import ControlType
    from kafkatx.format.record_batch import Record, build_batch, build_control_batch
    from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value

    out.mkdir(parents=True, exist_ok=True)
    per_partition = int(size_gb * (1 << 30)) // partitions
    value = b"x" * VALUE_SIZE

    def data_template(pid: int, txn: bool) -> bytes:
        recs = [Record(offset=i, timestamp=T0, key=b"key-%d" % i, value=value) for i in range(RECORDS_PER_BATCH)]
        return build_batch(recs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=txn)

    def marker_template(pid: int, commit: bool) -> bytes:
        return build_control_batch(offset=0, control_type=ControlType.COMMIT if commit else ControlType.ABORT,
                                   producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=T0 + 1)

    pack_offset = struct.Struct(">q").pack_into
    hws: dict[tuple[str, int], int] = {}
    open_pids: dict[int, list[tuple[str, int]]] = {}
    for p in range(partitions):
        topic, part = "bench", p
        d = out / f"{topic}-{part}"
        d.mkdir(exist_ok=True)
        pids = [10_000 + p * 4 + i for i in range(4)]
        templates = {pid: (data_template(pid, True), marker_template(pid, True), marker_template(pid, False))
                     for pid in pids}
        plain = data_template(-1, False)
        offset = 0
        written = 0
        seg_base, seg_written = 0, 0
        f = open(d / f"{0:020d}.log", "wb")  # noqa: SIM115 - rolled below
        i = 0
        while written < per_partition:
            pid = pids[i % len(pids)]
            data, commit, abort = templates[pid]
            # 3 data batches per transaction, then its marker (every 5th aborted); a plain batch in between
            chunks = [data, plain, data, data, abort if i % 5 == 4 else commit]
            for raw in chunks:
                if seg_written >= SEGMENT_BYTES:
                    f.close()
                    seg_base, seg_written = offset, 0
                    f = open(d / f"{seg_base:020d}.log", "wb")  # noqa: SIM115
                buf = bytearray(raw)
                pack_offset(buf, 0, offset)
                f.write(buf)
                count = RECORDS_PER_BATCH if raw is not commit and raw is not abort else 1
                offset += count
                written += len(buf)
                seg_written += len(buf)
            i += 1
        # leave the last producer's transaction open: a hanging transaction per partition
        pid = pids[0]
        buf = bytearray(templates[pid][0])
        pack_offset(buf, 0, offset)
        f.write(buf)
        offset += RECORDS_PER_BATCH
        f.close()
        hws[(topic, part)] = offset
        open_pids.setdefault(pid, []).append((topic, part))
    # one coordinator partition: the open producers' ids are known, their transactions complete
    # (so find-hanging reports them as orphaned)
    tsd = out / "__transaction_state-0"
    tsd.mkdir(exist_ok=True)
    recs = []
    for n, pid in enumerate(sorted(open_pids)):
        v = TxnLogValue(version=0, producer_id=pid, producer_epoch=0, transaction_timeout_ms=60_000,
                        state=TxnState.COMPLETE_COMMIT, partitions=(), last_update_timestamp=T0,
                        start_timestamp=T0)
        recs.append(Record(offset=n, timestamp=T0, key=encode_txn_log_key(f"bench-{pid}"),
                           value=encode_txn_log_value(v)))
    (tsd / f"{0:020d}.log").write_bytes(build_batch(recs) if recs else b"")
    hws[("__transaction_state", 0)] = len(recs)
    (out / "replication-offset-checkpoint").write_text(encode_offset_checkpoint(hws))
    (out / "done").write_text(json.dumps({"size_gb": size_gb, "partitions": partitions}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0, help="total size of the generated log dir (default 1)")
    ap.add_argument("--partitions", type=int, default=32, help="number of data partitions (default 32)")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "kafkatx-bench",
                    help="where generated log dirs are kept between runs")
    ap.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    log_dir = args.cache_dir / f"logdir-{args.size_gb:g}gb-{args.partitions}p"
    if args.generate_only:
        _generate(log_dir, args.size_gb, args.partitions)
        return 0
    if not (log_dir / "done").exists():
        print(f"generating {args.size_gb:g} GB in {log_dir} ...", file=sys.stderr)
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--generate-only", "--size-gb", str(args.size_gb),
                        "--partitions", str(args.partitions), "--cache-dir", str(args.cache_dir)], check=True)
        print(f"generated in {time.perf_counter() - t:.1f}s", file=sys.stderr)

    from kafkatx.session import offline

    size = sum(f.stat().st_size for f in log_dir.rglob("*.log"))
    results = {}
    for name, call in (("lag", lambda: offline.lag([log_dir])),
                       ("find-hanging", lambda: offline.find_hanging([log_dir], now=T0 + 3_600_000))):
        t = time.perf_counter()
        answer = call()
        elapsed = time.perf_counter() - t
        results[name] = (elapsed, len(answer.rows), len(answer.skipped))
    # batches in the log (each command reads every header once; no snapshots)
    from kafkatx.storage.log_dir import open_log_dirs
    from kafkatx.storage.replay import replay_partition
    from kafkatx.storage.replicas import choose_replicas

    batches = sum(replay_partition(c.partition).batches for c in choose_replicas(open_log_dirs([log_dir])))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"log dir: {log_dir} ({size / (1 << 30):.2f} GiB, {args.partitions} partitions, {batches} batches)")
    for name, (elapsed, rows, skipped) in results.items():
        print(f"{name:13s} {elapsed:7.2f}s  {batches / elapsed:12,.0f} batches/s  "
              f"{size / elapsed / (1 << 20):8.1f} MiB/s  rows={rows} skipped={skipped}")
    print(f"peak RSS: {peak_mb:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
