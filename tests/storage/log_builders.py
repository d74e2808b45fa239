"""Builders for small partition folders, written with the format layer's encoders (used by tests/storage and tests/cli)."""

from __future__ import annotations

from pathlib import Path

from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.record_batch import Record, build_batch


def write_segment(folder: Path, base: int, batches: list[bytes]) -> tuple[Path, list[int]]:
    """Write ``batches`` as ``<base>.log`` in ``folder``; returns the path and each batch's position."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{base:020d}.log"
    positions, pos = [], 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    path.write_bytes(b"".join(batches))
    return path, positions


def data_batch(first: int, n: int = 2, ts: int = 1_000) -> bytes:
    return build_batch([Record(offset=first + i, timestamp=ts + first + i, key=b"k", value=b"v%d" % i)
                        for i in range(n)])


def write_index(folder: Path, base: int, entries: list[tuple[int, int]]) -> Path:
    path = folder / f"{base:020d}.index"
    path.write_bytes(encode_offset_index([OffsetIndexEntry(offset=o, position=p) for o, p in entries], base))
    return path


def big_segment_log_dir(root: Path) -> tuple[Path, Path]:
    """A log dir under ``root`` with one 20 MB segment (20 batches of one 1 MB record: more than one
    pread window) and a ``.lock`` nobody holds; returns (log dir, segment)."""
    ld = root / "logs"
    part = ld / "big-0"
    part.mkdir(parents=True)
    seg = part / "00000000000000000000.log"
    with open(seg, "wb") as fh:
        for i in range(20):
            fh.write(build_batch([Record(offset=i, timestamp=1_700_000_000_000 + i, key=None, value=bytes(1 << 20))]))
    (ld / ".lock").touch()
    return ld, seg


def damaged_txn_segment(path: Path, *, open_tail: bool) -> int:
    """Write a ~400 KB segment at ``path``: 300 transactional batches of producers 100-102 with a
    COMMIT or ABORT marker for each after every third batch (none after batch 290 with
    ``open_tail``: those transactions stay open), one byte flipped in the middle, and a torn tail
    (the first 40 bytes again). Returns the offset after the last batch written."""
    from kafkatx.format.control import ControlType
    from kafkatx.format.record_batch import build_control_batch

    path.parent.mkdir(parents=True, exist_ok=True)
    out = bytearray()
    offset = 0
    for i in range(300):
        pid = 100 + i % 3
        recs = [Record(offset=offset + k, timestamp=1_700_000_000_000 + offset + k, key=b"k", value=bytes(400))
                for k in range(3)]
        out += build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=(i // 3) * 3,
                           is_transactional=True)
        offset += 3
        if i % 3 == 2 and not (open_tail and i >= 290):
            for p in (100, 101, 102):
                out += build_control_batch(offset=offset, control_type=ControlType.COMMIT if i % 2 else ControlType.ABORT,
                                           producer_id=p, producer_epoch=0, coordinator_epoch=0,
                                           timestamp=1_700_000_000_000 + offset)
                offset += 1
    out[len(out) // 2] ^= 0xFF  # inside some batch: a finding there (which one depends on the byte hit)
    out += out[:40]  # a torn tail
    path.write_bytes(bytes(out))
    return offset
