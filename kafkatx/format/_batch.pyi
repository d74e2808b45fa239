"""Type stub for the optional C extension kafkatx/format/_batch.c (see record_batch.py)."""

from typing import Any

from kafkatx.format._primitives import Buffer
from kafkatx.format.record_batch import BatchHeader, Record

HW_CRC32C: int
FRAME_COLUMNS: tuple[str, ...]

def setup(record: type[Record], header: type[BatchHeader], /) -> None: ...
def decode_records(
    buf: Buffer, start: int, end: int, p: int, rec: int, count: int, base_offset: int, base_ts: int,
    append_ts: int | None, limit: int, /,
) -> tuple[list[Record], int, int, tuple[Any, ...] | None]: ...
def scan_headers(
    buf: Buffer, pos: int, end: int, verify_crc: bool, max_count: int, max_bytes: int, /,
) -> tuple[list[BatchHeader], int, int | None]: ...
def frame_columns(
    buf: Buffer, pos: int, end: int, verify_crc: bool, max_count: int, max_bytes: int, /,
) -> tuple[bytearray, int, int, int | None]: ...
def crc32c(buf: Buffer, start: int, end: int, /) -> int: ...
