"""Help and usage errors read well at 80 columns, in the user's words, not Python's.

Each of these failed before: help lines of 114 columns (the examples), ``FILE <list[Path]>`` and
``<int range>`` beside options, the command list cut with ``...`` even at 120 columns, pydantic's
``Input should be a valid integer`` / ``Value error, 'xml' is not one of`` as error text, and
``timeline --help`` / ``verify --help`` offering ``--bootstrap-server`` which they then refuse.
"""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from kafkatx.cli.main import app

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
PYTHON_WORDS = re.compile(r"<[^>\n]*>|list\[|\bPath\b|int range|float range|Input should|Value error")


def help_text(*args: str, columns: int = 80) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(columns), "TERM": "xterm"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_fits_80_columns_in_plain_words(command):
    text = help_text(*([command] if command else []))
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, f"{command or 'kafkatx'} --help: lines over 80 columns: {long}"
    # the only angle brackets allowed are inside prose that quotes a file name pattern, never a type
    words = [m for m in PYTHON_WORDS.findall(text) if m not in ("<offset>", "<UTC time>")]
    assert not words, f"{command or 'kafkatx'} --help shows Python type names: {words}"


@pytest.mark.parametrize("columns", [80, 120])
def test_command_list_is_not_cut(columns):
    text = help_text(columns=columns)
    listing = text.split("Commands:", 1)[1]
    assert "..." not in listing
    # every command's first sentence is whole
    assert "Find transactions that hold a partition's LSO back." in " ".join(listing.split())


@pytest.mark.parametrize(("args", "said"), [
    (["find-hanging", "--log-dir", "fixtures/hanging", "--now", "soon"], "'soon' is not a whole number"),
    (["find-hanging", "--log-dir", "fixtures/hanging", "--topic", "t", "--partition", "-1"],
     "'-1' is below the minimum, 0"),
    (["lag", "--log-dir", "fixtures/hanging", "--timeout", "abc"], "'abc' is not a number"),
    (["list-txn", "--log-dir", "fixtures/hanging", "--format", "xml"],
     "'xml' is not one of text, table, json, jsonl, yaml"),
])
def test_usage_errors_in_plain_words(args, said):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert said in result.output
    assert not PYTHON_WORDS.search(result.output.split("Error:", 1)[1]), result.output


@pytest.mark.parametrize("command", ["timeline", "verify"])
def test_offline_only_commands_do_not_offer_online_flags(command):
    text = help_text(command)
    for flag in ("--bootstrap-server", "--command-config", "--profile", "--timeout"):
        assert flag not in text, f"{command} --help lists {flag}, which it refuses"
    refused = CliRunner().invoke(app, [command, "--bootstrap-server", "h:9092"])
    assert refused.exit_code == 2 and "no online form" in refused.stderr
