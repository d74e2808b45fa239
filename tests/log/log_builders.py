"""Builders for small partition folders, written with the format layer's encoders (used by tests/log and tests/cli)."""

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
