"""The rooms below the CLI (format/, storage/, coordinator/, checks/, session/, rows.py) are type-checked as ``mypy --strict`` checks them, by `.ci/run`'s plain ``mypy kafkatx``.

pyproject.toml spells the strict flags out per module, because ``strict = true`` in an overrides
section is not per-module (mypy's config parser turns strict mode on for the whole package). These
tests read the configuration through mypy's own option parser, so they hold for the mypy CI runs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

mypy_main = pytest.importorskip("mypy.main", reason="mypy is not installed (it is in the test extras)")

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _options(*args: str):
    _, options = mypy_main.process_options([*args, "-c", "pass"])
    return options


def _strict_per_module_flags() -> dict[str, object]:
    """What ``--strict`` changes from mypy's defaults, among the options mypy takes per module."""
    from mypy.options import PER_MODULE_OPTIONS

    strict, default = _options("--config-file", "", "--strict"), _options("--config-file", "")
    names = [n for n in PER_MODULE_OPTIONS if hasattr(strict, n)]
    return {n: getattr(strict, n) for n in names if getattr(strict, n) != getattr(default, n)}


def test_strict_changes_the_flags_we_expect_it_to():
    flags = _strict_per_module_flags()
    # the ones that matter most here: every def typed, no Any returned, no implicit re-export
    assert flags["disallow_untyped_defs"] is True
    assert flags["warn_return_any"] is True
    assert flags["implicit_reexport"] is False
    assert len(flags) >= 10


def _strict_overrides() -> list[str]:
    """The module patterns of pyproject's overrides that type-check a package strictly."""
    with PYPROJECT.open("rb") as fh:
        overrides = tomllib.load(fh)["tool"]["mypy"].get("overrides", [])
    found: list[str] = []
    for block in overrides:
        if block.get("disallow_untyped_defs") or block.get("strict"):
            mods = block["module"]
            found.extend([mods] if isinstance(mods, str) else mods)
    return found


def test_the_rooms_below_the_cli_are_strict():
    assert {"kafkatx.format.*", "kafkatx.storage.*", "kafkatx.coordinator.*", "kafkatx.checks.*",
            "kafkatx.session.*", "kafkatx.rows"} <= set(_strict_overrides())


@pytest.mark.parametrize("pattern", _strict_overrides())
def test_every_strict_package_gets_every_strict_flag(pattern):
    base = _options("--config-file", str(PYPROJECT))
    for module in (pattern.removesuffix(".*"), pattern.replace("*", "any_module")):
        options = base.clone_for_module(module)
        wrong = {n: getattr(options, n) for n, v in _strict_per_module_flags().items() if getattr(options, n) != v}
        assert not wrong, (f"{module} is not checked as --strict would check it: {wrong} (spell out every "
                           "flag of test_strict_per_module_flags in its [[tool.mypy.overrides]] block)")


def test_the_global_strict_only_flag_is_set():
    assert _options("--config-file", str(PYPROJECT)).warn_redundant_casts is True


def test_strict_does_not_leak_to_the_other_layers():
    """A ``strict = true`` in an overrides section would turn strict mode on everywhere (the CLI is not
    strict-clean): the per-module flags stay per module."""
    options = _options("--config-file", str(PYPROJECT))
    why = ("strict mode is on for the whole package: a `strict = true` in an overrides block does that "
           "(mypy's config parser); spell the flags out instead")
    assert options.disallow_untyped_defs is False, why
    assert options.clone_for_module("kafkatx.cli.main").disallow_untyped_defs is False, why
