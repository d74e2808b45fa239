"""Sequences in Java ``int`` arithmetic: ``DefaultRecordBatch.incrementSequence`` / ``decrementSequence``
everywhere kafkatx computes them, for every pair of int32s.

Kafka computes a batch's ``lastSequence()`` as ``incrementSequence(baseSequence, lastOffsetDelta)``, a
record's sequence (``DefaultRecord.readFrom``) as ``incrementSequence(baseSequence, offsetDelta)`` when the
base sequence is not negative (else NO_SEQUENCE), and ``BatchMetadata.firstSeq`` as
``decrementSequence(lastSeq, offsetDelta)``, all on Java ``int``s: each ``+`` and ``-`` wraps modulo 2^32
(JLS 15.18.2), the bound ``Integer.MAX_VALUE - increment`` too. Valid data never wraps but at
Integer.MAX_VALUE; a crafted or damaged batch (``LogSegment.recover`` checks CRCs and sizes, not the sign of
``lastOffsetDelta``, and no base sequence range) gives Java's wrapped values, which kafka-dump-log.sh prints.

The oracle below evaluates Kafka's two expressions with each operation wrapped to 32 bits by ctypes'
``c_int32`` (two's complement, nothing from kafkatx); every implementation is held to it: the reference
(``record_batch.increment_sequence`` / ``decrement_sequence``, ``BatchHeader.last_sequence``),
kafka_dump's text (Python, and the compiled ``render/_dump.c`` through ``render_batches``), the producer-state
fold (``PyProducerStateFold`` and the compiled ``storage/_replay.c``, over bytes and over headers) and
``spark/tasks._last_sequence`` on Arrow arrays. Then a crafted partition (a CRC-valid batch with
lastOffsetDelta -5, one with baseSequence -7, one with baseSequence Integer.MIN_VALUE and delta -5) through
``kafkatx dump-segment`` and the replay; ``tests/spark/test_crafted_sequences.py`` takes it through
``batch_rows``.
"""

from __future__ import annotations

import ctypes
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkatx.format import compiled
from kafkatx.format import record_batch as rb
from kafkatx.format.control import ControlType
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.render import kafka_dump as kd
from kafkatx.storage.producer_state import PyProducerStateFold, fold_compiled

try:
    from kafkatx.storage._replay import ProducerStateFold as CProducerStateFold
except ImportError:  # pragma: no cover - depends on the build
    CProducerStateFold = None  # type: ignore[assignment,misc]

INT32_MAX = 2**31 - 1  # Integer.MAX_VALUE
INT32_MIN = -(2**31)  # Integer.MIN_VALUE
PID = 7


def _int(value: int) -> int:
    """A Java int's value after an operation: the low 32 bits, two's complement (ctypes truncates)."""
    return ctypes.c_int32(value).value


def java_increment(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``'s expressions evaluated on Java ints, each operation wrapped."""
    if sequence > _int(INT32_MAX - increment):
        return _int(_int(increment - _int(INT32_MAX - sequence)) - 1)
    return _int(sequence + increment)


def java_decrement(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``'s expressions evaluated on Java ints, each operation wrapped."""
    if sequence < decrement:
        return _int(_int(INT32_MAX - _int(decrement - sequence)) + 1)
    return _int(sequence - decrement)


def java_last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """``DefaultRecordBatch.lastSequence``: NO_SEQUENCE (-1) stays."""
    return -1 if base_sequence == -1 else java_increment(base_sequence, last_offset_delta)


def java_record_sequence(base_sequence: int, offset_delta: int) -> int:
    """``DefaultRecord.readFrom``: NO_SEQUENCE under a negative base sequence."""
    return -1 if base_sequence < 0 else java_increment(base_sequence, offset_delta)


def test_the_oracle_gives_kafkas_own_test_values() -> None:
    # DefaultRecordBatchTest.testIncrementSequence / testDecrementSequence
    assert java_increment(5, 5) == 10
    assert java_increment(INT32_MAX, 1) == 0
    assert java_increment(INT32_MAX - 5, 10) == 4
    assert java_decrement(5, 5) == 0
    assert java_decrement(0, 1) == INT32_MAX
    # and what the int wrap does to a negative increment: Integer.MAX_VALUE - (-5) overflows to
    # Integer.MIN_VALUE + 4, so 2 > it and the result is -5 - (Integer.MAX_VALUE - 2) - 1, wrapped
    assert java_increment(2, -5) == 2**31 - 3


int32s = st.one_of(st.integers(INT32_MIN, INT32_MAX), st.integers(INT32_MIN, INT32_MIN + 8),
                   st.integers(INT32_MAX - 8, INT32_MAX), st.integers(-9, 9))
pairs = st.tuples(int32s, int32s)
BASE_OFFSET = 1 << 40  # room for any int32 delta on either side


def _data_batch(base_sequence: int, delta: int) -> bytes:
    """A CRC-valid transactional batch of producer PID: base offset BASE_OFFSET, one record at offset
    BASE_OFFSET + delta (so lastOffsetDelta and the record's offsetDelta are both ``delta``)."""
    return build_batch([Record(offset=BASE_OFFSET + delta, timestamp=1_000, key=b"k", value=b"v")],
                       base_offset=BASE_OFFSET, producer_id=PID, producer_epoch=0, base_sequence=base_sequence,
                       is_transactional=True)


def _dump_sequences(text: str) -> tuple[int, int]:
    """(lastSequence, the one record's sequence) of kafka-dump-log text of one batch."""
    (last,) = re.findall(r" lastSequence: (-?\d+) ", text)
    (record,) = re.findall(r" sequence: (-?\d+) ", text)
    return int(last), int(record)


def _folded_last_sequence(fold_class: type, raw: bytes) -> tuple[int, int]:
    """The producer's last sequence after a fold over the batch's bytes, and after ``append`` of its header."""
    over_bytes = fold_class([], keep_completed=True, span_floor=0)
    over_bytes.fold(raw, 0, len(raw))
    appended = fold_class([], keep_completed=True, span_floor=0)
    appended.append(rb.read_batch_header(raw, 0))
    (row_b,), (row_a,) = over_bytes.active_producers(), appended.active_producers()
    assert row_b[0] == row_a[0] == PID
    return row_b[2], row_a[2]  # EntryRow: producer id, epoch, last sequence, ...


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pairs, min_size=1, max_size=8))
@example([(2, -5), (-7, 2), (-7, -5), (INT32_MIN, -5), (INT32_MAX, INT32_MAX), (INT32_MIN, INT32_MIN),
          (INT32_MAX, INT32_MIN), (INT32_MIN, INT32_MAX), (-1, -5), (0, -1)])
def test_every_implementation_gives_javas_int_value(cases: list[tuple[int, int]]) -> None:
    for seq, delta in cases:
        want_inc, want_dec = java_increment(seq, delta), java_decrement(seq, delta)
        # the reference, and kafka_dump's names for it
        assert rb.increment_sequence(seq, delta) == kd.increment_sequence(seq, delta) == want_inc
        assert rb.decrement_sequence(seq, delta) == kd.decrement_sequence(seq, delta) == want_dec
        raw = _data_batch(seq, delta)
        header = rb.read_batch_header(raw, 0)
        assert header.last_offset_delta == delta and header.base_sequence == seq  # the batch holds the pair
        want_last, want_record = java_last_sequence(seq, delta), java_record_sequence(seq, delta)
        assert header.last_sequence == want_last
        # kafka-dump-log text, Python: the batch line and the record line
        (record,) = rb.iter_records(raw, header)
        python_text = kd.batch_line(header, True) + "\n" + kd.record_line(header, record)
        assert _dump_sequences(python_text) == (want_last, want_record)
        # BatchMetadata.firstSeq of a snapshot entry: decrementSequence(lastSeq, offsetDelta)
        entry = ProducerSnapshotEntry(producer_id=PID, producer_epoch=0, last_sequence=seq, last_offset=1,
                                      offset_delta=delta, timestamp=5, coordinator_epoch=0,
                                      current_txn_first_offset=-1)
        assert f" firstSequence: {want_dec} lastSequence: {seq} " in kd.snapshot_entry_line(entry)
        # the producer-state fold, pure Python
        assert _folded_last_sequence(PyProducerStateFold, raw) == (want_last, want_last)
        if kd._dump is not None:  # the compiled kafka-dump-log text (render/_dump.c)
            got = kd.render_batches(raw, 0, len(raw), fmt="text", deep=True, print_data=False, verify_crc=True,
                                    base64=False, start_offset=None, end_offset=None, raw=True)
            assert got is not None and got[1] == len(raw), "the compiled path rendered the whole batch"
            assert got[0] is not None
            assert _dump_sequences(got[0].data.decode()) == (want_last, want_record)
        if fold_compiled():  # the compiled fold (storage/_replay.c)
            assert _folded_last_sequence(CProducerStateFold, raw) == (want_last, want_last)
    try:
        import pyarrow as pa
    except ImportError:  # the spark extra is not installed: tests/spark skips too
        return
    from kafkatx.spark.tasks import _last_sequence

    column = pa.array([s for s, _d in cases], pa.int64()), pa.array([d for _s, d in cases], pa.int64())
    assert _last_sequence(*column).to_pylist() == [java_last_sequence(s, d) for s, d in cases]


# ---------------------------------------------------------------------------- a crafted partition
# (base sequence, base offset, record offsets): CRC-valid transactional batches of producer PID, epoch 0
CRAFTED = [
    (0, 0, [0, 1]),  # a plain batch opening the transaction
    (-7, 2, [2, 3, 4]),  # baseSequence -7: lastSequence -5; DefaultRecord's sequence NO_SEQUENCE
    (INT32_MIN, 10, [5]),  # lastOffsetDelta -5 from Integer.MIN_VALUE: wraps to Integer.MAX_VALUE - 4
    (2, 20, [15]),  # lastOffsetDelta -5: Integer.MAX_VALUE - (-5) overflows, lastSequence 2^31 - 3
]
MARKER_OFFSET = 21


def crafted_segment() -> tuple[bytes, list[tuple[int, int]]]:
    """The crafted segment's bytes (CRAFTED's batches, then a COMMIT marker) and each data batch's
    (baseSequence, lastOffsetDelta), as written."""
    raws, pairs_written = [], []
    for seq, base, offsets in CRAFTED:
        raws.append(build_batch([Record(offset=o, timestamp=1_000, key=b"k", value=b"v%d" % o) for o in offsets],
                                base_offset=base, producer_id=PID, producer_epoch=0, base_sequence=seq,
                                is_transactional=True))
        pairs_written.append((seq, offsets[-1] - base))
    raws.append(build_control_batch(offset=MARKER_OFFSET, control_type=ControlType.COMMIT, producer_id=PID,
                                    producer_epoch=0, coordinator_epoch=0, timestamp=2_000))
    return b"".join(raws), pairs_written


def write_crafted(log_dir: Path) -> Path:
    """A log dir holding partition t-0 with the crafted segment (and its checkpoints); returns the .log."""
    from tests.storage.txn_builders import PartitionWriter, write_log_dir

    buf, _pairs = crafted_segment()
    w = PartitionWriter("t", 0)
    w.seg.data += buf
    w.next_offset = MARKER_OFFSET + 1
    write_log_dir(log_dir, [w])
    return log_dir / "t-0" / f"{0:020d}.log"


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    """``kafkatx`` in this process, stdout and stderr apart (as tests/cli's ``invoke`` fixture)."""
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_the_crafted_batches_hold_what_they_say() -> None:
    buf, written = crafted_segment()
    headers = list(rb.iter_batches(buf, 0, verify_crc=True))
    assert [(h.base_sequence, h.last_offset_delta) for h in headers[:-1]] == written
    assert (-7, 2) in written and (2, -5) in written and (INT32_MIN, -5) in written
    assert all(rb.crc_valid(buf, h) for h in headers)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("files", [False, True], ids=["kafkatx", "files"])
def test_dump_segment_prints_javas_sequences(tmp_path: Path, pure: bool, files: bool) -> None:
    log = write_crafted(tmp_path / "log")
    _buf, written = crafted_segment()
    args = ["--files", str(log)] if files else [str(log)]
    with compiled.pure_python(pure):
        result = _invoke("dump-segment", "--deep-iteration", *args)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    batches = [line for line in lines if line.startswith("baseOffset: ")]
    assert [int(m) for line in batches[:-1] for m in re.findall(r" lastSequence: (-?\d+) ", line)] == [
        java_last_sequence(s, d) for s, d in written]
    # each record's sequence: incrementSequence(baseSequence, offsetDelta), NO_SEQUENCE for a negative base
    records = [int(m) for line in lines if line.startswith("| offset: ") and "endTxnMarker" not in line
               for m in re.findall(r" sequence: (-?\d+) ", line)]
    assert records == [java_record_sequence(seq, o - base) for seq, base, offsets in CRAFTED for o in offsets]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_dump_segment_json_holds_javas_last_sequence(tmp_path: Path, pure: bool) -> None:
    log = write_crafted(tmp_path / "log")
    _buf, written = crafted_segment()
    with compiled.pure_python(pure):
        result = _invoke("dump-segment", "--format", "jsonl", str(log))
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    batches = [r for r in rows if "last_sequence" in r]
    assert [r["last_sequence"] for r in batches[:-1]] == [java_last_sequence(s, d) for s, d in written]
    assert all(INT32_MIN <= r["last_sequence"] <= INT32_MAX for r in batches)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_the_replay_takes_the_crafted_batches(tmp_path: Path, pure: bool) -> None:
    """``ProducerAppendInfo.appendDataBatch`` of a replayed log (``AppendOrigin.REPLICATION``: no sequence
    check, ``maybeValidateDataBatch`` checks only CLIENT appends) stores ``batch.lastSequence()``: the
    producer ends with the last data batch's (Java's wrapped value), its last offset, and no finding; the
    COMMIT marker closes the transaction the first batch opened."""
    from kafkatx.storage.log_dir import open_log_dirs
    from kafkatx.storage.replay import replay_partition

    write_crafted(tmp_path / "log")
    _buf, written = crafted_segment()
    (part,) = [p for d in open_log_dirs([tmp_path / "log"]) for p in d.partitions()]
    with compiled.pure_python(pure):
        state = replay_partition(part, use_snapshot=False, keep_completed=True)
    assert state.findings == []
    producer = state.producers[PID]
    seq, delta = written[-1]
    assert producer.last_sequence == java_last_sequence(seq, delta) == 2**31 - 3
    assert producer.last_offset == CRAFTED[-1][1] + delta  # lastOffset = baseOffset + lastOffsetDelta
    assert producer.current_txn_first_offset is None
    assert [(c.first_offset, c.marker_offset, c.outcome) for c in state.completed] == [(0, MARKER_OFFSET, "COMMIT")]


int64s = st.one_of(st.integers(-(2**63), 2**63 - 1), int32s)


@pytest.mark.skipif(not fold_compiled(), reason="the C extension is not built (or KAFKATX_PURE_PYTHON is set)")
@settings(max_examples=300, deadline=None)
@given(int64s, int64s)
def test_the_fold_twins_agree_on_hand_made_headers_past_int32(seq: int, delta: int) -> None:
    """A BatchHeader made by hand (no wire format bounds it) may hold any int64: the compiled fold's
    ``append`` (``_framer.h``'s int64 arguments) and the reference's give the same last sequence, an int32."""
    header = rb.BatchHeader(position=0, base_offset=0, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
                            attributes=0x10, last_offset_delta=delta, base_timestamp=1, max_timestamp=1,
                            producer_id=PID, producer_epoch=0, base_sequence=seq, records_count=1)
    got = []
    for fold_class in (CProducerStateFold, PyProducerStateFold):
        fold = fold_class([], keep_completed=True, span_floor=0)
        fold.append(header)
        ((_pid, _epoch, last_seq, *_rest),) = fold.active_producers()
        got.append(last_seq)
    assert got[0] == got[1] == header.last_sequence
    assert INT32_MIN <= got[0] <= INT32_MAX
    if INT32_MIN <= seq <= INT32_MAX and INT32_MIN <= delta <= INT32_MAX:
        assert got[0] == java_last_sequence(seq, delta)
