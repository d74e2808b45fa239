"""Whole-process timings of kafkatx's commands next to their peers, in one table, in one run.

    PYTHONPATH=. python benchmarks/bench_commands.py              # 100 MB partition, best of 3
    PYTHONPATH=. python benchmarks/bench_commands.py --quick      # 20 MB, best of 2 (a smoke run)
    PYTHONPATH=. python benchmarks/bench_commands.py --baseline /path/to/older/kafkatx   # before/after
    PYTHONPATH=. python benchmarks/bench_commands.py --memory-gb 1,4           # memory at 1 GB and 4 GB
    PYTHONPATH=. python benchmarks/bench_commands.py --segment-mb 1024         # the 10 x 1 GB replay case

Everything is generated under a temp dir (``--work-dir`` to keep it) with kafkatx's own
writers; batches are templates with only the base offset patched (Kafka's CRC-32C does not
cover it), so a gigabyte takes seconds. What is measured, each as a whole process
(``python -m kafkatx ...``, page cache warm, stdout to /dev/null), best of ``--repeat``
runs, the repetitions of all rows interleaved so that a noisy neighbour hurts every row
alike:

* the 100 MB partition (~1 KB batches of 10 records; transactions of 3 batches + marker
  from 4 producers, a plain batch between; no producer snapshot and no
  ``.kafka_cleanshutdown``, so the broker's loader recovers the segment (every batch's CRC)
  and replays every batch: the worst case): ``verify``, ``lag``, ``find-hanging``,
  ``dump-segment`` (text, jsonl, deep jsonl), against
  - the *aiokafka CRC scan*: a script that mmaps the segment and checks every batch's CRC
    with aiokafka's compiled reader (``benchmarks/bench_decode.py``'s ``_aio_batches``),
  - *kafka-python deep iteration*: every record of the segment through kafka-python;
* replay proportional to what Kafka replays: a partition of ``--segments`` segments of
  ``--segment-mb`` each with a producer snapshot at every segment roll (what brokers
  write) and a clean shutdown, against the same partition cut down to its last segment
  (log start offset at that segment's base: the broker replays that segment whole, the very
  work it does on the full partition from its newest snapshot);
* start-up: ``kafkatx --version`` and ``find-hanging`` on ``fixtures/hanging``, against
  ``python -c pass`` and ``python -c "import typer"`` (the floor);
* memory: anonymous RSS (``RssAnon``: not the mmap'd file pages) and ``VmHWM`` (peak RSS,
  file pages included) of ``lag``/``verify``/``find-hanging``/``dump-segment`` at exit, per
  log size (100 MB, plus ``--memory-gb``).

``--baseline DIR`` runs every kafkatx row a second time with ``PYTHONPATH=DIR`` (another
checkout, its C extension built in place) and prints both columns: before/after from one
machine in one run. Timings on a shared machine are noisy: compare ratios, and re-take the
figures on an idle machine before quoting them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

T0 = 1_700_000_000_000
NOW = T0 + 3_600_000
RECORDS_PER_BATCH = 10
INDEX_INTERVAL = 4096  # index.interval.bytes
TOPIC = "bench"

# ------------------------------------------------------------------ data


@dataclass
class _Producer:
    pid: int
    last_offset: int = -1
    txn_first: int = -1
    delta: int = 0


@dataclass
class _Writer:
    """Appends template batches to a partition folder, rolling segments, writing indexes and snapshots."""

    path: Path
    segment_bytes: int
    snapshots: bool
    offset: int = 0
    producers: dict[int, _Producer] = field(default_factory=dict)
    _f: object = None
    _seg_written: int = 0
    _seg_base: int = 0
    _index: bytearray = field(default_factory=bytearray)
    _timeindex: bytearray = field(default_factory=bytearray)
    _txnindex: bytearray = field(default_factory=bytearray)
    _since_index: int = 0

    def _open(self) -> None:
        self._seg_base, self._seg_written, self._since_index = self.offset, 0, 0
        self._index, self._timeindex, self._txnindex = bytearray(), bytearray(), bytearray()
        if self.snapshots and self.offset > 0:
            self._snapshot(self.offset)
        self._f = open(self.path / f"{self.offset:020d}.log", "wb")  # noqa: SIM115 - closed in _close

    def _close(self) -> None:
        if self._f is None:
            return
        self._f.close()  # type: ignore[attr-defined]
        (self.path / f"{self._seg_base:020d}.index").write_bytes(bytes(self._index))
        (self.path / f"{self._seg_base:020d}.timeindex").write_bytes(bytes(self._timeindex))
        if self._txnindex:
            (self.path / f"{self._seg_base:020d}.txnindex").write_bytes(bytes(self._txnindex))
        self._f = None

    def _snapshot(self, at: int) -> None:
        from kafkatx.format.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot
        entries = [ProducerSnapshotEntry(producer_id=p.pid, producer_epoch=0, last_sequence=0,
                                         last_offset=p.last_offset, offset_delta=p.delta, timestamp=T0,
                                         coordinator_epoch=0, current_txn_first_offset=p.txn_first)
                   for p in self.producers.values() if p.last_offset >= 0]
        (self.path / f"{at:020d}.snapshot").write_bytes(encode_producer_snapshot(entries))

    def append(self, raw: bytes, count: int, pid: int, kind: str) -> None:
        if self._f is None or self._seg_written >= self.segment_bytes:
            self._close()
            self._open()
        buf = bytearray(raw)
        struct.pack_into(">q", buf, 0, self.offset)
        if self._since_index >= INDEX_INTERVAL:
            last = self.offset + count - 1
            self._index += struct.pack(">ii", last - self._seg_base, self._seg_written)
            self._since_index = 0
        if not self._timeindex and raw[21 + 1] & 0x20 == 0 and self._seg_written > 0:
            # Kafka appends a time index entry only when the max timestamp grows (maxTimestampSoFar,
            # the offset of the batch that set it); the templates' timestamps never grow past the
            # first data batch's, so one entry per segment.
            (max_ts,) = struct.unpack_from(">q", buf, 35)
            self._timeindex += struct.pack(">qi", max_ts, self.offset + count - 1 - self._seg_base)
        self._f.write(buf)  # type: ignore[attr-defined]
        self._seg_written += len(buf)
        self._since_index += len(buf)
        if pid >= 0:
            p = self.producers.setdefault(pid, _Producer(pid))
            p.last_offset = self.offset + count - 1
            p.delta = count - 1
            if kind == "txn" and p.txn_first < 0:
                p.txn_first = self.offset
            elif kind.startswith("marker"):
                if kind == "marker-abort" and p.txn_first >= 0:
                    from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
                    self._txnindex += encode_aborted_txn(AbortedTxn(
                        version=0, producer_id=pid, first_offset=p.txn_first, last_offset=self.offset,
                        last_stable_offset=self.offset + 1))
                p.txn_first = -1
        self.offset += count

    def finish(self) -> int:
        self._close()
        return self.offset


def _templates() -> dict[str, bytes]:
    from kafkatx.format.control import ControlType
    from kafkatx.format.record_batch import Record, build_batch, build_control_batch

    def data(pid: int, txn: bool) -> bytes:
        recs = [Record(offset=i, timestamp=T0 + i, key=b"key-%08d" % i, value=b"%064x" % (i * 7919) + b"x" * 20,
                       headers=(("trace", b"abcdef"),) if i % 3 == 0 else ())
                for i in range(RECORDS_PER_BATCH)]
        return build_batch(recs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=txn)

    out = {"plain": data(-1, False)}
    for pid in range(1000, 1004):
        out[f"txn{pid}"] = data(pid, True)
        out[f"commit{pid}"] = build_control_batch(offset=0, control_type=ControlType.COMMIT, producer_id=pid,
                                                  producer_epoch=0, coordinator_epoch=0, timestamp=T0 + 20)
        out[f"abort{pid}"] = build_control_batch(offset=0, control_type=ControlType.ABORT, producer_id=pid,
                                                 producer_epoch=0, coordinator_epoch=0, timestamp=T0 + 20)
    return out


def generate_log_dir(out: Path, partitions: dict[str, tuple[int, int, bool]], *, clean: bool) -> dict[str, Path]:
    """``partitions``: folder name -> (bytes, segment bytes, snapshot at every roll). Returns the folders."""
    from kafkatx.format.checkpoint import encode_offset_checkpoint
    from kafkatx.format.record_batch import Record, build_batch
    from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value

    out.mkdir(parents=True, exist_ok=True)
    t = _templates()
    hws: dict[tuple[str, int], int] = {}
    folders = {}
    pids = list(range(1000, 1004))
    for n, (name, (size, segment_bytes, snapshots)) in enumerate(sorted(partitions.items())):
        d = out / name
        d.mkdir(exist_ok=True)
        w = _Writer(d, segment_bytes, snapshots)
        written = 0
        i = 0
        while written < size:
            pid = pids[i % len(pids)]
            end = f"abort{pid}" if i % 5 == 4 else f"commit{pid}"
            for key, count, p, kind in ((f"txn{pid}", RECORDS_PER_BATCH, pid, "txn"), ("plain", RECORDS_PER_BATCH, -1, ""),
                                        (f"txn{pid}", RECORDS_PER_BATCH, pid, "txn"),
                                        (f"txn{pid}", RECORDS_PER_BATCH, pid, "txn"), (end, 1, pid, "marker-" + end[:5])):
                w.append(t[key], count, p, kind)
                written += len(t[key])
            i += 1
        # leave one transaction open: find-hanging reports it (orphaned: the coordinator says CompleteCommit)
        w.append(t["txn1000"], RECORDS_PER_BATCH, 1000, "txn")
        hws[(TOPIC, n)] = w.finish()
        folders[name] = d
    tsd = out / "__transaction_state-0"
    tsd.mkdir(exist_ok=True)
    recs = []
    for n, pid in enumerate(pids):
        v = TxnLogValue(version=0, producer_id=pid, producer_epoch=0, transaction_timeout_ms=60_000,
                        state=TxnState.COMPLETE_COMMIT, partitions=(), last_update_timestamp=T0, start_timestamp=T0)
        recs.append(Record(offset=n, timestamp=T0, key=encode_txn_log_key(f"bench-{pid}"),
                           value=encode_txn_log_value(v)))
    (tsd / f"{0:020d}.log").write_bytes(build_batch(recs))
    (tsd / f"{0:020d}.index").write_bytes(b"")
    (tsd / f"{0:020d}.timeindex").write_bytes(b"")
    hws[("__transaction_state", 0)] = len(recs)
    (out / "replication-offset-checkpoint").write_text(encode_offset_checkpoint(hws))
    if clean:
        (out / "recovery-point-offset-checkpoint").write_text(encode_offset_checkpoint(hws))
        (out / ".kafka_cleanshutdown").write_text("")
    return folders


def last_segment_alone(src: Path, out: Path) -> Path:
    """``src``'s partition cut down to its last segment: the same files (hard links) from the last
    segment's base on, that base as the log start offset, a clean shutdown. The broker deletes the
    snapshot at the log start and replays the segment from there: the very work the full partition's
    load does from its newest snapshot, without the segments before it."""
    from kafkatx.format.checkpoint import encode_offset_checkpoint

    part = src / f"{TOPIC}-0"
    base = max(int(f.name[:20]) for f in part.glob("*.log"))
    dst = out / part.name
    dst.mkdir(parents=True, exist_ok=True)
    for f in part.iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) >= base:
            os.link(f, dst / f.name)
    shutil.copytree(src / "__transaction_state-0", out / "__transaction_state-0")
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint", ".kafka_cleanshutdown"):
        shutil.copy(src / name, out / name)
    (out / "log-start-offset-checkpoint").write_text(encode_offset_checkpoint({(TOPIC, 0): base}))
    return out


# ------------------------------------------------------------------ peers

AIOKAFKA_CRC = """
import mmap, sys
from aiokafka.record.memory_records import MemoryRecords
with open(sys.argv[1], "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
    recs = MemoryRecords(bytes(m))  # the Cython reader needs bytes
    n = bad = 0
    while (b := recs.next_batch()) is not None:
        n += 1
        if not b.validate_crc():
            bad += 1
print(n, bad)
"""

KAFKA_PYTHON_DEEP = """
import mmap, sys
from kafka.record.memory_records import MemoryRecords
with open(sys.argv[1], "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
    recs = MemoryRecords(memoryview(m))
    n = 0
    while (b := recs.next_batch()) is not None:
        for r in b:
            n += 1
print(n)
"""

MINIMAL_TYPER = """
import typer
app = typer.Typer()
@app.command()
def hello(n: int = 1) -> None:
    pass
@app.command()
def other() -> None:
    pass
app(["hello"], standalone_mode=False)
"""

# Runs kafkatx's CLI and, at exit, appends this process's RssAnon / VmHWM (kB) to a file.
STATUS_WRAPPER = """
import atexit, sys
out_path = sys.argv[1]
def _status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile", "VmHWM"):
                fields[k] = int(v.split()[0])
    with open(out_path, "w") as out:
        out.write(f"{fields.get('RssAnon', 0)} {fields.get('VmHWM', 0)}")
atexit.register(_status)
sys.argv = ["kafkatx"] + sys.argv[2:]
from kafkatx.cli.main import main
sys.exit(main())
"""


# ------------------------------------------------------------------ running


@dataclass
class Row:
    label: str
    argv: list[str]
    kafkatx: bool  # runs kafkatx (so it gets a baseline column)
    peer: str | None = None  # label of the row the ratio is taken against
    units: int = 0  # records, for a records/s column
    times: dict[str, float] = field(default_factory=dict)  # column -> best seconds
    codes: dict[str, int] = field(default_factory=dict)


PYCACHE = Path(tempfile.gettempdir()) / "kafkatx-bench-pycache"


def _env(pythonpath: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KAFKATX_PURE_PYTHON", None)
    # Start-up as an installed kafkatx has it: byte code cached (outside the source trees).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env["COLUMNS"] = "80"
    return env


# Children run from a neutral directory: ``python -m kafkatx`` puts the working directory first on
# sys.path, which would shadow the PYTHONPATH that picks the tree a column measures.
NEUTRAL_CWD = tempfile.gettempdir()


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    t = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                          cwd=NEUTRAL_CWD)
    elapsed = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return elapsed, proc.returncode


def run_rows(rows: list[Row], columns: dict[str, Path | None], repeat: int) -> None:
    """Best of ``repeat`` wall times per row and column; rounds interleave every row and column."""
    envs = {c: _env(p) for c, p in columns.items()}
    for r in rows:  # warm the page cache and the .pyc files
        for c in (columns if r.kafkatx else [next(iter(columns))]):
            _time(r.argv, envs[c])
    for _ in range(repeat):
        for r in rows:
            for c in (columns if r.kafkatx else [next(iter(columns))]):
                secs, code = _time(r.argv, envs[c])
                r.times[c] = min(r.times.get(c, float("inf")), secs)
                r.codes[c] = code


def memory(argv: list[str], env: dict[str, str], tmp: Path) -> tuple[int, int]:
    status = tmp / "status.txt"
    subprocess.run([sys.executable, "-c", STATUS_WRAPPER, str(status), *argv], env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=NEUTRAL_CWD)
    anon, hwm = (int(x) for x in status.read_text().split())
    return anon, hwm


def print_table(title: str, rows: list[Row], columns: dict[str, Path | None]) -> None:
    """Times per column; ratio = time / the peer row's time (same column when the peer is kafkatx's
    own); speed-up = before / after (> 1: faster now)."""
    by_label = {r.label: r for r in rows}
    cols = list(columns)
    head = f"| {'case':62} | " + " | ".join(f"{c:>9}" for c in cols) + " | "
    head += " | ".join(f"{'ratio ' + c:>12}" for c in cols) + " |"
    if len(cols) > 1:
        head += " speed-up |"
    head += " rate |"
    print(f"\n### {title}\n")
    print(head)
    print("|" + "|".join("-" * (len(p) + 2) for p in head.strip(" |").split(" | ")) + "|")
    for r in rows:
        cells = [f"{r.times[c]:8.3f}s" if c in r.times else f"{'':>9}" for c in cols]
        peer = by_label.get(r.peer) if r.peer else None
        ratios = []
        for c in cols:
            t = r.times.get(c)
            base = None
            if peer is not None:
                base = peer.times.get(c) if c in peer.times else next(iter(peer.times.values()), None)
            ratios.append(f"{t / base:11.2f}x" if (t is not None and base) else f"{'':>12}")
        line = f"| {r.label:62} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |"
        if len(cols) > 1:
            t0, t1 = r.times.get(cols[0]), r.times.get(cols[1])
            line += f" {t0 / t1:7.2f}x |" if (t0 and t1) else f" {'':>8} |"
        rates = ", ".join(f"{r.units / r.times[c] / 1e3:,.0f}k rec/s" for c in cols if r.units and c in r.times)
        line += f" {rates} |"
        print(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100.0, help="the single-segment partition (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per row; the best counts (default 3)")
    ap.add_argument("--segments", type=int, default=10, help="segments of the replay-proportional case (10)")
    ap.add_argument("--segment-mb", type=float, default=20.0,
                    help="segment size of the replay-proportional case (default 20; 1024 is the 10 GB case)")
    ap.add_argument("--memory-gb", default="",
                    help="comma-separated extra log sizes for the memory rows, e.g. 1,4 (default: none)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another kafkatx checkout (C extension built in place): adds a 'before' column")
    ap.add_argument("--quick", action="store_true", help="20 MB partition, 2 x 5 MB segments, best of 2")
    ap.add_argument("--skip-deep", action="store_true", help="skip the deep-iteration rows (the slowest)")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep generated data here (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mb, args.segments, args.segment_mb, args.repeat = 20.0, 2, 5.0, 2
    columns: dict[str, Path | None] = {}
    if args.baseline is not None:
        columns["before"] = args.baseline.resolve()
    columns["after" if args.baseline is not None else "kafkatx"] = ROOT
    if args.work_dir is not None:  # kept after the run; a former run's data there is replaced
        work = args.work_dir.resolve()
        work.mkdir(parents=True, exist_ok=True)
        for name in ("partition", "many", "last", *(f"mem-{gb}" for gb in filter(None, args.memory_gb.split(",")))):
            shutil.rmtree(work / name, ignore_errors=True)
        _run(args, columns, work)
        return 0
    with tempfile.TemporaryDirectory() as tmp_name:
        _run(args, columns, Path(tmp_name))
    return 0


def _kx(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafkatx", *args]


def _run(args: argparse.Namespace, columns: dict[str, Path | None], tmp: Path) -> None:
    mb = 1 << 20
    t = time.perf_counter()
    size = int(args.size_mb * mb)
    main_dir = tmp / "partition"
    folders = generate_log_dir(main_dir, {f"{TOPIC}-0": (size, 1 << 40, False)}, clean=False)
    seg = next(folders[f"{TOPIC}-0"].glob("*.log"))
    seg_bytes = int(args.segment_mb * mb)
    many = tmp / "many"
    generate_log_dir(many, {f"{TOPIC}-0": (args.segments * seg_bytes - seg_bytes // 2, seg_bytes, True)}, clean=True)
    last = last_segment_alone(many, tmp / "last")
    gen = time.perf_counter() - t
    from kafkatx.format.record_batch import iter_batches
    from kafkatx.storage.segment import map_file
    with map_file(seg) as buf:
        headers = list(iter_batches(buf))
    batches = len(headers)
    records = sum(h.records_count for h in headers)
    del headers
    many_segs = len(list((many / f"{TOPIC}-0").glob("*.log")))
    print(f"generated in {gen:.1f}s under {tmp}: {seg.stat().st_size / 1e6:.1f} MB segment, {batches} batches, "
          f"{records} records; replay case: {many_segs} segments of {args.segment_mb:g} MB with a snapshot at "
          f"every roll vs the last segment alone")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.repeat}, whole processes")

    now = str(NOW)
    rows = [
        Row("aiokafka CRC scan (compiled reader, mmap + bytes)", [sys.executable, "-c", AIOKAFKA_CRC, str(seg)],
            False),
        Row("kafkatx verify", _kx("verify", "--log-dir", str(main_dir)), True, "aiokafka CRC scan (compiled reader, mmap + bytes)"),
        Row("kafkatx lag", _kx("lag", "--log-dir", str(main_dir)), True, "aiokafka CRC scan (compiled reader, mmap + bytes)"),
        Row("kafkatx find-hanging", _kx("find-hanging", "--log-dir", str(main_dir), "--now", now), True,
            "aiokafka CRC scan (compiled reader, mmap + bytes)"),
        Row("kafkatx dump-segment (text)", _kx("dump-segment", str(seg)), True,
            "aiokafka CRC scan (compiled reader, mmap + bytes)"),
        Row("kafkatx dump-segment --format jsonl", _kx("dump-segment", "--format", "jsonl", str(seg)), True,
            "kafkatx dump-segment (text)"),
    ]
    if not args.skip_deep:
        rows += [
            Row("kafka-python deep iteration", [sys.executable, "-c", KAFKA_PYTHON_DEEP, str(seg)], False,
                units=records),
            Row("kafkatx dump-segment --deep-iteration (text)", _kx("dump-segment", "--deep-iteration", str(seg)),
                True, "kafka-python deep iteration", units=records),
            Row("kafkatx dump-segment --deep-iteration --format jsonl",
                _kx("dump-segment", "--deep-iteration", "--format", "jsonl", str(seg)), True,
                "kafka-python deep iteration", units=records),
        ]
    print("\nrunning the 100 MB rows ...", file=sys.stderr)
    run_rows(rows, columns, args.repeat)
    print_table(f"One {seg.stat().st_size / 1e6:.0f} MB partition (ratio: against the row named in the text)",
                rows, columns)

    lbl_last = "last segment alone (lag)"
    replay = [
        Row(lbl_last, _kx("lag", "--log-dir", str(last)), True),
        Row(f"{many_segs} segments, snapshot at every roll (lag)", _kx("lag", "--log-dir", str(many)), True, lbl_last),
        Row("last segment alone (find-hanging)", _kx("find-hanging", "--log-dir", str(last), "--now", now), True),
        Row(f"{many_segs} segments, snapshot at every roll (find-hanging)",
            _kx("find-hanging", "--log-dir", str(many), "--now", now), True, "last segment alone (find-hanging)"),
    ]
    print("running the replay rows ...", file=sys.stderr)
    run_rows(replay, columns, args.repeat)
    print_table(f"Replay proportional to what Kafka replays ({args.segment_mb:g} MB segments)", replay, columns)

    fixture = ROOT / "fixtures" / "hanging"
    floor = "python -c pass"
    startup = [
        Row(floor, [sys.executable, "-c", "pass"], False),
        Row('python -c "import typer"', [sys.executable, "-c", "import typer"], False, floor),
        Row("a two-command typer app (typer builds params with pydantic)",
            [sys.executable, "-c", MINIMAL_TYPER], False, floor),
        Row("kafkatx --version", _kx("--version"), True, floor),
        Row("kafkatx find-hanging fixtures/hanging", _kx("find-hanging", "--log-dir", str(fixture), "--now",
                                                         "1700007200000"), True, floor),
    ]
    print("running the start-up rows ...", file=sys.stderr)
    run_rows(startup, columns, max(args.repeat, 5))
    print_table("Start-up (ratio: against bare python)", startup, columns)

    sizes = [(f"{args.size_mb:g} MB", main_dir, seg)]
    for gb in filter(None, args.memory_gb.split(",")):
        d = tmp / f"mem-{gb}"
        f = generate_log_dir(d, {f"{TOPIC}-0": (int(float(gb) * (1 << 30)), 1 << 30, False)}, clean=False)
        sizes.append((f"{gb} GB", d, min(f[f"{TOPIC}-0"].glob("*.log"))))
    print("\n### Memory at exit: RssAnon (anonymous, MiB) / VmHWM (peak RSS incl. mmap'd file pages, MiB)\n")
    cmds = [("lag", lambda d, s: ("lag", "--log-dir", str(d))),
            ("verify", lambda d, s: ("verify", "--log-dir", str(d))),
            ("find-hanging", lambda d, s: ("find-hanging", "--log-dir", str(d), "--now", now)),
            ("dump-segment jsonl", lambda d, s: ("dump-segment", "--format", "jsonl", str(s)))]
    print("| log size | column | " + " | ".join(c for c, _ in cmds) + " |")
    print("|---|---|" + "---|" * len(cmds))
    for label, d, s in sizes:
        for col, path in columns.items():
            cells = []
            for _c, make in cmds:
                anon, hwm = memory(list(make(d, s)), _env(path), tmp)
                cells.append(f"{anon / 1024:.0f} / {hwm / 1024:.0f}")
            print(f"| {label} | {col} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
