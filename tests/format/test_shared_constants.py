"""Every constant the C side declares once (kafkatx/format/_wire.h, and each layer's own module) against
the Python constant it mirrors: one place to look when a Kafka rule or a field list changes.

Each compiled module exports what it was built with as attributes; a value that drifts from the Python
side fails here with its name, before it could make the two twins disagree on some input.
"""

from __future__ import annotations

import dataclasses
import importlib

import pytest

import kafkatx.format.record_batch as rb
import kafkatx.format.segment_fold as sf
import kafkatx.render.kafka_dump as kd
import kafkatx.storage.producer_state as ps
from kafkatx.errors import BadLength, BadVarint, DecodeError, Truncated
from kafkatx.format.control import ControlType
from kafkatx.render import rows

COMPILED = ("kafkatx.format._batch", "kafkatx.format._fold", "kafkatx.format._txn_log", "kafkatx.storage._replay",
            "kafkatx.coordinator._coordinator",
            "kafkatx.render._dump")

# the shared constants (_wire.h's wire_add_constants): name on the C side -> the Python value
SHARED = {
    "HEADER_SIZE": rb.HEADER_SIZE,
    "LOG_OVERHEAD": rb.LOG_OVERHEAD,
    "CRC_START": rb._CRC_START,
    "MAX_BATCH_SIZE": rb.MAX_BATCH_SIZE,
    "MIN_RECORD": rb._MIN_RECORD,
    "ATTR_CODEC_MASK": rb.COMPRESSION_CODEC_MASK,
    "ATTR_TIMESTAMP_TYPE": rb.TIMESTAMP_TYPE_MASK,
    "ATTR_TRANSACTIONAL": rb.TRANSACTIONAL_FLAG_MASK,
    "ATTR_CONTROL": rb.CONTROL_FLAG_MASK,
    "ATTR_DELETE_HORIZON": rb.DELETE_HORIZON_FLAG_MASK,
    "CONTROL_ABORT": int(ControlType.ABORT),
    "CONTROL_COMMIT": int(ControlType.COMMIT),
    "FOLD_CRC_FAILS_ONLY": sf.CRC_FAILS_ONLY,
    "FOLD_TABLE_ONLY": sf.TABLE_ONLY,
    # decode_records' error kinds index record_batch._C_ERRORS
    "K_DECODE": rb._C_ERRORS.index(DecodeError),
    "K_BADLENGTH": rb._C_ERRORS.index(BadLength),
    "K_TRUNCATED": rb._C_ERRORS.index(Truncated),
    "K_BADVARINT": rb._C_ERRORS.index(BadVarint),
    "BATCH_HEADER_FIELDS": rb.BATCH_HEADER_FIELDS,
}


def _module(name: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} is not built (python setup.py build_ext --inplace)")


@pytest.mark.parametrize("name", COMPILED)
def test_every_compiled_module_carries_the_shared_constants_of_the_python_side(name: str) -> None:
    m = _module(name)
    got = {key: getattr(m, key, "<missing>") for key in SHARED}
    assert got == SHARED
    assert m.HW_CRC32C in (0, 1)


def test_the_batch_module_fills_the_record_fields_in_their_order() -> None:
    m = _module("kafkatx.format._batch")
    assert m.RECORD_FIELDS == tuple(f.name for f in dataclasses.fields(rb.Record))


def test_the_replay_module_agrees_on_its_reasons_and_rows() -> None:
    m = _module("kafkatx.storage._replay")
    assert (m.FOLD_END, m.FOLD_CHUNK, m.FOLD_STOP, m.FOLD_BYTES) == (ps.FOLD_END, ps.FOLD_CHUNK, ps.FOLD_STOP,
                                                                     ps.FOLD_BYTES)
    # the entry row's fields in order: the pure class's entry as it hands it out
    assert m.ENTRY_FIELDS == ps._Entry.__slots__


def test_the_dump_module_agrees_on_its_flags_and_rows() -> None:
    m = _module("kafkatx.render._dump")
    for flag in ("RENDER_DEEP", "RENDER_VERIFY", "RENDER_BASE64", "RENDER_PRINT_DATA", "RENDER_RAW", "PRINT_BOUND"):
        assert getattr(m, flag) == getattr(kd, flag), flag
    assert m.BATCH_ROW_FIELDS == rows.BatchRow.__struct_fields__
    assert m.RECORD_ROW_FIELDS == rows.RecordRow.__struct_fields__
    assert m.HEADER_ROW_FIELDS == rows.HeaderRow.__struct_fields__
