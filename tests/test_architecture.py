"""Imports point one way: format -> log -> txn -> repair -> cluster -> render -> spark -> cli.

A module may import kafkatx modules of its own layer or of layers to its left
(plus kafkatx.errors and the package root). format/, log/ and txn/ never import
typer, rich, confluent_kafka, kafka or pyspark; pyspark is imported only inside
functions under spark/ so ``kafkatx --help`` stays fast. (architecture.md)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "kafkatx"
LAYERS = ["format", "log", "txn", "repair", "cluster", "render", "spark", "cli"]
ANYWHERE = {"errors", ""}  # kafkatx.errors and the package root (__version__)
PURE_LAYERS = {"format", "log", "txn"}
FORBIDDEN_IN_PURE = {"typer", "rich", "confluent_kafka", "kafka", "pyspark", "click", "prometheus_client", "msgspec"}


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
