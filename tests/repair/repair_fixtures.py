"""Builders shared by the repair tests (and by the subprocesses the fault tests start).

A small but real-shaped broker log dir: a data partition with a segment and its
indexes, a producer snapshot, a ``__transaction_state`` partition and the checkpoint
files, plus Kafka's ``.lock``. The contents are arbitrary bytes: the repair machinery
must not care what they mean. ``make_plan`` uses every operation kind, including two
appends to the same file, like a planner appending an ABORT marker and then more.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from kafkatx.repair import AppendBytes, CreateFile, MoveToBackup, RepairPlan, ReplaceFile

SEG = "orders-0/00000000000000000000.log"
IDX = "orders-0/00000000000000000000.index"
TIDX = "orders-0/00000000000000000000.timeindex"
TXNIDX = "orders-0/00000000000000000000.txnindex"
SNAP = "orders-0/00000000000000000042.snapshot"
NEW_SNAP = "orders-0/00000000000000000050.snapshot"
TXN_SEG = "__transaction_state-3/00000000000000000000.log"
CKPT = "replication-offset-checkpoint"

MARKER = bytes(range(78))  # stands in for a 78-byte control batch
MORE = b"\x07" * 61
TXN_RECORDS = b"\x01" * 150
INDEX_ENTRY = (50).to_bytes(4, "big") + (4096).to_bytes(4, "big")
TIME_ENTRY = (1_700_000_000_000).to_bytes(8, "big") + (50).to_bytes(4, "big")
TXN_ENTRY = b"\x00" * 34
NEW_CKPT = b"0\n1\norders 0 51\n"
NEW_SNAP_BYTES = b"\x00\x01" + b"\x5a" * 40


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha_file(path: Path) -> str:
    return sha(path.read_bytes())


def build_log_dir(root: Path) -> Path:
    ld = root / "kafka-logs"
    (ld / "orders-0").mkdir(parents=True)
    (ld / "__transaction_state-3").mkdir()
    (ld / ".lock").write_bytes(b"")
    (ld / "meta.properties").write_text("version=1\nnode.id=1\n")
    (ld / CKPT).write_bytes(b"0\n1\norders 0 42\n")
    (ld / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\norders 0 42\n")
    (ld / SEG).write_bytes(bytes(range(256)) * 17)
    (ld / IDX).write_bytes(INDEX_ENTRY * 3)
    (ld / TIDX).write_bytes(TIME_ENTRY * 3)
    (ld / SNAP).write_bytes(b"\x00\x01" + b"\x33" * 30)
    (ld / TXN_SEG).write_bytes(b"\x02" * 500)
    return ld


def make_plan(ld: Path) -> RepairPlan:
    seg = ld / SEG
    seg_after_marker = seg.read_bytes() + MARKER
    return RepairPlan(
        log_dirs=(ld,),
        description="test repair",
        operations=(
            AppendBytes(path=seg, expected_size=seg.stat().st_size, expected_sha256=sha_file(seg), data=MARKER),
            AppendBytes(path=seg, expected_size=len(seg_after_marker), expected_sha256=sha(seg_after_marker),
                        data=MORE),
            AppendBytes(path=ld / IDX, expected_size=(ld / IDX).stat().st_size, expected_sha256=sha_file(ld / IDX),
                        data=INDEX_ENTRY),
            AppendBytes(path=ld / TIDX, expected_size=(ld / TIDX).stat().st_size,
                        expected_sha256=sha_file(ld / TIDX), data=TIME_ENTRY),
            CreateFile(path=ld / TXNIDX, data=TXN_ENTRY, like=seg),
            AppendBytes(path=ld / TXN_SEG, expected_size=(ld / TXN_SEG).stat().st_size,
                        expected_sha256=sha_file(ld / TXN_SEG), data=TXN_RECORDS),
            MoveToBackup(path=ld / SNAP, expected_sha256=sha_file(ld / SNAP)),
            CreateFile(path=ld / NEW_SNAP, data=NEW_SNAP_BYTES, like=seg),
            ReplaceFile(path=ld / CKPT, expected_sha256=sha_file(ld / CKPT), data=NEW_CKPT),
        ),
    )


def tree(ld: Path) -> dict[str, tuple[str, int, int, int]]:
    """Every entry under ``ld``: relative path -> (sha256 or kind, uid, gid, mode)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(ld):
        for name in dirnames + filenames:
            if name == ".lock" and Path(dirpath) == ld:
                continue  # Kafka's lock file: a repair creates it when absent, as LogManager does, and keeps it
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                what = sha(p.read_bytes())
            elif stat.S_ISDIR(st.st_mode):
                what = "dir"
            else:
                what = "other"
            out[p.relative_to(ld).as_posix()] = (what, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
    return out


def expected_applied_contents(original: dict[Path, bytes], ld: Path) -> dict[str, bytes | None]:
    """What the plan must leave, derived from the original files (None: absent)."""
    return {
        SEG: original[ld / SEG] + MARKER + MORE,
        IDX: original[ld / IDX] + INDEX_ENTRY,
        TIDX: original[ld / TIDX] + TIME_ENTRY,
        TXNIDX: TXN_ENTRY,
        TXN_SEG: original[ld / TXN_SEG] + TXN_RECORDS,
        SNAP: None,
        NEW_SNAP: NEW_SNAP_BYTES,
        CKPT: NEW_CKPT,
    }


REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# runs apply_plan or the CLI in a fresh process and SIGKILLs it after a chosen step (its docstring)
FAULT_LAUNCHER = HERE / "fault_launcher.py"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE)])
    env.update(extra)
    return env


LOCK_SCRIPT = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
if sys.argv[2] == "flock":
    fcntl.flock(fd, fcntl.LOCK_EX)
else:  # what the JVM's FileChannel.tryLock() does on Linux: a POSIX record lock
    fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()  # hold until the test closes our stdin
"""
