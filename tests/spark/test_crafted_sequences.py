"""``batches/`` rows of a crafted segment (``spark/tasks.batch_rows``): CRC-valid batches whose
lastOffsetDelta is negative or whose baseSequence is below -1 (``LogSegment.recover`` accepts them: it checks
CRCs and sizes). Their ``last_sequence`` is ``DefaultRecordBatch.lastSequence()``, computed on Java ints
(``tests/format/test_sequence_wrap.py``'s oracle), an int32 like every other value of that column: the row
is written, not the whole scan failed. Both the framed path (the compiled framer's columns,
``tasks._last_sequence``) and the per-batch reference (pure-Python mode) are taken."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import msgspec
import pytest

pa = pytest.importorskip("pyarrow")

from kafkatx.format import compiled  # noqa: E402
from kafkatx.spark import rows as R  # noqa: E402
from kafkatx.spark import tasks as X  # noqa: E402
from tests.format.test_sequence_wrap import crafted_segment, java_last_sequence, write_crafted  # noqa: E402


@pytest.mark.parametrize("pure", [False, True], ids=["framed", "reference"])
def test_batch_rows_write_javas_last_sequence_for_crafted_batches(tmp_path: Path, pure: bool) -> None:
    if not pure and not compiled.active("kafkatx.format._batch"):
        pytest.skip("KAFKATX_PURE_PYTHON is set: no compiled framer")
    log = write_crafted(tmp_path / "log")
    buf, written = crafted_segment()
    task = R.SegmentTask(log_dir=str(log.parent.parent), topic="t", partition=0, partition_path=str(log.parent),
                         segment_path=str(log), segment_base_offset=0, size=len(buf), chosen=True)
    told: list[tuple[int, int, int]] = []
    work = [pa.record_batch({"work": [msgspec.msgpack.encode([task])]})]
    read: list[int] = []

    def decode(task: R.SegmentTask):  # type: ignore[no-untyped-def]  # the reference, noting each call
        read.append(task.start)
        return R.decode_segment(task)

    with compiled.pure_python(pure), mock.patch.object(X, "decode_segment", decode):
        batches = list(X.batch_rows(work, lambda n, crc, err, _size: told.append((n, crc, err))))
    assert read == ([0] if pure else [])  # compiled: the whole segment framed, its columns through _last_sequence
    assert told == [(len(written) + 1, 0, 0)]  # every batch a row, no CRC or decode error
    table = pa.Table.from_batches(batches)
    assert table.schema.field("last_sequence").type == pa.int32()
    got = table.column("last_sequence").to_pylist()
    assert got == [java_last_sequence(s, d) for s, d in written] + [-1]  # the COMMIT marker: NO_SEQUENCE
    assert table.column("base_sequence").to_pylist() == [s for s, _d in written] + [-1]
