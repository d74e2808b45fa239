"""Type stub for the optional C extension kafkatx/storage/_replay.c (see fold.py)."""

from typing import Any

def replay_setup(entry: type, completed: type, abort: str, commit: str, /) -> None: ...
def replay_fold(
    buf: Any, pos: int, hi: int, producers: dict[int, Any], start: int, end: int, stop: int | None,
    check_data_crc: bool, spans: list[tuple[int, int]] | None, span_floor: int, completed: list[Any] | None,
    topic: str, partition: int, max_bytes: int, ongoing: dict[int, int] | None, aborts_only: bool,
    crcs_hold: bool, /,
) -> tuple[int, int, int, int]: ...
