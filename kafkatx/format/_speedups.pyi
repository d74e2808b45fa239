"""Type stub for the optional C extension kafkatx/format/_speedups.c (see record_batch.py)."""

from typing import Any

from kafkatx.format.record_batch import BatchHeader, Record

def setup(record: type[Record], header: type[BatchHeader], /) -> None: ...
def decode_records(
    buf: Any, start: int, end: int, p: int, rec: int, count: int, base_offset: int, base_ts: int,
    append_ts: int | None, limit: int, /,
) -> tuple[list[Record], int, int, tuple[Any, ...] | None]: ...
def scan_headers(
    buf: Any, pos: int, end: int, verify_crc: bool, max_count: int, max_bytes: int, /,
) -> tuple[list[BatchHeader], int, int | None]: ...
def crc32c(buf: Any, start: int, end: int, /) -> int: ...
def set_fold_event(cls: type[tuple[Any, ...]], /) -> None: ...
def fold_segment(
    buf: Any, start: int, end: int, crc_mode: int, breaks: Any, seg_base: int, prev_last: int | None,
    want_table: bool, max_bytes: int, /,
) -> tuple[
    # instances of the set_fold_event class (segment_fold.FoldEvent), plain tuples before it is set
    list[tuple[BatchHeader, BatchHeader | None, int, bool, int | None, int | None, bool]],
    int, int, int | None, list[tuple[int, int, int, int | None]], bytes | None,
]: ...
def bisect_many(a: Any, xs: Any, exact: bool, /) -> list[int]: ...
def replay_setup(entry: type, completed: type, abort: str, commit: str, /) -> None: ...
def replay_fold(
    buf: Any, pos: int, hi: int, producers: dict[int, Any], start: int, end: int, stop: int | None,
    check_data_crc: bool, spans: list[tuple[int, int]] | None, span_floor: int, completed: list[Any] | None,
    topic: str, partition: int, max_bytes: int, /,
) -> tuple[int, int, int, int]: ...
def render_setup(batch_row: type, record_row: type, header_row: type, unset: Any, /) -> None: ...
def render_batches(
    buf: Any, pos: int, end: int, text: bool, flags: int, start_offset: int | None, end_offset: int | None,
    max_bytes: int, /,
) -> tuple[bytes | list[Any], int, bool]: ...  # text: bytes; jsonl: render_setup's BatchRow instances
def render_batch(buf: Any, pos: int, data: Any, text: bool, flags: int, /) -> bytes | Any | None: ...
