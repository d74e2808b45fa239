"""dump-segment's compiled rendering (``kafkatx.render._dump.render_batches``) against the per-batch Python path.

Every comparison runs the very same ``kafkatx dump-segment`` twice in this process -- once with
the C extension, once under ``compiled.pure_python()`` (what ``KAFKATX_PURE_PYTHON=1``
gives: every batch through ``kafkatx.render.dump._batch_rows`` and ``emit``) -- and requires the same
exit code, the same stderr and byte-identical stdout. The segments hold what the compiled path
must render exactly (headers, null keys/values, non-UTF-8 and non-printable payloads, JSON
escapes, LogAppendTime, delete horizons, sequence wrap-around, control batches, compressed batches
decompressed for deep iteration) and what it must hand back to the Python path (magic 0/1, corrupt
records, CRC mismatches, unusual control records, trailing bytes).
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatx.format import compiled as compiled_mod
from kafkatx.format.control import ControlType, encode_control_key
from kafkatx.format.legacy import build_message_set
from kafkatx.format.record_batch import Compression, Record, TimestampType, build_batch, build_control_batch
from kafkatx.render import emit
from kafkatx.render import kafka_dump as kd
from kafkatx.render.formats import Rendered
from kafkatx.storage.segment import map_file
from tests.format.conftest import record_lists

needs_c = pytest.mark.skipif(kd._dump is None, reason="no compiled code (KAFKATX_PURE_PYTHON=1, or the "
                             "C extension not built: python setup.py build_ext --inplace): nothing to compare")

SPECIAL_PAYLOADS = [
    b"", b"plain text", b"\x00\xffbinary", b"\x01ctl", b"del\x7f", b"tab\tnew\nline\rcr",
    b'quote" back\\slash', "caf\u00e9 \u20ac \U0001F600".encode(), "zero\u200bwidth".encode(),
    "nb\u00a0sp".encode(), "line\u2028sep".encode(), b"\xc3\x28 bad utf8", b"\xed\xa0\x80 surrogate",
    ("x" * 40 + '"' + "y" * 17 + "\\").encode(), bytes(range(32)),
]


def _with_attributes(batch: bytes, extra: int) -> bytes:
    """The batch with ``extra`` attribute bits set and its CRC-32C recomputed."""
    b = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", b, 21)
    struct.pack_into(">h", b, 21, attributes | extra)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def _with_count(batch: bytes, count: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def _batches() -> list[bytes]:
    out = []
    offset = 0

    def take(n: int) -> int:
        nonlocal offset
        first, offset = offset, offset + n
        return first

    o = take(len(SPECIAL_PAYLOADS))
    out.append(build_batch([Record(offset=o + i, timestamp=1_000 + i, key=p, value=SPECIAL_PAYLOADS[-1 - i],
                                   headers=((f"h{i}", p), ('k"\\\x01\u00e9', None), ("", b"")))
                            for i, p in enumerate(SPECIAL_PAYLOADS)],
                           producer_id=7, producer_epoch=1, base_sequence=2**31 - 3, is_transactional=True))
    out.append(build_control_batch(offset=take(1), control_type=ControlType.COMMIT, producer_id=7,
                                   producer_epoch=1, coordinator_epoch=9, timestamp=1_100))
    o = take(3)
    out.append(build_batch([Record(offset=o + i, timestamp=1_200 + i, key=None, value=None) for i in range(3)],
                           timestamp_type=TimestampType.LOG_APPEND_TIME))
    o = take(2)
    out.append(_with_attributes(build_batch([Record(offset=o + i, timestamp=1_300, key=b"k", value=b"v")
                                             for i in range(2)]), 0x40))  # delete horizon
    o = take(1)
    out.append(build_batch([Record(offset=o, timestamp=-1, key=b"no-ts", value=b"x")]))  # NO_TIMESTAMP
    o = take(1)  # a control batch of another type (LEADER_CHANGE), and one of an unknown type
    out.append(build_batch([Record(offset=o, timestamp=1_400, key=encode_control_key(2), value=b"\x00\x00")],
                           is_control=True))
    o = take(1)
    out.append(build_batch([Record(offset=o, timestamp=1_401, key=encode_control_key(77), value=None)],
                           is_control=True))
    o = take(1)  # a control record Kafka's parser refuses: the Python path reports it
    out.append(build_batch([Record(offset=o, timestamp=1_402, key=b"\x00", value=None)], is_control=True,
                           is_transactional=True, producer_id=7, producer_epoch=1))
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        o = take(3)
        out.append(build_batch([Record(offset=o + i, timestamp=1_500 + i, key=b"c", value=b"\xfe" * i)
                                for i in range(3)], compression=codec))
    o = take(2)
    out.append(build_message_set([(o, -1, b"m0", b"legacy0"), (o + 1, -1, None, b"\x00")], magic=0))
    o = take(2)
    out.append(build_message_set([(o, 1_600, b"m1", b"legacy1"), (o + 1, 1_601, b"k", None)], magic=1,
                                 compression=Compression.GZIP))
    o = take(2)  # records that do not decode inside an intact batch (count says 3, holds 2)
    out.append(_with_count(build_batch([Record(offset=o + i, timestamp=1_700, key=b"a", value=b"b")
                                        for i in range(2)]), 3))
    o = take(2)  # a CRC mismatch
    bad = bytearray(build_batch([Record(offset=o + i, timestamp=1_800, key=b"a", value=b"crc")
                                 for i in range(2)]))
    bad[-2] ^= 0xFF
    out.append(bytes(bad))
    o = take(2)
    out.append(build_batch([Record(offset=o + i, timestamp=1_900, key=b"after", value=b"\xff")
                            for i in range(2)], partition_leader_epoch=3))
    out.append(build_control_batch(offset=take(1), control_type=ControlType.ABORT, producer_id=7,
                                   producer_epoch=1, coordinator_epoch=-1, timestamp=2_000))
    values = [None, b"", b"x", None, b"x", b"y", b""]  # one header key, values alike and not (null vs empty)
    o = take(len(values))
    out.append(build_batch([Record(offset=o + i, timestamp=2_100, key=b"k", value=b"v",
                                   headers=(("same", v), ("k2", b"x")) if i % 2 else (("same", v),))
                            for i, v in enumerate(values)]))
    return out


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    folder = tmp_path / "orders-0"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(b"".join(_batches()) + b"\x00\x00\x00\x07garbage")
    return log


def _dump(invoke, monkeypatch, compiled: bool, *args: object) -> tuple[int, bytes, str]:
    with compiled_mod.pure_python(not compiled):
        result = invoke("dump-segment", *args)
    return result.exit_code, result.stdout_bytes, result.stderr


def _same(invoke, monkeypatch, *args: object) -> bytes:
    compiled = _dump(invoke, monkeypatch, True, *args)
    python = _dump(invoke, monkeypatch, False, *args)
    assert compiled == python
    return compiled[1]


FLAGS = [
    (), ("--deep-iteration",), ("--print-data",), ("--no-verify-crc", "--deep-iteration"),
    ("--print-data", "--payload-encoding", "base64"), ("--deep-iteration", "--payload-encoding", "base64"),
    ("--deep-iteration", "--start-offset", "20", "--end-offset", "40"), ("--deep-iteration", "--max-bytes", "3000"),
    ("--print-data", "--no-verify-crc", "--start-offset", "3"),
]


@needs_c
@pytest.mark.parametrize("flags", [("--print-data-log",), ("--print-data-log", "--no-verify-crc"),
                                   ("--deep-iteration", "--max-bytes", "3000")], ids=" ".join)
def test_kafka_dump_log_form_renders_identically(invoke, monkeypatch, mixed, flags):
    """--files: payloads as Kafka's StringDecoder prints them, written by the compiled code when they
    are UTF-8 (control characters as they are) and by Python (U+FFFD) when not."""
    out = _same(invoke, monkeypatch, "--files", mixed, *flags)
    assert out.startswith(b"Dumping ")


@needs_c
@pytest.mark.parametrize("fmt", ["jsonl", "text", "json"])  # json: never compiled, still the same
@pytest.mark.parametrize("flags", FLAGS, ids=" ".join)
def test_compiled_rendering_is_byte_identical(invoke, monkeypatch, mixed, fmt, flags):
    out = _same(invoke, monkeypatch, *flags, "--format", fmt, mixed)
    assert out  # something was dumped


@needs_c
def test_compiled_path_renders_and_stops_where_python_must_take_over(mixed):
    batches = _batches()
    with map_file(mixed) as buf:
        done = kd.render_batches(buf, 0, len(buf), fmt="jsonl", deep=True, print_data=False, verify_crc=True,
                                 base64=False, start_offset=None, end_offset=None)
    assert done is not None
    rendered, reached, stop = done
    assert isinstance(rendered, Rendered) and rendered.fmt == "jsonl"
    # the first seven batches are clean; the eighth has a control record Kafka refuses
    assert reached == sum(len(b) for b in batches[:7]) and not stop
    assert rendered.data.count(b"\n") == 7


@needs_c
def test_end_offset_stops_the_compiled_path(mixed):
    with map_file(mixed) as buf:
        done = kd.render_batches(buf, 0, len(buf), fmt="text", deep=False, print_data=False, verify_crc=False,
                                 base64=False, start_offset=None, end_offset=16)
    assert done is not None
    rendered, reached, stop = done
    assert stop and rendered is not None
    assert rendered.data.decode().splitlines()[-1].startswith("baseOffset: 16 lastOffset: 18 ")  # holds 16; 19.. stops


@needs_c
def test_a_transaction_log_decoder_keeps_the_python_path(invoke, monkeypatch, tmp_path):
    from kafkatx.format.txn_log import encode_txn_log_key

    folder = tmp_path / "__transaction_state-0"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(build_batch([Record(offset=0, timestamp=5, key=encode_txn_log_key("tx"), value=None)]))
    out = _same(invoke, monkeypatch, "--deep-iteration", "--format", "jsonl", log)
    assert b'"decoded":' in out


payloads = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=20).map(str.encode),
                     st.sampled_from(SPECIAL_PAYLOADS))


@st.composite
def segments(draw: st.DrawFn) -> bytes:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        recs = draw(record_lists(max_size=6))
        recs = [Record(offset=r.offset, timestamp=r.timestamp, key=draw(payloads), value=draw(payloads),
                       headers=r.headers) for r in recs]
        out.append(build_batch(recs, compression=draw(st.sampled_from([Compression.NONE, Compression.NONE,
                                                                       Compression.LZ4])),
                               timestamp_type=draw(st.sampled_from(list(TimestampType)[1:])),
                               base_sequence=draw(st.sampled_from([-1, 0, 2**31 - 2])),
                               producer_id=draw(st.sampled_from([-1, 1, 2**62]))))
    return b"".join(out)


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=segments(), base64=st.booleans())
def test_generated_segments_render_identically(invoke, monkeypatch, tmp_path, data, base64):
    log = tmp_path / "topic-0" / f"{0:020d}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_bytes(data)
    enc = ("--payload-encoding", "base64" if base64 else "hex")
    _same(invoke, monkeypatch, "--deep-iteration", "--format", "jsonl", *enc, log)
    _same(invoke, monkeypatch, "--print-data", *enc, log)
    _same(invoke, monkeypatch, "--files", log, "--print-data-log")  # kafka-dump-log.sh's raw strings


def test_emit_writes_rendered_rows_as_they_are():
    out = io.StringIO()  # no byte stream underneath: the text is written
    emit(iter([{"a": 1}, Rendered("jsonl", '{"b":"\u00e9"}\n'.encode()), {"c": None}]), "jsonl", out=out)
    assert out.getvalue() == '{"a":1}\n{"b":"\u00e9"}\n{"c":null}\n'
    raw = io.BytesIO()
    wrapper = io.TextIOWrapper(raw, encoding="utf-8")
    emit(iter(["first", Rendered("text", b"second\n"), "third"]), "text", out=wrapper)
    assert raw.getvalue() == b"first\nsecond\nthird\n"
    with pytest.raises(ValueError, match="rendered as text"):
        emit([Rendered("text", b"x\n")], "jsonl", out=io.StringIO())


@needs_c
def test_compressed_batches_are_rendered_compiled_when_deep(mixed):
    batches = _batches()
    at = sum(len(b) for b in batches[:8])  # the gzip, snappy, lz4 and zstd batches, then magic 0
    with map_file(mixed) as buf:
        done = kd.render_batches(buf, at, len(buf), fmt="jsonl", deep=True, print_data=False, verify_crc=True,
                                 base64=False, start_offset=None, end_offset=None)
    assert done is not None
    rendered, reached, _ = done
    assert rendered is not None and reached == at + sum(len(b) for b in batches[8:12])
    rows = rendered.data.decode().splitlines()
    assert [r.split('"compression":"')[1].split('"')[0] for r in rows] == ["gzip", "snappy", "lz4", "zstd"]
    assert all('"value":"fefe"' in r for r in rows)


# ------------------------------------------------------------------ jsonl: objects built in C, JSON by msgspec


def _python_rows(invoke, monkeypatch, log: Path, *args: str) -> list[dict]:
    code, out, _ = _dump(invoke, monkeypatch, False, "--format", "jsonl", *args, log)
    return [json.loads(line) for line in out.decode().splitlines()]


def test_row_classes_carry_the_python_paths_keys_in_order(invoke, monkeypatch, mixed):
    from kafkatx.render import rows as jsonl_rows

    rows = _python_rows(invoke, monkeypatch, mixed, "--deep-iteration")
    first = rows[0]  # 15 records with headers, from the per-batch dicts (render.dump._batch_row)
    assert jsonl_rows.BatchRow.__struct_fields__ == tuple(first)
    assert jsonl_rows.RecordRow.__struct_fields__ == tuple(first["records"][0])
    assert jsonl_rows.HeaderRow.__struct_fields__ == tuple(first["records"][0]["headers"][0])
    shallow = _python_rows(invoke, monkeypatch, mixed)[0]
    assert tuple(shallow) == jsonl_rows.BatchRow.__struct_fields__[:-1]  # no "records" key without deep


@needs_c
@pytest.mark.parametrize("deep", [False, True])
def test_compiled_jsonl_is_row_objects_equal_to_the_python_rows(invoke, monkeypatch, mixed, deep):
    import msgspec

    from kafkatx.render import rows as jsonl_rows

    expected = _python_rows(invoke, monkeypatch, mixed, *(["--deep-iteration"] if deep else []))
    sp = kd._dump
    kd._jsonl_rows(sp)
    flags = (1 if deep else 0) | 2
    with map_file(mixed) as buf:
        rows, reached, stop = sp.render_batches(buf, 0, len(buf), False, flags, None, None, 1 << 20)
    assert isinstance(rows, list) and len(rows) == 7 and not stop  # the clean batches before the odd control one
    assert all(type(r) is jsonl_rows.BatchRow for r in rows)
    if deep:
        assert all(type(rec) is jsonl_rows.RecordRow for r in rows for rec in r.records)
        assert type(rows[0].records[0].headers[0]) is jsonl_rows.HeaderRow
    else:
        assert all(r.records is msgspec.UNSET for r in rows)
    assert [_plain(r) for r in rows] == expected[:7]


def _plain(value):
    """A row object as the dict/list values it stands for (no JSON involved)."""
    import msgspec

    if isinstance(value, msgspec.Struct):
        return {f: _plain(getattr(value, f)) for f in value.__struct_fields__
                if getattr(value, f) is not msgspec.UNSET}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@needs_c
def test_without_msgspec_jsonl_takes_the_per_batch_path(invoke, monkeypatch, mixed):
    with_rows = _dump(invoke, monkeypatch, True, "--deep-iteration", "--format", "jsonl", mixed)
    monkeypatch.setattr(kd, "_rows_ready", False)  # what a failed `import msgspec` leaves
    with map_file(mixed) as buf:
        assert kd.render_batches(buf, 0, len(buf), fmt="jsonl", deep=True, print_data=False, verify_crc=True,
                                 base64=False, start_offset=None, end_offset=None) is None
    assert _dump(invoke, monkeypatch, True, "--deep-iteration", "--format", "jsonl", mixed) == with_rows


ints = st.one_of(st.integers(-(2**63), 2**64 - 1), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**63]))
strs = st.one_of(st.text(), st.sampled_from([s.decode("utf-8", "replace") for s in SPECIAL_PAYLOADS]))


@given(offset=ints, ts=st.none() | ints, key=st.none() | strs, value=st.none() | strs,
       headers=st.lists(st.tuples(strs, st.none() | strs), max_size=3), flag=st.none() | st.booleans())
@settings(max_examples=300, deadline=None)
def test_msgspec_writes_what_the_python_path_writes(offset, ts, key, value, headers, flag):
    """The same values as dicts through render.formats.json_line (orjson, the stdlib for what orjson
    refuses) and as row objects through msgspec: the same line (escapes, non-ASCII, big ints, None)."""
    from kafkatx.render import rows as jsonl_rows
    from kafkatx.render.formats import json_line

    hdrs = tuple(jsonl_rows.HeaderRow(k, v) for k, v in headers)
    rec = jsonl_rows.RecordRow(offset, ts, key, value, hdrs)
    batch = jsonl_rows.BatchRow(offset, offset, 1, 0, 61, 2, 4294967295, flag, value or "none", -1, offset, -1,
                                -1, -1, bool(flag), False, key, ts, ts, None, (rec,))
    rec_dict = {"offset": offset, "timestamp_ms": ts, "key": key, "value": value,
                "headers": [{"key": k, "value": v} for k, v in headers]}
    batch_dict = {"base_offset": offset, "last_offset": offset, "count": 1, "position": 0, "size": 61, "magic": 2,
                  "crc": 4294967295, "crc_valid": flag, "compression": value or "none",
                  "partition_leader_epoch": -1, "producer_id": offset, "producer_epoch": -1, "base_sequence": -1,
                  "last_sequence": -1, "is_transactional": bool(flag), "is_control": False, "control_type": key,
                  "coordinator_epoch": ts, "base_timestamp_ms": ts, "max_timestamp_ms": None,
                  "records": [rec_dict]}
    got = jsonl_rows.encode_lines([batch, rec])
    assert got == (json_line(batch_dict) + "\n" + json_line(rec_dict) + "\n").encode()


@needs_c
def test_render_setup_refuses_row_classes_it_cannot_fill():
    """The compiled code stores the fields into the instances' slots: only plain gc=False Structs with
    exactly the expected fields, in order, are accepted."""
    import msgspec

    from kafkatx.render import rows as jr

    class Tracked(msgspec.Struct):  # gc=True: instances the collector must track
        key: str
        value: str | None

    class Reordered(msgspec.Struct, gc=False):
        value: str | None
        key: str

    class Wider(msgspec.Struct, gc=False):
        key: str
        value: str | None
        extra: int = 0

    sp = kd._dump
    kd._jsonl_rows(sp)
    try:
        for bad in (Tracked, Reordered, Wider):
            with pytest.raises(TypeError):
                sp.render_setup(jr.BatchRow, jr.RecordRow, bad, msgspec.UNSET)
            with pytest.raises(RuntimeError, match="render_setup"):  # refused: no jsonl rows until set up again
                sp.render_batches(b"", 0, 0, False, 0, None, None, 1)
    finally:
        sp.render_setup(jr.BatchRow, jr.RecordRow, jr.HeaderRow, msgspec.UNSET)
    assert sp.render_batches(b"", 0, 0, False, 0, None, None, 1) == ([], 0, False)
