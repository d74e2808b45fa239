"""Rows -> text / table / json / jsonl / yaml.

Every command hands its result to :func:`emit`. Rows are msgspec Structs (field order
is key order), dataclasses or dicts; nested records, tuples, enums and paths become plain
JSON values through :func:`to_plain`. Payload bytes are encoded by the command
layer (``--payload-encoding``) before they get here; stray ``bytes`` are shown as
hex rather than failing.

``dump-segment`` hands some of its rows over already rendered (:class:`Rendered`, for jsonl and
text only: text lines written by compiled code, jsonl by msgspec from row objects compiled code
builds): they are written as they are.

- ``json``: one document: a list for many rows, an object for a single object
  (pass the object itself, not a list). Lists are streamed element by element.
- ``jsonl``: one compact object per line, streamed from iterators.
- ``yaml``: ``yaml.safe_dump(..., sort_keys=False)``.
- ``table``: a rich table on ``out``; nested values are shown compactly.
- ``text``: plain lines: strings as they are, rows as ``key: value key: value``
  (the layout of Kafka's own dump tools).
"""

from __future__ import annotations

import codecs
import dataclasses
import enum
import functools
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, TextIO

from msgspec import Struct

if TYPE_CHECKING:
    from kafkatx.rows import RowChunks


@functools.cache
def _orjson() -> Any:
    """orjson, imported on first use (a command whose output is text never pays for it at start-up);
    None without it (a declared dependency: the stdlib ``json`` gives the same text)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover
        return None
    return orjson

FORMATS = ("text", "table", "json", "jsonl", "yaml")


class Rendered(Struct, frozen=True):
    """Rows already rendered as ``fmt`` (``jsonl`` by msgspec, ``text`` by compiled code): UTF-8 lines, each
    ending in a newline, byte for byte what :func:`emit` would write for the rows they stand for
    (``dump-segment``'s batches, :func:`kafkatx.render.kafka_dump.render_batches`). A row of
    :func:`emit`'s ``rows`` like any other; only ``fmt`` may take it."""

    fmt: str
    data: bytes


def to_plain(value: Any, *, encode_bytes: Callable[[bytes], Any] | None = None) -> Any:
    """A JSON-ready copy of ``value``: dataclasses/mappings -> dict (order kept), sequences -> list.

    ``encode_bytes`` turns payload bytes into a string (the command's
    ``--payload-encoding``); without it bytes become hex.
    """
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, enum.Enum):
            return _enum(value)
        return value
    if isinstance(value, enum.Enum):
        return _enum(value)
    if type(value) is dict:  # rows already plain (list-txn's 200,000): the Mapping branch without the ABC checks
        return {str(k): v if type(v) in _PLAIN else to_plain(v, encode_bytes=encode_bytes) for k, v in value.items()}
    if type(value) is list:
        return [v if type(v) in _PLAIN else to_plain(v, encode_bytes=encode_bytes) for v in value]
    names = _dataclass_fields(type(value))
    if names is not None:
        # Rows by the hundred thousand (list-txn at 200,000 ids): plain field values are taken as
        # they are, the rest recurse.
        out = {}
        for name in names:
            v = getattr(value, name)
            out[name] = v if type(v) in _PLAIN else to_plain(v, encode_bytes=encode_bytes)
        return out
    if isinstance(value, Mapping):
        return {str(k): to_plain(v, encode_bytes=encode_bytes) for k, v in value.items()}
    if isinstance(value, bytes | bytearray | memoryview):
        return encode_bytes(bytes(value)) if encode_bytes is not None else bytes(value).hex()
    if isinstance(value, PurePath):
        return os.fspath(value)
    if isinstance(value, set | frozenset):
        return [to_plain(v, encode_bytes=encode_bytes) for v in sorted(value, key=repr)]
    if isinstance(value, Iterable):
        return [to_plain(v, encode_bytes=encode_bytes) for v in value]
    return str(value)


_PLAIN = frozenset({int, str, float, bool, type(None)})  # exact types: an IntEnum is no plain int
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _dataclass_fields(t: type) -> tuple[str, ...] | None:
    """The field names of record type ``t``, a msgspec Struct or a dataclass (None: neither), looked up
    once per type."""
    try:
        return _FIELDS[t]
    except KeyError:
        names: tuple[str, ...] | None = getattr(t, "__struct_fields__", None)
        if names is None and dataclasses.is_dataclass(t):
            names = tuple(f.name for f in dataclasses.fields(t))
        _FIELDS[t] = names
        return names


def _enum(value: enum.Enum) -> Any:
    # Kafka-facing enums (TxnState) carry Kafka's spelling; others print their name.
    name = getattr(value, "kafka_name", None)
    return name if isinstance(name, str) else value.name


def _is_single(rows: Any) -> bool:
    return isinstance(rows, Mapping) or (not isinstance(rows, type) and _dataclass_fields(type(rows)) is not None)


def json_line(value: Any) -> str:
    """``value`` (already plain) as one compact JSON line: what ``json.dumps(value, ensure_ascii=False,
    separators=(",", ":"))`` gives, made by orjson (same text; the stdlib takes what orjson refuses:
    integers beyond 64 bits, strings with lone surrogates)."""
    fast = _orjson()
    if fast is not None:
        try:
            line: bytes = fast.dumps(value)
            return line.decode()
        except TypeError:
            pass
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_indented(value: Any) -> str:
    """``value`` (already plain) as ``json.dumps(value, ensure_ascii=False, indent=2)`` gives it."""
    fast = _orjson()
    if fast is not None:
        try:
            text: bytes = fast.dumps(value, option=fast.OPT_INDENT_2)
            return text.decode()
        except TypeError:
            pass
    import json

    return json.dumps(value, ensure_ascii=False, indent=2)


def emit(rows: Any, fmt: str, *, columns: Sequence[str] | None = None, title: str | None = None,
         out: TextIO | None = None, plain: bool = False) -> None:
    """Write ``rows`` (an iterable of rows, or one object) to ``out`` (default stdout) as ``fmt``.

    ``columns`` limits and orders the keys for ``table``/``text`` (json/jsonl/yaml
    always carry every key). ``title`` heads a table (and a text listing). ``plain``: the
    caller vouches that every row already is what :func:`to_plain` would make of it (dicts,
    lists, str, int, bool, None), so json/jsonl/yaml skip that copy (``dump-segment``'s
    batches and records, by the million).
    """
    out = sys.stdout if out is None else out
    fmt = getattr(fmt, "value", fmt)
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")
    plainify = _same if plain else to_plain
    if fmt == "json":
        _emit_json(rows, out, plainify)
    elif fmt == "jsonl":
        write = out.write
        for row in [rows] if _is_single(rows) else rows:
            if type(row) is Rendered:
                _write_rendered(out, row, fmt)
                continue
            write(json_line(plainify(row)))
            write("\n")
    elif fmt == "yaml":
        import yaml

        options: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "default_flow_style": False}
        if _is_single(rows):
            yaml.safe_dump(plainify(rows), out, **options)
        else:
            # a row at a time (dump-segment's batches: never all in memory): a block list's items are
            # written one after the other, so the text is the whole list's
            empty = True
            for row in rows:
                yaml.safe_dump([plainify(row)], out, **options)
                empty = False
            if empty:
                yaml.safe_dump([], out, **options)
    elif fmt == "table":
        _emit_table([rows] if _is_single(rows) else rows, columns, title, out)
    else:
        if title:
            out.write(title + "\n")
        for row in [rows] if _is_single(rows) else rows:
            if type(row) is Rendered:
                _write_rendered(out, row, fmt)
                continue
            out.write(text_line(row, columns) + "\n")
    out.flush()


def _same(value: Any) -> Any:
    return value


def _write_rendered(out: TextIO, row: Rendered, fmt: str) -> None:
    if row.fmt != fmt:
        raise ValueError(f"rows rendered as {row.fmt} given to {fmt} output")
    # Straight to the byte stream under a UTF-8 text stream (what writing the decoded text would
    # put there: kafkatx's lines end in "\n", which POSIX text streams do not translate).
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if buffer is not None and isinstance(encoding, str) and codecs.lookup(encoding).name == "utf-8":
        out.flush()
        buffer.write(row.data)
    else:
        out.write(row.data.decode())


def _emit_json(rows: Any, out: TextIO, plainify: Callable[[Any], Any] = to_plain) -> None:
    if _is_single(rows):
        out.write(json_indented(plainify(rows)))
        out.write("\n")
        return
    if isinstance(rows, list):
        # Rows already in memory (list-txn's 1,000,000): a chunk of them per encoder call.
        if not rows:
            out.write("[]\n")
            return
        for start in range(0, len(rows), _JSON_CHUNK):
            out.write("[\n" if start == 0 else ",\n")
            out.write(_json_items([plainify(row) for row in rows[start:start + _JSON_CHUNK]]))
        out.write("\n]\n")
        return
    # Stream the rows of an iterator, each written as it comes, so a dump of a large segment never sits
    # in memory as one document.
    first = True
    for row in rows:
        out.write("[\n" if first else ",\n")
        first = False
        out.write(_json_items([plainify(row)]))
    out.write("[]\n" if first else "\n]\n")


_JSON_CHUNK = 1024


def emit_json_values(rows: Sequence[Sequence[Any]] | RowChunks, names: Sequence[str], out: TextIO | None = None) -> None:
    """``emit([dict(zip(names, row)) for row in rows], "json", plain=True)``, the same text, without a dict
    per row (``list-txn``'s 1,000,000 rows): each row a sequence of plain values (str, int, None, lists or
    tuples of them), the first ``len(names)`` of them written under ``names`` in order, any further left out.
    ``rows``: a sequence, or :class:`RowChunks` (taken a chunk at a time: the rows never all in memory). A
    chunk of rows at a time by msgspec (one compiled struct per row, made by ``take`` itself), written as it
    is made; a chunk it refuses goes the dict way (:func:`_json_items`)."""
    out = sys.stdout if out is None else out
    cursor: RowChunks = _SequenceRows(rows) if isinstance(rows, Sequence) else rows
    piece_text = functools.partial(_json_piece, cursor, tuple(names))
    write = _text_writer(out, _utf8_buffer(out))
    _write_pieces(piece_text, _JSON_CHUNK, write)  # one chunk a piece, written as it is made
    out.flush()


class _SequenceRows:
    """A sequence of rows as :class:`RowChunks` (``coordinator.RowCursor``'s ``take``, without copying the
    sequence)."""

    __slots__ = ("_at", "_rows")

    def __init__(self, rows: Sequence[Sequence[Any]]) -> None:
        self._rows = rows
        self._at = 0

    def take(self, n: int, make: Callable[..., Any] | None = None, k: int = 0) -> list[Any]:
        chunk = self._rows[self._at:self._at + n]
        self._at += len(chunk)
        return list(chunk) if make is None else [make(*row[:k]) for row in chunk]


def _utf8_buffer(out: TextIO) -> Any:
    """The byte stream under ``out`` when ``out`` is a UTF-8 text stream over one (msgspec's UTF-8 goes there
    as it is: what writing the decoded text would put there, :func:`_write_rendered`'s reasoning); else None."""
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    return buffer if buffer is not None and isinstance(encoding, str) and codecs.lookup(encoding).name == "utf-8" \
        else None


# A piece's text: str (separators, a chunk msgspec refused) and msgspec's UTF-8 (memoryviews), in order.
_Parts = list[str | memoryview]


def _json_piece(rows: RowChunks, names: tuple[str, ...], i: int, n: int) -> tuple[_Parts, int]:
    """Piece ``i`` of the document (every piece before it ``n`` rows): its next ``n`` rows at most, taken from
    ``rows`` a chunk at a time, as the document's text: ``"[\n"`` before piece 0's items, ``",\n"`` before any
    other's, each chunk's items joined by ``",\n"``; a piece of fewer than ``n`` rows is the last, and closes the
    document (``"\n]\n"``, or ``"[]\n"`` when it has no rows at all). The parts and the rows taken."""
    struct, encode, indent = _values_struct(names)
    k = len(names)
    parts: _Parts = []
    taken = 0
    while taken < n and (chunk := rows.take(min(_JSON_CHUNK, n - taken), struct, k)):
        parts.append(("[\n" if i == 0 else ",\n") if taken == 0 else ",\n")
        taken += len(chunk)
        try:
            parts.append(memoryview(indent(encode(chunk), indent=2))[2:-2])  # "[\n" and "\n]" left out, not copied
        except (TypeError, ValueError):  # what orjson also refuses (lone surrogates): the dict way's answer
            parts.append(_json_items([dict(zip(names, _struct_values(row), strict=True)) for row in chunk]))
    if taken < n:
        parts.append("[]\n" if i == 0 and taken == 0 else "\n]\n")
    return parts, taken


def _write_pieces(piece_text: Callable[[int, int], tuple[_Parts, int]], n: int,
                  write: Callable[[_Parts], None]) -> None:
    """The document's pieces of ``n`` rows, each made, then written, up to the last (fewer than ``n`` rows)."""
    i = 0
    while True:
        parts, taken = piece_text(i, n)
        write(parts)
        if taken < n:
            return
        i += 1


def _text_writer(out: TextIO, buffer: Any) -> Callable[[_Parts], None]:
    """A piece's parts written to ``out`` as they are: the str as text, msgspec's UTF-8 to ``buffer`` (the byte
    stream under ``out``, the text written so far flushed first), or decoded (``buffer`` None)."""
    def write(parts: _Parts) -> None:
        for part in parts:
            if isinstance(part, str):
                out.write(part)
            elif buffer is not None:
                out.flush()
                buffer.write(part)
            else:
                out.write(bytes(part).decode())
    return write


def _struct_values(row: Any) -> list[Any]:
    """A :func:`_values_struct` row's values in order, a tuple among them as the list it stands for."""
    return [list(v) if isinstance(v, tuple) else v for v in (getattr(row, f) for f in row.__struct_fields__)]


@functools.cache
def _values_struct(names: tuple[str, ...]) -> tuple[Any, Callable[[Any], bytes], Callable[..., bytes]]:
    """A msgspec struct type with ``names`` as its fields in order (encoded as the dict of them would be:
    same keys, same order), its encoder and ``msgspec.json.format``."""
    import msgspec

    struct = msgspec.defstruct("JsonValues", [(name, object) for name in names])
    return struct, msgspec.json.Encoder().encode, msgspec.json.format


def _json_items(values: list[Any]) -> str:
    """``values`` (already plain) as the items of ``json_indented(values)``: each indented two more,
    separated by a comma and a newline (what lies between that list's opening and closing lines)."""
    fast = _orjson()
    if fast is not None:
        try:
            items: bytes = fast.dumps(values, option=fast.OPT_INDENT_2)
            return items.decode()[2:-2]
        except TypeError:
            pass
    return ",\n".join("  " + json_indented(v).replace("\n", "\n  ") for v in values)


def text_value(value: Any) -> str:
    """How one value looks in text/table output: null -> ``null``, lists ``[a,b]``, objects JSON."""
    value = to_plain(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return "[" + ",".join(text_value(v) for v in value) + "]"
    if isinstance(value, dict | list):
        return json_line(value)
    return str(value)


def text_line(row: Any, columns: Sequence[str] | None = None) -> str:
    """A row as one ``key: value key: value`` line (strings are printed as they are)."""
    if isinstance(row, str):
        return row
    plain = to_plain(row)
    if not isinstance(plain, dict):
        return text_value(plain)
    keys = list(columns) if columns else list(plain)
    return " ".join(f"{k}: {text_value(plain.get(k))}" for k in keys)


def _emit_table(rows: Iterable[Any], columns: Sequence[str] | None, title: str | None, out: TextIO) -> None:
    """A generic table (the dump commands): the keys as headers, fitted to the width like every
    human table (:mod:`kafkatx.render.human`): the least important keys go first
    (``descriptions.TABLE_KEY_PRIORITY``, then the rightmost), every row one line."""
    from kafkatx.render.descriptions import TABLE_KEY_PRIORITY
    from kafkatx.render.human import UNLIMITED_WIDTH, Column, Rows, colour_wanted, output_console, table
    from kafkatx.render.printing import print_view

    plain_rows = [to_plain(r) for r in rows]
    dict_rows = [r if isinstance(r, dict) else {"value": r} for r in plain_rows]
    keys = list(columns) if columns else _keys(dict_rows)
    data = Rows([Column(key, key, priority=TABLE_KEY_PRIORITY.get(key, 10 + i), shrink=True)
                 for i, key in enumerate(keys)])
    for row in dict_rows:
        data.add({k: _cell(row.get(k)) for k in keys})
    width = output_console(out, piped=UNLIMITED_WIDTH).width  # a listing to grep: every column when piped
    print_view(out, table(data, width, title=title, ascii_only=not colour_wanted(out)), width=width)


def _keys(rows: list[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for row in rows:
        for k in row:
            keys.setdefault(k, None)
    return list(keys)


def _cell(value: Any) -> str:
    return "" if value is None else text_value(value)
