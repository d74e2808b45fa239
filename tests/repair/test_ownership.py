"""Owner/group/mode: created files take their sibling's, appended files keep theirs, undo restores them.

A broker runs as an unprivileged user (``kafka``), while on-call repairs often run as root:
a ``.txnindex`` created root:root 0600 would make the broker fail to open it. Needs root
(to chown the fixture to another uid), skipped otherwise.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from repair_fixtures import CKPT, IDX, NEW_SNAP, SEG, SNAP, TXN_SEG, TXNIDX, make_plan, tree

from kafkatx.repair import CreateFile, RepairPlan, apply_plan, undo_journal

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")

NOW = 1_700_000_000_000
KAFKA_UID = KAFKA_GID = 1234


def _chown_tree(ld: Path, uid: int, gid: int, file_mode: int) -> None:
    os.chown(ld, uid, gid)
    for p in ld.rglob("*"):
        os.chown(p, uid, gid)
        os.chmod(p, 0o750 if p.is_dir() else file_mode)


def _owner(p: Path) -> tuple[int, int, int]:
    st = os.lstat(p)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def test_created_files_take_siblings_owner_and_mode(log_dir: Path, tmp_path: Path) -> None:
    _chown_tree(log_dir, KAFKA_UID, KAFKA_GID, 0o640)
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    for rel in (TXNIDX, NEW_SNAP):  # created with like=<the .log>
        assert _owner(log_dir / rel) == (KAFKA_UID, KAFKA_GID, 0o640), rel
    for rel in (SEG, IDX, TXN_SEG):  # appended: untouched owner/mode
        assert _owner(log_dir / rel) == (KAFKA_UID, KAFKA_GID, 0o640), rel
    assert _owner(log_dir / CKPT) == (KAFKA_UID, KAFKA_GID, 0o640)  # replaced: keeps the old file's
    # the journal records who owned what before
    ops = json.loads(result.journal_path.read_text().splitlines()[0])["operations"]
    assert {(o["before"]["uid"], o["before"]["gid"], o["before"]["mode"]) for o in ops if o["before"]} == \
        {(KAFKA_UID, KAFKA_GID, 0o640)}
    # backups keep the owner too, so a restore is faithful
    assert {_owner(p) for p in result.backup_dir.iterdir()} == {(KAFKA_UID, KAFKA_GID, 0o640)}


def test_like_sibling_with_its_own_mode(log_dir: Path, tmp_path: Path) -> None:
    _chown_tree(log_dir, KAFKA_UID, KAFKA_GID, 0o640)
    os.chown(log_dir / IDX, 4321, 4321)
    os.chmod(log_dir / IDX, 0o600)
    plan = RepairPlan(log_dirs=(log_dir,), operations=(
        CreateFile(path=log_dir / TXNIDX, data=b"\x00" * 34, like=log_dir / IDX),))
    apply_plan(plan, tmp_path / "r.journal", now=NOW)
    assert _owner(log_dir / TXNIDX) == (4321, 4321, 0o600)


def test_without_like_the_directory_owner_is_used(log_dir: Path, tmp_path: Path) -> None:
    _chown_tree(log_dir, KAFKA_UID, KAFKA_GID, 0o640)
    plan = RepairPlan(log_dirs=(log_dir,), operations=(CreateFile(path=log_dir / TXNIDX, data=b"x"),))
    apply_plan(plan, tmp_path / "r.journal", now=NOW)
    assert _owner(log_dir / TXNIDX) == (KAFKA_UID, KAFKA_GID, 0o644)


def test_undo_restores_owner_and_mode(log_dir: Path, tmp_path: Path) -> None:
    _chown_tree(log_dir, KAFKA_UID, KAFKA_GID, 0o640)
    os.chmod(log_dir / SNAP, 0o600)
    before = tree(log_dir)
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    undo_journal(result.journal_path)
    assert tree(log_dir) == before  # includes uid, gid and mode of every entry
    assert _owner(log_dir / SNAP) == (KAFKA_UID, KAFKA_GID, 0o600)
