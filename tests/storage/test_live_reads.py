"""Reading a live broker's files never kills the process.

A segment truncated while it is mapped makes the next touch of a page past the new end
raise SIGBUS, which kills Python with no message. The reproduction below runs in a real
subprocess: it maps a real segment copy, the test truncates the file, the subprocess reads.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import DecodeError
from kafkatx.storage import segment as segment_mod
from kafkatx.storage.segment import FileShrank, broker_holds_lock, map_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
NOW = "1700007200000"

READER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kafkatx.format.record_batch import iter_batches, iter_records
    from kafkatx.storage.segment import map_file
    with map_file(Path(sys.argv[1])) as buf:
        print("opened", flush=True)
        sys.stdin.readline()
        n = 0
        for h in iter_batches(buf):
            n += len(list(iter_records(buf, h)))
        print(n, flush=True)
""")


@pytest.fixture
def live_dir(tmp_path: Path) -> Path:
    ld = tmp_path / "hanging"
    shutil.copytree(FIXTURES / "hanging", ld)
    (ld / ".lock").touch()
    return ld


def _hold_lock(ld: Path) -> int:
    """Take the log dir lock the way a Java broker does (FileChannel.tryLock: a POSIX lock)."""
    fd = os.open(ld / ".lock", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _read_while_truncating(seg: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.Popen([sys.executable, "-c", READER, str(seg)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "opened"
    os.truncate(seg, 0)  # what a follower truncation or recovery does to a live segment
    out, err = proc.communicate("go\n", timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.skipif(segment_mod._mapguard is None, reason="kafkatx.storage._mapguard is not built")
def test_mapped_segment_truncated_underneath_no_longer_dies_of_sigbus(live_dir: Path) -> None:
    """The reproduction: the mmap path (the stopped-broker path) died of SIGBUS; now
    the map is guarded (kafkatx/storage/_mapguard.c) and the read ends in FileShrank."""
    seg = live_dir / "orders-0" / "00000000000000000055.log"
    got = _read_while_truncating(seg, {"KAFKATX_READ": "mmap"})
    assert got.returncode != -signal.SIGBUS, got.stderr  # before: -SIGBUS
    assert got.returncode == 1, (got.returncode, got.stderr)  # the bare reader lets the error through
    assert "FileShrank" in got.stderr and "changed size while being read" in got.stderr, got.stderr
    assert str(seg) in got.stderr


def test_held_lock_reads_with_pread_and_survives_truncation(live_dir: Path) -> None:
    seg = live_dir / "orders-0" / "00000000000000000055.log"
    with map_file(seg) as buf:  # this process holds no lock: counted on the fast path first
        from kafkatx.format.record_batch import iter_batches, iter_records
        records = sum(len(list(iter_records(buf, h))) for h in iter_batches(buf))
    fd = _hold_lock(live_dir)
    try:
        got = _read_while_truncating(seg, {})
    finally:
        os.close(fd)
    assert got.returncode == 0, got.stderr
    assert int(got.stdout.strip()) == records > 0  # the snapshot taken at open, whole


def test_lock_detection(live_dir: Path) -> None:
    seg = live_dir / "orders-0" / "00000000000000000000.log"
    assert not broker_holds_lock(seg)
    from kafkatx.repair.fsutil import LogDirLocks, probe_lock

    with LogDirLocks([live_dir]):  # our own lock (a repair holding it) is no broker
        assert not broker_holds_lock(seg)
        # ... and asking did not drop it (closing a probe descriptor would drop a POSIX lock)
        probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os
            fd = os.open({str(live_dir / '.lock')!r}, os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                print("free")
            except OSError:
                print("held")
        """)], capture_output=True, text=True, timeout=30)
        assert probe.stdout.strip() == "held"
    assert probe_lock(live_dir) is False
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(live_dir / '.lock')!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert broker_holds_lock(seg)
        assert broker_holds_lock(live_dir / "replication-offset-checkpoint")
    finally:
        holder.communicate("done\n", timeout=30)
    assert not broker_holds_lock(seg)


def test_file_shrinking_during_the_pread_is_one_decode_error(live_dir: Path, monkeypatch) -> None:
    seg = live_dir / "orders-0" / "00000000000000000055.log"
    size = seg.stat().st_size
    monkeypatch.setenv("KAFKATX_READ", "pread")
    monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 1000)
    real = os.pread
    calls = []

    def shrinking(fd: int, n: int, pos: int) -> bytes:
        calls.append(pos)
        if len(calls) == 2:
            os.truncate(seg, 1500)
        return real(fd, n, pos)

    monkeypatch.setattr(segment_mod.os, "pread", shrinking)
    with pytest.raises(FileShrank) as exc:
        with map_file(seg):
            pass
    assert not isinstance(exc.value, DecodeError)  # no torn tail: the read is incomplete, exit 3
    assert exc.value.exit_code == 3
    assert exc.value.path == str(seg) and exc.value.position == 1500
    assert str(exc.value).startswith(f"{seg}: byte 1500: file shrank")
    assert str(size) in str(exc.value)


def test_file_shrinking_after_the_last_pread(live_dir: Path, monkeypatch) -> None:
    seg = live_dir / "orders-0" / "00000000000000000055.log"
    monkeypatch.setenv("KAFKATX_READ", "pread")
    real_fstat = os.fstat
    seen = []

    def fstat(fd: int) -> os.stat_result:
        seen.append(fd)
        if len(seen) == 2:  # the size check after the preads
            os.truncate(seg, 100)
        return real_fstat(fd)

    monkeypatch.setattr(segment_mod.os, "fstat", fstat)
    with pytest.raises(FileShrank) as exc:
        with map_file(seg):
            pass
    assert exc.value.position == 100


def test_cli_shrink_is_exit_3_one_line(live_dir: Path, monkeypatch) -> None:
    seg = live_dir / "orders-0" / "00000000000000000055.log"
    monkeypatch.setenv("KAFKATX_READ", "pread")
    monkeypatch.setattr(segment_mod, "PREAD_WINDOW", 1000)
    real = os.pread

    def shrinking(fd: int, n: int, pos: int) -> bytes:
        if pos >= 1000:
            os.truncate(seg, 1000)
        return real(fd, n, pos)

    real_v = os.preadv

    def shrinking_v(fd: int, buffers: list, pos: int) -> int:  # dump-segment's windowed read
        got = real_v(fd, buffers, pos)
        os.truncate(seg, 1000)  # right after the first window is read
        return got

    monkeypatch.setattr(segment_mod.os, "pread", shrinking)
    monkeypatch.setattr(segment_mod.os, "preadv", shrinking_v)
    result = CliRunner().invoke(app, ["dump-segment", str(seg)])
    assert result.exit_code == 3, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(seg) in lines[0] and "byte 1000" in lines[0] and "shrank" in lines[0]


def _cli(args: list[str], mode: str, monkeypatch) -> tuple[int, str]:
    monkeypatch.setenv("KAFKATX_READ", mode)
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout


@pytest.mark.parametrize("fixture", ["hanging", "clean", "ghost", "two-brokers"])
def test_pread_path_gives_identical_results(fixture: str, monkeypatch) -> None:
    dirs = sorted(p for p in (FIXTURES / fixture).iterdir() if p.is_dir()) if fixture == "two-brokers" \
        else [FIXTURES / fixture]
    src: list[str] = []
    for d in dirs:
        src += ["--log-dir", str(d)]
    commands = [["find-hanging", *src, "--now", NOW, "--format", "json"],
                ["lag", *src, "--format", "json"],
                ["verify", *src, "--format", "json"],
                ["list-txn", *src, "--format", "json"]]
    segs = sorted(str(p) for d in dirs for p in d.rglob("*") if p.suffix in (".log", ".index", ".timeindex",
                                                                             ".snapshot", ".txnindex"))
    commands.append(["dump-segment", "--deep-iteration", "--print-data", *segs])
    compared = 0
    for args in commands:
        fast = _cli(args, "mmap", monkeypatch)
        slow = _cli(args, "pread", monkeypatch)
        assert fast == slow, args[0]
        if args[0] != "dump-segment":
            json.loads(fast[1])
        compared += len(fast[1])
    assert compared > 1000


def test_a_populated_map_is_the_same_read_only_bytes_and_never_bypasses_the_pread_path(live_dir: Path,
                                                                                        monkeypatch) -> None:
    # verify maps each segment with populate=True (MAP_POPULATE): the same bytes, read-only; where a
    # running broker holds the log dir it is the pread snapshot all the same (immune to truncation).
    seg = live_dir / "orders-0" / "00000000000000000055.log"
    raw = seg.read_bytes()
    monkeypatch.setenv("KAFKATX_READ", "mmap")
    with map_file(seg, populate=True) as buf:
        assert bytes(buf) == raw
        with pytest.raises(TypeError):
            buf[0:1] = b"x"  # type: ignore[index]
    monkeypatch.setenv("KAFKATX_READ", "pread")  # what a lock held by another process selects
    with map_file(seg, populate=True) as buf:
        os.truncate(seg, 0)
        assert bytes(buf) == raw  # a snapshot taken at open, not a mapping of the file
