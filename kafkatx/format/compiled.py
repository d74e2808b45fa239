"""The one switch for kafkatx's compiled modules (the optional C extensions).

kafkatx's C code is one compiled module per Python module it speeds up, in that module's layer
(``kafkatx/format/_wire.h`` lists them). Each Python module imports its compiled twin itself (so
``tests/test_architecture.py`` sees the dependency), then hands it to :func:`bind`, which

* returns ``None`` when the module is not built, when ``KAFKATX_PURE_PYTHON`` is set (to anything
  but ``""`` or ``"0"``), or when its ``setup`` call refuses the Python classes it is given
  (they no longer match the C code);
* records where the module keeps it (the owning module's global), so that :func:`pure_python`
  can turn every compiled path off at once and back on.

The Python module reads its global on every call (``c = _batch``; ``if c is not None: ...``), so
the switch costs nothing on the hot paths. Results and errors are the same either way
(``tests/format/test_speedups.py`` and the other twin tests run both).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TypeVar

M = TypeVar("M", bound=ModuleType)
PURE_PYTHON_ENV = "KAFKATX_PURE_PYTHON"

# (owning module's name, the global it keeps the compiled module in, the compiled module)
_BOUND: list[tuple[str, str, ModuleType]] = []


def pure_python_requested() -> bool:
    """Whether ``KAFKATX_PURE_PYTHON`` asks for the pure-Python paths."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def bind(owner: str, attr: str, module: M | None, setup: Callable[[M], object] | None = None) -> M | None:
    """The compiled ``module`` the Python module ``owner`` keeps in its global ``attr``, or None.

    ``module`` is what the owner's ``try: from ... import _x / except ImportError: None`` got;
    ``setup(module)`` registers the owner's classes with it (a TypeError or AttributeError from
    it: the classes and the C code disagree, and the pure-Python path is used).
    """
    if module is None or pure_python_requested():
        return None
    if setup is not None:
        try:
            setup(module)
        except (TypeError, AttributeError):  # pragma: no cover - the classes no longer match the C code
            return None
    _BOUND.append((owner, attr, module))
    return module


def modules() -> dict[str, ModuleType]:
    """The compiled modules in use now, by name (empty under :func:`pure_python` or without a build)."""
    found: dict[str, ModuleType] = {}
    for owner, attr, module in _BOUND:
        if getattr(sys.modules.get(owner), attr, None) is module:
            found[module.__name__] = module
    return found


def active(name: str) -> bool:
    """Whether the compiled module ``name`` (e.g. ``"kafkatx.format._batch"``) is in use now."""
    return name in modules()


@contextmanager
def pure_python(pure: bool = True) -> Iterator[None]:
    """Every layer on its pure-Python path inside the block (what ``KAFKATX_PURE_PYTHON=1`` selects
    for a whole process); the compiled modules in use before are back afterwards. ``pure=False``:
    nothing changes (tests that run one body both ways: ``with pure_python(pure): ...``)."""
    if not pure:
        yield
        return
    saved = []
    for owner, attr, _module in _BOUND:
        holder = sys.modules.get(owner)
        if holder is not None:
            saved.append((holder, attr, getattr(holder, attr, None)))
            setattr(holder, attr, None)
    try:
        yield
    finally:
        for holder, attr, value in reversed(saved):
            setattr(holder, attr, value)
