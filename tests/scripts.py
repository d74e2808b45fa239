"""The repository's generator scripts (completions/generate.py, man/generate.py) loaded as modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem + "_" + path.parent.name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
