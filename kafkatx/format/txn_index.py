"""Aborted transaction index (``<base>.txnindex``).

Kafka schema (``storage/src/main/java/org/apache/kafka/storage/internals/log/AbortedTxn.java``,
``TransactionIndex.java``)::

    entry (34 bytes):
      version           int16   0 (AbortedTxn.CURRENT_VERSION)
      producerId        int64
      firstOffset       int64   first offset of the aborted transaction
      lastOffset        int64   offset of the ABORT marker
      lastStableOffset  int64   LSO when the marker was written

The file is not preallocated: it is appended to as ABORT markers land, so a
partial trailing entry means a torn write (Kafka's iterator throws a
``CorruptIndexException``). We raise :class:`Truncated` at the partial entry.
An entry with another version raises :class:`UnknownVersion` at the entry
(Kafka: "Unexpected aborted transaction version").
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from msgspec import Struct

from kafkatx.errors import Truncated, UnknownVersion
from kafkatx.format._primitives import Buffer, struct_columns

# version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(Struct, frozen=True, kw_only=True):
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexColumns(NamedTuple):
    """The entries of a ``.txnindex`` by field (:func:`read_txn_index_columns`); entry ``i`` is at byte
    ``i * ENTRY_SIZE``."""

    producer_ids: Sequence[int]
    first_offsets: Sequence[int]
    last_offsets: Sequence[int]
    last_stable_offsets: Sequence[int]


def _truncated(pos: int, left: int) -> Truncated:
    return Truncated(f"txn index: entry at byte {pos} has only {left} of {ENTRY_SIZE} bytes", position=pos)


def _unknown_version(version: int, pos: int) -> UnknownVersion:
    return UnknownVersion(f"txn index: unexpected aborted transaction version {version}", position=pos)


def _check_versions(versions: Sequence[int]) -> None:
    """:class:`UnknownVersion` at the first entry whose version column is not ours."""
    if versions.count(CURRENT_VERSION) != len(versions):
        i = next(i for i, v in enumerate(versions) if v != CURRENT_VERSION)
        raise _unknown_version(versions[i], i * ENTRY_SIZE)


def iter_txn_index(buf: Buffer) -> Iterator[tuple[int, int, int, int, int]]:
    """``(version, producer_id, first_offset, last_offset, last_stable_offset)`` of each entry, lazily,
    with :func:`read_txn_index`'s errors (a scan that needs a field or two builds no objects)."""
    # a context-managed view: an mmap cannot be closed while a view of it is alive,
    # and an exception traceback would otherwise keep this one alive
    with memoryview(buf) as view:
        size = len(view)
        pos = 0
        while pos < size:
            if size - pos < ENTRY_SIZE:
                raise _truncated(pos, size - pos)
            entry: tuple[int, int, int, int, int] = _ENTRY.unpack_from(view, pos)
            if entry[0] != CURRENT_VERSION:
                raise _unknown_version(entry[0], pos)
            yield entry
            pos += ENTRY_SIZE


def read_txn_index_columns(buf: Buffer) -> TxnIndexColumns:
    """:func:`read_txn_index` by column: the same entries and the same errors (the first entry of
    another version, else a partial trailing entry), one tuple per field instead of an object per
    entry (``verify`` reads every ``.txnindex`` and needs objects only for the entries it reports)."""
    with memoryview(buf) as view:
        size = len(view)
        n = size // ENTRY_SIZE
        columns = struct_columns(view, n, _ENTRY)
    _check_versions(columns[0])
    if size != n * ENTRY_SIZE:
        raise _truncated(n * ENTRY_SIZE, size - n * ENTRY_SIZE)
    return TxnIndexColumns(*columns[1:])


def read_txn_index(buf: Buffer) -> list[AbortedTxn]:
    return [AbortedTxn(version=CURRENT_VERSION, producer_id=producer_id, first_offset=first, last_offset=last,
                       last_stable_offset=lso)
            for producer_id, first, last, lso in zip(*read_txn_index_columns(buf), strict=True)]


def first_entry_below(buf: Buffer, start_offset: int) -> int | None:
    """``TransactionIndex.sanityCheck``: the position of the first whole entry whose last offset is below
    ``start_offset`` (the segment base), or None. Raises :class:`UnknownVersion` at an entry of
    another version, as :func:`read_txn_index` does; a partial trailing entry is ignored.

    The broker runs this on every segment at every start, so it is done without a Python step per
    entry: by column (``struct_columns``), compared with ``count``/``min``.
    """
    with memoryview(buf) as view:
        n = len(view) // ENTRY_SIZE
        if n == 0:
            return None
        versions, _producer_ids, _firsts, lasts, _lsos = struct_columns(view, n, _ENTRY, fields=(0, 3))
    _check_versions(versions)
    if min(lasts) >= start_offset:
        return None
    return next(i for i, last in enumerate(lasts) if last < start_offset) * ENTRY_SIZE


def encode_aborted_txn(txn: AbortedTxn) -> bytes:
    """The 34 bytes Kafka's ``AbortedTxn`` writes for one entry."""
    try:
        return _ENTRY.pack(txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
                           txn.last_stable_offset)
    except struct.error as err:
        raise ValueError(f"aborted txn field out of range: {err}") from err
