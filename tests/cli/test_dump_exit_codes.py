"""dump-* exit codes as cli.md documents them: 3 when the input cannot be read or is not the file kind
at all (used to be 2 for an unreadable file, and 1 for random bytes in a .log), 1 for a torn tail."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {"dump-segment": ".log", "dump-index": ".index", "dump-snapshot": ".snapshot",
            "dump-txnindex": ".txnindex"}


def _random_file(tmp_path, suffix: str, size: int = 5000):
    path = tmp_path / f"{0:020d}{suffix}"
    # Random bytes whose first record batch header cannot be a batch: magic (byte 16) 0x7f is no version.
    data = bytearray(random.Random(26).randbytes(size))
    data[16] = 0x7F
    path.write_bytes(bytes(data))
    return path


def test_random_bytes_as_a_segment_is_exit_3_naming_file_and_byte(invoke, tmp_path):
    path = _random_file(tmp_path, ".log")
    for fmt in ("text", "json", "jsonl"):
        r = invoke("dump-segment", path, "--format", fmt)
        assert r.exit_code == 3, (fmt, r.stderr)
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"kafkatx: {path}: byte 16: not a Kafka log segment"), line


def test_a_torn_tail_is_still_a_finding(invoke, tmp_path, partition_writer):
    seg = partition_writer(tmp_path / "orders-0")
    with open(seg.log, "ab") as fh:
        fh.write(b"\x00" * 7 + b"\x01")  # the start of a batch header the crash cut off
    r = invoke("dump-segment", seg.log)
    assert r.exit_code == 1, r.stderr
    assert "trailing bytes" in r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unreadable_file_is_exit_3(invoke, tmp_path, monkeypatch, command):
    path = _random_file(tmp_path, COMMANDS[command], 24)
    real_access = os.access
    # root reads a mode-000 file anyway: deny it the way the kernel would for another user
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if str(p) == str(path) else
                        real_access(p, mode, *a, **k))
    r = invoke(command, path)
    assert r.exit_code == 3, r.output
    (line,) = r.stderr.strip().splitlines()
    assert str(path) in line and "permission denied" in line


# Root without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH is refused a mode-000 file like any user.
_NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
           "--inh-caps", "-dac_override,-dac_read_search", "--"]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_mode_000_file_is_exit_3(invoke, tmp_path, command):
    """The kernel's own refusal, not a patched os.access: as a plain user, or as root with its DAC
    override dropped (setpriv) in a separate process."""
    path = _random_file(tmp_path, COMMANDS[command])
    path.chmod(0)
    if os.geteuid() != 0:
        r = invoke(command, path)
        code, stderr = r.exit_code, r.stderr
    else:
        if shutil.which("setpriv") is None:
            pytest.skip("root reads a mode-000 file and setpriv (to drop that) is not installed")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([*_NO_DAC, sys.executable, "-m", "kafkatx", command, str(path)],
                              capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
        code, stderr = done.returncode, done.stderr
    assert code == 3, stderr
    (line,) = stderr.strip().splitlines()
    assert str(path) in line and "ermission denied" in line, line
