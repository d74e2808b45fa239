"""Rendering of result rows: text, table, json, jsonl, yaml (see :mod:`kafkatx.render.formats`).

The tables people read are :mod:`kafkatx.render.views` and the views of one command family beside it
(``describe_views``, ``verify_views``, ``repair_views``), imported on first use through :func:`human_views`,
so ``kafkatx --help`` does not pay for rich's tables and panels.
"""

from importlib import import_module
from types import ModuleType

from kafkatx.render.formats import FORMATS, emit, text_line, text_value, to_plain


def human_views(family: str = "views") -> ModuleType:
    """:mod:`kafkatx.render.views` (or ``family``: ``describe_views``, ``verify_views``, ``repair_views``),
    imported on first use."""
    if family not in ("views", "describe_views", "verify_views", "repair_views"):
        raise ValueError(f"no render module {family!r}")
    return import_module(f"kafkatx.render.{family}")


__all__ = ["FORMATS", "emit", "human_views", "text_line", "text_value", "to_plain"]
