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
import errno
import functools
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from msgspec import Struct

from kafkatx.errors import OutputIncomplete

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
# list-txn's JSON in two processes taking turns (emit_json_values): rows per piece (a multiple of the chunk;
# ~5 MB of text at list-txn's rows), and the rows from which a second process pays for its fork
_JSON_PIECE = 16 * _JSON_CHUNK
_JSON_TURNS_FROM = 200_000


def emit_json_values(rows: Sequence[Sequence[Any]] | RowChunks, names: Sequence[str], out: TextIO | None = None, *,
                     piece: int | None = None, turns_from: int | None = None) -> None:
    """``emit([dict(zip(names, row)) for row in rows], "json", plain=True)``, the same text, without a dict
    per row (``list-txn``'s 1,000,000 rows): each row a sequence of plain values (str, int, None, lists or
    tuples of them), the first ``len(names)`` of them written under ``names`` in order, any further left out.
    ``rows``: a sequence, or :class:`RowChunks` (taken a chunk at a time: the rows never all in memory). A
    chunk of rows at a time by msgspec (one compiled struct per row, made by ``take`` itself); a chunk it
    refuses goes the dict way (:func:`_json_items`).

    From ``turns_from`` rows on (default ``_JSON_TURNS_FROM``; :func:`_json_processes` says when), written by
    two processes taking turns: pieces of ``piece`` rows (default ``_JSON_PIECE``, a multiple of the chunk),
    this process making the even ones, a forked one the odd ones, each skipping the other's rows
    (:func:`_write_in_turns`). The same bytes, in the same order."""
    out = sys.stdout if out is None else out
    cursor: RowChunks = _SequenceRows(rows) if isinstance(rows, Sequence) else rows
    piece_text = functools.partial(_json_piece, cursor, tuple(names))
    buffer = _utf8_buffer(out)
    fd = _fileno(out) if buffer is not None else None
    if fd is not None and _json_processes(cursor.remaining(), _JSON_TURNS_FROM if turns_from is None
                                          else turns_from) == 2:
        out.flush()
        encoding = (out.encoding, getattr(out, "errors", None) or "strict")
        remake = functools.partial(_remade_piece, tuple(names))
        _write_in_turns(cursor, piece_text, _JSON_PIECE if piece is None else piece, fd, encoding, remake)
        return
    write = _text_writer(out, buffer)
    _write_pieces(cursor, piece_text, _JSON_CHUNK, write)  # one chunk a piece, written as it is made
    out.flush()


def _fileno(out: TextIO) -> int | None:
    """The file descriptor under ``out`` (None: a stream in memory)."""
    try:
        return out.fileno()
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation among them
        return None


class _SequenceRows:
    """A sequence of rows as :class:`RowChunks` (``coordinator.RowCursor``'s ``take``, ``skip`` and
    ``remaining``, without copying the sequence)."""

    __slots__ = ("_at", "_rows")

    def __init__(self, rows: Sequence[Sequence[Any]]) -> None:
        self._rows = rows
        self._at = 0

    def take(self, n: int, make: Callable[..., Any] | None = None, k: int = 0) -> list[Any]:
        chunk = self._rows[self._at:self._at + n]
        self._at += len(chunk)
        return list(chunk) if make is None else [make(*row[:k]) for row in chunk]

    def skip(self, n: int) -> int:
        skipped = max(0, min(n, len(self._rows) - self._at))
        self._at += skipped
        return skipped

    def remaining(self) -> int:
        return len(self._rows) - self._at


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


def _write_pieces(rows: RowChunks, piece_text: Callable[[int, int], tuple[_Parts, int]], n: int,
                  write: Callable[[_Parts, bool], None], turn: int = 0, turns: int = 1) -> None:
    """The pieces of ``n`` rows this process writes, of ``turns`` processes taking turns: pieces ``turn``,
    ``turn + turns``, ...; the rows of the others' pieces skipped (none made). Each piece made, then written
    (``write(parts, last)``: in this process's turn). Stops at the last piece: its own (written), or another's
    (the rows ran out while skipping)."""
    i = turn
    ahead = turn * n  # the rows of the pieces before this process's first
    while rows.skip(ahead) == ahead:
        parts, taken = piece_text(i, n)
        write(parts, taken < n)
        if taken < n:
            return
        i += turns
        ahead = (turns - 1) * n


def _text_writer(out: TextIO, buffer: Any) -> Callable[[_Parts, bool], None]:
    """A piece's parts written to ``out`` as they are: the str as text, msgspec's UTF-8 to ``buffer`` (the byte
    stream under ``out``, the text written so far flushed first), or decoded (``buffer`` None)."""
    def write(parts: _Parts, last: bool) -> None:
        for part in parts:
            if isinstance(part, str):
                out.write(part)
            elif buffer is not None:
                out.flush()
                buffer.write(part)
            else:
                out.write(bytes(part).decode())
    return write


def _json_processes(rows: int, turns_from: int) -> int:
    """How many processes write a JSON document of ``rows`` rows at most (:func:`emit_json_values`): 2 (taking
    turns) from ``turns_from`` rows on where ``log.fanout.jobs_for`` gives more than one (a fork is there, two
    CPUs are this process's, ``KAFKATX_JOBS`` does not say 1); else 1."""
    from kafkatx.storage.fanout import jobs_for

    return min(2, jobs_for(rows, None, at_least=turns_from))


def _write_in_turns(rows: RowChunks, piece_text: Callable[[int, int], tuple[_Parts, int]], n: int, fd: int,
                    encoding: tuple[str, str], remake: Callable[[list[Any], int, int], tuple[_Parts, int]]) -> None:
    """The document's pieces of ``n`` rows written to ``fd`` by two processes taking turns: this one writes the
    even pieces, a forked one the odd ones. Each makes its next piece while the other writes; a piece is written
    whole, in the writer's turn, with ``os.write`` (one open file: the offset shared, a file, a pipe or
    /dev/null alike), then the turn passed on (a byte on a pipe; not after the last piece). The forked process
    never returns: it ends with ``os._exit``, a failure told to this one, which raises
    :class:`~kafkatx.errors.OutputIncomplete` (:exc:`BrokenPipeError` when the reader went away, as one process
    would); this one's failure (or Ctrl-C) ends the other. Returns once every piece is written and the other
    process reaped.

    The forked process is watched (:mod:`kafkatx.storage.watchdog`): this one keeps the rows of the piece the
    other is making (taken, not made), and when the other says nothing for the bound while making it, or is
    stopped while writing it, kills it, makes that piece from the kept rows and finishes the document alone,
    the same bytes. A piece the other had begun to write is finished from where the shared offset says it
    stopped; where the output has no offset (a pipe, a terminal) that cannot be known, and the answer is
    :class:`~kafkatx.errors.OutputIncomplete` (exit 4), never a document with a piece twice or torn."""
    from kafkatx.storage.fdio import kill_and_reap, write_all
    from kafkatx.storage.watchdog import say, silence_bound

    from_parent, to_child = os.pipe()
    from_child, to_parent = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process (its coverage is not gathered)
        _turns_child(rows, piece_text, n, fd, encoding, _Turn(from_parent, to_parent, first=False),
                     (to_child, from_child))
    os.close(from_parent)
    os.close(to_parent)
    reaped = False
    bound = silence_bound()
    try:
        turn = _Turn(from_child, to_child, first=True)
        i = 0  # the piece this process makes next
        alone = False
        passed_at: int | None = None  # the output's offset when the turn was passed on (None: it has none)
        held: list[Any] = []  # the rows of the other's piece, kept until it is written
        while True:
            parts, taken = piece_text(i, n)
            if not alone and turn.stalled(pid, bound):  # the other's piece not written: killed, made here
                alone = reaped = True
                say(f"the second writer of the JSON output (pid {pid}) said nothing for {bound:g} s (stopped, or "
                    "stuck); killed, the document finished by the first process")
                _write_rest(fd, turn, remake(held, i - 1, n)[0], encoding, passed_at)
            write_all(fd, _encoded(parts, encoding))
            if taken < n:
                break
            if alone:
                i += 1
                continue
            turn.passed()
            passed_at = _offset(fd)
            held = rows.take(n)  # the other's piece: its rows kept (not made) in case it must be made here
            if len(held) < n:  # the other's piece is the last: it closes the document
                if turn.stalled(pid, bound, end=True):
                    reaped = True
                    say(f"the second writer of the JSON output (pid {pid}) said nothing for {bound:g} s (stopped, "
                        "or stuck); killed, the document finished by the first process")
                    _write_rest(fd, turn, remake(held, i + 1, n)[0], encoding, passed_at)
                break
            i += 2
        if not reaped:
            turn.wait_end()
            status = os.waitpid(pid, 0)[1]
            reaped = True
            if status != 0:  # ended without telling (killed): its last piece perhaps not all written
                raise OutputIncomplete(_incomplete(f"wait status {status}"))
    finally:
        os.close(to_child)  # the forked process waiting for a turn sees the end
        os.close(from_child)
        if not reaped:
            kill_and_reap(pid)  # this one failed or was interrupted


def _remade_piece(names: tuple[str, ...], held: list[Any], i: int, n: int) -> tuple[_Parts, int]:
    """Piece ``i`` made from its rows (``held``: what the cursor's ``take`` gave), as the other process
    would have made it."""
    return _json_piece(_SequenceRows(held), names, i, n)


def _encoded(parts: _Parts, encoding: tuple[str, str]) -> bytes:
    return b"".join(p.encode(*encoding) if isinstance(p, str) else p for p in parts)


def _offset(fd: int) -> int | None:
    """The output's offset (shared by both processes: one open file); None for a pipe or a terminal."""
    try:
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None


def _write_rest(fd: int, turn: _Turn, parts: _Parts, encoding: tuple[str, str], passed_at: int | None) -> None:
    """The other's piece written by this process after the other was killed: whole when the other had not
    begun to write it, else from where the shared offset says it stopped; where the output has no offset,
    :class:`OutputIncomplete` (what was written of it cannot be known)."""
    from kafkatx.storage.fdio import write_all

    data = _encoded(parts, encoding)
    if turn.began:
        at = _offset(fd)
        if at is None or passed_at is None or not 0 <= at - passed_at <= len(data):
            raise OutputIncomplete(_incomplete("it stopped while writing its piece to an output without an "
                                               "offset (a pipe or a terminal); what it wrote cannot be known"))
        data = data[at - passed_at:]
    write_all(fd, data)


def _turns_child(rows: RowChunks, piece_text: Callable[[int, int], tuple[_Parts, int]], n: int, fd: int,
                 encoding: tuple[str, str], turn: _Turn, parents: tuple[int, int]) -> NoReturn:  # pragma: no cover
    """The forked process of :func:`_write_in_turns`: the odd pieces, then ``os._exit`` (no atexit handler, no
    flush of the parent's buffers). A failure is told to the parent as one line (the turn never passed)."""
    code = 1
    try:
        for end in parents:
            os.close(end)
        _write_pieces(rows, piece_text, n, functools.partial(_write_turn, turn, fd, encoding), 1, 2)
        code = 0
    except BrokenPipeError:
        _tell(turn.pass_on, _BROKEN_PIPE)
    except BaseException as err:  # noqa: BLE001 - told to the parent, which raises
        _tell(turn.pass_on, _FAILED + f"{type(err).__name__}: {err}".encode(errors="replace"))
    finally:
        os._exit(code)


_TURN, _BROKEN_PIPE, _FAILED, _BEGUN = b"t", b"p", b"!", b"s"


class _Turn:
    """A process's turns (:func:`_write_in_turns`): :meth:`wait` for the other's byte (the first turn this
    process's own when ``first``), :meth:`passed` hands it on; anything else from the other (its failure, or
    the end of the pipe: it ended) raised."""

    def __init__(self, wait_on: int, pass_on: int, *, first: bool) -> None:
        self.wait_on, self.pass_on, self.mine = wait_on, pass_on, first
        self.began = False  # the other said it began to write its piece (and has not passed the turn yet)

    def wait(self) -> None:
        if not self.mine:
            got = os.read(self.wait_on, 1)
            if got != _TURN:
                self._failed(got)
        self.mine = True

    def begin(self) -> None:
        """Tell the other this process begins to write its piece (the forked writer, before each write)."""
        os.write(self.pass_on, _BEGUN)

    def stalled(self, pid: int, bound: float, *, end: bool = False) -> bool:
        """Wait for the turn (``end``: for the other to end, its last piece written) watching the other,
        process ``pid``: True when it said nothing for ``bound`` seconds while making its piece, or was
        stopped (SIGSTOP: state T) that long while writing it - then it is killed and reaped (the turn is
        this process's). A writer blocked by its reader is not stalled: one process would wait the same."""
        import select
        import time

        from kafkatx.storage import watchdog

        if self.mine:
            return False
        last = time.monotonic()
        while True:
            left = bound - (time.monotonic() - last)
            if left <= 0:
                if self.began and watchdog.state(pid) not in ("T", "t"):
                    last = time.monotonic()  # writing, and waiting on its output: not the other's fault
                    continue
                watchdog.kill_stalled(pid)
                self.mine = True
                return True
            ready, _, _ = select.select([self.wait_on], [], [], left)
            if not ready:
                continue
            got = os.read(self.wait_on, 1)
            if got == _BEGUN:
                self.began = True
                last = time.monotonic()
                continue
            if got == _TURN and not end:
                self.began = False
                self.mine = True
                return False
            if got == b"" and end:
                return False  # it ended: the caller reaps it and reads its status
            self._failed(got)

    def passed(self) -> None:
        try:
            os.write(self.pass_on, _TURN)
        except BrokenPipeError:  # the other ended, a failure told perhaps
            self._failed(b"")
        self.mine = False

    def wait_end(self) -> None:
        """Until the other process ends (its last piece written): a word from it is its failure."""
        if got := self._rest():
            self._failed(got)

    def _rest(self) -> bytes:
        from kafkatx.storage.fdio import read_all

        return read_all(self.wait_on)

    def _failed(self, got: bytes) -> NoReturn:
        told = got + self._rest()
        if told[:1] == _BROKEN_PIPE:
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
        raise OutputIncomplete(_incomplete(told[1:].decode(errors="replace") if told[:1] == _FAILED else ""))


def _incomplete(why: str) -> str:
    return f"JSON output incomplete: its second writer process failed ({why or 'it ended without a word'})"


def _tell(fd: int, message: bytes) -> None:  # pragma: no cover - the forked process
    try:
        os.write(fd, message)
    except OSError:
        pass


def _write_turn(turn: _Turn, fd: int, encoding: tuple[str, str], parts: _Parts, last: bool) -> None:
    """A piece's parts written whole to ``fd`` (short writes continued) in this process's turn, then the turn
    passed on (not after the last piece: nothing follows it)."""
    data = _encoded(parts, encoding)
    from kafkatx.storage.fdio import (
        write_all,  # the turns' path only: kafkatx.storage is not imported for every emit
    )

    turn.wait()
    turn.begin()  # the first process knows the piece may be partly written from here on
    write_all(fd, data)
    if not last:
        turn.passed()


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
    from kafkatx.render.human import (
        UNLIMITED_WIDTH,
        Column,
        Rows,
        colour_wanted,
        output_console,
        print_view,
        table,
    )

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
