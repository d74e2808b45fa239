"""BatchHeader's field list and the batch attribute bits, each written once in format/record_batch.py.

Expected values come from Kafka's ``DefaultRecordBatch`` (the header layout in its class comment and
the ``*_OFFSET`` constants; the masks ``COMPRESSION_CODEC_MASK = 0x07``, ``TIMESTAMP_TYPE_MASK = 0x08``,
``TRANSACTIONAL_FLAG_MASK = 0x10``, ``CONTROL_FLAG_MASK = 0x20``, ``DELETE_HORIZON_FLAG_MASK = 0x40``),
not from kafkatx's output.
"""

from __future__ import annotations

import re
import struct
from dataclasses import fields

import crc32c
import pytest

import kafkatx.format.record_batch as rb
from kafkatx.format import compiled
from kafkatx.format.compression import Compression
from kafkatx.format.record_batch import BATCH_HEADER_FIELDS, BatchHeader, TimestampType

# DefaultRecordBatch's header, in wire order, after kafkatx's own ``position`` (where the batch starts).
KAFKA_ORDER = (
    "position", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
    "records_count",
)


def test_the_field_list_is_the_dataclass_in_kafkas_wire_order():
    assert BATCH_HEADER_FIELDS == KAFKA_ORDER
    assert BATCH_HEADER_FIELDS == tuple(f.name for f in fields(BatchHeader))
    # the slots the compiled header builder fills (format/_wire.h's resolve_slots checks them at setup)
    assert BatchHeader.__slots__ == BATCH_HEADER_FIELDS


def _hand_made_batch(prefix: int) -> tuple[bytes, dict[str, int]]:
    """A magic 2 batch with no records whose every header field holds a different value, after
    ``prefix`` bytes of padding; the CRC-32C covers attributes to the end (DefaultRecordBatch)."""
    want = {
        "position": prefix, "base_offset": 1_000_001, "batch_length": 49, "partition_leader_epoch": 7,
        "magic": 2, "attributes": 0x10 | 0x08 | 0x03, "last_offset_delta": 5,
        "base_timestamp": 1_700_000_000_011, "max_timestamp": 1_700_000_000_013, "producer_id": 4242,
        "producer_epoch": 9, "base_sequence": 100, "records_count": 6,
    }
    after_crc = struct.pack(">hiqqqhii", want["attributes"], want["last_offset_delta"], want["base_timestamp"],
                            want["max_timestamp"], want["producer_id"], want["producer_epoch"],
                            want["base_sequence"], want["records_count"])
    want["crc"] = crc32c.crc32c(after_crc)
    head = struct.pack(">qiibI", want["base_offset"], want["batch_length"], want["partition_leader_epoch"],
                       want["magic"], want["crc"])
    batch = head + after_crc
    assert len(batch) == 61 == want["batch_length"] + 12
    return b"\0" * prefix + batch, want


@pytest.fixture(params=["python", "compiled"])
def path(request):
    if request.param == "compiled" and rb._batch is None:
        pytest.skip("the C extension is not built (or KAFKATX_PURE_PYTHON is set)")
    with compiled.pure_python(request.param == "python"):
        yield request.param


def test_every_field_lands_in_its_slot(path):
    buf, want = _hand_made_batch(prefix=3)
    for header in (rb.read_batch_header(buf, 3), next(rb.iter_batches(buf, 3)),
                   next(rb.iter_batches(buf, 3, verify_crc=True))):
        assert type(header) is BatchHeader
        assert {name: getattr(header, name) for name in BATCH_HEADER_FIELDS} == want
        assert header == BatchHeader(**want)


def test_make_header_takes_exactly_the_fields_after_position():
    values = tuple(range(101, 101 + len(BATCH_HEADER_FIELDS) - 1))
    header = rb._make_header(5, values)
    assert type(header) is BatchHeader
    assert header == BatchHeader(position=5, **dict(zip(BATCH_HEADER_FIELDS[1:], values, strict=True)))
    with pytest.raises(ValueError):
        rb._make_header(5, values[:-1])
    with pytest.raises(ValueError):
        rb._make_header(5, (*values, 0))


def test_the_masks_are_kafkas():
    assert rb.COMPRESSION_CODEC_MASK == 0x07
    assert rb.TIMESTAMP_TYPE_MASK == 0x08
    assert rb.TRANSACTIONAL_FLAG_MASK == 0x10
    assert rb.CONTROL_FLAG_MASK == 0x20
    assert rb.DELETE_HORIZON_FLAG_MASK == 0x40


def _header(magic: int, attributes: int) -> BatchHeader:
    return BatchHeader(position=0, base_offset=0, batch_length=49, partition_leader_epoch=0, magic=magic, crc=0,
                       attributes=attributes, last_offset_delta=0, base_timestamp=0, max_timestamp=0,
                       producer_id=1, producer_epoch=0, base_sequence=0, records_count=1)


@pytest.mark.parametrize(("attributes", "codec", "ts_type", "txn", "control", "horizon"), [
    (0x00, Compression.NONE, TimestampType.CREATE_TIME, False, False, False),
    (0x04, Compression.ZSTD, TimestampType.CREATE_TIME, False, False, False),
    (0x08 | 0x02, Compression.SNAPPY, TimestampType.LOG_APPEND_TIME, False, False, False),
    (0x10, Compression.NONE, TimestampType.CREATE_TIME, True, False, False),
    (0x30, Compression.NONE, TimestampType.CREATE_TIME, True, True, False),  # a transaction marker
    (0x40 | 0x01, Compression.GZIP, TimestampType.CREATE_TIME, False, False, True),
    (0x7F, 7, TimestampType.LOG_APPEND_TIME, True, True, True),  # codec id 7 is unknown: kept as the int
])
def test_the_predicates_read_the_bits_of_a_magic_2_batch(attributes, codec, ts_type, txn, control, horizon):
    h = _header(2, attributes)
    assert h.compression == codec
    assert h.timestamp_type is ts_type
    assert (h.is_transactional, h.is_control, h.has_delete_horizon) == (txn, control, horizon)


def test_magic_0_and_1_have_no_transactional_control_or_horizon_bits():
    # Legacy message attributes have only the codec and (magic 1) the timestamp type
    # (LegacyRecord); the v2 flags read false whatever the byte holds.
    for magic in (0, 1):
        h = _header(magic, 0x7A)
        assert (h.is_transactional, h.is_control, h.has_delete_horizon) == (False, False, False)
        assert h.compression == Compression.SNAPPY
    assert _header(0, 0x08).timestamp_type is TimestampType.NO_TIMESTAMP
    assert _header(1, 0x08).timestamp_type is TimestampType.LOG_APPEND_TIME


_MASK_NAME = re.compile(r"_?((COMPRESSION_)?CODEC_MASK|TIMESTAMP_TYPE(_MASK|_BIT)?|TRANSACTIONAL(_FLAG_MASK)?"
                        r"|CONTROL(_FLAG_MASK)?|DELETE_HORIZON(_FLAG_MASK)?)")


def _attribute_bits_by_number(path) -> list[int]:
    """Lines of ``path`` that test a batch's ``attributes`` against a literal number (``x.attributes & 0x10``)
    or give a mask a name of their own (``_TRANSACTIONAL = 0x10``)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
            sides = (node.left, node.right)
            named = any(isinstance(s, ast.Attribute) and s.attr == "attributes" or
                        isinstance(s, ast.Name) and s.id in ("attributes", "attr") for s in sides)
            literal = any(isinstance(s, ast.Constant) and isinstance(s.value, int) for s in sides)
            if named and literal:
                found.append(node.lineno)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, int) and not isinstance(node.value.value, bool)):
            # a copy of a mask under a name of its own (_CONTROL = 0x20)
            if any(isinstance(t, ast.Name) and _MASK_NAME.fullmatch(t.id) for t in node.targets):
                found.append(node.lineno)
    return found


def test_no_module_retypes_the_attribute_bits():
    """The masks are written once (record_batch.py; legacy.py holds LegacyRecord's own): every other module
    asks a BatchHeader predicate or uses the named mask."""
    from pathlib import Path

    pkg = Path(rb.__file__).resolve().parents[1]
    own = {pkg / "format" / "record_batch.py", pkg / "format" / "legacy.py"}
    offenders = {str(p.relative_to(pkg.parent)): lines for p in sorted(pkg.rglob("*.py"))
                 if p not in own and (lines := _attribute_bits_by_number(p))}
    assert not offenders, f"attribute bits tested by number (use record_batch's masks or predicates): {offenders}"


def test_the_retyping_check_sees_a_literal_mask(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("_CONTROL = 0x20\nRANK_CONTROL = 5\n\n\ndef f(h, attributes):\n"
                     "    return h.attributes & 0x10, attributes & 0x07, h.attributes & MASK\n")
    assert _attribute_bits_by_number(probe) == [1, 6, 6]
