"""The row models: one ``msgspec.Struct`` per output row, each output's keys declared once.

Every consumer of a row takes its field list from the class here (``tests/cli/test_row_models.py``
holds them to it):

* ``dump-segment`` / ``dump-index`` / ``dump-snapshot`` / ``dump-txnindex``: the library
  (:mod:`kafkatx.render.dump`) builds these objects; their JSON/JSONL/YAML/table dicts are
  :func:`as_plain` of them (``msgspec.to_builtins``: the fields in declaration order, UNSET
  fields left out); jsonl of whole chunks is :func:`encode_lines` (msgspec straight from the
  objects).
* the compiled renderer (``_dump.render_batches``, kafkatx/render/_dump.c) fills :class:`BatchRow`,
  :class:`RecordRow` and :class:`HeaderRow` itself: ``render_setup`` is handed the classes and
  refuses them unless their ``__struct_fields__`` are its names in its order
  (:func:`kafkatx.render.kafka_dump._jsonl_rows`).
* ``kafkatx scan``'s ``batches/`` dataset (:mod:`kafkatx.spark.rows`, :mod:`kafkatx.spark.schema`):
  :class:`ScanBatchRow`'s fields are its columns in order, its annotations their Spark types
  (:data:`Int32` -> int, ``int`` -> long, ``str`` -> string, ``bool`` -> boolean) and
  nullability (``X | None``). The executors build plain tuples in that order (millions of rows).

The field order is the key order of cli.md's contract (and the column order of docs/scan.md):
never reorder a class here without the doc.

``gc=False``: the rows hold only strs, ints, None, bools and tuples of rows (no cycles), so the
collector need not track the million record rows of a deep dump. The compiled code fills the
fields' slots of the three dump classes directly (``render_setup`` checks the layout; those
classes must stay plain: no defaults but UNSET, no ``__post_init__``, no weakref/dict slots).

Imported on first use only (start-up does not pay for msgspec).
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from kafkatx.render.formats import Rendered

__all__ = [
    "UNSET", "BatchRow", "HeaderRow", "Int32", "OffsetIndexRow", "RecordRow", "DecodedRecordRow", "ScanBatchRow",
    "SnapshotEntryRow", "SnapshotRow", "TimeIndexRow", "TrailingBytesRow", "TxnIndexRow", "as_plain",
    "encode_lines", "field_types",
]

# A Kafka INT32 field (an epoch, a sequence, a count): a Spark "int" column; plain ``int`` is INT64 ("long").
Int32 = Annotated[int, msgspec.Meta(ge=-(1 << 31), le=(1 << 31) - 1)]


# ------------------------------------------------------------------ dump-segment (.log, .checkpoint)


class HeaderRow(msgspec.Struct, gc=False):
    """A record header: ``{"key": ..., "value": ...}``."""

    key: str
    value: str | None


class RecordRow(msgspec.Struct, gc=False):
    """One record of a batch row (``--deep-iteration``)."""

    offset: int
    timestamp_ms: int | None
    key: str | None
    value: str | None
    headers: tuple[HeaderRow, ...]


class DecodedRecordRow(RecordRow, gc=False):
    """A record of ``__transaction_state`` / ``__consumer_offsets`` / ``__cluster_metadata`` with
    ``--decoder``: :class:`RecordRow`'s keys, then ``decoded`` (the decoder's object, or
    ``{"error": ...}`` when the record does not decode)."""

    decoded: dict[str, Any]


class BatchRow(msgspec.Struct, gc=False):
    """One batch of a ``.log``: cli.md's batch keys, then ``records`` with ``--deep-iteration``."""

    base_offset: int
    last_offset: int
    count: Int32
    position: int
    size: int
    magic: Int32
    crc: int
    crc_valid: bool | None
    compression: str
    partition_leader_epoch: Int32
    producer_id: int
    producer_epoch: Int32
    base_sequence: Int32
    last_sequence: Int32
    is_transactional: bool
    is_control: bool
    control_type: str | None
    coordinator_epoch: Int32 | None
    base_timestamp_ms: int | None
    max_timestamp_ms: int | None
    records: tuple[RecordRow, ...] | UnsetType = UNSET


class TrailingBytesRow(msgspec.Struct, gc=False):
    """The last object of a ``.log`` whose last bytes do not form a batch (cli.md "Trailing bytes")."""

    file: str
    trailing_bytes: int
    position: int
    error: str


# ------------------------------------------------------------------ dump-index


class OffsetIndexRow(msgspec.Struct, gc=False):
    """One ``.index`` entry; ``problem`` only with ``dump-index --verify`` (null when the entry is good)."""

    offset: int
    position: int
    problem: str | None | UnsetType = UNSET


class TimeIndexRow(msgspec.Struct, gc=False):
    """One ``.timeindex`` entry; ``problem`` as for :class:`OffsetIndexRow`."""

    timestamp_ms: int
    offset: int
    problem: str | None | UnsetType = UNSET


# ------------------------------------------------------------------ dump-snapshot, dump-txnindex


class SnapshotEntryRow(msgspec.Struct, gc=False):
    """One producer of a ``.snapshot`` (Kafka's ``ProducerStateManager`` snapshot entry)."""

    producer_id: int
    producer_epoch: Int32
    last_sequence: Int32
    last_offset: int
    offset_delta: Int32
    timestamp_ms: int | None
    coordinator_epoch: Int32
    current_txn_first_offset: int | None


class SnapshotRow(msgspec.Struct, gc=False):
    """A whole ``.snapshot`` (json/jsonl/yaml): header, then its producers."""

    version: Int32
    crc: int
    crc_valid: bool
    entries: tuple[SnapshotEntryRow, ...]


class TxnIndexRow(msgspec.Struct, gc=False):
    """One aborted transaction of a ``.txnindex``."""

    version: Int32
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


# ------------------------------------------------------------------ scan's batches/ dataset


class ScanBatchRow(msgspec.Struct, gc=False):
    """A row of ``kafkatx scan``'s ``batches/`` (docs/scan.md): where the batch is, then its header.

    An error row (bytes that are no batch) has only the five place columns, ``position`` and
    ``error``. Unlike :class:`BatchRow`, timestamps are the stored values (-1: none) and
    ``attributes`` / ``timestamp_type`` are columns.
    """

    log_dir: str
    topic: str
    partition: Int32
    segment: str
    segment_base_offset: int
    position: int | None
    base_offset: int | None
    last_offset: int | None
    count: Int32 | None
    size: int | None
    magic: Int32 | None
    attributes: Int32 | None
    compression: str | None
    timestamp_type: str | None
    crc: int | None
    crc_valid: bool | None
    partition_leader_epoch: Int32 | None
    producer_id: int | None
    producer_epoch: Int32 | None
    base_sequence: Int32 | None
    last_sequence: Int32 | None
    is_transactional: bool | None
    is_control: bool | None
    control_type: str | None
    coordinator_epoch: Int32 | None
    base_timestamp_ms: int | None
    max_timestamp_ms: int | None
    error: str | None


def field_types(cls: type[msgspec.Struct]) -> dict[str, tuple[str, bool]]:
    """``{field: (kind, nullable)}`` of a row class, kind one of ``int`` (INT32), ``long``,
    ``string``, ``boolean``: what a typed store (Spark, Parquet) makes of each field."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, tuple[str, bool]] = {}
    for name in cls.__struct_fields__:
        hint = hints[name]
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,)
        nullable = type(None) in args
        (base,) = [a for a in args if a is not type(None)]
        if base is Int32:
            kind = "int"
        elif base is int:
            kind = "long"
        elif base is str:
            kind = "string"
        elif base is bool:
            kind = "boolean"
        else:
            raise TypeError(f"{cls.__name__}.{name}: {hint!r} is no column type")
        out[name] = (kind, nullable)
    return out


_UnionType = type(int | None)


# ------------------------------------------------------------------ to the outputs

_ENCODER = msgspec.json.Encoder()


def encode_lines(rows: list[Any]) -> bytes:
    """``rows`` as jsonl: one compact object per line, each line ending in a newline."""
    return _ENCODER.encode_lines(rows)


def as_plain(rows: Iterable[Any]) -> Iterator[Any]:
    """Each row as cli.md's dict (a Struct through ``msgspec.to_builtins``: fields in order, UNSET
    left out); anything else (a text line, an already rendered chunk, a dict) as it is."""
    to_builtins = msgspec.to_builtins
    struct = msgspec.Struct
    for row in rows:
        yield to_builtins(row) if isinstance(row, struct) and type(row) is not Rendered else row
