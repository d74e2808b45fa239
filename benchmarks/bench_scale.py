"""kafkatx at the scale of a real broker: every analysis command, whole process, on three
generated log dirs, each next to a floor measured in the same run.

    PYTHONPATH=. python benchmarks/bench_scale.py                  # the issue's sizes (minutes, ~3 GB disk)
    PYTHONPATH=. python benchmarks/bench_scale.py --quick          # a smoke run (seconds)
    PYTHONPATH=. python benchmarks/bench_scale.py --ids 200000 --segment-mb 256 --work-dir /var/tmp/kx-scale
    PYTHONPATH=. python benchmarks/bench_scale.py --only ids --ids 200000 --baseline /path/to/older/checkout

The shapes (generated once under ``--work-dir``, default a temp dir; a former run's data there is
reused when its parameters match):

* ``partitions``: ``--topics`` x ``--partitions-per-topic`` (200 x 50 = 10,000) partitions written by
  ``fixtures/sim.py``'s simulated broker (segments, indexes, a producer snapshot at each log end,
  leader-epoch checkpoints, partition.metadata), one transactional id per topic whose transactions
  span the topic's partitions (two rounds, the last topic's second transaction left open), plain
  batches between, 50 empty ``__consumer_offsets`` partitions and 50 ``__transaction_state``
  partitions, the log dir's checkpoints and a clean shutdown.
* ``ids``: ``--ids`` transactional ids (default 1,000,000, and 200,000 as a second size) over 50
  ``__transaction_state`` partitions, one record per batch as ``TransactionStateManager`` appends
  them: Empty, Ongoing, PrepareCommit, CompleteCommit (4 records per id up to 200,000 ids, the
  first 2 above), one id in 100 left Ongoing; offset and time indexes as ``LogSegment.append``
  writes them, an empty producer snapshot at each log end.
* ``segment``: one ``--segment-mb`` segment (default 2048) of ~100-byte batches: plain batches,
  transactional batches of one producer and its commit markers, no producer snapshot (the broker
  replays every batch), plus the ``__transaction_state`` record of that producer.

Every row is one whole process (``python -m kafkatx``; stdout to /dev/null), page cache warm (every
file of the shape read once before any row, and each command run once untimed first unless
``--no-warm``), best of ``--repeat``. Peak memory: ``total`` is the child's
``VmHWM`` (peak RSS, mmap'd file pages included), ``private`` the largest ``RssAnon`` (anonymous
memory: what the process allocated), both sampled from ``/proc/<pid>/status`` every 20 ms while it runs. The floors, each a whole process too:

* ``read every file``: every file of the log dir read once in Python (``partitions`` shape);
* ``aiokafka iteration``: aiokafka's reader iterating every record of ``__transaction_state``,
  touching key and value, in a Python loop (``ids`` shape);
* ``crc32c pass``: the ``crc32c`` package's compiled CRC-32C over the segment's bytes (``segment``).

Timings on a shared machine are noisy: compare ratios, and take the figures on an idle machine
before quoting them. ``--baseline DIR`` adds a column with another checkout (before/after).
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import struct
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

T0 = 1_700_000_000_000
NOW = T0 + 600_000  # --now for find-hanging/describe-txn: within the transactions' timeouts
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 50
INDEX_INTERVAL = 4096  # index.interval.bytes
TIMEOUT_MS = 60_000

# ------------------------------------------------------------------ shape: 10,000 partitions


def topic_transactions(coord, plain, ti: int, tlogs: list, t: int, *, last: bool) -> int:  # type: ignore[no-untyped-def]
    """One transactional id for the topic of ``tlogs`` (fixtures/sim.py's coordinator and producers): two
    rounds of transactions over all its partitions with plain batches between, the second left open
    when ``last`` (Ongoing on the coordinator, open in every partition). Returns the clock."""
    tid = f"app-{tlogs[0].topic}"
    prod = coord.init_producer_id(tid, 10_000 + ti, timeout_ms=TIMEOUT_MS, timestamp=t)
    for rnd in range(2):
        t += 1
        coord.add_partitions(tid, tlogs, timestamp=t)
        for log in tlogs:
            prod.send(log, [(b"k", b"v" * 40)] * 3, timestamp=t, transactional=True)
            plain.send(log, [(None, b"p" * 40)], timestamp=t)
        if last and rnd == 1:
            break  # left open
        coord.end_txn(tid, commit=True, timestamp=t)
        coord.write_markers(tid, tlogs, timestamp=t)
        coord.complete(tid, timestamp=t)
    return t


def gen_partitions(out: Path, topics: int, per_topic: int) -> None:
    from fixtures.sim import PartitionLog, Producer, TxnCoordinator, write_log_dir

    txn_logs = {p: PartitionLog(TXN_STATE, p) for p in range(TXN_STATE_PARTITIONS)}
    coord = TxnCoordinator(txn_logs)
    logs: list[PartitionLog] = []
    plain = Producer()
    t = T0
    for ti in range(topics):
        topic = f"topic-{ti:03d}"
        tlogs = [PartitionLog(topic, p) for p in range(per_topic)]
        logs.extend(tlogs)
        t = topic_transactions(coord, plain, ti, tlogs, t, last=ti == topics - 1)
    internal = [PartitionLog("__consumer_offsets", p) for p in range(50)]
    write_log_dir(out, [*logs, *internal, *txn_logs.values()], node_id=1, cluster_id="bench-scale-cluster00",
                  directory_id="bench-scale-directory0")


# ------------------------------------------------------------------ shape: N transactional ids

_BATCH_HEAD = struct.Struct(">qiib")  # base offset, batch length, partition leader epoch, magic
_BATCH_REST = struct.Struct(">hiqqqhii")  # attributes .. records count (after the CRC)


def one_record_batch(offset: int, timestamp: int, key: bytes, value: bytes | None) -> bytes:
    """An uncompressed v2 batch of one record, no producer: what the coordinator appends per change
    (checked against ``kafkatx.format.record_batch.build_batch`` in ``gen_ids``)."""
    import crc32c

    from kafkatx.format.varint import encode_varint

    body = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(len(key)) + key
    body += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    body += encode_varint(0)
    rec = encode_varint(len(body)) + body
    rest = _BATCH_REST.pack(0, 0, timestamp, timestamp, -1, -1, -1, 1) + rec
    crc = crc32c.crc32c(rest)
    return _BATCH_HEAD.pack(offset, 4 + 1 + 4 + len(rest), 0, 2) + struct.pack(">I", crc) + rest


def _txn_value(pid: int, state: int, parts: list[tuple[str, int]] | None, last: int, start: int) -> bytes:
    """``TransactionLog.valueToBytes`` at version 0."""
    out = struct.pack(">hqhib", 0, pid, 0, TIMEOUT_MS, state)
    if parts is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(parts))
        for topic, p in parts:
            tb = topic.encode()
            out += struct.pack(">h", len(tb)) + tb + struct.pack(">ii", 1, p)
    return out + struct.pack(">qq", last, start)


class _SegmentWriter:
    """One segment file with the offset/time index entries ``LogSegment.append`` writes."""

    def __init__(self, d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        self.d = d
        self.f = open(d / f"{0:020d}.log", "wb")  # noqa: SIM115 - closed in close()
        self.pos = 0
        self.since = 0
        self.offset = 0
        self.max_ts = -1
        self.max_ts_offset = -1
        self.index = bytearray()
        self.tindex = bytearray()
        self.last_t = -1

    def append(self, batch: bytes, last_offset: int, max_ts: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, last_offset
        if self.since > INDEX_INTERVAL:
            self.index += struct.pack(">ii", last_offset, self.pos)
            self._time_entry()
            self.since = 0
        self.f.write(batch)
        self.pos += len(batch)
        self.since += len(batch)
        self.offset = last_offset + 1

    def _time_entry(self) -> None:
        if self.max_ts > self.last_t:
            self.tindex += struct.pack(">qi", self.max_ts, self.max_ts_offset)
            self.last_t = self.max_ts

    def close(self, snapshot: bool = True) -> int:
        from kafkatx.format.checkpoint import encode_leader_epoch_checkpoint
        from kafkatx.format.producer_snapshot import encode_producer_snapshot

        self.f.close()
        if self.max_ts >= 0:
            self._time_entry()  # LogSegment.close: the max timestamp once more
        (self.d / f"{0:020d}.index").write_bytes(bytes(self.index))
        (self.d / f"{0:020d}.timeindex").write_bytes(bytes(self.tindex))
        if snapshot and self.offset > 0:
            (self.d / f"{self.offset:020d}.snapshot").write_bytes(encode_producer_snapshot([]))
        (self.d / "leader-epoch-checkpoint").write_text(encode_leader_epoch_checkpoint([(0, 0)]))
        return self.offset


def _log_dir_files(out: Path, hws: dict[tuple[str, int], int], clean: bool = True) -> None:
    from kafkatx.format.checkpoint import encode_offset_checkpoint

    (out / "replication-offset-checkpoint").write_text(encode_offset_checkpoint(hws))
    (out / "recovery-point-offset-checkpoint").write_text(encode_offset_checkpoint(hws))
    (out / "log-start-offset-checkpoint").write_text(encode_offset_checkpoint({}))
    (out / "cleaner-offset-checkpoint").write_text(encode_offset_checkpoint({}))
    (out / "meta.properties").write_text("#\n#Tue Nov 14 22:13:20 UTC 2023\ncluster.id=bench-scale-cluster00\n"
                                         "directory.id=bench-scale-directory0\nnode.id=1\nversion=1\n")
    if clean:
        (out / ".kafka_cleanshutdown").write_text("")


def records_per_id(ids: int) -> int:
    return 4 if ids <= 200_000 else 2


def open_id(ids: int) -> str:
    """An id left Ongoing (describe-txn's subject)."""
    return f"txn-{(ids // 2) // 100 * 100:07d}"


def gen_ids(out: Path, ids: int) -> None:
    from kafkatx.format.record_batch import Record, build_batch
    from kafkatx.format.txn_log import coordinator_partition

    out.mkdir(parents=True, exist_ok=True)
    key0 = struct.pack(">h", 0)
    check = one_record_batch(7, T0, b"k", b"v")
    assert check == build_batch([Record(offset=7, timestamp=T0, key=b"k", value=b"v")], base_offset=7), \
        "one_record_batch drifted from build_batch"
    writers = [_SegmentWriter(out / f"{TXN_STATE}-{p}") for p in range(TXN_STATE_PARTITIONS)]
    names = [f"txn-{i:07d}" for i in range(ids)]
    part_of = [coordinator_partition(n, TXN_STATE_PARTITIONS) for n in names]
    keys = [key0 + struct.pack(">h", len(n)) + n.encode() for n in names]
    rounds = records_per_id(ids)
    t = T0
    for rnd in range(rounds):
        for i in range(ids):
            if i % 100 == 0 and rnd >= 2:
                continue  # left Ongoing
            t += 1
            pid = 1_000_000 + i
            parts = [(f"orders-{i % 200:03d}", i % 50)]
            started = T0 + ids + 1 + i  # the time of this id's Ongoing record (round 1)
            if rnd == 0:
                value = _txn_value(pid, 0, None, t, -1)  # Empty after InitProducerId
            elif rnd == 1:
                value = _txn_value(pid, 1, parts, t, started)  # Ongoing
            elif rnd == 2:
                value = _txn_value(pid, 2, parts, t, started)  # PrepareCommit
            else:
                value = _txn_value(pid, 4, [], t, started)  # CompleteCommit
            w = writers[part_of[i]]
            w.append(one_record_batch(w.offset, t, keys[i], value), w.offset, t)
    hws = {(TXN_STATE, p): w.close() for p, w in enumerate(writers)}
    _log_dir_files(out, hws)


# ------------------------------------------------------------------ shape: a 2 GB segment


SEGMENT_PID = 4242
SEGMENT_TID = "small-batches-app"


def segment_templates() -> list[tuple[bytes, int, int]]:
    """One repeating block: (batch template, records, producer id or -1), ~100 bytes each."""
    from kafkatx.format.control import ControlType
    from kafkatx.format.record_batch import Record, build_batch, build_control_batch

    def data(pid: int, txn: bool) -> bytes:
        return build_batch([Record(offset=0, timestamp=T0, key=b"key-0001", value=b"v" * 22)],
                           producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=txn)

    commit = build_control_batch(offset=0, control_type=ControlType.COMMIT, producer_id=SEGMENT_PID,
                                 producer_epoch=0, coordinator_epoch=0, timestamp=T0 + 1)
    plain, txn = data(-1, False), data(SEGMENT_PID, True)
    return [(plain, 1, -1), (txn, 1, SEGMENT_PID), (plain, 1, -1), (txn, 1, SEGMENT_PID), (plain, 1, -1),
            (commit, 1, SEGMENT_PID)]


def gen_segment(out: Path, segment_mb: float) -> int:
    """Returns the number of batches written."""
    from kafkatx.format.record_batch import Record, build_batch
    from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value

    pack = struct.Struct(">q").pack_into
    block_t = segment_templates()
    reps = 2000
    block = bytearray(b"".join(t for t, _, _ in block_t) * reps)
    positions: list[int] = []
    pos = 0
    for _ in range(reps):
        for t, _, _ in block_t:
            positions.append(pos)
            pos += len(t)
    per_block = len(positions)  # one record per batch: offsets advance by one per batch
    target = int(segment_mb * (1 << 20))
    d = out / "small-0"
    d.mkdir(parents=True, exist_ok=True)
    blocks = max(1, target // len(block))
    with open(d / f"{0:020d}.log", "wb") as f:
        for b in range(blocks):
            base = b * per_block
            for k, p in enumerate(positions):
                pack(block, p, base + k)
            f.write(block)
    offset = blocks * per_block
    # LogSegment.append: an offset index entry for the first batch that starts more than
    # index.interval.bytes after the last entry's batch (one record per batch: offset = batch number)
    index = bytearray()
    last, size = 0, blocks * len(block)
    while True:
        b, r = divmod(last + INDEX_INTERVAL + 1, len(block))
        k = bisect.bisect_left(positions, r)
        if k == per_block:
            b, k = b + 1, 0
        at = b * len(block) + positions[k]
        if at >= size:
            break
        index += struct.pack(">ii", b * per_block + k, at)
        last = at
    (d / f"{0:020d}.index").write_bytes(bytes(index))
    # the max timestamp (T0 + 1, the first marker's, offset 5) at the first index entry; no close
    (d / f"{0:020d}.timeindex").write_bytes(struct.pack(">qi", T0 + 1, 5) if index else b"")
    tsd = out / f"{TXN_STATE}-0"
    tsd.mkdir(exist_ok=True)
    v = TxnLogValue(version=0, producer_id=SEGMENT_PID, producer_epoch=0, transaction_timeout_ms=TIMEOUT_MS,
                    state=TxnState.COMPLETE_COMMIT, partitions=(), last_update_timestamp=T0 + 1,
                    start_timestamp=T0)
    (tsd / f"{0:020d}.log").write_bytes(build_batch([Record(offset=0, timestamp=T0 + 1,
                                                            key=encode_txn_log_key(SEGMENT_TID),
                                                            value=encode_txn_log_value(v))]))
    (tsd / f"{0:020d}.index").write_bytes(b"")
    (tsd / f"{0:020d}.timeindex").write_bytes(struct.pack(">qi", T0 + 1, 0))
    # No snapshot and no clean shutdown: the broker's loader recovers and replays every batch.
    _log_dir_files(out, {("small", 0): offset, (TXN_STATE, 0): 1}, clean=False)
    return offset


# ------------------------------------------------------------------ floors (each a whole process)

READ_EVERY_FILE = """
import os, sys
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        with open(os.path.join(root, name), "rb") as f:
            while chunk := f.read(1 << 20):
                n += len(chunk)
print(n)
"""

AIOKAFKA_ITERATION = """
import os, sys
from aiokafka.record.memory_records import MemoryRecords
n = 0
for name in sorted(os.listdir(sys.argv[1])):
    if not name.startswith("__transaction_state-"):
        continue
    d = os.path.join(sys.argv[1], name)
    for seg in sorted(f for f in os.listdir(d) if f.endswith(".log")):
        with open(os.path.join(d, seg), "rb") as f:
            recs = MemoryRecords(f.read())
        while (b := recs.next_batch()) is not None:
            for r in b:
                k, v = r.key, r.value
                n += 1
print(n)
"""

CRC32C_PASS = """
import sys, crc32c
n = 0
with open(sys.argv[1], "rb") as f:
    c = 0
    while chunk := f.read(8 << 20):
        c = crc32c.crc32c(chunk, c)
        n += len(chunk)
print(n, c)
"""


# ------------------------------------------------------------------ measuring


@dataclass
class Row:
    shape: str
    label: str
    argv: list[str]
    kafkatx: bool
    floor: str | None = None  # label of the floor row of this shape
    units: int = 0  # batches, for a batches/s figure
    secs: dict[str, float] = field(default_factory=dict)
    private_kb: dict[str, int] = field(default_factory=dict)
    total_kb: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # user + system seconds of the best run
    codes: dict[str, int] = field(default_factory=dict)


PYCACHE = Path(tempfile.gettempdir()) / "kafkatx-bench-pycache"
NEUTRAL_CWD = tempfile.gettempdir()


def _env(pythonpath: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KAFKATX_PURE_PYTHON", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env["PYTHONPATH"] = str(pythonpath)
    env["COLUMNS"] = "80"
    return env


def _status_kb(pid: int, tree_too: bool = True) -> tuple[int, int]:
    """(private, VmHWM) kB of a running process and of its children (``verify --jobs``, the second writer of
    ``list-txn``'s JSON), summed; (0, 0) once it is gone. Private is ``RssAnon`` for a process alone; with
    children, each process's ``Pss_Anon`` (the pages a fork left shared counted once, split between them),
    read only when ``tree_too`` (``smaps_rollup`` walks the page tables: asked every 20 ms of two 250 MB
    processes it slowed them by 0.1-0.2 s; (0, 0) then)."""
    tree = _tree(pid)
    if len(tree) == 1:
        return _fields(f"/proc/{pid}/status", "RssAnon:", "VmHWM:")
    if not tree_too:
        return 0, 0
    anon = hwm = 0
    for p in tree:
        anon += _fields(f"/proc/{p}/smaps_rollup", "Pss_Anon:")[0]
        hwm += _fields(f"/proc/{p}/status", "VmHWM:")[0]
    return anon, hwm


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants that are running."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        children = []
    return [pid, *(p for c in children for p in _tree(c))]


def _fields(path: str, *names: str) -> tuple[int, ...]:
    """The kB values of lines ``names`` of a /proc file, 0 for those not there (or the process gone)."""
    got = dict.fromkeys(names, 0)
    try:
        with open(path) as f:
            for line in f:
                key = line.split(":", 1)[0] + ":"
                if key in got:
                    got[key] = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return tuple(got[n] for n in names)


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, int, int, int, float]:
    """(seconds, exit code, peak private kB, peak total kB, CPU seconds), memory sampled from /proc every
    20 ms while the child runs, its own children included (``VmHWM`` starts afresh at exec; the child's
    ``ru_maxrss`` would also count the pages it shared with this process between fork and exec, so it is
    only the fallback). CPU: user + system of the child and the children it waited for (``wait4``)."""
    peak = [0, 0]
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=NEUTRAL_CWD)
    done = threading.Event()

    def sample() -> None:
        n = 0
        while not done.wait(0.02):
            n += 1
            anon, hwm = _status_kb(proc.pid, tree_too=n % 5 == 0)  # a process tree every 100 ms
            peak[0], peak[1] = max(peak[0], anon), max(peak[1], hwm)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()  # drained while it runs
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return elapsed, proc.returncode, peak[0], peak[1] or usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def read_tree(path: Path) -> int:
    """Every file under ``path`` read once (the page cache warm for the floors too, also with ``--no-warm``:
    a floor timed first on files not read lately is a disk read, and flatters every ratio to it)."""
    n = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                while chunk := f.read(8 << 20):
                    n += len(chunk)
    return n


def run_rows(rows: list[Row], columns: dict[str, Path], repeat: int, warm: bool = True) -> None:
    envs = {c: _env(p) for c, p in columns.items()}

    def cols(r: Row) -> list[str]:
        if not r.kafkatx:
            return [next(iter(columns))]
        # scan (Spark, minutes at full size) runs in the last column only
        return [list(columns)[-1]] if r.label.startswith("scan") else list(columns)

    for r in rows if warm else ():  # warm the page cache and the .pyc files
        for c in cols(r):
            run_once(r.argv, envs[c])
    for _ in range(repeat):
        for r in rows:
            for c in cols(r):
                secs, code, priv, total, cpu = run_once(r.argv, envs[c])
                if secs < r.secs.get(c, float("inf")):
                    r.secs[c], r.cpu[c] = secs, cpu
                r.private_kb[c] = max(r.private_kb.get(c, 0), priv)
                r.total_kb[c] = max(r.total_kb.get(c, 0), total)
                r.codes[c] = code


def print_table(title: str, rows: list[Row], columns: dict[str, Path]) -> None:
    by_label = {(r.shape, r.label): r for r in rows}
    cols = list(columns)
    print(f"\n### {title}\n")
    head = ["command"] + [f"{c} s" for c in cols] + [f"x floor ({c})" for c in cols] + [f"CPU s ({c})" for c in cols]
    head += [f"private MB ({c})" for c in cols] + [f"total MB ({c})" for c in cols] + ["exit", "rate"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    last = cols[-1]
    for r in rows:
        floor = by_label.get((r.shape, r.floor)) if r.floor else None
        cells = [r.label] + [f"{r.secs[c]:.3f}" if c in r.secs else "" for c in cols]
        for c in cols:
            base = floor.secs.get(next(iter(columns))) if floor else None
            cells.append(f"{r.secs[c] / base:.2f}x" if (floor and base and c in r.secs) else "")
        cells += [f"{r.cpu[c]:.3f}" if c in r.cpu else "" for c in cols]
        c0 = last if last in r.secs else next(iter(r.secs))
        cells += [f"{r.private_kb[c] / 1024:.0f}" if c in r.private_kb else "" for c in cols]
        cells += [f"{r.total_kb[c] / 1024:.0f}" if c in r.total_kb else "" for c in cols]
        cells.append(str(r.codes[c0]))
        cells.append(f"{r.units / r.secs[c0] / 1e6:.1f}M batches/s" if r.units else "")
        print("| " + " | ".join(cells) + " |")
    one, two = by_label.get((rows[0].shape, "scan local[1]")), by_label.get((rows[0].shape, "scan local[2]"))
    if one is not None and two is not None:
        for c in cols:
            if c in one.secs and c in two.secs:
                print(f"\nscan ({c}): local[2] is {one.secs[c] / two.secs[c]:.2f}x local[1] "
                      f"({one.secs[c]:.1f} s / {two.secs[c]:.1f} s)")


def _kx(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafkatx", *args]


def _py(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def _analysis_rows(shape: str, d: Path, floor: str, describe: str, units: int = 0) -> list[Row]:
    ld = ["--log-dir", str(d)]
    now = ["--now", str(NOW)]
    return [
        Row(shape, "lag", _kx("lag", *ld, "--format", "json"), True, floor, units),
        Row(shape, "find-hanging", _kx("find-hanging", *ld, *now, "--format", "json"), True, floor, units),
        Row(shape, "verify", _kx("verify", *ld, "--format", "json"), True, floor, units),
        Row(shape, "list-txn", _kx("list-txn", *ld, "--format", "json"), True, floor),
        Row(shape, "describe-txn", _kx("describe-txn", describe, *ld, *now, "--format", "json"), True, floor),
    ]


def _scan_rows(shape: str, d: Path, out: Path, floor: str, name: str | None = None) -> list[Row]:
    """``kafkatx scan`` on Spark with one worker thread and with two (the machine's cores): the
    speed-up over one process is local[1] / local[2] (``print_table`` prints it)."""
    return [Row(shape, f"scan local[{k}]", _kx("scan", "--log-dir", str(d), "--output",
                                                str(out / f"scan-{name or shape}-{k}"), "--master", f"local[{k}]",
                                                "--now", str(NOW)), True, floor)
            for k in (1, 2)]


def _generate(marker: Path, params: str, fn, *args) -> object:  # type: ignore[no-untyped-def]
    """Generate once per parameters (a marker file holds them and the result)."""
    if marker.exists() and marker.read_text().split("\n")[0] == params:
        return marker.read_text().split("\n")[1]
    shutil.rmtree(marker.parent, ignore_errors=True)
    marker.parent.mkdir(parents=True)
    t = time.perf_counter()
    result = fn(marker.parent / "logs", *args)
    print(f"  generated {marker.parent.name} in {time.perf_counter() - t:.1f}s", flush=True)
    marker.write_text(f"{params}\n{result}")
    return str(result)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--partitions-per-topic", type=int, default=50)
    ap.add_argument("--ids", default="1000000,200000", help="transactional id counts, comma-separated")
    ap.add_argument("--segment-mb", type=float, default=2048.0)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per row; the best counts (default 2)")
    ap.add_argument("--only", default="partitions,ids,segment", help="shapes to run, comma-separated")
    ap.add_argument("--no-warm", action="store_true",
                    help="skip the untimed first run of each row (the shape's files are still read once first)")
    ap.add_argument("--scan", action="store_true", help="also kafkatx scan --master local[1] and local[2] on the partitions and ids shapes, "
                         "and local[2]'s speed-up over local[1] (needs pyspark; Spark is slow to start)")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout: adds a 'before' column")
    ap.add_argument("--quick", action="store_true", help="5 x 4 partitions, 2,000 ids, a 4 MB segment, best of 1")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep generated data here (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.quick:
        args.topics, args.partitions_per_topic, args.ids, args.segment_mb, args.repeat = 5, 4, "2000", 4.0, 1
    columns: dict[str, Path] = {}
    if args.baseline is not None:
        columns["before"] = args.baseline.resolve()
    columns["after" if args.baseline is not None else "kafkatx"] = ROOT
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        _run(args, columns, args.work_dir.resolve())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _run(args, columns, Path(tmp))
    return 0


def _run(args: argparse.Namespace, columns: dict[str, Path], work: Path) -> None:
    only = set(args.only.split(","))
    print(f"kafkatx at scale: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"work dir {work}", flush=True)
    if "partitions" in only:
        n = args.topics * args.partitions_per_topic
        _generate(work / "partitions" / "params", f"{args.topics}x{args.partitions_per_topic}", gen_partitions,
                  args.topics, args.partitions_per_topic)
        d = work / "partitions" / "logs"
        read_tree(d)  # page cache warm before any row (the floor is timed first)
        rows = [Row("partitions", "read every file", _py(READ_EVERY_FILE, str(d)), False)]
        rows += _analysis_rows("partitions", d, "read every file", "app-topic-000")
        if args.scan:
            rows += _scan_rows("partitions", d, work, "read every file")
        run_rows(rows, columns, args.repeat, not args.no_warm)
        print_table(f"{n:,} partitions ({args.topics} topics x {args.partitions_per_topic}) + 50 "
                    f"__consumer_offsets + 50 {TXN_STATE}", rows, columns)
    if "ids" in only:
        for ids in (int(x) for x in args.ids.split(",") if x):
            _generate(work / f"ids-{ids}" / "params", str(ids), gen_ids, ids)
            d = work / f"ids-{ids}" / "logs"
            read_tree(d)  # page cache warm before any row (the floor is timed first)
            rows = [Row("ids", "aiokafka iteration", _py(AIOKAFKA_ITERATION, str(d)), False)]
            rows += [r for r in _analysis_rows("ids", d, "aiokafka iteration", open_id(ids))
                     if r.label != "lag"]
            if args.scan:
                rows += _scan_rows("ids", d, work, "aiokafka iteration", f"ids-{ids}")
            run_rows(rows, columns, args.repeat, not args.no_warm)
            print_table(f"{ids:,} transactional ids x {records_per_id(ids)} records over {TXN_STATE_PARTITIONS} "
                        f"{TXN_STATE} partitions (1 in 100 left Ongoing)", rows, columns)
    if "segment" in only:
        batches = int(_generate(work / "segment" / "params", str(args.segment_mb), gen_segment,  # type: ignore[arg-type]
                                args.segment_mb))
        d = work / "segment" / "logs"
        read_tree(d)  # page cache warm before any row (the floor is timed first)
        seg = d / "small-0" / f"{0:020d}.log"
        rows = [Row("segment", "crc32c pass", _py(CRC32C_PASS, str(seg)), False)]
        rows += [r for r in _analysis_rows("segment", d, "crc32c pass", SEGMENT_TID, units=batches)
                 if r.label in ("lag", "find-hanging", "verify")]
        for r in rows:
            r.units = batches if r.kafkatx else 0
        run_rows(rows, columns, args.repeat, not args.no_warm)
        print_table(f"one {args.segment_mb:,.0f} MB segment, {batches:,} batches of ~100 bytes, "
                    f"no snapshot", rows, columns)


if __name__ == "__main__":
    sys.exit(main())
