"""The read window on every command that reads segments: ``list-txn``, ``describe-txn``,
``describe-producers``, ``timeline``, ``describe-cluster``, ``abort-hanging`` (its analysis, the plan's reads of the active
segments and the post-check) and ``dump-index --verify`` / kafka-dump-log's ``--files`` index walk
read a segment on the pread path (a live broker holds the log dir; ``KAFKATX_READ=pread`` selects it
here) in ``--read-window`` windows, as ``verify``/``lag``/``find-hanging``/``dump-segment`` do.

- Windowed answers are the mapped answers, byte for byte, on the fixtures and on a 400 KB damaged
  transactional segment that spans many 64 KiB windows (reads of 4 KiB), with an offset and a time
  index whose lookups go back and forth over it.
- Peak private memory (``RssAnon`` + ``RssShmem`` of /proc/<pid>/status, sampled; a shared anonymous
  map counts) of each command on a log dir whose segments are 300 MB, read with pread and
  ``--read-window 8MiB``, stays under 64 MB. Before: no flag (windows of 64 MiB, 84 MB peak), and
  ``abort-hanging`` read each active segment it appends after whole (335 MB).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from log_builders import damaged_txn_segment, write_index

from kafkatx.format.record_batch import Record, build_batch, iter_batches
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index
from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value
from kafkatx.storage import segment as segment_mod

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


def _commands(dirs: list[Path]) -> list[list[str]]:
    """Every segment-reading command over ``dirs``: list-txn, describe-txn of each id, describe-producers
    of each partition, timeline, the abort-hanging plan, dump-index --verify of each index."""
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    src = [a for d in dirs for a in ("--log-dir", str(d))]
    cmds = [["list-txn", *src, "--format", "json"], ["timeline", *src, "--now", str(NOW), "--format", "json"],
            ["abort-hanging", *src, "--all", "--now", str(NOW), "--format", "json"],
            ["describe-cluster", *src, "--format", "json"]]
    listed = CliRunner().invoke(app, ["list-txn", *src, "--format", "json"])
    ids = sorted({r["transactional_id"] for r in json.loads(listed.stdout or "[]")}) if listed.exit_code == 0 else []
    cmds += [["describe-txn", tid, *src, "--now", str(NOW), "--format", "json"] for tid in ids]
    parts = sorted({p.name for d in dirs for p in d.glob("*-*") if p.is_dir() and p.name[-1].isdigit()})
    for name in parts:
        topic, _, num = name.rpartition("-")
        cmds.append(["describe-producers", *src, "--topic", topic, "--partition", num, "--now", str(NOW),
                     "--format", "json"])
    for d in dirs:
        for index in sorted([*d.glob("*/*.index"), *d.glob("*/*.timeindex")]):
            cmds.append(["dump-index", str(index), "--verify", "--format", "json"])
            cmds.append(["dump-segment", "--files", str(index)])  # kafka-dump-log.sh's walk (DumpLogSegments)
    return cmds


def _same_windowed_as_mapped(dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> int:
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    runner = CliRunner()
    checked = 0
    for cmd in _commands(dirs):
        monkeypatch.setenv("KAFKATX_READ", "mmap")
        mapped = runner.invoke(app, cmd)
        monkeypatch.setenv("KAFKATX_READ", "pread")
        monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 4096)
        windowed = runner.invoke(app, [*cmd, "--read-window", "65536"])
        monkeypatch.undo()
        assert mapped.exception is None or isinstance(mapped.exception, SystemExit), (cmd, mapped.output)
        assert (windowed.exit_code, windowed.output) == (mapped.exit_code, mapped.output), cmd
        checked += 1
    return checked


def _dirs(fixture: str) -> list[Path]:
    root = ROOT / "fixtures" / fixture
    brokers = sorted(p for p in root.glob("broker-*") if p.is_dir())
    return brokers or [root]


@pytest.mark.parametrize("fixture", ["hanging", "ghost", "twopc", "two-brokers", "clean", "kraft"])
def test_windowed_commands_answer_what_the_mapped_reads_answer(fixture: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = []
    for d in _dirs(fixture):  # a copy: the .lock a plan never creates, an untouched tree
        dest = tmp_path / d.relative_to(ROOT / "fixtures")
        shutil.copytree(d, dest)
        dirs.append(dest)
    assert _same_windowed_as_mapped(dirs, monkeypatch) >= 5


def test_windowed_commands_on_a_damaged_segment_of_many_windows(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """400 KB of transactions left open at the end, a flipped byte and a torn tail, with an offset index
    (an entry every ~16 KB) and a time index: each index entry's batch is read where it lies, and the
    time index's lookups start again before bytes already read (the window is read again)."""
    ld = tmp_path / "logs"
    seg = ld / "t-0" / "00000000000000000000.log"
    damaged_txn_segment(seg, open_tail=True)
    data = seg.read_bytes()
    batches = []
    try:
        for h in iter_batches(data):
            batches.append(h)
    except Exception:  # the flipped byte or the torn tail: the batches before it
        pass
    assert len(batches) > 100 and data and len(data) > 6 * 65536
    entries, last = [], -1 << 20
    for h in batches:
        if h.position - last >= 16384:
            entries.append((h.last_offset, h.position))
            last = h.position
    write_index(seg.parent, 0, entries)
    times = [TimeIndexEntry(timestamp=h.max_timestamp, offset=h.last_offset) for h in batches[::25]]
    times.append(TimeIndexEntry(timestamp=batches[3].max_timestamp, offset=batches[3].last_offset))  # goes back
    (seg.parent / "00000000000000000000.timeindex").write_bytes(encode_time_index(times, 0))
    assert _same_windowed_as_mapped([ld], monkeypatch) >= 6


# ----------------------------------------------------------------------------- memory on 300 MB segments

BIG_BATCHES = 300  # batches of ~1 MiB: 300 MB per segment
SAMPLE = r"""
import json, subprocess, sys, time
def anon(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            # private memory: RssAnon, plus RssShmem (a shared anonymous map, as mmap.mmap(-1, n) makes)
            return sum(int(line.split()[1]) for line in fh if line.startswith(("RssAnon:", "RssShmem:")))
    except OSError:
        return 0
    return 0
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
peak = 0
while child.poll() is None:
    peak = max(peak, anon(child.pid))
    time.sleep(0.005)
out, err = child.communicate()
print(json.dumps({"code": child.returncode, "stdout": out[-200000:], "stderr": err[-3000:], "peak_anon_kib": peak}))
"""


def _write_big(path: Path, batch: bytearray, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for i in range(count):
            struct.pack_into(">q", batch, 0, i)  # base offset: outside the CRC (it starts at byte 21)
            fh.write(batch)


@pytest.fixture(scope="module")
def big_dirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log dir with two 300 MB segments: ``__transaction_state-0`` (one transactional id's records, each
    carrying a 1 MiB record header, which the coordinator ignores) ending with the id Ongoing in
    ``big-0``, and ``big-0`` (one-record 1 MiB batches of producer 7; its last batch is transactional and
    open): list-txn/describe-txn read the first, describe-producers/timeline/abort-hanging both."""
    root = tmp_path_factory.mktemp("big") / "logs"
    pad = (("pad", bytes(1 << 20)),)
    value = TxnLogValue(version=0, producer_id=7, producer_epoch=0, transaction_timeout_ms=60_000,
                        state=TxnState.EMPTY, partitions=(), last_update_timestamp=NOW - 3_600_000,
                        start_timestamp=-1)
    rec = Record(offset=0, timestamp=NOW - 3_600_000, key=encode_txn_log_key("big-txn"),
                 value=encode_txn_log_value(value), headers=pad)
    _write_big(root / "__transaction_state-0" / "00000000000000000000.log", bytearray(build_batch([rec])),
               BIG_BATCHES - 1)
    ongoing = TxnLogValue(version=0, producer_id=7, producer_epoch=0, transaction_timeout_ms=60_000,
                          state=TxnState.ONGOING, partitions=(("big", (0,)),), last_update_timestamp=NOW - 3_600_000,
                          start_timestamp=NOW - 3_600_000)
    last = build_batch([Record(offset=BIG_BATCHES - 1, timestamp=NOW - 3_600_000, key=encode_txn_log_key("big-txn"),
                               value=encode_txn_log_value(ongoing))], base_offset=BIG_BATCHES - 1)
    with open(root / "__transaction_state-0" / "00000000000000000000.log", "ab") as fh:
        fh.write(last)
    data = bytearray(build_batch([Record(offset=0, timestamp=NOW - 7_200_000, key=None, value=bytes(1 << 20))]))
    seg = root / "big-0" / "00000000000000000000.log"
    _write_big(seg, data, BIG_BATCHES - 1)
    open_txn = build_batch([Record(offset=BIG_BATCHES - 1, timestamp=NOW - 3_600_000, key=None, value=b"v")],
                           base_offset=BIG_BATCHES - 1, producer_id=7, producer_epoch=0, base_sequence=0,
                           is_transactional=True)
    with open(seg, "ab") as fh:
        fh.write(open_txn)
    write_index(seg.parent, 0, [(i, i * len(data)) for i in range(0, BIG_BATCHES - 1, 4)])
    return root


def _peak(args: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), KAFKATX_READ="pread")
    out = subprocess.run([sys.executable, "-c", SAMPLE, sys.executable, "-m", "kafkatx", *args],
                         capture_output=True, text=True, env=env, timeout=900)
    got: dict[str, object] = json.loads(out.stdout)
    return got


BIG_COMMANDS = {
    "list-txn": (["list-txn", "--format", "json"], 0),
    "describe-txn": (["describe-txn", "big-txn", "--now", str(NOW), "--format", "json"], 0),
    "describe-producers": (["describe-producers", "--topic", "big", "--partition", "0", "--now", str(NOW),
                            "--format", "json"], 0),
    "timeline": (["timeline", "--now", str(NOW), "--format", "json"], 0),
    "abort-hanging": (["abort-hanging", "--all", "--now", str(NOW), "--format", "json"], 1),
    "abort-hanging --execute": (["abort-hanging", "--all", "--now", str(NOW), "--format", "json", "--execute"], 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BIG_COMMANDS))
def test_peak_private_memory_on_300_mb_segments_read_with_pread_stays_under_64_mb(
        big_dirs: Path, tmp_path: Path, name: str) -> None:
    args, code = BIG_COMMANDS[name]
    for seg in big_dirs.glob("*/*.log"):
        assert seg.stat().st_size > 300_000_000
    extra = ["--journal", str(tmp_path / "j.journal")] if "--execute" in args else []
    t0 = time.monotonic()
    got = _peak([*args, "--log-dir", str(big_dirs), "--read-window", str(8 << 20), *extra])
    print(f"{name}: peak private {got['peak_anon_kib']} KiB, {time.monotonic() - t0:.1f} s")
    assert got["code"] == code, got["stderr"]
    out = str(got["stdout"])
    if name in ("list-txn", "describe-txn"):
        assert '"big-txn"' in out and '"Ongoing"' in out
    if name == "describe-producers":
        assert json.loads(out)[0]["current_txn_first_offset"] == BIG_BATCHES - 1
    if name.startswith("abort-hanging"):
        rows = json.loads(out)
        assert [(r["transactional_id"], r["action"]) for r in rows] == [("big-txn", "abort-timed-out")]
    assert 0 < int(str(got["peak_anon_kib"])) < 64 * 1024, got["peak_anon_kib"]


@pytest.mark.slow
@pytest.mark.parametrize("args", [["dump-index", "--verify", "--format", "json"], ["dump-segment", "--files"]],
                         ids=["dump-index --verify", "dump-segment --files X.index"])
def test_index_walks_of_a_300_mb_segment_stay_under_64_mb(big_dirs: Path, args: list[str]) -> None:
    """dump-index --verify, and kafka-dump-log.sh's index walk (before: the whole .log, 327 MB)."""
    index = big_dirs / "big-0" / "00000000000000000000.index"
    got = _peak([*args, str(index), "--read-window", str(8 << 20)])
    assert got["code"] == 0, got["stderr"]
    entries = index.stat().st_size // 8  # (abort-hanging --execute may have added one)
    assert entries >= len(range(0, BIG_BATCHES - 1, 4))
    if args[0] == "dump-index":
        assert len(json.loads(str(got["stdout"]))) == entries
    else:  # one line per entry after the "Dumping" line, no mismatch
        assert str(got["stdout"]).count("offset: ") == entries, got["stdout"]
    assert 0 < int(str(got["peak_anon_kib"])) < 64 * 1024, got["peak_anon_kib"]
