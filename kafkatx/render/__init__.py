"""Rendering of result rows: text, table, json, jsonl, yaml (see :mod:`kafkatx.render.formats`).

The tables people read are :mod:`kafkatx.render.views` (imported on first use through
:func:`human_views`, so ``kafkatx --help`` does not pay for rich's tables and panels).
"""

from types import ModuleType

from kafkatx.render.formats import FORMATS, emit, text_line, text_value, to_plain


def human_views() -> ModuleType:
    """:mod:`kafkatx.render.views`, imported on first use."""
    from kafkatx.render import views

    return views


__all__ = ["FORMATS", "emit", "human_views", "text_line", "text_value", "to_plain"]
