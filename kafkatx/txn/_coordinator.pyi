"""Type stub for the optional C extension kafkatx/txn/_coordinator.c (see coordinator.py TxnFold)."""

from collections.abc import Callable, Container
from typing import Any

def txn_fold(
    buf: Any, pos: int, end: int, log_start: int, log_end: int, partition: int, n: int,
    latest: dict[str, Any], history: dict[str, Any] | None, history_for: Container[str] | None,
    findings: list[Any], file: str, valid: frozenset[tuple[int, int]], /,
) -> tuple[int, int]: ...
def fold_values(
    latest: dict[str, Any], skip: Container[str], partition: int, coordinator_id: int | None,
    wanted: Container[int] | None, state_names: tuple[str, ...], row_of: Callable[..., tuple[object, ...]],
    out: list[tuple[object, ...]], /,
) -> None: ...
def timed_out_of(
    latest: dict[str, Any], skip: Container[str], partition: int, states: Container[int], now: int,
    two_pc_timeout: int, is_timed_out: Callable[[int | None, int, int], bool],
    out: list[tuple[str, int, Any, int]], /,
) -> None: ...
def java_string_hash(s: str, /) -> int: ...
