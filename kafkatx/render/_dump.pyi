"""Type stub for the optional C extension kafkatx/render/_dump.c (see kafka_dump.py)."""

from typing import Any

def render_setup(batch_row: type, record_row: type, header_row: type, unset: Any, /) -> None: ...
def render_batches(
    buf: Any, pos: int, end: int, text: bool, flags: int, start_offset: int | None, end_offset: int | None,
    max_bytes: int, /,
) -> tuple[bytes | list[Any], int, bool]: ...  # text: bytes; jsonl: render_setup's BatchRow instances
def render_batch(buf: Any, pos: int, data: Any, text: bool, flags: int, /) -> bytes | Any | None: ...
