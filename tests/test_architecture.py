"""Imports point one way, the rooms after Kafka's own split:
format -> storage -> coordinator -> checks -> session -> repair -> cluster -> render -> spark -> cli.

A module may import kafkatx modules of its own layer or of layers to its left
(plus kafkatx.errors, kafkatx.rows and the package root). The rooms below repair/ never import
typer, rich, confluent_kafka, kafka or pyspark; pyspark is imported only inside
functions under spark/ so ``kafkatx --help`` stays fast. (architecture.md)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "kafkatx"
LAYERS = ["format", "storage", "coordinator", "checks", "session", "repair", "cluster", "render", "spark", "cli"]
ANYWHERE = {"errors", "rows", ""}  # kafkatx.errors, the result rows and the package root (__version__)
PURE_LAYERS = {"format", "storage", "coordinator", "checks", "session"}
# msgspec is allowed: its Struct is the record type of every layer (a required dependency; a class costs
# ~0.1 ms to create and an instance ~0.2 µs, a frozen slotted dataclass ~1-2 ms and ~2.5 µs).
FORBIDDEN_IN_PURE = {"typer", "rich", "confluent_kafka", "kafka", "pyspark", "click", "prometheus_client"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return ""
    if parts[-1] == "__main__":  # an entry point (python -m kafkatx, python -m kafkatx.spark) is CLI
        return "cli"
    return parts[1]


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = _module_name(path)
    is_pkg = path.name == "__init__.py"
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_func: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_func or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_func) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append((target, child.lineno, in_func))
                # "from kafkatx import log" imports a sub-package
                if target == "kafkatx":
                    found.extend((f"kafkatx.{a.name}", child.lineno, in_func) for a in child.names
                                 if (PKG / a.name).is_dir() or (PKG / f"{a.name}.py").is_file())
            visit(child, inner)

    visit(tree, False)
    return found


SOURCES = sorted(PKG.rglob("*.py"))


def test_there_are_modules_to_check():
    assert len(SOURCES) > 10
    assert _layer("kafkatx.format.record_batch") == "format"
    assert _layer("kafkatx.errors") == "errors"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_imports_point_down_the_layers(path):
    module = _module_name(path)
    layer = _layer(module)
    problems = []
    for target, line, in_func in _imports(path):
        top = target.split(".")[0]
        if top == "kafkatx":
            target_layer = _layer(target)
            if target_layer in ANYWHERE or layer in ANYWHERE:
                continue
            if target_layer not in LAYERS or layer not in LAYERS:
                problems.append(f"line {line}: {target} (layer {target_layer!r}) from layer {layer!r} is not "
                                "in the layer list; add it to architecture.md and this test")
            elif LAYERS.index(target_layer) > LAYERS.index(layer):
                problems.append(f"line {line}: {layer}/ imports {target} ({target_layer}/ is to its right)")
        if layer in PURE_LAYERS and top in FORBIDDEN_IN_PURE:
            problems.append(f"line {line}: {layer}/ must not import {top}")
        if top == "pyspark" and (layer != "spark" or not in_func):
            problems.append(f"line {line}: pyspark imported {'at module level' if not in_func else 'outside spark/'}")
    assert not problems, f"{module}:\n" + "\n".join(problems)


def test_checker_catches_a_wrong_arrow(tmp_path, monkeypatch):
    """The checker itself: a fake format module importing the CLI must be flagged."""
    fake = PKG / "format" / "_arch_probe.py"
    fake.write_text("from kafkatx.cli import main\nimport typer\n\ndef f():\n    import pyspark\n")
    try:
        with pytest.raises(AssertionError) as info:
            test_imports_point_down_the_layers(fake)
        text = str(info.value)
        assert "format/ imports kafkatx.cli" in text and "must not import typer" in text
        assert "pyspark imported outside spark/" in text
    finally:
        fake.unlink()


# ------------------------------------------------------------------ the compiled modules
# One compiled module per Python module it speeds up, in that module's layer (kafkatx/format/_wire.h
# lists them). They follow the same arrow: a module's C source includes headers of its own layer or
# layers to its left only, imports (PyImport_*) no kafkatx module to its right, and is imported from
# Python only by its own layer or layers to its right, so every registration of a higher layer's
# classes with compiled code is an import this checker sees.

C_SOURCES = sorted(PKG.rglob("*.c"))
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_PYIMPORT = re.compile(r'\bPyImport_\w+\s*\(\s*"([^"]+)"')


def _c_module(path: Path) -> str:
    return _module_name(path)


def test_compiled_modules_are_in_layers() -> None:
    assert {_c_module(p) for p in C_SOURCES} >= {"kafkatx.format._batch", "kafkatx.format._fold",
                                                  "kafkatx.format._txn_log", "kafkatx.storage._replay",
                                                  "kafkatx.render._dump", "kafkatx.storage._mapguard",
                                                  "kafkatx.storage._partition"}
    for path in C_SOURCES:
        assert _layer(_c_module(path)) in LAYERS, f"{path}: a compiled module outside the layer folders"


@pytest.mark.parametrize("path", C_SOURCES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_compiled_sources_point_down_the_layers(path: Path) -> None:
    layer = _layer(_c_module(path))
    text = path.read_text()
    problems = []
    for inc in _INCLUDE.findall(text):
        target = (path.parent / inc).resolve()
        assert target.is_file(), f"{path}: #include \"{inc}\" is not a file of the package"
        target_layer = _layer(_module_name(target))
        if LAYERS.index(target_layer) > LAYERS.index(layer):
            problems.append(f'#include "{inc}" ({target_layer}/ is to the right of {layer}/)')
    for name in _PYIMPORT.findall(text):
        if name.split(".")[0] == "kafkatx" and _layer(name) not in ANYWHERE:
            if LAYERS.index(_layer(name)) > LAYERS.index(layer):
                problems.append(f"imports {name} ({_layer(name)}/ is to the right of {layer}/)")
    assert not problems, f"{path}:\n" + "\n".join(problems)


def test_compiled_modules_are_imported_from_their_layer_or_above_and_by_name() -> None:
    compiled = {_c_module(p) for p in C_SOURCES}
    importers: dict[str, list[str]] = {name: [] for name in compiled}
    for path in SOURCES:
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                # "from kafkatx.format import _batch": the compiled module is the imported name
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for hit in (n for n in names if n in compiled):
                importers[hit].append(module)
                assert LAYERS.index(_layer(hit)) <= LAYERS.index(_layer(module)), (
                    f"{module} ({_layer(module)}/) imports {hit} ({_layer(hit)}/ is to its right)")
    unused = sorted(name for name, who in importers.items() if not who)
    assert not unused, f"compiled modules no Python module imports by name: {unused}"


def test_checker_catches_a_wrong_arrow_in_c() -> None:
    """A fake format-layer C source including a storage source and importing the CLI must be flagged."""
    fake = PKG / "format" / "_arch_probe.c"
    fake.write_text('#include "_wire.h"\n#include "../storage/_replay.c"\n'
                    'static void f(void) { PyImport_ImportModule("kafkatx.cli.main"); }\n')
    try:
        with pytest.raises(AssertionError) as info:
            test_compiled_sources_point_down_the_layers(fake)
        text = str(info.value)
        assert '"../storage/_replay.c" (storage/ is to the right of format/)' in text
        assert "imports kafkatx.cli.main (cli/ is to the right of format/)" in text
    finally:
        fake.unlink()


def test_setup_py_builds_every_compiled_module() -> None:
    setup = (PKG.parent / "setup.py").read_text()
    for path in C_SOURCES:
        assert f'"{_c_module(path)}"' in setup, f"setup.py does not build {_c_module(path)}"
