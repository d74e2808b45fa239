"""The root group imports a command's module only when that command runs (start-up time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

from kafkatx.cli.main import COMMAND_MODULES, LAZY_COMMANDS, app

ROOT = Path(__file__).resolve().parents[2]

ANALYSIS = ("kafkatx.coordinator", "kafkatx.checks", "kafkatx.session", "kafkatx.storage.replay")
PROBE = f"""
import sys
from kafkatx.cli.main import main
code = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.startswith(("kafkatx.cli.", *{ANALYSIS!r}, "kafkatx.repair", "yaml",
                                                        "kafkatx.cluster", "confluent_kafka", "pyspark", "orjson", "msgspec",
                                                        "json")))
print("MODULES", ",".join(mods), file=sys.stderr)
"""


def _modules(*args: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=False)
    line = [x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return set(filter(None, line[len("MODULES "):].split(",")))


def test_version_imports_no_command_module() -> None:
    mods = _modules("--version")
    assert not {f"kafkatx.cli.{m}" for m in COMMAND_MODULES} & mods
    assert not any(m.startswith((*ANALYSIS, "yaml", "confluent_kafka", "pyspark")) for m in mods)


def test_find_hanging_imports_only_its_own_module() -> None:
    mods = _modules("find-hanging", "--log-dir", str(ROOT / "fixtures" / "hanging"), "--now", "1700007200000",
                    "--format", "jsonl")
    assert "kafkatx.cli.txn" in mods
    assert not {"kafkatx.cli.dump", "kafkatx.cli.scan"} & mods
    assert not any(m.startswith(("confluent_kafka", "pyspark", "yaml")) for m in mods)


def test_json_libraries_load_only_for_json_output() -> None:
    """orjson (json/jsonl/yaml rows) costs start-up time: a command writing text for a person does not
    import it, nor the json module. (msgspec is the library's record type, a Struct per decoded entry
    and row, so a command that decodes loads it; ``--version`` decodes nothing and loads neither.)"""
    seg = str(ROOT / "fixtures" / "hanging" / "orders-0" / "00000000000000000000.log")
    hanging = ("find-hanging", "--log-dir", str(ROOT / "fixtures" / "hanging"), "--now", "1700007200000")
    for args in (hanging, ("dump-segment", seg), ("--version",)):
        mods = _modules(*args)
        assert not {"orjson", "json"} & mods, (args, mods)
    assert "msgspec" not in _modules("--version")
    assert "orjson" in _modules(*hanging, "--format", "jsonl")
    # dump-segment of a data partition loads neither verify (dump-index --verify) nor the replay
    assert not any(m.startswith(ANALYSIS) for m in _modules("dump-segment", seg))
    assert "msgspec" in _modules("dump-segment", "--format", "jsonl", seg)


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    group = typer.main.get_command(app)
    commands = group.commands  # type: ignore[attr-defined]  # loads every module
    for name, cmd in commands.items():
        assert LAZY_COMMANDS.get(name) is not None, f"{name} is missing from LAZY_COMMANDS"
        assert cmd.callback.__module__ == f"kafkatx.cli.{LAZY_COMMANDS[name]}", name
    assert set(LAZY_COMMANDS) <= set(commands)
