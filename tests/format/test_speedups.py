"""The compiled fast path (kafkatx/format/_batch.c) against the pure-Python reference.

Every comparison runs the same public calls twice -- once with the extension,
once under ``compiled.pure_python()`` (the pure-Python loops) -- and
requires identical results: the same headers, the same Record values of the very
same class, and the same DecodeError subclass, message and position at the same
point of the iteration.
"""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

import kafkatx.format.record_batch as rb
from kafkatx.errors import BadLength, BadVarint, DecodeError, Truncated
from kafkatx.format import compiled
from kafkatx.format.record_batch import (
    Compression,
    Record,
    TimestampType,
    build_batch,
    crc_valid,
    iter_batches,
    iter_records,
)
from kafkatx.format.varint import encode_varint, encode_varlong
from tests.format.conftest import record_lists
from tests.format.test_record_batch_corrupt import VALID, _refix_crc, _single_record_batch

ROOT = Path(__file__).resolve().parents[2]

# Whether the extension must be there (a C compiler on PATH and no KAFKATX_PURE_PYTHON) is
# tests/format/test_speedups_guard.py's job: it is a separate module so that this skip cannot hide it.
sp = pytest.importorskip("kafkatx.format._batch")
if not compiled.active("kafkatx.format._batch"):
    pytest.skip("KAFKATX_PURE_PYTHON is set: nothing compiled to compare", allow_module_level=True)


def _path(fast: bool) -> contextlib.AbstractContextManager[None]:
    return compiled.pure_python(not fast)


def _err(e: DecodeError) -> tuple:
    return ("error", type(e), e.message, e.position, str(e))


def _walk(buf, *, start: int = 0, verify_crc: bool = False,  # type: ignore[no-untyped-def]
          max_decompressed: int = 1 << 22) -> list:
    """Everything the public reader API says about ``buf``, errors included, in order."""
    out: list = []
    try:
        for h in iter_batches(buf, start, verify_crc=verify_crc):
            out.append(("header", type(h), h, crc_valid(buf, h)))
            try:
                for r in iter_records(buf, h, max_decompressed=max_decompressed):
                    out.append(("record", type(r), r))
            except DecodeError as e:
                out.append(_err(e))
    except DecodeError as e:
        out.append(_err(e))
    return out


def _same(buf, **kw) -> list:  # type: ignore[no-untyped-def]
    with _path(True):
        fast = _walk(buf, **kw)
    with _path(False):
        slow = _walk(buf, **kw)
    assert fast == slow
    return fast


def test_extension_is_active_by_default() -> None:
    if os.environ.get("KAFKATX_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("KAFKATX_PURE_PYTHON is set for this run")
    assert rb._batch is sp and compiled.modules()["kafkatx.format._batch"] is sp


def test_pure_python_env_var_forces_the_python_path() -> None:
    # every layer: record_batch, segment_fold, txn_log, the partition folder reads, the txn fold and the dump renderer
    code = ("import kafkatx.format.record_batch as rb, kafkatx.format.segment_fold as sf, kafkatx.format.txn_log as tl, "
            "kafkatx.storage.partition as pa, kafkatx.storage.producer_state as fo, kafkatx.coordinator.state_manager as co, "
            "kafkatx.render.kafka_dump as kd; from kafkatx.format import compiled; "
            "print(rb._batch is None, [m is None for m in (sf._fold, tl._txn_log, pa._partition, fo._replay, "
            "co._coordinator, kd._dump)], len(compiled.modules()))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KAFKATX_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True [True, True, True, True, True, True] 0"
    env["KAFKATX_PURE_PYTHON"] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False [False, False, False, False, False, False] 7"


def test_compiled_records_are_ordinary_frozen_records() -> None:
    recs = [Record(offset=5, timestamp=9, key=b"k", value=None, headers=(("a", b"1"), ("b", None)))]
    buf = build_batch(recs)
    with _path(True):
        (r,) = iter_records(buf, next(iter_batches(buf)))
    assert type(r) is Record and r == recs[0] and hash(r) == hash(recs[0]) and repr(r) == repr(recs[0])
    with pytest.raises(AttributeError):
        r.offset = 6  # type: ignore[misc]


# ------------------------------------------------------------------ valid batches


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=record_lists(), log_append=st.booleans(), txn=st.booleans(), prefix=st.binary(max_size=3))
def test_hypothesis_batches_every_codec(codec: Compression, recs: list[Record], log_append: bool,
                                        txn: bool, prefix: bytes) -> None:
    ts_type = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    batch = build_batch(recs, compression=codec, timestamp_type=ts_type, is_transactional=txn,
                        producer_id=7, producer_epoch=1, base_sequence=0)
    buf = prefix + batch + batch
    out = _same(buf, start=len(prefix), verify_crc=True)
    records = [x[2] for x in out if x[0] == "record"]
    if log_append:
        assert {r.timestamp for r in records} == {max(r.timestamp for r in recs)}
    else:
        assert records == recs + recs
    assert all(x[0] != "error" for x in out)


@pytest.mark.parametrize("as_mmap", [False, True])
def test_fixture_segments(as_mmap: bool, tmp_path: Path) -> None:
    logs = sorted(glob.glob(str(ROOT / "fixtures" / "*" / "*" / "*.log")))
    assert logs, "no fixture segments found"
    total = 0
    for path in logs:
        with open(path, "rb") as f:
            if as_mmap:
                if os.fstat(f.fileno()).st_size == 0:
                    continue
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    total += len(_same(m, verify_crc=True))
            else:
                total += len(_same(f.read()))
    assert total > 0


@pytest.mark.parametrize("gzip", [False, True])
@settings(max_examples=30, deadline=None)
@given(recs=record_lists())
def test_kafka_python_built_batches(gzip: bool, recs: list[Record]) -> None:
    base = recs[0].offset
    builder = KpBuilder(magic=2, compression_type=1 if gzip else 0, is_transactional=False, producer_id=-1,
                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for r in recs:
        builder.append(r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    data = bytes(builder.build())
    struct.pack_into(">q", data := bytearray(data), 0, base)
    out = _same(bytes(data))
    assert [x[2] for x in out if x[0] == "record"] == recs


def test_offsets_and_timestamps_past_int64() -> None:
    # Python ints do not overflow: neither may the C path. A base offset near 2**63
    # plus a delta, and a 10-byte timestamp delta carrying bits past 2**64.
    rec = (bytes([0]) + b"\xff" * 9 + b"\x7f" + encode_varint(2**31 - 1) + b"\x01\x01\x00")
    body = encode_varint(len(rec)) + rec
    hdr = struct.pack(">qiibIhiqqqhii", 2**63 - 2, 49 + len(body), 0, 2, 0, 0, 0, 2**63 - 1, 0, -1, -1, -1, 1)
    buf = _refix_crc(bytearray(hdr + body))
    out = _same(buf)
    (r,) = [x[2] for x in out if x[0] == "record"]
    assert r.offset == 2**63 - 2 + 2**31 - 1
    assert r.timestamp > 2**63 or r.timestamp < -(2**63)


def test_big_batch_decoded_in_chunks() -> None:
    n = rb._CHUNK * 2 + 17
    recs = [Record(offset=i, timestamp=i, key=None, value=b"v%d" % i) for i in range(n)]
    for codec in (Compression.NONE, Compression.ZSTD):
        out = _same(build_batch(recs, compression=codec))
        assert [x[2] for x in out if x[0] == "record"] == recs


def test_error_in_a_later_chunk() -> None:
    n = rb._CHUNK + 5
    recs = [Record(offset=i, timestamp=i, key=None, value=b"v") for i in range(n)]
    good = bytearray(build_batch(recs))
    good[-4] = 0x7F  # the last record's value length -> runs past the record
    for codec in (Compression.NONE, Compression.GZIP):
        if codec is Compression.NONE:
            buf = _refix_crc(good)
        else:
            from kafkatx.format.compression import compress
            body = compress(codec, bytes(good[61:]))
            hdr = bytearray(good[:61])
            struct.pack_into(">h", hdr, 21, int(codec))
            struct.pack_into(">i", hdr, 8, 49 + len(body))
            buf = _refix_crc(bytearray(bytes(hdr) + body))
        out = _same(buf)
        assert out[-1][0] == "error" and out[-1][1] is BadLength
        assert sum(x[0] == "record" for x in out) == n - 1


# ------------------------------------------------------------------ corrupt input

CRAFTED = [
    bytes([12, 0, 0, 0, 9, 1, 0]),                        # negative key length
    bytes([12, 0, 0, 0, 100, 1, 0]),                      # key past the record
    bytes([200, 1, 0, 0, 0, 1, 1, 0]),                    # record length past the batch
    bytes([14, 0]) + b"\xff" * 11 + b"\x00",              # varlong longer than 10 bytes
    bytes([12, 0, 0, 0, 1, 1, 0]) + b"\x00\x00",          # bytes left after the records
    bytes([2, 0]),                                        # record length 1
    bytes([0x80]),                                        # length varint cut after 1 byte
    bytes([0x80, 0x80]),                                  # length varint cut after 2 bytes (BadVarint)
    bytes([0xff, 0xff, 0xff, 0xff, 0x7f]),                # length > 32 bits
    bytes([0xff] * 6),                                    # varint longer than 5 bytes
    bytes([12, 0, 0, 0, 1, 5, 0]),                        # negative value length
    bytes([12, 0, 0, 0, 1, 40, 0]),                       # value past the record
    bytes([12, 0, 0, 0, 1, 1, 3]),                        # header count -2
    bytes([12, 0, 0, 0, 1, 1, 40]),                       # header count 20 in 0 bytes
    bytes([14, 0, 0, 0, 1, 1, 2, 3]),                     # header key length -2
    bytes([18, 0, 0, 0, 1, 1, 2, 2, 0xff, 1]),           # header key not UTF-8
    bytes([18, 0, 0, 0, 1, 1, 2, 2, 0xc3, 1]),           # header key cut UTF-8 sequence
    bytes([18, 0, 0, 0, 1, 1, 2, 2, 0x41, 5]),           # header value length -3
    bytes([18, 0, 0, 0, 1, 1, 2, 2, 0x41, 40]),          # header value past the record
    bytes([16, 0, 0, 0, 1, 1, 2, 2, 0x41]),              # header value length past the data
    bytes([14, 0, 0, 0, 1, 1, 0]),                        # fields end before the declared length
    bytes([12, 0, 0, 0, 1, 1, 2, 0, 1]),                  # fields end after the declared length
    bytes([12, 0, 0, 0, 1, 1]),                           # header count past the data
    bytes([12, 0, 0x80, 0x80, 0x80]),                     # ts varint past the data (BadVarint)
    bytes([12, 0, 0, 0x80]),                              # offset varint cut (Truncated)
    bytes([12, 0, 0, 0, 1, 1, 0x81, 0x80, 0x80, 0x80, 0x80, 0]),  # header count varint too long
]


@pytest.mark.parametrize("body", CRAFTED, ids=range(len(CRAFTED)))
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_crafted_record_errors(body: bytes, codec: Compression) -> None:
    if codec is Compression.NONE:
        buf = b"\xaa" * 5 + _single_record_batch(body)
    else:
        from kafkatx.format.compression import compress
        cbody = compress(codec, body)
        hdr = bytearray(struct.pack(">qiibIhiqqqhii", 0, 49 + len(cbody), 0, 2, 0, int(codec), 0, 0, 0,
                                    -1, -1, -1, 1))
        buf = b"\xaa" * 5 + _refix_crc(bytearray(bytes(hdr) + cbody))
    out = _same(buf, start=5, verify_crc=True)
    assert out[-1][0] == "error"
    assert issubclass(out[-1][1], DecodeError)


def test_crafted_corpus_covers_every_error_kind() -> None:
    kinds = set()
    for body in CRAFTED:
        with _path(True):
            out = _walk(_single_record_batch(body))
        kinds.add(out[-1][1])
    assert {BadLength, Truncated, BadVarint, DecodeError} <= kinds


def _mutate(base: bytes, flips: list[tuple[int, int]], cut: int, fix_crc: bool) -> bytes:
    buf = bytearray(base)
    for pos, val in flips:
        buf[pos % len(buf)] = val
    if fix_crc and len(buf) > 21 and buf[16] == 2:
        _refix_crc(buf)
    return bytes(buf[: len(buf) - cut % 8])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       st.integers(0, 10**6), st.booleans(), st.booleans())
def test_mutated_batches_agree(base: bytes, flips: list[tuple[int, int]], cut: int, fix_crc: bool,
                               verify: bool) -> None:
    _same(_mutate(base, flips, cut, fix_crc), verify_crc=verify)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 255), min_size=1, max_size=60), st.integers(1, 20))
def test_random_record_sections_agree(body: list[int], count: int) -> None:
    hdr = bytearray(struct.pack(">qiibIhiqqqhii", 3, 49 + len(body), 0, 2, 0, 0, 0, 100, 200, -1, -1, -1,
                                count))
    _same(_refix_crc(bytearray(bytes(hdr) + bytes(body))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_agree(buf: bytes) -> None:
    _same(buf, verify_crc=True)
    _same(buf)


def test_crc_mismatch_same_error() -> None:
    bad = bytearray(VALID[0])
    bad[-1] ^= 1
    out = _same(VALID[0] + bytes(bad), verify_crc=True)
    assert out[-1][1].__name__ == "CrcMismatch" and out[-1][3] == len(VALID[0]) + 17


# ------------------------------------------------------------------ crc32c and edge buffers


@given(st.binary(max_size=5000), st.integers(0, 20))
def test_crc32c_matches_the_crc32c_package(data: bytes, skip: int) -> None:
    skip = min(skip, len(data))
    assert sp.crc32c(data, skip, len(data)) == crc32c.crc32c(data[skip:])


@pytest.mark.parametrize("length", [0, 7, 8, 383, 384, 385, 767, 768, 1142, 6143, 6144, 6145, 6144 + 384 + 7,
                                    12288 + 383, 65537, 1 << 20])
def test_crc32c_three_streams_at_their_block_edges(length: int) -> None:
    """The hardware path joins three streams per round of 3 x 2048 and 3 x 128 bytes, then goes on
    one stream: every edge between those, at every alignment, gives the crc32c package's CRC."""
    data = bytes((i * 131 + length) & 0xFF for i in range(length + 8))
    for skip in range(8):
        assert sp.crc32c(data, skip, skip + length) == crc32c.crc32c(data[skip:skip + length]), skip


def test_crc32c_rejects_ranges_outside_the_buffer() -> None:
    with pytest.raises(ValueError):
        sp.crc32c(b"abc", 0, 4)
    with pytest.raises(ValueError):
        sp.crc32c(b"abc", 2, 1)


def test_memoryview_and_bytearray_buffers() -> None:
    buf = b"".join(VALID)
    ref = _same(buf)
    assert _same(bytearray(buf)) == ref
    assert _same(memoryview(buf)) == ref
    # a strided view is never handed to the C code (which reads flat bytes)
    assert rb._direct(memoryview(buf)) and not rb._direct(memoryview(buf + buf)[::2])


def test_mmap_can_close_after_iteration_starts(tmp_path: Path) -> None:
    recs = [Record(offset=i, timestamp=i, key=None, value=b"x") for i in range(10)]
    p = tmp_path / "00.log"
    p.write_bytes(build_batch(recs))
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with _path(True):
            h = next(iter_batches(m))
            it = iter_records(m, h)
        m.close()  # no buffer export may outlive a call into the extension
        assert list(it) == recs


def test_setup_rejects_unslotted_classes() -> None:
    class Plain:
        pass

    with pytest.raises(TypeError):
        sp.setup(Plain, rb.BatchHeader)
    sp.setup(rb.Record, rb.BatchHeader)  # restore


def test_decode_records_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        sp.decode_records(b"abc", 0, 10, 0, 0, 1, 0, 0, None, 10)
    with pytest.raises(ValueError):
        sp.decode_records(b"abc", 0, 3, 5, 0, 1, 0, 0, None, 10)
    with pytest.raises(TypeError):
        sp.decode_records(b"abc", 0, 3, 0, 0, 1, 0, 0, "x", 10)


def test_encode_helpers_roundtrip_in_the_big_ts_case() -> None:
    # sanity of the crafted bytes above: a 10-byte varlong is what encode_varlong
    # makes for the extreme deltas Kafka can write
    assert len(encode_varlong(-(2**63))) == 10


def _last_reference(buf, start: int, verify: bool) -> tuple:  # type: ignore[no-untyped-def]
    """What iter_batches(last_only=True) must end with: the last header iter_batches yields and the error it stops at."""
    seen = None
    try:
        for h in iter_batches(buf, start, verify_crc=verify):
            seen = h
    except DecodeError as e:
        return seen, _err(e)
    return seen, None


def _last(buf, start: int, verify: bool) -> tuple:  # type: ignore[no-untyped-def]
    seen = None
    try:
        for seen in rb.iter_batches(buf, start, verify_crc=verify, last_only=True):  # noqa: B007
            pass
    except DecodeError as e:
        return seen, _err(e)
    return seen, None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(VALID), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
       st.integers(0, 10**6), st.booleans(), st.booleans(), st.integers(0, 3))
def test_last_only_equals_the_last_header_iter_batches_yields(parts: list[bytes], flips: list[tuple[int, int]],
                                                               cut: int, fix_crc: bool, verify: bool,
                                                               skip: int) -> None:
    """``iter_batches(last_only=True)`` (the log end and recovery scans) on the compiled path (one header made, not one per
    batch) and the pure-Python path, against iter_batches itself; legacy batches and damage included."""
    buf = b"".join(parts[:-1]) + _mutate(parts[-1], flips, cut, fix_crc)
    start = sum(len(p) for p in parts[:min(skip, len(parts) - 1)])
    with _path(False):
        want = _last_reference(buf, start, verify)
        assert _last(buf, start, verify) == want
    with _path(True):
        assert _last_reference(buf, start, verify) == want
        assert _last(buf, start, verify) == want


def test_scan_headers_last_only_mode() -> None:
    buf = b"".join(VALID)
    with _path(True):
        every = list(iter_batches(buf))
    hdrs, pos, bad = sp.scan_headers(buf, 0, len(buf), False, -1, 1 << 62)
    two = [h for h in every if h.magic == 2]
    # C frames the magic-2 prefix and makes only its last header.
    prefix = 0
    for h in every:
        if h.magic != 2:
            break
        prefix += 1
    assert (hdrs, pos, bad) == ([every[prefix - 1]] if prefix else [], every[prefix - 1].position
                                + every[prefix - 1].size if prefix else 0, None)
    assert two  # the corpus has magic-2 batches
    with pytest.raises(ValueError):
        sp.scan_headers(buf, 0, len(buf), False, 0, 100)


def _last_and_error(buf, **kw):  # type: ignore[no-untyped-def]
    from collections import deque

    last: deque = deque(maxlen=1)
    seen = 0
    try:
        for h in rb.iter_batches(buf, **kw):
            seen += 1
            last.append(h)
    except DecodeError as err:
        return (list(last), type(err), err.message, err.position), seen
    return (list(last), None), seen


def test_last_only_ends_with_the_very_batch_and_error_of_the_full_scan() -> None:
    """``iter_batches(last_only=True)`` (the loader's recovery scan, the log end) builds only the last
    header of each compiled scan; what a keep-the-last caller sees must not change."""
    good = [build_batch([Record(offset=o, timestamp=5, key=b"k", value=b"v" * 30)], producer_id=3,
                        producer_epoch=0, base_sequence=o) for o in range(0, 40, 2)]
    legacy = build_batch([Record(offset=40, timestamp=5, key=b"k", value=b"old")], magic=1)
    bad = bytearray(good[5])
    bad[-1] ^= 1
    cases = {
        "clean": b"".join(good),
        "legacy in the middle": b"".join(good[:10]) + legacy + b"".join(good[10:]),
        "bad CRC": b"".join(good[:5]) + bytes(bad) + b"".join(good[6:]),
        "torn tail": b"".join(good) + good[0][:30],
        "garbage": b"".join(good[:7]) + b"\xff" * 70,
        "empty": b"",
    }
    for name, raw in cases.items():
        for verify in (False, True):
            full, n_full = _last_and_error(raw, verify_crc=verify)
            last, n_last = _last_and_error(raw, verify_crc=verify, last_only=True)
            assert last == full, (name, verify)
            if n_full > 3:
                assert n_last < n_full, (name, verify)  # the headers between were never built


def test_compiled_crc32c_matches_the_package_at_every_length_and_alignment() -> None:
    """``_wire.h``'s CRC-32C (the hardware path where the CPU has it: 8-byte steps from wherever a short
    buffer starts, then 4/2/1-byte steps; three streams for long ones) against the ``crc32c`` package:
    every length up to past the three-stream thresholds, at every start modulo 8."""
    data = bytes((i * 131 + (i >> 3) * 7 + 11) & 0xFF for i in range(7000))
    lengths = [*range(0, 420), *range(6100, 6160)]  # < 3 * 128 bytes, the short streams, the long ones
    for start in range(8):
        for n in lengths:
            assert sp.crc32c(data, start, start + n) == crc32c.crc32c(data[start:start + n]), (start, n)
