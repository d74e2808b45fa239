"""The compiled fast path must be built wherever it can be.

Kept out of test_speedups.py on purpose: that module skips as a whole when the extension is
missing (``pytest.importorskip``), and a guard inside it would be skipped with everything else.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def _pure_python_requested() -> bool:
    return os.environ.get("KAFKATX_PURE_PYTHON", "") not in ("", "0")


def test_extension_is_built_when_a_compiler_is_available() -> None:
    # CI builds the extension (.ci/run); with `cc` on PATH a missing .so is a build bug, not a
    # reason to silently test only the Python path. It fails, never skips, in that case.
    if _pure_python_requested():
        pytest.skip("KAFKATX_PURE_PYTHON is set: the pure-Python path was asked for")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on PATH: the pure-Python path is the supported fallback")
    assert importlib.util.find_spec("kafkatx.format._speedups") is not None, (
        "kafkatx.format._speedups is not built although cc is on PATH: run `python setup.py build_ext "
        "--inplace` (or `pip install -e .`)")


def test_record_batch_uses_the_extension_when_built() -> None:
    if _pure_python_requested() or importlib.util.find_spec("kafkatx.format._speedups") is None:
        pytest.skip("the extension is not in use for this run")
    import kafkatx.format.record_batch as rb

    assert rb._speedups is not None, "the extension is built but record_batch fell back to pure Python"
