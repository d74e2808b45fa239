"""No read may kill the process.

Where the ``.lock`` probe says no broker holds the log dir (a plain log dir, NFS, another host, a
broker in another mount namespace), kafkatx maps segments. A file truncated under the mapping used to
kill kafkatx with SIGBUS (exit 135). The map is now registered with the compiled guard
(kafkatx/storage/_mapguard.c): the SIGBUS handler patches a zero page over the faulting page and flags
the range, and ``map_file`` reports "changed size while being read" (FileShrank, exit 3, one line
naming the file) instead of whatever the zeros decode to.

The truncation is placed deterministically by the reader's launcher (the test's hook between map and
read): it wraps ``mmap.mmap`` so the segment is cut to 1,000 bytes right after it is mapped. Expected
outcome reasoned from the mechanism, not from kafkatx's output: the first batch of the segment is
1 MB long, so the read touches pages past byte 1,000, which are past the file's new end.
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from log_builders import big_segment_log_dir

from kafkatx.storage import segment as segment_mod
from kafkatx.storage.segment import FileShrank, map_file

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(segment_mod._mapguard is None, reason="kafkatx.storage._mapguard is not built")

LAUNCHER = textwrap.dedent("""
    import mmap, os, sys
    seg = sys.argv[1]
    real_mmap = mmap.mmap
    state = {"cut": False}

    class Map(real_mmap):
        def __new__(cls, fileno, *a, **k):
            m = real_mmap.__new__(cls, fileno, *a, **k)
            if fileno != -1 and not state["cut"] and os.path.samestat(os.fstat(fileno), os.stat(seg)):
                state["cut"] = True
                os.truncate(seg, 1000)  # another process's truncation, between map and read
            return m

    mmap.mmap = Map
    sys.argv = ["kafkatx", *sys.argv[2:]]
    from kafkatx.cli.main import main
    sys.exit(main())
""")


@pytest.fixture
def plain_log_dir(tmp_path: Path) -> tuple[Path, Path]:
    return big_segment_log_dir(tmp_path)


def _run(ld: Path, seg: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KAFKATX_READ", None)  # the lock probe decides: nobody holds it, so the segment is mapped
    argv = [a.format(ld=ld, seg=seg) for a in args]
    return subprocess.run([sys.executable, "-c", LAUNCHER, str(seg), *argv], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("args", [
    ["verify", "--log-dir", "{ld}"],
    ["dump-segment", "--files", "{seg}"],
    ["dump-segment", "--files", "{seg}", "--deep-iteration", "--print-data-log"],
], ids=["verify", "dump-segment", "dump-segment-deep"])
def test_truncation_under_the_map_is_exit_3_one_line(plain_log_dir: tuple[Path, Path], args: list[str]) -> None:
    ld, seg = plain_log_dir
    got = _run(ld, seg, args)
    assert got.returncode != 128 + signal.SIGBUS and got.returncode != -signal.SIGBUS, got.stderr  # before
    assert got.returncode == 3, (got.returncode, got.stderr[-2000:])
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1, got.stderr
    assert str(seg) in lines[0] and "changed size while being read" in lines[0]
    assert os.path.getsize(seg) == 1000  # the cut happened (the hook ran between map and read)


@pytest.mark.parametrize("args", [
    ["find-hanging", "--log-dir", "{ld}", "--now", "1700007200000"],
    ["lag", "--log-dir", "{ld}"],
], ids=["find-hanging", "lag"])
def test_truncation_under_the_map_leaves_the_partition_out(plain_log_dir: tuple[Path, Path], args: list[str]) -> None:
    """Commands over partitions tell the never-a-false-answer story: the partition could not be read, the answer is
    incomplete (exit 3). Before the guard: SIGBUS; with a swallowed FileShrank: a recovery note about
    the zeros and exit 0 (a false all-clear)."""
    ld, seg = plain_log_dir
    got = _run(ld, seg, args)
    assert got.returncode == 3, (got.returncode, got.stderr[-2000:])
    lines = got.stderr.strip().splitlines()
    about = [line for line in lines if str(seg) in line]
    assert about and all("changed size while being read" in line for line in about), got.stderr
    assert "recovery truncates" not in got.stderr and "do not form a batch" not in got.stderr
    assert lines[-1].startswith("kafkatx: incomplete: 1 partition could not be read"), got.stderr
    assert os.path.getsize(seg) == 1000


def test_in_process_flag_and_registry(tmp_path: Path) -> None:
    """The guard in this process (under pytest's faulthandler): the faulting read goes on with zeros,
    map_file raises FileShrank naming the file and its new size, and the slot is freed."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x01" * (64 * mmap.PAGESIZE))
    before = segment_mod._mapguard.in_use()
    with pytest.raises(FileShrank) as caught, map_file(path) as buf:
        assert isinstance(buf, mmap.mmap)
        assert segment_mod._mapguard.in_use() == before + 1
        os.truncate(path, 100)
        assert buf[0] == 1  # the first page is still the file's
        assert buf[10 * mmap.PAGESIZE] == 0  # past the end: the zero page the handler mapped
    assert str(path) in str(caught.value) and "changed size while being read" in str(caught.value)
    assert caught.value.position == 100
    assert segment_mod._mapguard.in_use() == before


def test_shrink_without_a_fault_is_still_reported(tmp_path: Path) -> None:
    """No page past the new end touched, but the file is shorter after the read: FileShrank too."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x01" * (8 * mmap.PAGESIZE))
    with pytest.raises(FileShrank), map_file(path) as buf:
        os.truncate(path, 5 * mmap.PAGESIZE)
        assert buf[0] == 1


def test_an_unguarded_fault_still_kills(tmp_path: Path) -> None:
    """A SIGBUS outside every registered range chains to the default action: the guard hides no other bug."""
    path = tmp_path / "f"
    path.write_bytes(b"a" * (4 * mmap.PAGESIZE))
    code = textwrap.dedent(f"""
        import mmap, os
        from kafkatx.storage import _mapguard
        fh = open({str(path)!r}, "rb")
        guarded = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        _mapguard.register(guarded)
        other = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        os.truncate({str(path)!r}, 10)
        print(guarded[3 * mmap.PAGESIZE], flush=True)
        print(other[3 * mmap.PAGESIZE], flush=True)
    """)
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert got.stdout.splitlines() == ["0"]  # the guarded read went on, the other one did not print
    assert got.returncode == -signal.SIGBUS, (got.returncode, got.stderr)


def test_without_the_compiled_guard_segments_are_read_with_pread(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x01" * (4 * mmap.PAGESIZE))
    monkeypatch.delenv("KAFKATX_READ", raising=False)
    monkeypatch.setattr(segment_mod, "_mapguard", None)
    calls: list[int] = []
    real = segment_mod.read_snapshot
    monkeypatch.setattr(segment_mod, "read_snapshot", lambda fd, p, n: calls.append(n) or real(fd, p, n))
    with map_file(path) as buf:
        assert buf[0] == 1
    assert calls == [4 * mmap.PAGESIZE]
