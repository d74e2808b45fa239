"""The journal: its content, its checksum, where it goes, and that it exists before any write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from repair_fixtures import CKPT, MARKER, MORE, SEG, SNAP, TXNIDX, make_plan, sha, tree

from kafkatx.errors import RepairError
from kafkatx.repair import apply_plan, default_journal_path, read_journal
from kafkatx.repair.journal import canonical_checksum

NOW = 1_700_000_000_000


def _line1(journal: Path) -> dict:
    return json.loads(journal.read_text().splitlines()[0])


def test_journal_records_every_touched_file(log_dir: Path, tmp_path: Path) -> None:
    seg_bytes = (log_dir / SEG).read_bytes()
    st = os.stat(log_dir / SEG)
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    obj = _line1(result.journal_path)
    assert obj["format"] == "kafkatx-repair-journal" and obj["version"] == 1
    assert obj["log_dirs"] == [str(log_dir.resolve())]
    assert obj["backup_dir"] == "r.journal.d"
    assert obj["checksum"] == canonical_checksum(obj)
    ops = obj["operations"]
    first, second = ops[0], ops[1]
    assert first["path"] == SEG and first["op"] == "append"
    assert first["before"] == {"size": len(seg_bytes), "sha256": sha(seg_bytes), "uid": st.st_uid,
                               "gid": st.st_gid, "mode": st.st_mode & 0o7777}
    assert first["append"] == {"offset": len(seg_bytes), "length": len(MARKER), "sha256": sha(MARKER)}
    # the second append starts where the first ended
    assert second["before"]["sha256"] == sha(seg_bytes + MARKER)
    assert second["after"]["sha256"] == sha(seg_bytes + MARKER + MORE)
    create = next(o for o in ops if o["path"] == TXNIDX)
    assert create["before"] is None and create["like"] == SEG and create["temp"].endswith(".kafkatx-tmp")
    move = next(o for o in ops if o["path"] == SNAP)
    assert move["after"] is None and (result.backup_dir / move["backup"]).is_file()
    replace = next(o for o in ops if o["path"] == CKPT)
    assert replace["op"] == "replace" and (result.backup_dir / replace["backup"]).is_file()

    journal, statuses = read_journal(result.journal_path)
    assert len(journal.operations) == len(ops)
    assert [s.status for s in statuses] == ["applied"]


def test_journal_written_and_synced_before_first_write(log_dir: Path, tmp_path: Path, run_apply) -> None:
    before = tree(log_dir)
    journal = tmp_path / "r.journal"
    proc = run_apply(log_dir, journal, fault=0)  # killed right after the journal step
    assert proc.returncode == -9, proc.stderr
    assert "finished" not in proc.stdout
    assert tree(log_dir) == before  # not one byte of the log dir changed
    parsed, statuses = read_journal(journal)  # ... but the complete journal is there
    assert len(parsed.operations) == 9 and statuses == []


@pytest.mark.parametrize("edit", [
    lambda o: o["operations"][0]["before"].__setitem__("size", 10),
    lambda o: o["operations"][4].__setitem__("path", "orders-0/other.txnindex"),
    lambda o: o["log_dirs"].__setitem__(0, "/tmp"),
    lambda o: o.__setitem__("description", "harmless?"),
])
def test_any_edit_breaks_the_checksum(log_dir: Path, tmp_path: Path, edit) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    lines = result.journal_path.read_text().splitlines()
    obj = json.loads(lines[0])
    edit(obj)
    result.journal_path.write_text(json.dumps(obj) + "\n" + "\n".join(lines[1:]) + "\n")
    with pytest.raises(RepairError, match="r.journal: journal checksum mismatch"):
        read_journal(result.journal_path)


@pytest.mark.parametrize("content,match", [
    (b"", "not a kafkatx journal"),
    (b"\xff\xfe garbage", "not a kafkatx journal"),
    (b'{"format": "something-else"}\n', "not a kafkatx repair journal"),
    (b'{"format": "kafkatx-repair-journal", "version": 9}\n', "version 9 is not supported"),
])
def test_not_a_journal(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "x.journal"
    path.write_bytes(content)
    with pytest.raises(RepairError, match=match):
        read_journal(path)


def test_well_checksummed_but_inconsistent_journal_is_refused(log_dir: Path, tmp_path: Path) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    obj = _line1(result.journal_path)
    obj["operations"][0]["append"]["offset"] = 1  # does not start at the old end of file
    obj["checksum"] = canonical_checksum(obj)
    result.journal_path.write_text(json.dumps(obj) + "\n")
    with pytest.raises(RepairError, match="operation 0: fields do not describe a consistent append"):
        read_journal(result.journal_path)


def test_torn_status_line_is_ignored(log_dir: Path, tmp_path: Path) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    with open(result.journal_path, "a") as f:
        f.write('{"status": "und')
    _, statuses = read_journal(result.journal_path)
    assert [s.status for s in statuses] == ["applied"]


def test_default_journal_in_cwd(tmp_path: Path) -> None:
    ld = tmp_path / "logs"
    ld.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    path = default_journal_path([ld], NOW, cwd=work)
    assert path.parent == work.resolve()
    assert path.name == "kafkatx-repair-20231114T221320000Z.journal"


def test_default_journal_never_inside_log_dir(tmp_path: Path) -> None:
    ld = tmp_path / "data" / "logs"
    (ld / "t-0").mkdir(parents=True)
    path = default_journal_path([ld], NOW, cwd=ld / "t-0")
    assert path.parent == (tmp_path / "data").resolve()


def test_apply_without_journal_path_uses_cwd(log_dir: Path, tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "oncall"
    work.mkdir()
    monkeypatch.chdir(work)
    result = apply_plan(make_plan(log_dir), now=NOW)
    assert result.journal_path.parent == work.resolve()
    assert result.journal_path.is_file()
