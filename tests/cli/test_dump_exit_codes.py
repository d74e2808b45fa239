"""dump-* exit codes as cli.md documents them: 3 when the input cannot be read or is not the file kind
at all (used to be 2 for an unreadable file, and 1 for random bytes in a .log), 1 for a torn tail."""

from __future__ import annotations

import os
import random

import pytest

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


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file")
def test_mode_000_file_is_exit_3(invoke, tmp_path):
    path = _random_file(tmp_path, ".log")
    path.chmod(0)
    r = invoke("dump-segment", path)
    assert r.exit_code == 3 and str(path) in r.stderr
