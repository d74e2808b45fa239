"""apply_plan on real files: what it writes, and everything it refuses (touching nothing)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from repair_fixtures import (
    CKPT,
    IDX,
    MARKER,
    NEW_SNAP,
    SEG,
    SNAP,
    TXNIDX,
    expected_applied_contents,
    make_plan,
    sha,
    sha_file,
    tree,
)

from kafkatx.errors import RepairError
from kafkatx.repair import AppendBytes, CreateFile, RepairPlan, ReplaceFile, apply_plan, plan_steps

NOW = 1_700_000_000_000


def test_apply_writes_every_operation(log_dir: Path, tmp_path: Path) -> None:
    original = {p: p.read_bytes() for p in log_dir.rglob("*") if p.is_file()}
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)

    for rel, want in expected_applied_contents(original, log_dir).items():
        if want is None:
            assert not (log_dir / rel).exists(), rel
        else:
            assert (log_dir / rel).read_bytes() == want, rel
    # the moved snapshot sits in the backup dir, byte for byte
    backups = {p.name: p.read_bytes() for p in result.backup_dir.iterdir()}
    assert backups[f"0006-{Path(SNAP).name}"] == original[log_dir / SNAP]
    assert backups[f"0008-{CKPT}"] == original[log_dir / CKPT]
    # no temporary files left in the log dir, and nothing else appeared
    assert not [p for p in log_dir.rglob("*kafkatx-tmp*")]
    assert set(tree(log_dir)) == {p.relative_to(log_dir).as_posix() for p in original} - {SNAP, ".lock"} | {TXNIDX, NEW_SNAP} \
        | {"orders-0", "__transaction_state-3"}
    # the append rows name the exact byte ranges
    first = result.operations[0]
    assert (first.offset, first.length, first.sha256) == (len(original[log_dir / SEG]), len(MARKER), sha(MARKER))
    assert result.problems == ()
    assert json.loads(result.journal_path.read_text().splitlines()[-1])["status"] == "applied"


def test_apply_creates_a_missing_lock_file_as_kafka_does(log_dir: Path, tmp_path: Path) -> None:
    """LogManager.lockLogDirs -> FileLock opens .lock with CREATE: a repair locks a dir that has none
    too (else two repairs there would not exclude each other), creating it empty, owned like the dir."""
    (log_dir / ".lock").unlink()
    apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    st, dst = (log_dir / ".lock").stat(), log_dir.stat()
    assert st.st_size == 0 and (st.st_uid, st.st_gid) == (dst.st_uid, dst.st_gid)


def test_post_check_problems_are_reported(log_dir: Path, tmp_path: Path) -> None:
    seen = []

    def check() -> list[str]:
        seen.append((log_dir / IDX).stat().st_size)
        return ["index entry 3 points past the log"]

    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW, post_check=check)
    assert result.problems == ("index entry 3 points past the log",)
    assert seen == [4 * 8]  # it ran after the writes


def _refused(log_dir: Path, tmp_path: Path, plan: RepairPlan, match: str) -> None:
    before = tree(log_dir)
    journal = tmp_path / "refused.journal"
    with pytest.raises(RepairError, match=match):
        apply_plan(plan, journal, now=NOW)
    assert tree(log_dir) == before
    assert not journal.exists()
    assert not Path(str(journal) + ".d").exists()


def test_refuses_file_grown_since_plan(log_dir: Path, tmp_path: Path) -> None:
    plan = make_plan(log_dir)
    with open(log_dir / IDX, "ab") as f:
        f.write(b"\x00" * 8)
    _refused(log_dir, tmp_path, plan, r"00000000000000000000\.index: changed since the plan was made \(size")


def test_refuses_same_size_different_content(log_dir: Path, tmp_path: Path) -> None:
    plan = make_plan(log_dir)
    data = bytearray((log_dir / SEG).read_bytes())
    data[100] ^= 0xFF
    (log_dir / SEG).write_bytes(bytes(data))
    _refused(log_dir, tmp_path, plan, r"\.log: changed since the plan was made \(sha256")


def test_refuses_replace_of_changed_checkpoint(log_dir: Path, tmp_path: Path) -> None:
    plan = make_plan(log_dir)
    (log_dir / CKPT).write_bytes(b"0\n1\norders 0 43\n")
    _refused(log_dir, tmp_path, plan, "replication-offset-checkpoint: changed since the plan")


def test_refuses_create_over_existing_file(log_dir: Path, tmp_path: Path) -> None:
    (log_dir / TXNIDX).write_bytes(b"")
    _refused(log_dir, tmp_path, make_plan(log_dir), r"\.txnindex: file to create already exists")


def test_refuses_symlink_target_pointing_out(log_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_bytes(b"precious")
    link = log_dir / "orders-0" / "00000000000000000099.log"
    link.symlink_to(outside)
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        AppendBytes(path=link, expected_size=8, expected_sha256=sha(b"precious"), data=b"x"),))
    _refused(log_dir, tmp_path, plan, "is a symlink")
    assert outside.read_bytes() == b"precious"


def test_refuses_symlinked_partition_dir(log_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.log").write_bytes(b"abc")
    (log_dir / "evil-0").symlink_to(elsewhere, target_is_directory=True)
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        AppendBytes(path=log_dir / "evil-0" / "a.log", expected_size=3, expected_sha256=sha(b"abc"), data=b"x"),))
    _refused(log_dir, tmp_path, plan, "evil-0: is a symlink")
    assert (elsewhere / "a.log").read_bytes() == b"abc"


def test_refuses_create_through_symlinked_dir(log_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (log_dir / "evil-0").symlink_to(elsewhere, target_is_directory=True)
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        CreateFile(path=log_dir / "evil-0" / "x.txnindex", data=b"x"),))
    _refused(log_dir, tmp_path, plan, "is a symlink")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("path", ["../outside.log", "orders-0/../../outside.log"])
def test_refuses_dotdot_paths(log_dir: Path, tmp_path: Path, path: str) -> None:
    (tmp_path / "outside.log").write_bytes(b"abc")
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        AppendBytes(path=log_dir / path, expected_size=3, expected_sha256=sha(b"abc"), data=b"x"),))
    _refused(log_dir, tmp_path, plan, r"'\.\.'")


def test_refuses_path_outside_every_log_dir(log_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.log").write_bytes(b"abc")
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        AppendBytes(path=tmp_path / "outside.log", expected_size=3, expected_sha256=sha(b"abc"), data=b"x"),))
    _refused(log_dir, tmp_path, plan, "outside every log dir")


def test_refuses_journal_inside_log_dir(log_dir: Path) -> None:
    before = tree(log_dir)
    with pytest.raises(RepairError, match="must not be inside log dir"):
        apply_plan(make_plan(log_dir), log_dir / "orders-0" / "r.journal", now=NOW)
    assert tree(log_dir) == before


def test_refuses_existing_journal(log_dir: Path, tmp_path: Path) -> None:
    journal = tmp_path / "r.journal"
    journal.write_text("earlier repair\n")
    before = tree(log_dir)
    with pytest.raises(RepairError, match="journal already exists"):
        apply_plan(make_plan(log_dir), journal, now=NOW)
    assert tree(log_dir) == before and journal.read_text() == "earlier repair\n"


def test_refuses_overlapping_log_dirs(log_dir: Path, tmp_path: Path) -> None:
    plan = RepairPlan(log_dirs=(log_dir, log_dir / "orders-0"), operations=())
    with pytest.raises(RepairError, match="overlaps log dir"):
        apply_plan(plan, tmp_path / "r.journal", now=NOW)


def test_log_dir_reached_through_symlink_is_fine(log_dir: Path, tmp_path: Path) -> None:
    # /kafka-logs -> /data/kafka-logs is a common layout: the log dir itself may be a symlink.
    alias = tmp_path / "alias"
    alias.symlink_to(log_dir, target_is_directory=True)
    seg = alias / SEG
    plan = RepairPlan(log_dirs=(alias,), operations=(
        AppendBytes(path=seg, expected_size=seg.stat().st_size, expected_sha256=sha_file(seg), data=b"xy"),))
    result = apply_plan(plan, tmp_path / "r.journal", now=NOW)
    assert (log_dir / SEG).read_bytes().endswith(b"xy")
    assert result.operations[0].path == str(log_dir / SEG)


def test_several_log_dirs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "t-0").mkdir(parents=True)
        (d / "t-0" / "0.log").write_bytes(d.name.encode())
    plan = RepairPlan(log_dirs=(a, b), operations=tuple(
        AppendBytes(path=d / "t-0" / "0.log", expected_size=1, expected_sha256=sha(d.name.encode()), data=b"!")
        for d in (a, b)))
    result = apply_plan(plan, tmp_path / "r.journal", now=NOW)
    journal = json.loads(result.journal_path.read_text().splitlines()[0])
    assert [op["log_dir"] for op in journal["operations"]] == [0, 1]
    assert journal["log_dirs"] == [str(a.resolve()), str(b.resolve())]
    assert (a / "t-0" / "0.log").read_bytes() == b"a!" and (b / "t-0" / "0.log").read_bytes() == b"b!"


def test_replace_keeps_owner_and_mode_of_replaced_file(log_dir: Path, tmp_path: Path) -> None:
    os.chmod(log_dir / CKPT, 0o600)
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        ReplaceFile(path=log_dir / CKPT, expected_sha256=sha_file(log_dir / CKPT), data=b"new"),))
    apply_plan(plan, tmp_path / "r.journal", now=NOW)
    assert (log_dir / CKPT).read_bytes() == b"new"
    assert (log_dir / CKPT).stat().st_mode & 0o777 == 0o600


def test_plan_steps_names_every_crash_point(log_dir: Path) -> None:
    steps = plan_steps(make_plan(log_dir))
    assert steps[0] == "journal-written" and steps[-1] == "applied"
    assert "op4:create:linked" in steps and "op6:move:removed" in steps and "op8:replace:renamed" in steps
    assert len(steps) == len(set(steps)) == 1 + 5 * 1 + 2 * 3 + 2 + 3 + 1


def test_refuses_missing_log_dir(tmp_path: Path) -> None:
    plan = RepairPlan(log_dirs=(tmp_path / "nope",), operations=())
    with pytest.raises(RepairError, match="nope: log dir does not exist"):
        apply_plan(plan, tmp_path / "r.journal", now=NOW)
    assert not (tmp_path / "r.journal").exists()
