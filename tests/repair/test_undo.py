"""undo_journal and ``kafkatx undo``: exact restoration, and refusals that touch nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repair_fixtures import (
    CKPT,
    IDX,
    MARKER,
    MORE,
    NEW_SNAP,
    SEG,
    SNAP,
    TXNIDX,
    make_plan,
    subprocess_env,
    tree,
)
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.errors import RepairError
from kafkatx.repair import apply_plan, undo_journal
from kafkatx.repair.journal import canonical_checksum

NOW = 1_700_000_000_000


@pytest.fixture
def applied(log_dir: Path, tmp_path: Path):
    before = tree(log_dir)
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    assert tree(log_dir) != before
    return before, result.journal_path


def _rewrite(journal: Path, edit) -> None:
    obj = json.loads(journal.read_text().splitlines()[0])
    edit(obj)
    obj["checksum"] = canonical_checksum(obj)  # a consistent checksum: only the content checks can refuse
    journal.write_text(json.dumps(obj) + "\n")


def test_undo_restores_every_file_byte_for_byte(log_dir: Path, applied) -> None:
    before, journal = applied
    result = undo_journal(journal, now=NOW + 1)
    assert tree(log_dir) == before  # same files, same sha256, same owner/mode; created files gone
    actions = {(r.path.removeprefix(str(log_dir.resolve()) + "/"), r.action) for r in result.rows}
    assert actions == {(SEG, "truncate"), (IDX, "truncate"), ("orders-0/00000000000000000000.timeindex", "truncate"),
                       (TXNIDX, "delete"), ("__transaction_state-3/00000000000000000000.log", "truncate"),
                       (SNAP, "restore"), (NEW_SNAP, "delete"), (CKPT, "restore")}
    assert all(r.verified for r in result.rows)
    assert [r.index for r in result.rows] == list(range(8, -1, -1))  # newest operation first
    assert json.loads(journal.read_text().splitlines()[-1]) == {"status": "undone", "at_ms": NOW + 1}


def test_undo_twice_is_harmless(log_dir: Path, applied) -> None:
    before, journal = applied
    undo_journal(journal)
    again = undo_journal(journal)
    assert {r.action for r in again.rows} == {"nothing"}
    assert tree(log_dir) == before


def test_undo_after_a_partial_append(log_dir: Path, applied) -> None:
    before, journal = applied
    # as if the process died in the middle of writing the first marker
    size = (log_dir / SEG).stat().st_size - len(MARKER) - len(MORE) + 10
    os.truncate(log_dir / SEG, size)
    result = undo_journal(journal)
    assert tree(log_dir) == before
    seg_rows = [r for r in result.rows if r.path.endswith(SEG)]
    assert [(r.index, r.action) for r in seg_rows] == [(1, "nothing"), (0, "truncate")]


def test_dry_run_changes_nothing(log_dir: Path, applied) -> None:
    _, journal = applied
    after_apply = tree(log_dir)
    journal_text = journal.read_text()
    result = undo_journal(journal, dry_run=True)
    assert tree(log_dir) == after_apply and journal.read_text() == journal_text
    assert {r.action for r in result.rows} == {"truncate", "delete", "restore"}
    assert all(r.verified is None for r in result.rows)


def _refuses(log_dir: Path, journal: Path, match: str) -> None:
    state = tree(log_dir)
    journal_text = journal.read_text()
    with pytest.raises(RepairError, match=match):
        undo_journal(journal)
    assert tree(log_dir) == state
    assert journal.read_text() == journal_text


def test_refuses_when_broker_appended_after_repair(log_dir: Path, applied) -> None:
    _, journal = applied
    with open(log_dir / SEG, "ab") as f:
        f.write(b"\x09" * 100)
    _refuses(log_dir, journal, r"\.log: grew by 100 bytes after the repair \(the broker appended")


def test_refuses_when_file_rewritten_after_repair(log_dir: Path, applied) -> None:
    _, journal = applied
    data = bytearray((log_dir / IDX).read_bytes())
    data[0] ^= 1
    (log_dir / IDX).write_bytes(bytes(data))
    _refuses(log_dir, journal, r"\.index: changed since the repair")


def test_refuses_when_created_file_was_modified(log_dir: Path, applied) -> None:
    _, journal = applied
    (log_dir / TXNIDX).write_bytes(b"\x01" * 34)
    _refuses(log_dir, journal, r"\.txnindex: was modified after the repair created it")


def test_refuses_when_segment_was_deleted(log_dir: Path, applied) -> None:
    _, journal = applied
    (log_dir / IDX).unlink()
    _refuses(log_dir, journal, r"\.index: was deleted after the repair")


def test_refuses_when_backup_was_damaged(log_dir: Path, applied) -> None:
    _, journal = applied
    backup = next(p for p in Path(str(journal) + ".d").iterdir() if p.name.endswith(".snapshot"))
    backup.write_bytes(b"not the snapshot")
    _refuses(log_dir, journal, r"snapshot: its backup .* is missing or does not match the journal")


def test_refuses_wrong_checksum(log_dir: Path, applied) -> None:
    _, journal = applied
    text = journal.read_text()
    journal.write_text(text.replace('"description":"test repair"', '"description":"test repaiR"'))
    _refuses(log_dir, journal, "journal checksum mismatch")


@pytest.mark.parametrize("bad_path", ["../outside.log", "/etc/passwd", "orders-0/../../outside.log"])
def test_refuses_journal_path_outside_log_dir(log_dir: Path, applied, tmp_path: Path, bad_path: str) -> None:
    _, journal = applied
    (tmp_path / "outside.log").write_bytes(b"x" * 10)
    _rewrite(journal, lambda o: o["operations"][0].__setitem__("path", bad_path))
    _refuses(log_dir, journal, "not relative to its log dir|escapes")
    assert (tmp_path / "outside.log").read_bytes() == b"x" * 10


def test_refuses_journal_whose_log_dir_is_a_symlink(log_dir: Path, applied, tmp_path: Path) -> None:
    _, journal = applied
    alias = tmp_path / "alias"
    alias.symlink_to(log_dir, target_is_directory=True)
    _rewrite(journal, lambda o: o.__setitem__("log_dirs", [str(alias)]))
    _refuses(log_dir, journal, "resolves elsewhere")


def test_refuses_symlink_planted_after_repair(log_dir: Path, applied, tmp_path: Path) -> None:
    _, journal = applied
    victim = tmp_path / "victim"
    victim.write_bytes(b"do not delete")
    (log_dir / NEW_SNAP).unlink()
    (log_dir / NEW_SNAP).symlink_to(victim)
    _refuses(log_dir, journal, "is a symlink")
    assert victim.read_bytes() == b"do not delete"


def test_refuses_symlinked_journal(applied, tmp_path: Path, log_dir: Path) -> None:
    _, journal = applied
    link = tmp_path / "link.journal"
    link.symlink_to(journal)
    with pytest.raises(RepairError, match="is a symlink"):
        undo_journal(link)


# -- the command ---------------------------------------------------------------------------------------------


def test_cli_undo_json(log_dir: Path, applied) -> None:
    before, journal = applied
    result = CliRunner().invoke(app, ["undo", str(journal), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 9
    assert set(rows[0]) == {"index", "op", "path", "action", "size_before_undo", "size_after_undo", "sha256",
                            "verified"}
    assert all(r["verified"] is True for r in rows)
    assert tree(log_dir) == before


def test_cli_undo_dry_run_text(log_dir: Path, applied) -> None:
    _, journal = applied
    state = tree(log_dir)
    result = CliRunner().invoke(app, ["undo", str(journal), "--dry-run", "--format", "text"],
                                env={"COLUMNS": "200"})  # the temp path is longer than 80 columns
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"would undo from {journal}"
    # text is for people: one aligned row per file operation, the path shortened to partition/file
    assert any(line.split()[:3] == ["truncate", "append", "orders-0/00000000000000000000.log"]
               for line in result.stdout.splitlines())
    assert f"kafkatx undo {journal}" in result.stdout  # the command that really undoes it
    assert tree(log_dir) == state


def test_cli_undo_refusal_is_exit_3_one_line(log_dir: Path, applied) -> None:
    _, journal = applied
    journal.write_text(journal.read_text().replace('"created_ms":1700000000000', '"created_ms":1700000000001'))
    state = tree(log_dir)
    result = CliRunner().invoke(app, ["undo", str(journal)])
    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "r.journal: journal checksum mismatch" in lines[0]
    assert tree(log_dir) == state


def test_cli_undo_real_process(log_dir: Path, applied) -> None:
    before, journal = applied
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "undo", str(journal), "--format", "jsonl"],
                          capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 9
    assert tree(log_dir) == before
    missing = subprocess.run([sys.executable, "-m", "kafkatx", "undo", str(journal) + ".nope"],
                             capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert missing.returncode == 3 and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


# -- property: any mix of appends and creates round-trips ------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from([f"{0:020d}.log", f"{0:020d}.index", f"{0:020d}.txnindex"]),
                                st.binary(min_size=1, max_size=64)), min_size=1, max_size=8))
def test_apply_then_undo_round_trips(tmp_path_factory, steps) -> None:
    from kafkatx.repair import AppendBytes, CreateFile, RepairPlan
    from kafkatx.repair.fsutil import sha256_bytes

    ld = tmp_path_factory.mktemp("prop") / "logs"
    (ld / "t-0").mkdir(parents=True)
    (ld / "meta.properties").write_text("node.id=1\n")  # undo acts only inside real log dirs
    log, index = f"{0:020d}.log", f"{0:020d}.index"
    content = {log: b"seg", index: b""}
    for name, data in content.items():
        (ld / "t-0" / name).write_bytes(data)
    before = tree(ld)
    ops = []
    for name, data in steps:
        path = ld / "t-0" / name
        if name not in content:
            ops.append(CreateFile(path=path, data=data, like=ld / "t-0" / log))
            content[name] = data
        else:
            ops.append(AppendBytes(path=path, expected_size=len(content[name]),
                                   expected_sha256=sha256_bytes(content[name]), data=data))
            content[name] += data
    journal = ld.parent / "r.journal"
    apply_plan(RepairPlan(log_dirs=(ld,), operations=tuple(ops)), journal, now=NOW)
    for name, data in content.items():
        assert (ld / "t-0" / name).read_bytes() == data
    undo_journal(journal)
    assert tree(ld) == before


def test_undo_self_check_fires_when_a_file_does_not_come_back(log_dir: Path, applied, monkeypatch) -> None:
    # A faulty step (here: a truncate that leaves one byte too many, as a racing writer or a lying
    # filesystem would) must not pass for a successful undo: the post-undo sha256 check refuses, says
    # which file, and the journal is not marked "undone" so a second undo can be tried.
    import kafkatx.repair.undo as undo_mod

    before, journal = applied
    real_ftruncate = os.ftruncate

    def off_by_one(fd: int, length: int) -> None:
        real_ftruncate(fd, length + 1)

    monkeypatch.setattr(undo_mod.os, "ftruncate", off_by_one)
    with pytest.raises(RepairError, match="after undo the file does not match its state before the repair"):
        undo_journal(journal, now=NOW + 1)
    assert "undone" not in journal.read_text()
    monkeypatch.setattr(undo_mod.os, "ftruncate", real_ftruncate)
    undo_journal(journal, now=NOW + 2)  # the fault gone, undo resumes and restores every byte
    assert tree(log_dir) == before
