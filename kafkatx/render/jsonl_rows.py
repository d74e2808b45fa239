"""``dump-segment``'s jsonl rows as msgspec Structs, serialised by msgspec.

The compiled rendering (``kafkatx/render/_dump.c``: ``render_batches``, see :func:`kafkatx.render.kafka_dump.render_batches`)
builds these objects for the clean batches of a chunk of segment -- never JSON text -- and
:func:`encode_lines` turns the chunk's list into jsonl with one msgspec call. Each class stands
for a dict ``kafkatx.cli.dump`` builds on the per-batch path (``_batch_dict`` and its
``records``): the fields are the dict's keys in the same order (cli.md's contract), so msgspec
writes what orjson writes for the dict (tests/cli/test_dump_render.py holds the two paths to
the same bytes). ``records`` is left out (UNSET) without ``--deep-iteration``, like the key.

Imported on first use only (jsonl output of ``dump-segment``): start-up does not pay for msgspec.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET


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


class BatchRow(msgspec.Struct, gc=False):
    """One batch: ``dump.py``'s ``_batch_dict`` keys, then ``records`` when deep."""

    base_offset: int
    last_offset: int
    count: int
    position: int
    size: int
    magic: int
    crc: int
    crc_valid: bool | None
    compression: str
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool
    control_type: str | None
    coordinator_epoch: int | None
    base_timestamp_ms: int | None
    max_timestamp_ms: int | None
    records: tuple[RecordRow, ...] | msgspec.UnsetType = UNSET


# gc=False: the rows hold only strs, ints, None, bools and tuples of rows (no cycles), so the
# collector need not track the million record rows of a deep dump. The compiled code fills the
# fields' slots directly (_dump.render_setup checks the layout; the classes must stay plain:
# no defaults but UNSET, no __post_init__, no weakref/dict slots).

_ENCODER = msgspec.json.Encoder()


def encode_lines(rows: list[Any]) -> bytes:
    """``rows`` as jsonl: one compact object per line, each line ending in a newline."""
    return _ENCODER.encode_lines(rows)
