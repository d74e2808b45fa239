"""Type stub for the optional C extension kafkatx/txn/_coordinator.c (see coordinator.py TxnFold)."""

from collections.abc import Container
from typing import Any

def txn_fold(
    buf: Any, pos: int, end: int, log_start: int, log_end: int, partition: int, n: int,
    latest: dict[str, Any], history: dict[str, Any], history_for: Container[str] | None,
    findings: list[Any], file: str, valid: frozenset[tuple[int, int]], /,
) -> tuple[int, int]: ...
def java_string_hash(s: str, /) -> int: ...
