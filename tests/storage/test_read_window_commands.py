"""Every pread path reads in windows, not only verify's main pass.

On the pread path (a live broker holds the log dir; ``KAFKATX_READ=pread`` selects it here) ``lag``,
``find-hanging`` and their loader (``LogSegment.recover``'s valid prefix, the log end) and replay read
a segment with :class:`kafkatx.storage.segment.WindowedSnapshot`: at most ``--read-window`` bytes of it at
a time. Two kinds of test:

- the windowed reads answer exactly what the mapped reads answer, with windows of one page on the
  fixtures (every segment spans many windows, batches cross window ends, torn tails and damaged
  bytes included): the windows are a way of reading, not a rule;
- peak memory of ``lag``/``find-hanging`` on a 2 GiB segment read with pread stays under 100 MB
  (before: the whole segment was read into private memory, ~2.1 GB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from log_builders import damaged_txn_segment

from kafkatx.session.offline import find_hanging, lag, list_transactions
from kafkatx.storage import segment as segment_mod
from kafkatx.storage.segment import read_window

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_007_200_000


def _dirs(fixture: str) -> list[Path]:
    root = ROOT / "fixtures" / fixture
    brokers = sorted(p for p in root.glob("broker-*") if p.is_dir())  # fixtures/two-brokers: one dir each
    return brokers or [root]


LOADING = sorted(p.name for p in (ROOT / "fixtures" / "loading").iterdir() if p.is_dir())  # one log dir each


@pytest.mark.parametrize("fixture", ["hanging", "clean", "ghost", "two-brokers", "twopc",
                                     *(f"loading/{name}" for name in LOADING)])
def test_windowed_lag_and_find_hanging_answer_what_the_mapped_reads_answer(fixture: str, monkeypatch) -> None:
    dirs = _dirs(fixture)
    monkeypatch.setenv("KAFKATX_READ", "mmap")
    mapped = (lag(dirs, now=NOW), find_hanging(dirs, now=NOW), list_transactions(dirs))
    monkeypatch.setenv("KAFKATX_READ", "pread")
    monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 4096)  # pieces of one page
    opened: list[int] = []
    real = segment_mod.WindowedSnapshot.__init__

    def spy(self, fd, path, size, window):  # type: ignore[no-untyped-def]
        opened.append(window)
        real(self, fd, path, size, window)

    monkeypatch.setattr(segment_mod.WindowedSnapshot, "__init__", spy)
    # windows of one page: every batch boundary is somewhere a window ends
    with read_window(4096):  # the coordinator's __transaction_state reads (list-txn has no flag)
        listed = list_transactions(dirs)
    windowed = (lag(dirs, now=NOW, read_window=4096), find_hanging(dirs, now=NOW, read_window=4096), listed)
    assert windowed == mapped
    assert opened and set(opened) == {4096}  # the segments were read in windows, of the size asked for


def test_windowed_reads_of_a_damaged_multi_window_segment(tmp_path: Path, monkeypatch) -> None:
    """Transactional batches and markers over 100 pages, a damaged byte in the middle, a torn tail:
    the loader's valid prefix, the log end and the replay see what they see in the mapping."""
    # the last producers stay open: hanging rows to compare
    offset = damaged_txn_segment(tmp_path / "logs" / "t-0" / "00000000000000000000.log", open_tail=True)
    dirs = [tmp_path / "logs"]
    monkeypatch.setenv("KAFKATX_READ", "mmap")
    mapped = (lag(dirs, now=NOW), find_hanging(dirs, now=NOW))
    monkeypatch.setenv("KAFKATX_READ", "pread")
    monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 4096)
    windowed = (lag(dirs, now=NOW, read_window=4096), find_hanging(dirs, now=NOW, read_window=4096))
    assert windowed == mapped
    assert mapped[0].rows and mapped[0].rows[0].log_end_offset < offset  # recovery cut at the damage


MEASURE = r"""
import json, resource, subprocess, sys
got = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"code": got.returncode, "stdout": got.stdout[-2000:], "stderr": got.stderr[-2000:],
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


@pytest.fixture(scope="module")
def big_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.storage.test_read_window import _big_segment

    return _big_segment(tmp_path_factory.mktemp("big"))


@pytest.mark.slow
@pytest.mark.parametrize("args", [["lag"], ["find-hanging", "--now", str(NOW)]], ids=["lag", "find-hanging"])
def test_a_2_gib_segment_read_with_pread_stays_under_100_mb(big_log_dir: Path, args: list[str]) -> None:
    seg = big_log_dir / "big-0" / "00000000000000000000.log"
    assert seg.stat().st_size > 2 << 30
    env = dict(os.environ, PYTHONPATH=str(ROOT), KAFKATX_READ="pread")
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "kafkatx", *args, "--log-dir",
                          str(big_log_dir), "--format", "json"], capture_output=True, text=True, env=env, timeout=900)
    got = json.loads(out.stdout)
    assert got["code"] == 0, got["stderr"]
    rows = json.loads(got["stdout"])
    if args[0] == "lag":  # 2,048 one-record batches, offsets 0..2047, no transaction
        assert [(r["topic"], r["partition"], r["log_end_offset"], r["lso"]) for r in rows] == [("big", 0, 2048, 2048)]
    else:
        assert rows == [], rows
    assert got["maxrss_kib"] < 100 * 1000, got["maxrss_kib"]


def _damaged_segment(tmp_path: Path) -> Path:
    """400 KB of transactional batches and markers (many 64 KiB windows), a damaged byte, a torn tail."""
    from kafkatx.format.control import ControlType
    from kafkatx.format.record_batch import Record, build_batch, build_control_batch

    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    out = bytearray()
    offset = 0
    for i in range(300):
        recs = [Record(offset=offset + k, timestamp=1_700_000_000_000 + offset + k, key=b"k", value=bytes(400))
                for k in range(3)]
        out += build_batch(recs, producer_id=100 + i % 3, producer_epoch=0, base_sequence=(i // 3) * 3,
                           is_transactional=True)
        offset += 3
        if i % 3 == 2:
            for p in (100, 101, 102):
                out += build_control_batch(offset=offset, control_type=ControlType.COMMIT, producer_id=p,
                                           producer_epoch=0, coordinator_epoch=0, timestamp=1_700_000_000_000)
                offset += 1
    out[len(out) * 3 // 4] ^= 0xFF
    out += out[:40]
    seg = part / "00000000000000000000.log"
    seg.write_bytes(bytes(out))
    return seg


@pytest.mark.parametrize("flags", [[], ["--deep-iteration"], ["--print-data-log"], ["--verify-crc"],
                                   ["--start-offset", "500"], ["--format", "jsonl", "--deep-iteration"],
                                   ["--format", "json"], ["--files", "--deep-iteration"]],
                         ids=lambda f: " ".join(f) or "plain")
def test_windowed_dump_segment_prints_what_the_mapped_dump_prints(tmp_path: Path, monkeypatch,
                                                                  flags: list[str]) -> None:
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    segs = [_damaged_segment(tmp_path), *sorted((ROOT / "fixtures" / "hanging").glob("*-*/*.log"))]
    runner = CliRunner()
    outputs = []
    for seg in segs:
        monkeypatch.setenv("KAFKATX_READ", "mmap")
        if flags[:1] == ["--files"]:  # kafka-dump-log.sh's form: the file is the flag's value
            args = ["--files", str(seg), *flags[1:]]
        else:
            args = [str(seg), *flags]
        mapped = runner.invoke(app, ["dump-segment", *args])
        monkeypatch.setenv("KAFKATX_READ", "pread")
        monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 4096)
        windowed = runner.invoke(app, ["dump-segment", "--read-window", "65536", *args])
        monkeypatch.undo()
        assert (windowed.exit_code, windowed.output) == (mapped.exit_code, mapped.output), seg
        assert mapped.exit_code in (0, 1), mapped.output  # read, not refused
        outputs.append(mapped)
    # the damaged segment: the torn tail (40 bytes, a batch header needs 61) is a finding either way
    assert outputs[0].exit_code == 1 and "40 trailing bytes do not form a batch" in outputs[0].output


@pytest.mark.slow
def test_dump_segment_of_a_2_gib_segment_read_with_pread_stays_under_100_mb(big_log_dir: Path) -> None:
    seg = big_log_dir / "big-0" / "00000000000000000000.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT), KAFKATX_READ="pread")
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "kafkatx", "dump-segment", str(seg)],
                         capture_output=True, text=True, env=env, timeout=900)
    got = json.loads(out.stdout)
    assert got["code"] == 0, got["stderr"]
    last = got["stdout"].strip().splitlines()[-1]  # the 2,048th batch: base offset 2047 (one record each)
    assert last.startswith("baseOffset: 2047 lastOffset: 2047 count: 1"), last
    assert got["maxrss_kib"] < 100 * 1000, got["maxrss_kib"]
