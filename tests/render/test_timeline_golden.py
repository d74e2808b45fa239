"""Golden files of ``kafkatx timeline``'s text at 80 and 120 columns (fixtures/hanging, fixed --now).

A change of look is a reviewed diff: regenerate with
``KAFKATX_REGEN_GOLDEN=1 python -m pytest tests/render/test_timeline_golden.py`` and commit the files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
NOW = "1700007200000"
REGEN = os.environ.get("KAFKATX_REGEN_GOLDEN", "") not in ("", "0")


def _render(columns: int) -> str:
    env = {"COLUMNS": str(columns), "LINES": "50", "NO_COLOR": None, "FORCE_COLOR": None, "TERM": "dumb"}
    result = CliRunner().invoke(app, ["timeline", "--log-dir", str(REPO / "fixtures" / "hanging"), "--now", NOW],
                                env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_timeline_text_matches_golden(columns):
    text = _render(columns)
    assert "\x1b[" not in text  # not a terminal: no ANSI
    assert max(len(line) for line in text.splitlines()) <= columns  # every line fits, none wraps
    path = GOLDEN / f"timeline-hanging-{columns}.txt"
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with KAFKATX_REGEN_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{path.name} differs: review, then regenerate with KAFKATX_REGEN_GOLDEN=1"


def test_golden_files_show_what_the_fixture_holds():
    """The golden text itself (not only its bytes) says what the fixture README says: each partition with
    hanging transactions is headed by its offsets, and each hanging transaction has its own line."""
    text = (GOLDEN / "timeline-hanging-80.txt").read_text()
    assert "orders-0  start 0  LSO 137  HW 186  end 186  lag 49" in text
    assert "! timed-out: 1004 stale-loader" in text
    assert "! orphaned: 1007 (no id)" in text
    assert text.count("\n  ! ") == 8  # fixtures/expected/hanging/find-hanging.json has 8 rows


def test_colour_on_a_terminal_and_none_with_no_color():
    args = ["timeline", "--log-dir", str(REPO / "fixtures" / "hanging"), "--now", NOW, "--topic", "orders"]
    coloured = CliRunner().invoke(app, args, env={"FORCE_COLOR": "1", "NO_COLOR": None, "COLUMNS": "80"},
                                  catch_exceptions=False).stdout
    assert "\x1b[31m" in coloured and "\x1b[32m" in coloured  # red hanging / aborted, green committed
    plain = CliRunner().invoke(app, args, env={"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "80"},
                               catch_exceptions=False).stdout
    import re

    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", plain)  # NO_COLOR: no colour (bold/dim may stay)
    assert re.sub(r"\x1b\[[0-9;]*m", "", plain) == re.sub(r"\x1b\[[0-9;]*m", "", coloured)


def test_readme_sample_is_the_golden_text():
    readme = (REPO / "README.md").read_text()
    block = readme.split("### The timeline at 80 columns", 1)[1].split("```", 2)[1]
    golden = (GOLDEN / "timeline-hanging-80.txt").read_text().splitlines()
    lines = [line for line in block.splitlines() if line and line != "..."]
    assert len(lines) > 10
    assert [line for line in lines if line not in golden] == []  # regenerate the README excerpt too


def test_help_has_an_example():
    result = CliRunner().invoke(app, ["timeline", "--help"], env={"COLUMNS": "80"})
    assert "Example" in result.stdout
    assert "    kafkatx timeline --log-dir /var/lib/kafka/data --html timeline.html" in result.stdout
