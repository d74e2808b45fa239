"""The default journal name never collides with an earlier run's.

It is stamped with ``--now``, so the ``--execute`` line abort-hanging prints (which carries ``--now``)
was refused with ``journal already exists`` when run again after an undo. Now the next free name is
taken (``-2``) and the earlier journal is left as it was.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.repair import default_journal_path

REPO = Path(__file__).resolve().parents[2]
NOW = "1700007200000"


def test_next_free_name(tmp_path: Path) -> None:
    ld = tmp_path / "logs"
    ld.mkdir()
    first = default_journal_path([ld], int(NOW), cwd=tmp_path)
    first.write_text("{}")
    second = default_journal_path([ld], int(NOW), cwd=tmp_path)
    assert second.name == first.name.replace(".journal", "-2.journal")
    (tmp_path / (second.name + ".d")).mkdir()  # a backup dir alone also takes the name
    assert default_journal_path([ld], int(NOW), cwd=tmp_path).name == first.name.replace(".journal", "-3.journal")


def test_execute_undo_execute_again(tmp_path: Path, monkeypatch) -> None:
    ld = tmp_path / "hanging"
    shutil.copytree(REPO / "fixtures" / "hanging", ld, symlinks=True)
    work = tmp_path / "oncall"
    work.mkdir()
    monkeypatch.chdir(work)
    # inventory-sync (1005): orphaned on orders-1 (fixtures/README.md): one ABORT marker to write
    args = ["abort-hanging", "--log-dir", str(ld), "--transactional-id", "inventory-sync", "--now", NOW, "--execute"]

    def journal_of(result) -> Path:
        found = re.search(r"journal: (\S+\.journal) ", result.stderr)
        assert found, result.stderr
        return Path(found.group(1))

    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.stderr
    journal = journal_of(first)
    undone = CliRunner().invoke(app, ["undo", str(journal)])
    assert undone.exit_code == 0, undone.stderr
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.stderr
    second = journal_of(again)
    assert second != journal and journal.exists() and second.exists()
    assert second.name == journal.name.replace(".journal", "-2.journal")
