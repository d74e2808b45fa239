"""The modules of ``kafkatx/format`` import each other one way: no module reaches, at import or inside a
function, a module that imports it (a CRC helper reaching up into the batch framing at run time is the kind
of loop this keeps out). Each compiled module is bound by the Python module that uses it
(``kafkatx.format.compiled.bind``), never reached through another."""

from __future__ import annotations

import ast
from pathlib import Path

FORMAT = Path(__file__).resolve().parents[2] / "kafkatx" / "format"


def _format_imports(path: Path) -> set[str]:
    """The ``kafkatx.format`` modules (``.py``) ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "kafkatx.format":
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kafkatx.format."):
            found.add(node.module.split(".")[2])  # type: ignore[union-attr]
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("kafkatx.format."))
    return {m for m in found if (FORMAT / f"{m}.py").is_file()} - {path.stem}


def test_format_modules_import_each_other_without_a_loop() -> None:
    graph = {p.stem: _format_imports(p) for p in FORMAT.glob("*.py") if p.stem != "__init__"}
    assert "record_batch" in graph["segment_fold"] and "_primitives" in graph["record_batch"]  # it sees imports
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import loop in kafkatx/format: {' -> '.join((*path, module))}"
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
