"""Every read can fail, and a failure is never data: the one read contract of ``kafkatx/storage/fdio.py``.

The fault-injection sweep (``tests/io_faults.py``) runs each command once counting its I/O calls, then
again with each call site's calls failing in turn; here a sample of it on the bundled fixtures (the full
sweep: ``KAFKATX_FAULTS_FULL=1``; the table: ``python -m tests.io_faults``), and the cases it found.
"""

from __future__ import annotations

import errno
import mmap
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatx.errors import DecodeError, MissingFile, ReadFailed
from kafkatx.format.record_batch import Record, build_batch, iter_batches
from kafkatx.storage import fdio
from kafkatx.storage.segment import SMALL_FILE_BYTES, FileShrank, map_file, read_small_file
from tests import io_faults

REPO = Path(__file__).resolve().parents[2]
FULL = os.environ.get(io_faults.FULL_ENV, "") not in ("", "0")
NOW = io_faults.FIXTURE_NOW


# ---------------------------------------------------------------- the contract, call by call

@pytest.mark.parametrize("op", ["open", "stat", "fstat", "pread", "preadv", "mmap", "list"])
@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO, errno.ENOENT, errno.EMFILE])
def test_every_call_fails_as_read_failed_naming_the_file(tmp_path: Path, op: str, code: int) -> None:
    f = tmp_path / "00000000000000000000.log"
    f.write_bytes(b"x" * 100)

    def hook(got_op: str, path: str) -> None:
        if got_op == op:
            raise OSError(code, os.strerror(code), path)

    target = tmp_path if op == "list" else f
    with io_faults.hooked(hook):  # type: ignore[arg-type]
        with pytest.raises(ReadFailed) as exc:
            if op == "list":
                fdio.list_entries(tmp_path)
            elif op == "stat":
                fdio.stat(f)
            else:
                fd = fdio.open_read(f)
                try:
                    if op == "fstat":
                        fdio.fstat(fd, f)
                    elif op == "pread":
                        fdio.pread(fd, 10, 0, f)
                    elif op == "preadv":
                        fdio.preadv(fd, [memoryview(bytearray(10))], 0, f)
                    else:
                        fdio.map_read(fd, f)
                finally:
                    os.close(fd)
    err = exc.value
    assert not isinstance(err, (DecodeError, MissingFile))  # never bad bytes, never an absent optional file
    assert str(err).startswith(f"could not {'list' if op == 'list' else 'read'} {target}: ")
    assert err.errno == code and err.exit_code == 3


def test_is_file_answers_absent_only_for_absent(tmp_path: Path) -> None:
    f = tmp_path / "leader-epoch-checkpoint"
    assert fdio.is_file(f) is False  # really absent
    f.write_text("0\n0\n")

    def hook(_op: str, path: str) -> None:
        raise OSError(errno.EIO, "Input/output error", path)

    with io_faults.hooked(hook), pytest.raises(ReadFailed, match="Input/output error"):  # type: ignore[arg-type]
        fdio.is_file(f)  # Path.is_file would have answered False: "absent"


def test_a_short_small_read_reads_on(tmp_path: Path) -> None:
    """A pread that returns fewer bytes than the file holds is no end of file: the small read reads on."""
    f = tmp_path / "00000000000000000000.index"
    f.write_bytes(bytes(range(256)) * 4)
    first = io_faults.Hook(fail_at=2, fault="short")  # call 1 opens, call 2 is the pread
    with io_faults.hooked(first):
        got = read_small_file(f, allowed=True)
    assert first.injected is not None and first.injected.op == "pread"
    assert got == f.read_bytes()


def _big_segment(path: Path) -> list[int]:
    """A segment larger than a small read (so it is mapped): batch positions."""
    value = b"v" * 30_000
    positions, data = [], b""
    for i in range(4):
        positions.append(len(data))
        data += build_batch([Record(offset=i, timestamp=1_000 + i, key=b"k", value=value)], base_offset=i)
    assert len(data) > SMALL_FILE_BYTES
    path.write_bytes(data)
    return positions


def test_a_segment_cut_between_its_size_and_its_map_is_a_change_not_damage(tmp_path: Path, monkeypatch) -> None:
    """A file cut (mid-batch) after the reader took its size and before it mapped it maps shorter than it was:
    the batch that runs past the map's end is the file changing under the reader (FileShrank, exit 3), not
    a torn tail ("batch runs past the end")."""
    if os.environ.get("KAFKATX_READ"):
        pytest.skip("the map path only")
    seg = tmp_path / "00000000000000000000.log"
    positions = _big_segment(seg)
    real = mmap.mmap

    def cut_then_map(fd: int, *args, **kwargs):
        if fd >= 0:
            os.truncate(seg, positions[2] + 100)  # inside the third batch
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", cut_then_map)
    with pytest.raises(FileShrank, match="changed size while being read"):
        with map_file(seg) as buf:
            list(iter_batches(buf))


def test_too_many_open_files_names_the_file() -> None:
    """``ulimit -n 8`` with ``verify --jobs 8``: the fan-out does the runs it cannot start a process for (no
    descriptor for a pipe) in this process, so the answer is the one without the limit; where an open still
    fails, the line names the file it was opening (it said "Too many open files" alone)."""

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))

    args = [sys.executable, "-m", "kafkatx", "verify", "--log-dir", "fixtures/hanging", "--jobs", "8"]
    free = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=300)
    low = subprocess.run(args, capture_output=True, text=True, preexec_fn=low_limit, cwd=REPO, timeout=300)
    if low.returncode == 3:
        line = low.stderr.strip().splitlines()[-1]
        assert line.startswith("kafkatx: could not read fixtures/hanging/") and "Too many open files" in line, line
    else:
        assert (low.returncode, low.stdout, low.stderr) == (free.returncode, free.stdout, free.stderr)


# ---------------------------------------------------------------- the sweep (sampled)

# (command, faults at most in the default run): the first and last call of every call site with each of
# its faults are always among them unless the limit cuts them; the full sweep takes every call
SAMPLED = [("find-hanging", 40), ("lag", 30), ("list-txn", 30), ("describe-producers", 30), ("verify", 40),
           ("timeline", 25), ("describe-txn", 25), ("dump-segment", 20), ("dump-index", 20), ("dump-snapshot", 10),
           ("dump-txnindex", 10), ("abort-hanging", 30), ("abort-hanging --execute", 12), ("undo", 30)]


@pytest.mark.parametrize(("command", "limit"), SAMPLED, ids=[c for c, _ in SAMPLED])
def test_fault_sweep_on_the_fixtures(tmp_path: Path, command: str, limit: int) -> None:
    source = REPO / "fixtures" / "hanging"
    case = next(c for c in io_faults.cases("fixtures/hanging", source, NOW) if c.name == command)
    res = io_faults.sweep(case, tmp_path, full=FULL, per_site=3 if FULL else 0, limit=None if FULL else limit)
    assert res.calls > 0 and res.injected > 0
    assert res.false == [], "\n".join(res.false[:10])
