"""Every package of kafkatx is type-checked as ``mypy --strict`` checks it, by `.ci/run`'s plain ``mypy kafkatx``.

pyproject.toml says ``strict = true`` once, in its global ``[tool.mypy]`` section (``strict`` is not taken
per module in an overrides section: mypy's config parser would turn it on for the whole package from
there, so an override that loosened a package would silently not). These tests read the configuration
through mypy's own option parser, so they hold for the mypy CI runs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

mypy_main = pytest.importorskip("mypy.main", reason="mypy is not installed (it is in the test extras)")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"

# kafkatx's packages (each folder with an __init__.py) and its top-level modules
PACKAGES = sorted(p.parent.name for p in (ROOT / "kafkatx").glob("*/__init__.py"))
MODULES = sorted(p.stem for p in (ROOT / "kafkatx").glob("*.py") if p.stem != "__init__")


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


def test_the_packages_are_found():
    assert {"format", "storage", "coordinator", "checks", "session", "repair", "cluster", "render", "spark",
            "cli"} <= set(PACKAGES)
    assert {"rows", "errors"} <= set(MODULES)


def test_strict_is_said_once_in_the_global_section():
    with PYPROJECT.open("rb") as fh:
        mypy = tomllib.load(fh)["tool"]["mypy"]
    assert mypy.get("strict") is True
    assert not any("strict" in block for block in mypy.get("overrides", [])), \
        "`strict` in an overrides section is not per module (mypy's config parser): spell out the one flag"


@pytest.mark.parametrize("module", [*(f"kafkatx.{p}" for p in PACKAGES), *(f"kafkatx.{m}" for m in MODULES)])
def test_every_package_gets_every_strict_flag(module):
    base = _options("--config-file", str(PYPROJECT))
    inside = [f"{module}.any_module"] if module.removeprefix("kafkatx.") in PACKAGES else []
    for name in (module, *inside):
        options = base.clone_for_module(name)
        wrong = {n: getattr(options, n) for n, v in _strict_per_module_flags().items() if getattr(options, n) != v}
        assert not wrong, (f"{name} is not checked as --strict would check it: {wrong} (an override in "
                           "pyproject.toml's [tool.mypy] loosens it)")


def test_the_global_strict_only_flags_are_set():
    options = _options("--config-file", str(PYPROJECT))
    assert options.warn_redundant_casts is True
