"""``batches/`` rows made a column at a time from the framer's arrays (``spark/tasks.batch_rows``) against
the per-batch reference (``rows.decode_segment``: one ``BatchHeader`` per batch, its CRC checked, its control
record read), on random segments: every codec, idempotent and transactional batches, markers (COMMIT, ABORT,
one whose record does not read, one with no record), base sequences at NO_SEQUENCE (-1) and near
Integer.MAX_VALUE (``DefaultRecordBatch.lastSequence`` wraps there), producer id -1, a batch whose CRC fails,
legacy magic 0/1 batches (the reference reads those), garbage and a cut tail; and byte ranges of segments,
several segments to a bin, and flush sizes small enough to cut segments.

The expectation is always the reference's rows, read by the per-batch code, never batch_rows' own output.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from kafkatx.format import compiled  # noqa: E402
from kafkatx.format.control import ControlType  # noqa: E402
from kafkatx.format.record_batch import (  # noqa: E402
    Compression,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
)
from kafkatx.spark import rows as R  # noqa: E402
from kafkatx.spark import tasks as X  # noqa: E402
from tests.format.test_record_batch_corrupt import _refix_crc  # noqa: E402

INT32_MAX = 2**31 - 1  # Integer.MAX_VALUE
SEQUENCES = st.one_of(st.just(-1), st.integers(INT32_MAX - 4, INT32_MAX), st.integers(0, 1000),
                      st.integers(0, INT32_MAX))


@st.composite
def _magic2(draw: st.DrawFn, offset: int) -> bytes:
    kind = draw(st.sampled_from(["data", "commit", "abort", "bad-marker", "empty-marker"]))
    pid = draw(st.sampled_from([-1, 0, 7, 2**40]))
    if kind in ("commit", "abort", "empty-marker"):
        batch = build_control_batch(offset=offset, control_type=ControlType.ABORT if kind == "abort" else
                                    ControlType.COMMIT, producer_id=pid, producer_epoch=draw(st.integers(-1, 5)),
                                    coordinator_epoch=draw(st.integers(0, 2**31 - 1)), timestamp=offset)
        if kind == "empty-marker":  # recordsCount 0: no control record to read
            batch = _refix_crc(bytearray(batch[:57] + struct.pack(">i", 0) + batch[61:]))
        return batch
    n = draw(st.integers(1, 4))
    records = [Record(offset=offset + k, timestamp=1000 + k, key=b"k%d" % k if kind == "data" else b"\x00",
                      value=b"v" * k) for k in range(n)]
    return build_batch(records, compression=draw(st.sampled_from(list(Compression))),
                       partition_leader_epoch=draw(st.integers(-1, 3)), producer_id=pid,
                       producer_epoch=-1 if pid == -1 else draw(st.integers(0, 3)),
                       base_sequence=draw(SEQUENCES), is_transactional=kind == "bad-marker" or draw(st.booleans()),
                       is_control=kind == "bad-marker",  # a control batch whose record is no control record
                       timestamp_type=draw(st.sampled_from([TimestampType.CREATE_TIME,
                                                            TimestampType.LOG_APPEND_TIME])))


@st.composite
def segments(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """A segment's bytes and the positions of its batches."""
    parts: list[bytes] = []
    offset = 0
    legacy = draw(st.integers(0, 3)) == 0
    for _ in range(draw(st.integers(0, 12))):
        if legacy and draw(st.integers(0, 4)) == 0:
            magic = draw(st.sampled_from([0, 1]))
            parts.append(build_batch([Record(offset=offset, timestamp=5, key=b"k", value=b"v")], magic=magic,
                                     compression=draw(st.sampled_from([Compression.NONE, Compression.GZIP]))))
        else:
            parts.append(draw(_magic2(offset)))
        offset += 10
    if parts and draw(st.booleans()):  # a broken CRC: a byte of the records changed
        i = draw(st.integers(0, len(parts) - 1))
        if parts[i][16] == 2:
            broken = bytearray(parts[i])
            broken[-1] ^= 0x5A
            parts[i] = bytes(broken)
    positions = []
    pos = 0
    for p in parts:
        positions.append(pos)
        pos += len(p)
    buf = b"".join(parts)
    tail = draw(st.sampled_from(["none", "cut", "garbage"]))
    if tail == "cut" and buf:
        buf = buf[:len(buf) - draw(st.integers(1, min(80, len(buf))))]
    elif tail == "garbage":
        buf += draw(st.binary(min_size=1, max_size=40))
    return buf, positions


def _reference(tasks: list[R.SegmentTask]) -> tuple[list[tuple], list[tuple[int, int, int]]]:
    rows, counts = [], []
    for task in tasks:
        for kind, payload in R.decode_segment(task):
            if kind == R.BATCH:
                rows.append(payload)
            else:
                counts.append((payload.batches, payload.crc_errors, payload.decode_errors))
    return rows, counts


def _columnar(tasks: list[R.SegmentTask]) -> tuple[list[Any], list[tuple[int, int, int]]]:
    told: list[tuple[int, int, int]] = []
    work = [pa.record_batch({"work": [msgspec.msgpack.encode(tasks)]})]
    batches = list(X.batch_rows(work, lambda n, crc, err, _size: told.append((n, crc, err))))
    return batches, told


def _task(path: Path, buf: bytes, start: int = 0, end: int | None = None) -> R.SegmentTask:
    return R.SegmentTask(log_dir=str(path.parent.parent), topic="t", partition=3, partition_path=str(path.parent),
                         segment_path=str(path), segment_base_offset=int(path.stem), size=len(buf), chosen=True,
                         start=start, end=end)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(segments(), min_size=1, max_size=4), st.integers(1, 12), st.data())
def test_columnar_rows_equal_the_per_batch_reference(segs: list[tuple[bytes, list[int]]], flush: int,
                                                     data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tasks = []
        for i, (buf, positions) in enumerate(segs):
            path = Path(tmp, "log", "t-3", f"{100 * i:020d}.log")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(buf)
            start = data.draw(st.sampled_from(positions)) if positions and data.draw(st.booleans()) else 0
            end = data.draw(st.integers(start, len(buf))) if data.draw(st.integers(0, 3)) == 0 else None
            tasks.append(_task(path, buf, start, end))
        want, want_counts = _reference(tasks)
        with mock.patch.object(X, "ROWS_PER_BATCH", flush):
            batches, told = _columnar(tasks)
    assert all(b.schema == X.batch_schema() for b in batches)  # type for type, nullability included
    assert all(b.num_rows <= flush for b in batches)  # flushed at the flush size, segments cut
    assert [tuple(r.values()) for b in batches for r in b.to_pylist()] == want  # value for value, nulls too
    assert told == want_counts


@pytest.mark.parametrize("pure", [False, True])
def test_clean_segments_are_framed_and_legacy_ones_read_by_the_reference(tmp_path: Path, pure: bool) -> None:
    if not pure and not compiled.active("kafkatx.format._batch"):
        pytest.skip("KAFKATX_PURE_PYTHON is set: no compiled framer")
    recs = [Record(offset=k, timestamp=k, key=None, value=b"x") for k in range(3)]
    clean = b"".join(build_batch(recs, compression=c, producer_id=5, producer_epoch=0, base_sequence=INT32_MAX - 1)
                     for c in Compression)
    legacy = build_batch(recs, magic=1)
    tasks = []
    for name, buf in (("0", clean), ("10", legacy + clean), ("20", clean + legacy + clean)):
        path = tmp_path / "log" / "t-3" / f"{int(name):020d}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(buf)
        tasks.append(_task(path, buf))
    read: list[tuple[str, int]] = []

    def decode(task: R.SegmentTask):  # the reference, noting what it was asked to read
        read.append((Path(task.segment_path).name, task.start))
        return R.decode_segment(task)

    with compiled.pure_python(pure), mock.patch.object(X, "decode_segment", decode):
        batches, _told = _columnar(tasks)
    rows = [tuple(r.values()) for b in batches for r in b.to_pylist()]
    assert rows == _reference(tasks)[0]
    # sequences INT32_MAX - 1, INT32_MAX, 0: incrementSequence wraps past Integer.MAX_VALUE to 0
    assert {r[20] for r in rows if r[10] == 2} == {0}
    if pure:  # pure-Python mode: every segment through the reference, as before
        assert read == [(Path(t.segment_path).name, 0) for t in tasks]
    else:  # the clean segment framed whole; the others read by the reference from the first legacy batch
        assert read == [(Path(tasks[1].segment_path).name, 0), (Path(tasks[2].segment_path).name, len(clean))]


def test_the_windowed_pread_path_reads_by_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A live broker's log dir (``KAFKATX_READ=pread`` here) is read forward in windows: the reference reads it."""
    recs = [Record(offset=k, timestamp=k, key=None, value=b"x") for k in range(2)]
    buf = build_batch(recs) + build_control_batch(offset=2, control_type=ControlType.COMMIT, producer_id=1,
                                                  producer_epoch=0, coordinator_epoch=4, timestamp=9)
    path = tmp_path / "log" / "t-3" / f"{0:020d}.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(buf)
    read: list[int] = []

    def decode(task: R.SegmentTask):
        read.append(task.start)
        return R.decode_segment(task)

    monkeypatch.setenv("KAFKATX_READ", "pread")
    with mock.patch.object(X, "decode_segment", decode):
        batches, told = _columnar([_task(path, buf)])
    rows = [tuple(r.values()) for b in batches for r in b.to_pylist()]
    assert read == [0] and told == [(2, 0, 0)]
    assert rows == _reference([_task(path, buf)])[0]
    assert [(r[22], r[23], r[24]) for r in rows] == [(False, None, None), (True, "COMMIT", 4)]


def _marker_at(offset: int, *, attributes_codec: int = 0, records: int = 1) -> bytes:
    """A COMMIT marker of coordinator epoch 4 (every delta 0: the same records section at every offset),
    its codec bits or records count changed (CRC made to hold again)."""
    batch = bytearray(build_control_batch(offset=offset, control_type=ControlType.COMMIT, producer_id=7,
                                          producer_epoch=0, coordinator_epoch=4, timestamp=9))
    attributes = struct.unpack_from(">h", batch, 21)[0]
    struct.pack_into(">h", batch, 21, (attributes & ~0x7) | attributes_codec)
    struct.pack_into(">i", batch, 57, records)
    return bytes(_refix_crc(batch))


@pytest.mark.parametrize("first", ["plain", "gzip", "two"])
def test_a_control_record_read_once_is_the_answer_only_for_the_same_batch_bytes(tmp_path: Path, first: str) -> None:
    """``tasks._control`` keeps ``read_control_record``'s answer by magic, attributes, records count and the
    records section: the same marker's bytes at other offsets (and in another segment) are the same answer,
    but a batch whose codec bits say gzip over those very bytes (its records do not decompress) or whose count
    differs is read again, and an error names each batch's own byte. Every row equals the per-batch reference,
    whichever of them is read first."""
    if not compiled.active("kafkatx.format._batch"):
        pytest.skip("KAFKATX_PURE_PYTHON is set: no compiled framer")
    X._CONTROLS.clear()
    kinds = {"plain": {}, "gzip": {"attributes_codec": 1}, "two": {"records": 2}}
    order = [first, *[k for k in kinds if k != first]]
    buf = b"".join(_marker_at(10 * i, **kinds[k]) for i, k in enumerate(order + order))
    tasks = []
    for name in ("0", "100"):
        path = tmp_path / "log" / "t-3" / f"{int(name):020d}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(buf)
        tasks.append(_task(path, buf))
    batches, _told = _columnar(tasks)
    rows = [tuple(r.values()) for b in batches for r in b.to_pylist()]
    want = _reference(tasks)[0]
    assert rows == want
    by_kind = dict(zip(order, [(r[23], r[24], r[27]) for r in want], strict=False))
    assert by_kind["plain"] == ("COMMIT", 4, None)
    assert by_kind["gzip"][:2] == (None, None) and by_kind["gzip"][2]  # the gzip one does not read
    errors = [r[27] for r in want if r[27] is not None]
    assert len(errors) == len(set(errors)) >= 4  # each error names its own batch (file and byte)
