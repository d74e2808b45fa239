"""The man pages under man/ are what man/generate.py makes from the app now, and read as man pages."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _generator():
    pytest.importorskip("click_man", reason="click-man is not installed (pip install 'kafkatx[test]')")
    return load_script("man/generate.py")


def test_man_pages_are_fresh_one_per_command():
    import typer.main

    from kafkatx.cli.main import app

    pages = _generator().pages()
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert {p.name for p in pages} == {"kafkatx.1"} | {f"kafkatx-{name}.1" for name in commands}
    for path, text in pages.items():
        assert path.exists(), f"{path.name} missing: run python man/generate.py"
        assert path.read_text() == text, f"{path.name} is stale: run python man/generate.py"
    on_disk = {p.name for p in (REPO / "man").glob("*.1")}
    assert on_disk == {p.name for p in pages}, "man/ holds a page of no command: run python man/generate.py"


def test_a_page_lists_the_commands_options_and_renders():
    text = (REPO / "man" / "kafkatx-find-hanging.1").read_text()
    assert text.startswith('.TH "KAFKATX FIND-HANGING" "1"')
    assert r"\fB\-\-max\-transaction\-timeout\fP" in text and ".SH OPTIONS" in text
    if shutil.which("man") is None:
        pytest.skip("no man command on this machine to render the page")
    shown = subprocess.run(["man", "-l", str(REPO / "man" / "kafkatx-find-hanging.1")], capture_output=True,
                           text=True, env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin", "MANPAGER": "cat"})
    assert shown.returncode == 0 and "--max-transaction-timeout" in shown.stdout.replace("\u2010", "-")
