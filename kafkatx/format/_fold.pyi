"""Type stub for the optional C extension kafkatx/format/_fold.c (see segment_fold.py)."""

from typing import Any

from kafkatx.format._primitives import Buffer
from kafkatx.format.record_batch import BatchHeader

def setup(header: type[BatchHeader], event: type[tuple[Any, ...]], /) -> None: ...
def fold_segment(
    buf: Buffer, start: int, end: int, crc_mode: int, breaks: Any, seg_base: int, prev_last: int | None,
    want_table: bool, max_bytes: int, /,
) -> tuple[
    # instances of setup's event class (segment_fold.FoldEvent)
    list[tuple[BatchHeader, BatchHeader | None, int, bool, int | None, int | None, bool]],
    int, int, int | None, list[tuple[int, int, int, int | None]], bytearray | None,
]: ...
def increasing(values: Any, /) -> bool: ...
def entries_at_batches(table: Any, positions: Any, offsets: Any, lo: int, hi: int, base: int, /) -> bool: ...
def time_entries_at_batches(table: Any, offsets: Any, stamps: Any, lo: int, /) -> tuple[int, bool]: ...
def bisect_many(a: Any, xs: Any, exact: bool, /) -> list[int]: ...
