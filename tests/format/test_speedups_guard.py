"""The compiled fast path must be built wherever it can be.

Kept out of test_speedups.py on purpose: that module skips as a whole when the extension is
missing (``pytest.importorskip``), and a guard inside it would be skipped with everything else.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

# every compiled module setup.py declares (besides kafkatx.storage._mapguard, tests/storage/test_mapguard.py's)
COMPILED = ("kafkatx.format._batch", "kafkatx.format._fold", "kafkatx.format._txn_log", "kafkatx.storage._replay",
            "kafkatx.coordinator._coordinator", "kafkatx.render._dump")


def _pure_python_requested() -> bool:
    return os.environ.get("KAFKATX_PURE_PYTHON", "") not in ("", "0")


def test_extension_is_built_when_a_compiler_is_available() -> None:
    # CI builds the extension (.ci/run); with `cc` on PATH a missing .so is a build bug, not a
    # reason to silently test only the Python path. It fails, never skips, in that case.
    if _pure_python_requested():
        pytest.skip("KAFKATX_PURE_PYTHON is set: the pure-Python path was asked for")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on PATH: the pure-Python path is the supported fallback")
    missing = [name for name in COMPILED if importlib.util.find_spec(name) is None]
    assert not missing, (
        f"{', '.join(missing)} not built although cc is on PATH: run `python setup.py build_ext "
        "--inplace` (or `pip install -e .`)")


def test_every_layer_uses_its_compiled_module_when_built() -> None:
    built = [name for name in COMPILED if importlib.util.find_spec(name) is not None]
    if _pure_python_requested() or not built:
        pytest.skip("the extension is not in use for this run")
    import kafkatx.coordinator.state_manager
    import kafkatx.format.segment_fold
    import kafkatx.format.txn_log
    import kafkatx.render.kafka_dump
    import kafkatx.storage.producer_state  # noqa: F401  (each binds its compiled module on import)
    from kafkatx.format import compiled

    in_use = compiled.modules()
    assert [name for name in built if name not in in_use] == [], (
        "built but the Python module fell back to pure Python (its setup refused the classes?)")
    with compiled.pure_python():
        assert compiled.modules() == {}
    assert compiled.modules() == in_use


@pytest.mark.parametrize("name", COMPILED)
def test_each_compiled_module_imports_on_its_own(name: str) -> None:
    """A compiled module needs no other (they share only the header, kafkatx/format/_wire.h): imported
    alone in a fresh interpreter, no other compiled module is loaded, and its module state is set up."""
    import subprocess
    import sys
    from pathlib import Path

    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not built")
    code = (f"import sys, {name} as m; others = sorted(n for n in {list(COMPILED)!r} if n in sys.modules and n != {name!r}); "
            "print(others, m.HEADER_SIZE, m.HW_CRC32C in (0, 1))")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.stdout.split() == ["[]", "61", "True"]
