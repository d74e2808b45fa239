"""Rendering of result rows: text, table, json, jsonl, yaml (see :mod:`kafkatx.render.formats`)."""

from kafkatx.render.formats import FORMATS, emit, text_line, text_value, to_plain

__all__ = ["FORMATS", "emit", "text_line", "text_value", "to_plain"]
