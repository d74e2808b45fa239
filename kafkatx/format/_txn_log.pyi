"""Type stub for the optional C extension kafkatx/format/_txn_log.c (see txn_log.py)."""

from typing import Any

def txn_log_decode(key: Any, value: Any, /) -> tuple[str, tuple[Any, ...] | None] | None: ...
