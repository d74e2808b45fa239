"""Bounded readers and writers for Kafka's generated-message primitives.

The coordinator records (``__transaction_state``, ``__consumer_offsets``) and the
producer snapshot are written by Kafka's generated serializers
(``clients/src/main/java/org/apache/kafka/common/protocol/Readable.java``,
``ByteUtils.java``, the ``*Data.java`` classes generated from the JSON schemas).
Two encodings exist:

* classic (non-flexible) versions: strings are an i16 length + UTF-8
  (-1 = null), bytes an i32 length (-1 = null), arrays an i32 count (-1 = null);
* flexible versions (KIP-482): "compact" strings/bytes/arrays whose length is an
  unsigned varint holding ``length + 1`` (0 = null), and a tagged-field section
  (uvarint count, then ``tag uvarint, size uvarint, size bytes`` per field) at the
  end of every struct.

Error rule for everything here: the error's ``position`` is the position of the
field that could not be read (for a length or count that promises more bytes
than are left, the position of that length/count field). Negative lengths other
than the documented -1 null raise :class:`BadLength`; lengths that run past the
buffer raise :class:`Truncated`; malformed unsigned varints raise
:class:`BadVarint`; invalid UTF-8 raises a plain :class:`DecodeError`.
"""

from __future__ import annotations

import mmap
import struct
import sys
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from kafkatx.errors import BadLength, BadVarint, DecodeError, Truncated
from kafkatx.format import compiled

try:  # CRC-32C of the compiled framing module, the one module of format/ that computes it (no setup needed)
    from kafkatx.format import _batch as _batch
except ImportError:  # pragma: no cover - not built
    _batch = None  # type: ignore[assignment]
_batch = compiled.bind(__name__, "_batch", _batch)  # type: ignore[assignment]

# The one buffer type of the decoders: what a segment is read as (bytes from pread, an mmap.mmap
# of the file), a slice of it (memoryview) and what the writers build (bytearray). Every reader in
# format/ and storage/ takes it (storage/segment.py re-exports it for the rooms above); Python 3.12's
# collections.abc.Buffer would say the same, but we support 3.11 and do not depend on typing_extensions.
Buffer = bytes | bytearray | memoryview | mmap.mmap

T = TypeVar("T")

_crc32c_lib: Callable[..., int] | None = None


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``value``.

    The compiled module's (kafkatx/format/_batch.c, bound here like every compiled twin: ``_batch`` below)
    when it is built, else the ``crc32c`` package's, imported on first use: its import costs ~20 ms of every
    command's start-up.
    """
    sp = _batch
    if value == 0 and sp is not None:
        got: int = sp.crc32c(data, 0, len(data))
        return got
    return crc32c_function()(data, value)


def crc32c_function() -> Callable[..., int]:
    """The ``crc32c`` package's function itself (``(data, value=0) -> int``), imported on first use."""
    global _crc32c_lib
    if _crc32c_lib is None:
        import crc32c as lib

        _crc32c_lib = lib.crc32c
    return _crc32c_lib


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

# ByteUtils.readUnsignedVarint accepts at most 5 bytes (35 bits, the int keeps 32).
MAX_UVARINT_BYTES = 5


class Reader:
    """A cursor over ``buf[pos:end]`` whose every read is bounds-checked.

    ``what`` names the structure being decoded so messages read
    ``"transaction log value: ..."``.
    """

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf: Buffer, pos: int = 0, end: int | None = None, *, what: str = "") -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end
        self.what = what

    # -- helpers -----------------------------------------------------------------
    def _msg(self, text: str) -> str:
        return f"{self.what}: {text}" if self.what else text

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, size: int, field: str, at: int | None = None) -> None:
        """Raise Truncated unless ``size`` bytes are left."""
        if size > self.remaining:
            raise Truncated(
                self._msg(f"{field} needs {size} bytes but only {max(self.remaining, 0)} are left"),
                position=self.pos if at is None else at,
            )

    def _fixed(self, st: struct.Struct, field: str) -> int:
        self.need(st.size, field)
        (value,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return int(value)

    # -- fixed-width ---------------------------------------------------------------
    def i8(self, field: str = "int8") -> int:
        return self._fixed(_I8, field)

    def i16(self, field: str = "int16") -> int:
        return self._fixed(_I16, field)

    def i32(self, field: str = "int32") -> int:
        return self._fixed(_I32, field)

    def i64(self, field: str = "int64") -> int:
        return self._fixed(_I64, field)

    def raw(self, size: int, field: str = "bytes") -> bytes:
        self.need(size, field)
        data = bytes(self.buf[self.pos : self.pos + size])
        self.pos += size
        return data

    # -- varints -------------------------------------------------------------------
    def uvarint(self, field: str = "unsigned varint") -> int:
        """Kafka's unsigned varint (ByteUtils.readUnsignedVarint): 7 bits a byte, low first."""
        start = self.pos
        value = 0
        for i in range(MAX_UVARINT_BYTES):
            if self.pos >= self.end:
                raise BadVarint(self._msg(f"{field} runs past the end of the buffer"), position=start)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                return value & 0xFFFFFFFF
        raise BadVarint(self._msg(f"{field} is longer than {MAX_UVARINT_BYTES} bytes"), position=start)

    # -- strings and bytes -----------------------------------------------------------
    def _utf8(self, data: bytes, field: str, at: int) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DecodeError(self._msg(f"{field} is not valid UTF-8 ({err.reason})"),
                              position=at + err.start) from err

    def _take(self, length: int, field: str, at: int) -> bytes:
        if length > self.remaining:
            raise Truncated(
                self._msg(f"{field} length {length} runs past the end ({max(self.remaining, 0)} bytes left)"),
                position=at,
            )
        data = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        return data

    def string(self, field: str = "string", *, nullable: bool = False) -> str | None:
        """Classic string: i16 length (-1 = null) + UTF-8."""
        at = self.pos
        length = self.i16(f"{field} length")
        if length < 0:
            if length == -1 and nullable:
                return None
            raise BadLength(self._msg(f"{field} has invalid length {length}"), position=at)
        data = self._take(length, field, at)
        return self._utf8(data, field, at + 2)

    def bytes_(self, field: str = "bytes", *, nullable: bool = False) -> bytes | None:
        """Classic bytes: i32 length (-1 = null)."""
        at = self.pos
        length = self.i32(f"{field} length")
        if length < 0:
            if length == -1 and nullable:
                return None
            raise BadLength(self._msg(f"{field} has invalid length {length}"), position=at)
        return self._take(length, field, at)

    def _compact_length(self, field: str, nullable: bool) -> tuple[int | None, int]:
        at = self.pos
        raw = self.uvarint(f"{field} length")
        if raw == 0:
            if nullable:
                return None, at
            raise BadLength(self._msg(f"non-nullable {field} is null"), position=at)
        length = raw - 1
        if length > 0x7FFFFFFF:  # Java reads the uvarint into an int: this would be negative
            raise BadLength(self._msg(f"{field} has invalid length {length}"), position=at)
        return length, at

    def compact_string(self, field: str = "string", *, nullable: bool = False) -> str | None:
        length, at = self._compact_length(field, nullable)
        if length is None:
            return None
        if length > 0x7FFF:  # generated readers: "string field had invalid length"
            raise BadLength(self._msg(f"{field} has invalid length {length}"), position=at)
        start = self.pos
        data = self._take(length, field, at)
        return self._utf8(data, field, start)

    def compact_bytes(self, field: str = "bytes", *, nullable: bool = False) -> bytes | None:
        length, at = self._compact_length(field, nullable)
        if length is None:
            return None
        return self._take(length, field, at)

    # -- arrays ----------------------------------------------------------------------
    def _check_count(self, count: int, min_size: int, field: str, at: int) -> None:
        # Kafka: "Tried to allocate a collection of size N, but there are only M bytes
        # remaining." Every element takes at least min_size bytes.
        if count * min_size > self.remaining:
            raise Truncated(
                self._msg(f"{field} count {count} needs at least {count * min_size} bytes "
                          f"but only {max(self.remaining, 0)} are left"),
                position=at,
            )

    def array_count(self, field: str, min_size: int, *, nullable: bool = False) -> int | None:
        """Classic array: i32 count (-1 = null)."""
        at = self.pos
        count = self.i32(f"{field} count")
        if count < 0:
            if count == -1 and nullable:
                return None
            raise BadLength(self._msg(f"{field} has invalid count {count}"), position=at)
        self._check_count(count, min_size, field, at)
        return count

    def compact_array_count(self, field: str, min_size: int, *, nullable: bool = False) -> int | None:
        length, at = self._compact_length(field, nullable)
        if length is None:
            return None
        self._check_count(length, min_size, field, at)
        return length

    def array(self, item: Callable[[Reader], T], field: str, min_size: int, *,
              flexible: bool, nullable: bool = False) -> list[T] | None:
        count = (self.compact_array_count(field, min_size, nullable=nullable) if flexible
                 else self.array_count(field, min_size, nullable=nullable))
        if count is None:
            return None
        return [item(self) for _ in range(count)]

    # -- tagged fields ---------------------------------------------------------------
    def tagged_fields(self, field: str = "tagged fields") -> list[tuple[int, int, bytes]]:
        """Read a KIP-482 tagged-field section: ``[(tag, position_of_data, data)]``."""
        at = self.pos
        count = self.uvarint(f"{field} count")
        # each field takes at least 2 bytes (tag and size)
        self._check_count(count, 2, field, at)
        out: list[tuple[int, int, bytes]] = []
        for _ in range(count):
            tag = self.uvarint("tag")
            size_at = self.pos
            size = self.uvarint(f"tag {tag} size")
            data_at = self.pos
            data = self._take(size, f"tag {tag} data", size_at)
            out.append((tag, data_at, data))
        return out

    def expect_end(self) -> None:
        if self.pos != self.end:
            raise DecodeError(self._msg(f"{self.end - self.pos} trailing bytes after the structure"),
                              position=self.pos)


def decode_fixed_tag(data: bytes, st: struct.Struct, tag: int, what: str, at: int) -> int:
    """Decode a known tagged field of a fixed-width type; its size must match."""
    if len(data) != st.size:
        raise BadLength(f"{what}: tag {tag} has size {len(data)}, expected {st.size}", position=at)
    return int(st.unpack(data)[0])


# ---------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------


def _check_range(value: int, bits: int, field: str) -> None:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise ValueError(f"{field}={value} does not fit in int{bits}")


class Writer:
    """Appends Kafka primitives to a bytearray. Out-of-range values raise ValueError."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.out)

    def i8(self, v: int, field: str = "int8") -> None:
        _check_range(v, 8, field)
        self.out += _I8.pack(v)

    def i16(self, v: int, field: str = "int16") -> None:
        _check_range(v, 16, field)
        self.out += _I16.pack(v)

    def i32(self, v: int, field: str = "int32") -> None:
        _check_range(v, 32, field)
        self.out += _I32.pack(v)

    def i64(self, v: int, field: str = "int64") -> None:
        _check_range(v, 64, field)
        self.out += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        if not 0 <= v <= 0xFFFFFFFF:
            raise ValueError(f"unsigned varint {v} out of range")
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, s: str | None, *, flexible: bool, field: str = "string") -> None:
        if s is None:
            if flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"{field} is {len(data)} bytes; Kafka strings are at most 32767")
        if flexible:
            self.uvarint(len(data) + 1)
        else:
            self.i16(len(data))
        self.out += data

    def bytes_(self, b: bytes | None, *, flexible: bool) -> None:
        if b is None:
            if flexible:
                self.uvarint(0)
            else:
                self.i32(-1)
            return
        if flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.out += b

    def array_count(self, n: int | None, *, flexible: bool) -> None:
        if n is None:
            if flexible:
                self.uvarint(0)
            else:
                self.i32(-1)
        elif flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tagged_fields(self, fields: Iterable[tuple[int, bytes]]) -> None:
        """Write a tagged-field section; Kafka's generated writers emit tags in ascending order."""
        items = sorted(fields, key=lambda f: f[0])
        tags = [t for t, _ in items]
        if len(set(tags)) != len(tags):
            raise ValueError(f"duplicate tags {tags}")
        self.uvarint(len(items))
        for tag, data in items:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.out += data


@contextmanager
def reading(buf: Buffer, what: str) -> Iterator[Reader]:
    """The module boundary of a decoder: a Reader over a released-on-exit view of ``buf``.

    The view is context-managed because an mmap cannot be closed while a view of it
    is alive, and a DecodeError's traceback would otherwise keep one alive. Any
    stray low-level exception is wrapped once, here, with the reader's position.
    """
    with memoryview(buf) as view:
        r = Reader(view, what=what)
        try:
            yield r
        except (struct.error, IndexError, ValueError, OverflowError, UnicodeDecodeError) as err:
            raise DecodeError(f"{what}: {err}", position=r.pos) from err


def iter_sparse_entries(view: Buffer, entry: struct.Struct) -> Iterator[tuple[int, ...]]:
    """The whole entries of a Kafka index buffer, lazily, up to the first all-zero entry after the
    first (``AbstractIndex`` preallocates with zeros); a partial trailing entry is not looked at."""
    full = len(view) - len(view) % entry.size
    for pos in range(0, full, entry.size):
        values = entry.unpack_from(view, pos)
        if pos and not any(values):
            return
        yield values


def read_sparse_entries(buf: Buffer, entry: struct.Struct, what: str, *, strict: bool) -> list[tuple[int, ...]]:
    """The raw entries of a Kafka index file (``AbstractIndex``): fixed-size entries, possibly
    preallocated with zeros, so the walk stops at the first all-zero entry after the first.
    A partial trailing entry is ``Truncated`` at its position when ``strict``, dropped otherwise.
    """
    # a context-managed view: an mmap cannot be closed while a view of it is alive,
    # and an exception traceback would otherwise keep this one alive
    with memoryview(buf) as view:
        n = _sparse_count(buf, view, entry.size, what, strict)
        with view[:n * entry.size] as entries:
            return list(entry.iter_unpack(entries))


# the array typecode of each big-endian integer field an entry may have (by struct code)
_COLUMN_TYPES = {c: next(t for t in "hilq" if array(t).itemsize == struct.calcsize(">" + c)) for c in "hiq"}


_FEW_ENTRIES = 8  # up to this many entries, unpacking them as tuples costs less than the strided gather


def struct_columns(view: memoryview, n: int, entry: struct.Struct,
                   fields: Container[int] | None = None, *, arrays: bool = False) -> list[Sequence[int]]:
    """The first ``n`` entries of ``view`` (``entry``: a big-endian struct of ``h``/``i``/``q``
    fields, packed back to back) by column: one list per field (``fields``: only those field
    numbers; the others empty). No tuple per entry: each field's bytes are gathered with strided
    slices and read as native integers (``array``); ``arrays``: those arrays themselves, not lists
    (no int object per value)."""
    codes = entry.format.lstrip(">")
    if n <= _FEW_ENTRIES:  # an empty or short index (most at 10,000 partitions): as tuples
        with view[:n * entry.size] as entries:
            rows = list(zip(*entry.iter_unpack(entries), strict=True)) if n else [()] * len(codes)
        if arrays:  # the same native arrays the strided gather makes
            return [array(_COLUMN_TYPES[code], rows[number]) if fields is None or number in fields else []
                    for number, code in enumerate(codes)]
        return [list(rows[number]) if fields is None or number in fields else [] for number in range(len(codes))]
    columns: list[Sequence[int]] = []
    at = 0
    with view[:n * entry.size] as entries:
        data = entries.tobytes()  # strided slices of bytes are much faster than of a memoryview
    if len(set(codes)) == 1:  # fields of one width (an offset index: ">ii"): one array, a strided slice per field
        whole = array(_COLUMN_TYPES[codes[0]])
        whole.frombytes(data)
        if sys.byteorder == "little":
            whole.byteswap()
        k = len(codes)
        for number in range(k):
            if fields is not None and number not in fields:
                columns.append([])
                continue
            column = whole if k == 1 else whole[number::k]
            columns.append(column if arrays else column.tolist())
        return columns
    for number, code in enumerate(codes):
        column = array(_COLUMN_TYPES[code])
        width = column.itemsize
        if fields is not None and number not in fields:
            columns.append([])
            at += width
            continue
        raw = bytearray(n * width)
        for k in range(width):
            raw[k::width] = data[at + k::entry.size]
        column.frombytes(raw)
        if sys.byteorder == "little":
            column.byteswap()
        columns.append(column if arrays else column.tolist())
        at += width
    return columns


def read_sparse_columns(buf: Buffer, entry: struct.Struct, what: str, *, strict: bool,
                        arrays: bool = False) -> list[Sequence[int]]:
    """:func:`read_sparse_entries` by column (:func:`struct_columns`: one list per field of
    ``entry``, every entry's value, or with ``arrays`` one native ``array``; the columns of an
    empty index are empty)."""
    if len(buf) == entry.size:
        # One whole entry (a small segment's time index, most at 10,000 partitions): nothing after it can
        # be an all-zero end, no partial tail: its fields, as the columns struct_columns would make.
        values = entry.unpack_from(buf)
        if arrays:
            return [array(_COLUMN_TYPES[code], (value,)) for code, value in zip(entry.format.lstrip(">"), values,
                                                                                 strict=True)]
        return [[value] for value in values]
    with memoryview(buf) as view:
        return struct_columns(view, _sparse_count(buf, view, entry.size, what, strict), entry, arrays=arrays)


def _sparse_count(buf: Buffer, view: memoryview, size: int, what: str, strict: bool) -> int:
    """How many entries of ``size`` bytes are real: up to the first all-zero entry after the first,
    else all whole entries (a partial tail: ``Truncated`` when ``strict``)."""
    total = len(view)
    full = total - total % size
    zero = bytes(size)
    data = buf if isinstance(buf, (bytes, bytearray, mmap.mmap)) else view.tobytes()  # searched in place
    at = data.find(zero, size, full)
    while at >= 0:
        if at % size == 0:
            return at // size
        at = data.find(zero, at + 1, full)
    if full != total and strict:
        raise Truncated(
            f"{what}: {total - full} trailing bytes are less than one {size}-byte entry "
            f"(file size {total} is not a multiple of {size})",
            position=full,
        )
    return full // size
