"""On the pread path (a live broker holds the log dir) ``verify`` holds at most a
window of a segment, not the whole segment: peak memory of ``verify`` on a 2 GiB segment stays under
100 MB (before: the whole segment was read into private memory, ~2 GB).

The segment is 2,048 one-record batches of 1 MiB each, written in a temp dir (the batch is built
once; only its base offset, which the CRC does not cover, changes). ``KAFKATX_READ=pread`` selects the
read path a held ``.lock`` selects. Peak memory is the child's ``ru_maxrss`` as seen by a fresh parent.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from log_builders import damaged_txn_segment

from kafkatx.format.record_batch import Record, build_batch

ROOT = Path(__file__).resolve().parents[2]
MEASURE = r"""
import json, resource, subprocess, sys
got = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"code": got.returncode, "stdout": got.stdout[-2000:], "stderr": got.stderr[-2000:],
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _big_segment(tmp_path: Path, batches: int = 2048) -> Path:
    ld = tmp_path / "logs"
    part = ld / "big-0"
    part.mkdir(parents=True)
    batch = bytearray(build_batch([Record(offset=0, timestamp=1_700_000_000_000, key=None, value=bytes(1 << 20))]))
    with open(part / "00000000000000000000.log", "wb") as fh:
        for i in range(batches):
            struct.pack_into(">q", batch, 0, i)  # base offset: outside the CRC (it starts at byte 21)
            fh.write(batch)
    return ld


@pytest.mark.slow
def test_verify_of_a_2_gib_segment_read_with_pread_stays_under_100_mb(tmp_path: Path) -> None:
    ld = _big_segment(tmp_path)
    seg = ld / "big-0" / "00000000000000000000.log"
    assert seg.stat().st_size > 2 << 30
    env = dict(os.environ, PYTHONPATH=str(ROOT), KAFKATX_READ="pread")
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "kafkatx", "verify", "--log-dir", str(ld),
                          "--format", "json"], capture_output=True, text=True, env=env, timeout=600)
    got = json.loads(out.stdout)
    assert got["code"] == 0, got["stderr"]
    rows = json.loads(got["stdout"])
    assert all(r["severity"] == "info" for r in rows), rows  # the segment is whole: no problem
    assert got["maxrss_kib"] < 100 * 1000, got["maxrss_kib"]


@pytest.mark.parametrize("fixture", ["hanging", "clean", "ghost", "loading"])
def test_windowed_verify_finds_what_the_mapped_verify_finds(fixture: str, monkeypatch) -> None:
    """Windows of one page and chunks of 4 KiB (every segment spans many; bytes behind each chunk are
    released) change no finding."""
    from kafkatx.checks import verify as verify_mod
    from kafkatx.checks.verify import verify
    from kafkatx.storage import segment as segment_mod

    monkeypatch.setattr(verify_mod._PartitionVerifier, "chunk_bytes", 4096)  # many chunks, many windows

    root = ROOT / "fixtures" / fixture
    # fixtures/loading holds one broker's dir per loading rule (each node 1): verified one at a time, as
    # copies of one broker are not read together
    dirs = [root] if (root / "meta.properties").exists() or any(root.glob("*-[0-9]*")) else sorted(
        p for p in root.iterdir() if p.is_dir())
    for d in dirs:
        monkeypatch.setenv("KAFKATX_READ", "mmap")
        mapped = verify([d])
        monkeypatch.setenv("KAFKATX_READ", "pread")
        with monkeypatch.context() as m:
            m.setattr(segment_mod, "PREAD_WINDOW", 4096)  # pieces of one page: many windows per segment
            windowed = verify([d], read_window=1 << 16)
        assert windowed == mapped, d.name


def test_windowed_verify_on_a_multi_window_segment_with_damage(tmp_path: Path, monkeypatch) -> None:
    """A 400 KB segment of transactional batches and markers, a damaged byte in the middle, a torn tail:
    read in one-page windows with 4 KiB chunks (bytes behind each released), verify reports exactly
    what it reports from the mapping."""
    from kafkatx.checks import verify as verify_mod
    from kafkatx.checks.verify import verify
    from kafkatx.storage import segment as segment_mod

    damaged_txn_segment(tmp_path / "logs" / "t-0" / "00000000000000000000.log", open_tail=False)
    monkeypatch.setattr(verify_mod._PartitionVerifier, "chunk_bytes", 4096)
    monkeypatch.setenv("KAFKATX_READ", "mmap")
    mapped = verify([tmp_path / "logs"])
    monkeypatch.setenv("KAFKATX_READ", "pread")
    monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 4096)
    windowed = verify([tmp_path / "logs"], read_window=1 << 16)
    assert windowed == mapped
    checks = {p.check for p in mapped}
    assert "log-decode" in checks and len(mapped) >= 3, checks  # damage found, the same either way
