"""kafkatx.cli.fastparams against Typer's own (pydantic) conversion, for every option of every command.

The oracle is Typer itself: ``typer._coercion.build_runtime_param`` on the same parameter. For
each value of a corpus (good values, near misses pydantic accepts or words its own way, bad
values), the fast conversion must give the same value of the same type, or raise the same
error with the same message.
"""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

from kafkatx.cli import fastparams
from kafkatx.cli.main import app

pytestmark = pytest.mark.skipif(fastparams.RuntimeParam is None, reason="this Typer has no pydantic conversion layer")

CORPUS = ["", " ", "0", "7", "-3", "+4", " 7", "7 ", "1_000", "007", "1e3", "1.5", "1.", ".5", "-0.25", "nan",
          "inf", "99999999999999999999", "abc", "x y", "-", "table", "TABLE", "Json", "jsonl", "yaml", "text",
          "marker", "drop-snapshots", "utf8", "hex", "base64", "auto", "c", "python", "true", "no",
          "fixtures/hanging", "/nonexistent/kafkatx", "naïve", "\x00bad"]


def _params() -> list[tuple[str, Any, Any]]:
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    out = [("kafkatx", p, group) for p in group.get_params(ctx)]
    for name, cmd in sorted(group.commands.items()):  # type: ignore[attr-defined]
        out += [(name, p, cmd) for p in cmd.get_params(typer.Context(cmd, parent=ctx))]
    return out


PARAMS = _params()


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        got = runtime.coerce(value, param=param, ctx=ctx)
    except Exception as err:  # noqa: BLE001 - the error itself is what is compared
        # the words differ on purpose: kafkatx says Typer's pydantic messages in plain words (test_help.py)
        return "error", type(err).__name__
    return "value", (type(got).__name__, [type(v).__name__ for v in got] if isinstance(got, list) else None, got)


def test_every_simple_option_takes_the_fast_path() -> None:
    """What start-up gains: no option of any command needs pydantic to convert a value."""
    slow = [f"{cmd} {p.name}: {p.type_descriptor.annotation}" for cmd, p, _ in PARAMS
            if fastparams.fast_runtime_param(p) is None]
    assert slow == []


@pytest.mark.parametrize(("cmd_name", "param", "cmd"), PARAMS, ids=[f"{c}-{p.name}" for c, p, _ in PARAMS])
def test_fast_conversion_equals_typers(cmd_name: str, param: Any, cmd: Any) -> None:
    from typer._coercion import build_runtime_param

    fast = fastparams.fast_runtime_param(param)
    assert fast is not None
    slow = build_runtime_param(param.type_descriptor)
    ctx = typer.Context(cmd, info_name=cmd_name)
    annotation = param.type_descriptor.annotation
    values: list[Any] = list(CORPUS)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values += [m.value for m in annotation] + [m.value.upper() for m in annotation] + list(annotation)
    values += [True, False, 3, 2.5, Path("fixtures")]
    if param.multiple or param.nargs == -1:
        values = [(v,) for v in values if not isinstance(v, bool)] + [(), ("a", "b"), ("7", "x"),
                                                                       ("fixtures/hanging", "fixtures/clean")]
    for value in values:
        assert _outcome(fast, value, param, ctx) == _outcome(slow, value, param, ctx), (cmd_name, param.name, value)


@pytest.mark.parametrize(("argv", "code"), [
    (["find-hanging", "--log-dir", "fixtures/hanging", "--now", "1700007200000", "--format", "json"], 1),
    (["verify", "--log-dir", "fixtures/clean", "--format", "json"], 0),
    (["dump-segment", "fixtures/clean/orders-0/00000000000000000000.log", "--format", "jsonl"], 0),
    (["lag", "--log-dir", "fixtures/clean"], 0),
])
def test_a_command_does_not_import_pydantic(argv: list[str], code: int) -> None:
    """The start-up gain as a fact: a whole command (watch-capable or plain) never imports pydantic."""
    script = ("import sys\nfrom kafkatx.cli.main import main\n"
              f"rc = main({argv!r})\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')), rc)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == f"[] {code}"


def test_a_bad_value_is_said_in_plain_words() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["find-hanging", "--log-dir", "fixtures/hanging", "--now", "soon"])
    assert result.exit_code == 2
    assert "Invalid value for '--now': 'soon' is not a whole number" in result.output
    assert "Input should be" not in result.output
