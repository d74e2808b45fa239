"""format/segment_fold.py: the compiled ``fold_segment`` against its pure-Python twin, and what the events mean.

The twin comparisons call the chunk function twice on the same bytes -- the C one and
``fold_chunk_py`` -- and require the very same chunk (events with equal headers, stopping
position, order problems, table). The meaning tests build segments by hand and spell out
the expected runs and singles.
"""

from __future__ import annotations

import struct
from array import array
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkatx.format.record_batch as rb
from kafkatx.errors import DecodeError
from kafkatx.format import compiled
from kafkatx.format import segment_fold as sf
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import Compression, Record, build_batch, build_control_batch
from kafkatx.storage.segment import map_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_LOGS = sorted((ROOT / "fixtures").rglob("*.log"))

sp = pytest.importorskip("kafkatx.format._fold")
sp.setup(rb.BatchHeader, sf.FoldEvent)  # segment_fold skips this under KAFKATX_PURE_PYTHON=1


def _c_chunk(buf, start, end, mode, breaks, seg_base, prev, table, max_bytes,  # type: ignore[no-untyped-def]
             clean_until=0):
    events, pos, batches, prev_last, order, tbl = sp.fold_segment(buf, start, end, mode, breaks, seg_base, prev,
                                                                   table, max_bytes, clean_until)
    return sf.FoldChunk([sf.FoldEvent._make(e) for e in events], pos, batches, prev_last, order, tbl)


def _both(buf, start=0, end=None, mode=0, breaks=(), seg_base=0, prev=None, table=True,  # type: ignore[no-untyped-def]
          max_bytes=1 << 40, clean_until=0):
    end = len(buf) if end is None else end
    c = _c_chunk(buf, start, end, mode, list(breaks), seg_base, prev, table, max_bytes, clean_until)
    p = sf.fold_chunk_py(buf, start, end, mode, list(breaks), seg_base, prev, table, max_bytes, clean_until)
    assert c == p
    return c


def _data(offset: int, pid: int = -1, epoch: int = -1, txn: bool = False, n: int = 2,
          compression: Compression = Compression.NONE) -> bytes:
    recs = [Record(offset=offset + i, timestamp=1_700_000_000_000 + offset + i, key=b"k%d" % i, value=b"v" * 20)
            for i in range(n)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=0 if pid >= 0 else -1,
                       is_transactional=txn, compression=compression)


def _marker(offset: int, pid: int, commit: bool = True, epoch: int = 0, coord: int = 7) -> bytes:
    return build_control_batch(offset=offset, control_type=ControlType.COMMIT if commit else ControlType.ABORT,
                               producer_id=pid, producer_epoch=epoch, coordinator_epoch=coord,
                               timestamp=1_700_000_000_000 + offset)


def _bad_crc(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-1] ^= 0xFF  # inside the CRC-covered bytes
    return bytes(b)


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_compiled_and_python_agree_on_every_fixture_segment(path: Path) -> None:
    with map_file(path) as buf:
        for mode in (0, 1, 2, sf.CRC_FAILS_ONLY, sf.TABLE_ONLY):
            for breaks in ((), (3, 60, 150)):
                _both(buf, mode=mode, breaks=breaks, seg_base=int(path.name[:20]))
        _both(buf, max_bytes=500)  # chunk ends after the batch that passes 500 bytes
        if len(buf) > 200:
            _both(buf, end=len(buf) - 100)  # a batch cut by `end` stops the fast loop


def _mixed_segment() -> bytes:
    parts = [
        _data(0, pid=1, epoch=0, txn=True),           # P1 txn run ...
        _data(2, pid=2, epoch=0, txn=True),           # P2 txn run ...
        _data(4),                                     # plain: the pid -1 run
        _data(6, pid=1, epoch=0, txn=True),           # ... P1 continues
        _marker(8, pid=1),                            # P1 COMMIT: a single, ends P1's run
        _data(9, pid=1, epoch=0, txn=True),           # P1: a new run
        _data(11, pid=2, epoch=1, txn=True),          # P2 with a new epoch: a new run
        _bad_crc(_data(13, pid=2, epoch=1, txn=True)),  # bad CRC: a single when data CRCs are checked
        _marker(15, pid=2, commit=False, epoch=1, coord=3),
        _data(16, pid=3, epoch=0, txn=False),         # idempotent, not transactional
        _data(18, pid=3, epoch=0, txn=True),          # same producer, now transactional: a new run
        build_control_batch(offset=20, control_type=ControlType.LEADER_CHANGE, producer_id=-1, producer_epoch=-1,
                            coordinator_epoch=0, timestamp=1),  # pid -1 control: part of the plain run
        _data(21),
    ]
    return b"".join(parts)


def test_runs_and_singles_of_a_hand_built_segment() -> None:
    buf = _mixed_segment()
    chunk = _both(buf, mode=1)
    got = [(e.first.base_offset, e.last.base_offset if e.last else None, e.batches, e.crc_ok, e.control_type,
            e.coordinator_epoch, e.parsed) for e in chunk.events]
    assert got == [
        (0, 6, 2, True, None, None, False),     # P1: offsets 0 and 6 (P2 and a plain batch between)
        (2, None, 1, True, None, None, False),  # P2 epoch 0
        (4, 21, 3, True, None, None, False),    # plain batches 4, 20 (LEADER_CHANGE, pid -1), 21
        (8, None, 1, True, 1, 7, True),         # P1 COMMIT, coordinator epoch 7
        (9, None, 1, True, None, None, False),
        (11, None, 1, True, None, None, False),  # P2 epoch 1
        (13, None, 1, False, None, None, False),  # bad CRC
        (15, None, 1, True, 0, 3, True),        # P2 ABORT, coordinator epoch 3
        (16, None, 1, True, None, None, False),
        (18, None, 1, True, None, None, False),
    ]
    assert chunk.batches == 13 and chunk.pos == len(buf) and chunk.order == []
    table = array("q", chunk.table)
    assert list(table[1::4]) == [0, 2, 4, 6, 8, 9, 11, 13, 15, 16, 18, 20, 21]
    t = 1_700_000_000_000  # data batches: their last record's timestamp; markers: theirs; LEADER_CHANGE: 1
    assert list(table[3::4]) == [t + 1, t + 3, t + 5, t + 7, t + 8, t + 10, t + 12, t + 14, t + 15, t + 17, t + 19,
                                 1, t + 22]
    assert list(table[0::4])[:2] == [0, len(_data(0, pid=1, epoch=0, txn=True))]
    # Without data CRC checks the bad batch is one more batch of P2's epoch-1 run.
    chunk0 = _both(buf, mode=0)
    p2 = [e for e in chunk0.events if e.first.base_offset == 11][0]
    assert p2.batches == 2 and p2.last is not None and p2.last.base_offset == 13


def test_crc_fails_only_mode_gives_just_the_bad_batches() -> None:
    # verify's pass: every CRC checked (markers and plain batches too), an event only where it fails;
    # the table and the order problems are those of any other mode.
    buf = _mixed_segment() + _bad_crc(_marker(23, pid=1)) + _bad_crc(_data(24))
    chunk = _both(buf, mode=sf.CRC_FAILS_ONLY, seg_base=1)
    assert [(e.first.base_offset, e.batches, e.crc_ok, e.parsed, e.control_type) for e in chunk.events] == [
        (13, 1, False, False, None), (23, 1, False, False, None), (24, 1, False, False, None)]
    every = _both(buf, mode=2, seg_base=1)
    assert (chunk.table, chunk.order, chunk.batches, chunk.pos) == (every.table, every.order, 15, len(buf))
    assert chunk.order == [(0, 0, 0, None)]  # the first batch is below seg_base 1
    assert _both(_mixed_segment()[:-1], mode=sf.CRC_FAILS_ONLY).pos < len(_mixed_segment()) - 1  # cut: stops
    # magic 0/1 batches go through the driver: an event only when the legacy CRC fails
    legacy = build_batch([Record(offset=4, timestamp=1, key=b"a", value=b"b")], magic=1)
    bad_legacy = bytearray(build_batch([Record(offset=5, timestamp=1, key=b"a", value=b"c")], magic=1))
    bad_legacy[-1] ^= 0xFF
    for pure in (False, True):
        with compiled.pure_python(pure):
            fold = sf.SegmentFold(_data(0) + legacy + bytes(bad_legacy) + _bad_crc(_data(6)),
                                  crc_mode=sf.CRC_FAILS_ONLY)
            events = [e for c in fold.chunks() for e in c.events]
        assert [(e.first.base_offset, e.first.magic, e.crc_ok) for e in events] == [(5, 1, False), (6, 2, False)]
        assert fold.batches == 4


def test_table_only_mode_gives_the_table_and_order_without_events() -> None:
    # dump-index --verify's pass: no CRC checked (a bad one is just a batch), no event; the table and
    # the order problems are those of every other mode.
    buf = _mixed_segment() + _bad_crc(_data(23))
    chunk = _both(buf, mode=sf.TABLE_ONLY, seg_base=1)
    every = _both(buf, mode=2, seg_base=1)
    assert chunk.events == [] and chunk.batches == every.batches == 14 and chunk.pos == len(buf)
    assert (chunk.table, chunk.order) == (every.table, every.order) and chunk.order == [(0, 0, 0, None)]
    legacy = build_batch([Record(offset=25, timestamp=1, key=b"a", value=b"b")], magic=1)
    for pure in (False, True):  # a magic 0/1 batch goes through the driver: its table row, no event
        with compiled.pure_python(pure):
            fold = sf.SegmentFold(buf + legacy, crc_mode=sf.TABLE_ONLY, want_table=True)
            chunks = list(fold.chunks())
        assert [e for c in chunks for e in c.events] == [] and fold.batches == 15
        assert array("q", b"".join(c.table for c in chunks if c.table))[-3] == 25


def test_a_break_offset_ends_every_open_run() -> None:
    buf = b"".join([_data(0, pid=1, epoch=0, txn=True), _data(2, pid=1, epoch=0, txn=True),
                    _data(4, pid=1, epoch=0, txn=True), _data(6, pid=1, epoch=0, txn=True)])
    assert [e.batches for e in _both(buf).events] == [4]
    assert [(e.first.base_offset, e.batches) for e in _both(buf, breaks=[4]).events] == [(0, 2), (4, 2)]
    # an offset inside a batch (3 is in the batch at 2) ends the run at the first batch whose base reaches it
    assert [(e.first.base_offset, e.batches) for e in _both(buf, breaks=[3]).events] == [(0, 2), (4, 2)]


def test_control_records_the_fast_loop_leaves_to_read_control_record() -> None:
    # A control batch whose record has a header is not Kafka's plain layout: parsed is False and
    # the caller reads it with read_control_record (which decides what is wrong, if anything).
    rec = Record(offset=0, timestamp=1, key=struct.pack(">hh", 0, 1), value=struct.pack(">hi", 0, 5),
                 headers=(("h", b"x"),))
    odd = build_batch([rec], producer_id=9, producer_epoch=0, is_control=True, is_transactional=True)
    short_value = build_batch([Record(offset=1, timestamp=1, key=struct.pack(">hh", 0, 0), value=b"\x00")],
                              base_offset=1, producer_id=9, producer_epoch=0, is_control=True, is_transactional=True)
    compressed = build_batch([Record(offset=2, timestamp=1, key=struct.pack(">hh", 0, 1),
                                     value=struct.pack(">hi", 0, 5))], base_offset=2, producer_id=9,
                             producer_epoch=0, is_control=True, is_transactional=True, compression=Compression.GZIP)
    chunk = _both(odd + short_value + compressed)
    assert [(e.parsed, e.control_type) for e in chunk.events] == [(False, None)] * 3
    assert rb.read_control_record(odd, chunk.events[0].first).coordinator_epoch == 5


def test_offsets_that_go_back_are_reported() -> None:
    buf = _data(10) + _data(12) + _data(11) + _data(5)
    chunk = _both(buf, seg_base=8)
    sizes = [len(_data(0))] * 4
    assert chunk.order == [(1, 2 * sizes[0], 11, 13), (0, 3 * sizes[0], 5, 13)]
    assert chunk.prev_last == 13
    carried = _both(_data(20), seg_base=0, prev=25)
    assert carried.order == [(1, 0, 20, 25)] and carried.prev_last == 25


def test_the_driver_hands_legacy_batches_and_bad_bytes_to_python() -> None:
    legacy = build_batch([Record(offset=4, timestamp=1, key=b"a", value=b"b")], magic=1)
    buf = _data(0, pid=1, epoch=0, txn=True) + _data(2, pid=1, epoch=0, txn=True) + legacy + _data(5, pid=1, epoch=0,
                                                                                                     txn=True)
    for pure in (False, True):
        with compiled.pure_python(pure):
            fold = sf.SegmentFold(buf, crc_mode=2, want_table=True)
            events = [e for c in fold.chunks() for e in c.events]
        assert [(e.first.base_offset, e.first.magic, e.batches) for e in events] == [(0, 2, 2), (4, 1, 1), (5, 2, 1)]
        assert fold.batches == 4 and fold.pos == len(buf)
    torn = buf + b"\x00" * 30
    fold = sf.SegmentFold(torn)
    with pytest.raises(DecodeError):
        for _chunk in fold.chunks():
            pass
    assert fold.pos == len(buf)  # where the bytes that do not form a batch begin


@st.composite
def _segments(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(1, 25))
    out = []
    offset = 0
    for _ in range(n):
        kind = draw(st.sampled_from(["data", "marker", "plain", "bad", "leader"]))
        pid = draw(st.integers(1, 4))
        epoch = draw(st.integers(0, 2))
        if kind == "data":
            b = _data(offset, pid=pid, epoch=epoch, txn=draw(st.booleans()), n=draw(st.integers(1, 3)))
        elif kind == "marker":
            b = _marker(offset, pid, commit=draw(st.booleans()), epoch=epoch, coord=draw(st.integers(-1, 9)))
        elif kind == "plain":
            b = _data(offset)
        elif kind == "bad":
            b = _bad_crc(draw(st.sampled_from([_data(offset, pid=pid, epoch=epoch, txn=True),
                                               _marker(offset, pid, epoch=epoch)])))
        else:
            b = build_control_batch(offset=offset, control_type=ControlType.LEADER_CHANGE, producer_id=pid,
                                    producer_epoch=epoch, coordinator_epoch=0, timestamp=1)
        out.append(b)
        offset += draw(st.integers(-3, 5)) + struct.unpack_from(">i", b, 23)[0] + 1
        offset = max(offset, 0)
    return b"".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg=_segments(), mode=st.integers(0, 3), breaks=st.lists(st.integers(0, 60), max_size=3),
       max_bytes=st.integers(1, 4000), cut=st.integers(0, 80))
def test_compiled_and_python_agree_on_random_segments(seg: bytes, mode: int, breaks: list[int], max_bytes: int,
                                                      cut: int) -> None:
    _both(seg, mode=mode, breaks=sorted(breaks), max_bytes=max_bytes)
    _both(seg, end=max(len(seg) - cut, 0), mode=mode)
    _both(bytearray(seg), start=0, mode=mode, prev=7, seg_base=3)


def test_compiled_and_python_agree_with_many_producers() -> None:
    # enough producers to grow the C fold's open-run table several times
    parts = []
    for i in range(3000):
        pid = (i * 7919) % 800
        if i % 5 == 4:
            parts.append(_marker(i, pid, commit=bool(i % 2)))
        else:
            parts.append(_data(i, pid=pid, epoch=(i // 1000) % 2, txn=i % 3 != 0, n=1))
    buf = b"".join(parts)
    for mode in (0, 2):
        chunk = _both(buf, mode=mode, breaks=(1000, 2000))
        assert chunk.batches == 3000
    assert len(chunk.events) < 3000  # some runs formed


def test_the_compiled_fold_makes_fold_events_itself() -> None:
    import gc

    buf = _mixed_segment()
    chunk = sf._fold_chunk(buf, 0, len(buf), 1, [], 0, None, False, 1 << 40)
    assert chunk.events and {type(e) for e in chunk.events} == {sf.FoldEvent}
    assert chunk.events == sf.fold_chunk_py(buf, 0, len(buf), 1, [], 0, None, False, 1 << 40).events
    assert chunk.events[3].control_type == 1 and chunk.events[3].coordinator_epoch == 7  # P1 COMMIT
    del buf
    gc.collect()  # the events own their items
    assert [e.first.base_offset for e in chunk.events][:3] == [0, 2, 4]

    class Wide(tuple):  # an instance dict: not a plain tuple layout
        pass

    for bad in (int, Wide):
        with pytest.raises(TypeError):
            sp.setup(rb.BatchHeader, bad)
    sp.setup(rb.BatchHeader, sf.FoldEvent)  # a refused setup changes nothing: the fold still makes FoldEvents
    assert type(_c_chunk(_data(0), 0, len(_data(0)), 0, (), 0, None, False, 1 << 40).events[0]) is sf.FoldEvent


def _bisect_py(a: array, xs: list[int], exact: bool) -> list[int]:  # type: ignore[type-arg]
    with compiled.pure_python():
        return sf.bisect_many(a, xs, exact)


def test_bisect_many_by_hand() -> None:
    a = array("q", [3, 5, 5, 9])
    xs = [0, 3, 4, 5, 9, 10, -(2**63), 2**63 - 1, 2**64, -(2**70)]
    want = [0, 0, 1, 1, 3, 4, 0, 4, 4, 0]
    assert sp.bisect_many(a, xs, False) == _bisect_py(a, xs, False) == want
    found = [-1, 0, -2, 1, 3, -5, -1, -5, -5, -1]  # -k-1 where a[k] is not x
    assert sp.bisect_many(a, xs, True) == _bisect_py(a, xs, True) == found
    assert sp.bisect_many(array("q"), [1, 2], True) == [-1, -1]
    assert sp.bisect_many(a.tobytes(), (5,), False) == [1]  # any int64 buffer, any sequence
    with pytest.raises(ValueError):
        sp.bisect_many(b"1234567", [1], False)
    for not_int64 in (array("i", [1, 2]), array("Q", [1]), array("d", [1.0])):
        with pytest.raises(ValueError):
            sp.bisect_many(not_int64, [1], False)
    with pytest.raises(TypeError):
        sp.bisect_many(a, [1.5], False)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=60), st.lists(st.integers(-(2**64), 2**64), max_size=40),
       st.booleans())
def test_bisect_many_compiled_and_python_agree(values: list[int], xs: list[int], exact: bool) -> None:
    a = array("q", sorted(values))
    assert sp.bisect_many(a, xs, exact) == _bisect_py(a, xs, exact)
    xs.sort()  # in order: the compiled search gallops from the previous answer
    assert sp.bisect_many(a, xs, exact) == _bisect_py(a, xs, exact)
    assert sp.bisect_many(a, values, exact) == _bisect_py(a, values, exact)  # every x present (dupes too)


def test_bisect_many_gallops_over_long_columns() -> None:
    a = array("q", range(0, 300_000, 3))  # 100k values
    xs = [*range(-5, 300_010, 7), 10, 299_997, 2**63 - 1, 5]  # in order, then out of order
    assert sp.bisect_many(a, xs, True) == _bisect_py(a, xs, True)
    assert sp.bisect_many(a, xs, False) == _bisect_py(a, xs, False)


def _entries_py(table: bytes, positions, offsets, lo: int, hi: int, base: int = 0) -> bool:  # type: ignore[no-untyped-def]
    with compiled.pure_python():
        return sf.entries_at_batches(table, positions, offsets, lo, hi, base)


def test_entries_at_batches_by_hand() -> None:
    rows = array("q", [0, 10, 12, 5, 100, 13, 13, 5, 250, 14, 20, 5])  # batches at 0, 100, 250
    table = bytearray(rows)
    cases = [  # (positions, offsets, lo, hi, want)
        ([100, 250], [13, 20], 0, 2, True),
        ([100, 250], [12, 20], 0, 2, False),  # the batch at 100 starts after offset 12
        ([100, 251], [13, 20], 0, 2, False),  # no batch starts at 251
        ([100, 251], [13, 20], 0, 1, True),  # only the range is asked
        ([0, 100, 250], [10, 13, 14], 1, 3, True),
        ([], [], 0, 0, True),
        ([100], [2**64], 0, 1, True),  # an offset past int64: above every base
        ([100], [-(2**64)], 0, 1, False),
        ([2**64], [20], 0, 1, False),  # no batch starts past int64
        ([50, 100], [20, 20], 0, 2, False),
    ]
    for positions, offsets, lo, hi, want in cases:
        assert sp.entries_at_batches(table, positions, offsets, lo, hi, 0) is want, (positions, offsets, lo, hi)
        assert _entries_py(bytes(table), positions, offsets, lo, hi) is want, (positions, offsets, lo, hi)
        assert sp.entries_at_batches(rows, tuple(positions), tuple(offsets), lo, hi, 0) is want  # any int64 buffer
        # offsets relative to a base, and columns as native arrays (an index file's, read in place)
        rel = [o - 10 for o in offsets]
        assert sp.entries_at_batches(table, positions, rel, lo, hi, 10) is want
        assert _entries_py(bytes(table), positions, rel, lo, hi, 10) is want
        if all(-(2**31) <= v < 2**31 for v in [*positions, *rel]):
            assert sp.entries_at_batches(table, array("i", positions), array("i", rel), lo, hi, 10) is want
            assert sp.entries_at_batches(table, array("q", positions), array("l", rel), lo, hi, 10) is want
    assert sf.entries_at_batches(table, [100], [2**64], 0, 1, -(2**64)) is False  # offset 0: 100's batch is at 13
    assert _entries_py(bytes(table), [100], [2**64], 0, 1, -(2**64)) is False
    for offset, base, want in ((2**64, -10, True), (2**64 + 12, -(2**63), True), (2**63 + 13, -(2**63), True),
                               (2**63 + 12, -(2**63), False), (-(2**64), 2**62, False)):
        assert sp.entries_at_batches(table, [100], [offset], 0, 1, base) is want, (offset, base)  # exact sums
        assert _entries_py(bytes(table), [100], [offset], 0, 1, base) is want, (offset, base)
    assert sp.entries_at_batches(table, [100], [2**63 - 5], 0, 1, 10) is True  # past int64: above every base
    assert sp.entries_at_batches(table, [100], [-(2**63) + 5], 0, 1, -10) is False
    with pytest.raises(ValueError):
        sp.entries_at_batches(b"1234567", [1], [1], 0, 1, 0)
    with pytest.raises(ValueError):
        sp.entries_at_batches(table, [1], [1], 1, 0, 0)
    with pytest.raises(TypeError):
        sp.entries_at_batches(table, [1.5], [1], 0, 1, 0)


@given(st.lists(st.tuples(st.integers(61, 300), st.integers(0, 3)), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 12_000), st.integers(-3, 3)), max_size=30), st.data())
def test_entries_at_batches_compiled_and_python_agree(batches: list[tuple[int, int]],
                                                      picks: list[tuple[int, int]], data: st.DataObject) -> None:
    rows = array("q")
    pos = base = 0
    for size, gap in batches:
        rows.extend((pos, base, base + 1, 0))
        pos += size
        base += 2 + gap
    starts, bases = rows[0::4], rows[1::4]
    # entries at batch starts (or just off them), with offsets around the batch's base offset
    entries = sorted({(starts[p % len(starts)] + (p % 7 == 0), bases[p % len(bases)] + d) for p, d in picks})
    positions = [p for p, _ in entries]
    offsets = [o for _, o in entries]
    lo = data.draw(st.integers(0, len(entries)))
    hi = data.draw(st.integers(lo, len(entries)))
    assert sp.entries_at_batches(bytearray(rows), positions, offsets, lo, hi, 0) == _entries_py(
        rows.tobytes(), positions, offsets, lo, hi)
    base = data.draw(st.integers(-5, 5))
    rel = array("i", [o - base for o in offsets])
    assert sp.entries_at_batches(rows, array("i", positions), rel, lo, hi, base) == _entries_py(
        rows.tobytes(), positions, list(rel), lo, hi, base)


def _increasing_py(values) -> bool:  # type: ignore[no-untyped-def]
    with compiled.pure_python():
        return sf.increasing(values)


def test_increasing_by_hand() -> None:
    cases = [[], [5], [1, 2, 3], [1, 1], [3, 2], [-(2**63), 2**63 - 1], [2**63 - 1, 2**63, 2**70], [2**64, 2**64],
             [1, 2**64, 3], [-(2**70), 0], [0, 1.5, 2], [1, 2, 2, 3]]
    for values in cases:
        want = all(a < b for a, b in zip(values, values[1:], strict=False))
        assert sp.increasing(values) is want, values
        assert _increasing_py(values) is want, values
        assert sp.increasing(tuple(values)) is want  # any sequence
    assert sp.increasing(array("q", [1, 5, 9])) is True
    assert sp.increasing(array("i", [1, 5, 5])) is False  # a native int array is read in place
    assert sp.increasing(array("i", [-3, 0, 2**31 - 1])) is True
    assert sp.increasing(range(3, 0, -1)) is False
    with pytest.raises(TypeError):
        sp.increasing([1, None])
    assert sp.increasing([2, 1, None]) is False  # stops at the first pair that is not increasing, like all()


@given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70)), max_size=30))
def test_increasing_compiled_and_python_agree(values: list[int]) -> None:
    assert sp.increasing(values) == _increasing_py(values)
    values.sort()
    assert sp.increasing(values) == _increasing_py(values)
    assert sp.increasing(sorted(set(values))) is True


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([0, 1, -1]), st.sampled_from([0, 1, 2, 5]), st.binary(max_size=6), st.integers(0, 6),
       st.one_of(st.none(), st.tuples(st.sampled_from([0, 1, -2]), st.integers(-(2**31), 2**31 - 1),
                                      st.integers(0, 6), st.binary(max_size=70))),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 255)), max_size=3), st.integers(-3, 3))
def test_control_records_are_read_alike_whatever_their_bytes(kver: int, ktype: int, kextra: bytes, kcut: int,
                                                            val: tuple[int, int, int, bytes] | None,
                                                            flips: list[tuple[int, int]], grow: int) -> None:
    """``parse_control`` (C: a one-byte-varint fast path, then the general reader) and ``plain_control``
    (Python) on control records of every key and value length (short ones, long ones whose lengths
    take two varint bytes), and on bytes set at random in the record (its CRC made right again, so
    the record is read): the same type and epoch, or both leave it to ``read_control_record``."""
    key = (struct.pack(">hh", kver, ktype) + kextra)[kcut if kcut < 3 else 0:]
    value = None if val is None else (struct.pack(">hi", val[0], val[1]) + val[3])[val[2] if val[2] < 3 else 0:]
    rec = Record(offset=0, timestamp=1_700_000_000_000, key=key, value=value)
    raw = bytearray(build_batch([rec], producer_id=9, producer_epoch=0, is_control=True, is_transactional=True))
    for at, byte in flips:
        if rb.HEADER_SIZE + at < len(raw):
            raw[rb.HEADER_SIZE + at] = byte
    if grow > 0:
        raw += bytes(grow)  # trailing bytes inside the batch, after the record
    elif grow < 0 and len(raw) + grow > rb.HEADER_SIZE:
        del raw[grow:]
    struct.pack_into(">i", raw, 8, len(raw) - 12)  # the batch length covers what is there
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    buf = bytes(raw)
    chunk = _both(buf, mode=0)
    ends = [_marker(0, 9, coord=c) for c in (0, 5, 2**31 - 1)]
    for m in ends:  # and Kafka's own markers, read by the fast path
        (ev,) = _both(m, mode=0).events
        assert ev.parsed and ev.coordinator_epoch in (0, 5, 2**31 - 1)
    assert len(chunk.events) <= 1


def test_verify_mode_clean_run_matches_the_twin() -> None:
    """``CRC_FAILS_ONLY``'s loop of its own for the clean batches (``fold_clean_run``): every chunk
    size, start and previous last offset gives what the twin gives, with batches whose last offset
    lies below their base offset (last offset delta -1) and a bad CRC among them."""
    parts = []
    for i in range(12):
        if i % 4 == 1:
            empty = bytearray(build_batch([], base_offset=10 + i * 3, producer_id=-1))
            struct.pack_into(">i", empty, 23, -1)  # last offset delta -1: its last offset below its base
            struct.pack_into(">I", empty, 17, crc32c.crc32c(bytes(empty[21:])))
            parts.append(bytes(empty))
        elif i == 7:
            parts.append(_bad_crc(_data(10 + i * 3, n=1)))
        else:
            parts.append(_data(10 + i * 3, n=1))
    seg = b"".join(parts)
    starts = [0]
    for p in parts[:-1]:
        starts.append(starts[-1] + len(p))
    for max_bytes in (1, 60, 90, 200, 400, 1 << 40):
        for start in starts[:5]:
            for prev in (None, 5, 12, 40):
                _both(seg, start=start, mode=sf.CRC_FAILS_ONLY, prev=prev, max_bytes=max_bytes)


def _time_entries_py(table, offsets, stamps, lo: int) -> tuple[int, bool]:  # type: ignore[no-untyped-def]
    with compiled.pure_python():
        return sf.time_entries_at_batches(table, offsets, stamps, lo)


def test_time_entries_at_batches_by_hand() -> None:
    # batches at 0, 100, 250, 400: (base, last, max timestamp) = (10, 12, 50), (13, 13, 60), (14, 20, 55), (21, 25, 70)
    rows = array("q", [0, 10, 12, 50, 100, 13, 13, 60, 250, 14, 20, 55, 400, 21, 25, 70])
    table = bytearray(rows)
    cases = [  # (offsets, stamps, lo, want)
        ([12, 13, 25], [50, 60, 70], 0, (3, True)),
        ([11, 13, 25], [50, 60, 70], 0, (3, True)),  # 11 is held by the first batch (10..12)
        ([9, 13], [50, 60], 0, (2, False)),  # offset 9 is below the first batch's base
        ([13, 20], [60, 60], 0, (2, False)),  # the batch holding 20 has max timestamp 55
        ([13, 20, 26], [60, 55, 99], 0, (2, True)),  # 26 lies past every last offset: not reached
        ([13, 20, 26], [60, 55, 99], 2, (2, True)),  # nothing reached from 2
        ([13, 20, 26], [60, 55, 99], 3, (3, True)),
        ([], [], 0, (0, True)),
        ([2**64], [1], 0, (0, True)),  # past int64: past every last offset
        ([-(2**64)], [1], 0, (1, False)),  # below every base
        ([13], [2**64], 0, (1, False)),  # no max timestamp past int64
    ]
    for offsets, stamps, lo, want in cases:
        assert sp.time_entries_at_batches(table, offsets, stamps, lo) == want, (offsets, stamps, lo)
        assert sp.time_entries_at_batches(rows, tuple(offsets), tuple(stamps), lo) == want  # any int64 buffer
        assert _time_entries_py(bytes(table), offsets, stamps, lo) == want, (offsets, stamps, lo)
        assert _time_entries_py(rows, offsets, stamps, lo) == want
    # last offsets that go back: placed by the running maximum (the batch at 250 reaches 20 first)
    back = array("q", [0, 10, 20, 50, 100, 13, 13, 60, 250, 21, 22, 70])
    for offsets, stamps, want in (([20], [50], (1, True)), ([21], [70], (1, True)), ([13], [60], (1, False)),
                                  ([21, 22], [70, 70], (2, True))):
        assert sp.time_entries_at_batches(back, offsets, stamps, 0) == want, offsets
        assert _time_entries_py(back, offsets, stamps, 0) == want, offsets
    assert sp.time_entries_at_batches(b"", [5], [5], 0) == (0, True)  # an empty table reaches nothing
    assert _time_entries_py(b"", [5], [5], 0) == (0, True)
    for call in (sp.time_entries_at_batches, _time_entries_py):
        with pytest.raises(ValueError):
            call(table, [1, 2], [1], 0)  # columns of different lengths
        with pytest.raises(ValueError):
            call(table, [1], [1], 2)  # lo past the entries
    with pytest.raises(ValueError):
        sp.time_entries_at_batches(b"1234567", [1], [1], 0)
    with pytest.raises(TypeError):
        sp.time_entries_at_batches(table, [1.5], [1], 0)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 3), st.integers(0, 9)), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(-3, 140), st.integers(0, 9)), max_size=30), st.data())
def test_time_entries_at_batches_compiled_and_python_agree(batches: list[tuple[int, int, int]],
                                                           picks: list[tuple[int, int]], data: st.DataObject) -> None:
    rows = array("q")
    base = pos = 0
    for gap, span, ts in batches:
        base += gap
        rows.extend((pos, base, base + span, ts))  # a last offset may lie below the base: offsets that go back
        pos += 70
        base += max(span, 0) + 1
    entries = sorted(picks)
    offsets = [o for o, _ in entries]
    stamps = [t for _, t in entries]
    lo = data.draw(st.integers(0, len(entries)))
    got = sp.time_entries_at_batches(bytearray(rows), offsets, stamps, lo)
    assert got == _time_entries_py(rows.tobytes(), offsets, stamps, lo)
    assert got == _time_entries_py(rows, offsets, stamps, lo)


# ----------------------------------------------------------------------------- the CRC walk ahead (verify)

def _walks(buf: bytes | bytearray, start: int = 0, end: int | None = None, stop: bool = False) -> int:
    """crc_clean_walk compiled and in Python from ``start``: the same stopping point and progress cell."""
    end = len(buf) if end is None else end
    c_cell, p_cell = array("q", (start, int(stop))), array("q", (start, int(stop)))
    c = sp.crc_clean_walk(buf, start, end, c_cell)
    p = sf.crc_clean_walk_py(buf, start, end, p_cell)
    assert c == p and c_cell[0] == p_cell[0] == c
    return c


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg=_segments(), cut=st.integers(0, 80), junk=st.binary(max_size=30))
def test_crc_clean_walk_compiled_and_python_agree(seg: bytes, cut: int, junk: bytes) -> None:
    end = _walks(seg)
    # it stops at the first batch whose CRC fails (or that is no whole magic-2 batch), else at the end
    first_bad = _first_unclean(seg)
    assert end == first_bad
    _walks(seg, end=max(len(seg) - cut, 0))
    _walks(seg + junk)
    assert _walks(seg, stop=True) == 0  # the stop flag set: no batch walked


def _first_unclean(seg: bytes) -> int:
    pos = 0
    while pos < len(seg):
        try:
            h = rb.read_batch_header(seg, pos, len(seg))
        except DecodeError:
            return pos
        if h.magic != 2 or not rb.crc_valid(seg, h):
            return pos
        pos += h.size
    return pos


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg=_segments(), max_bytes=st.integers(1, 4000), prev=st.sampled_from([None, 3, 40]),
       short=st.integers(0, 200))
def test_crcs_the_walk_checked_change_no_chunk(seg: bytes, max_bytes: int, prev: int | None, short: int) -> None:
    """verify's fold (``CRC_FAILS_ONLY``) told that the batches up to where the walk stopped hold their CRC
    (or up to anywhere before that: the walk is still going) gives the chunk it gives checking them itself."""
    clean = _walks(seg)
    for until in (clean, max(clean - short, 0)):
        pos = 0
        while True:
            want = _both(seg, start=pos, mode=sf.CRC_FAILS_ONLY, prev=prev, max_bytes=max_bytes)
            got = _both(seg, start=pos, mode=sf.CRC_FAILS_ONLY, prev=prev, max_bytes=max_bytes, clean_until=until)
            assert got == want
            if got.pos == pos or got.pos >= len(seg):
                break
            pos, prev = got.pos, got.prev_last


def test_crc_ahead_reaches_the_first_bad_batch_and_stops_when_closed() -> None:
    seg = b"".join(_data(i * 2) for i in range(400)) + _bad_crc(_data(800)) + _data(802)
    with sf.CrcAhead(seg) as ahead:
        ahead._thread.join()  # the walk is done: it stopped at the bad batch
        assert ahead.clean == _first_unclean(seg) == len(seg) - len(_data(802)) - len(_data(800))
    big = bytearray(b"".join(_data(i * 2) for i in range(20000)))
    ahead = sf.CrcAhead(big)
    ahead.close()  # stopped at once or done: never past the end, at a batch boundary
    assert ahead.clean <= len(big) and (ahead.clean == 0 or _first_unclean(bytes(big[:ahead.clean])) == ahead.clean)
