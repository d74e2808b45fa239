"""Opt-in timing trace for ``kafkatx scan`` (benchmarks/bench_scan.py ``--trace``).

When ``KAFKATX_SCAN_TRACE`` names a file, the driver's phases and every Spark task append
one JSON line ``{"what", "t0", "t1", "pid", ...}`` to it (wall clock, so driver and Python
worker lines share one time axis; local workers inherit the driver's environment). Unset,
:func:`span` costs one dict lookup. Used to find where ``local[2]`` loses time to ``local[1]``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "KAFKATX_SCAN_TRACE"


@contextmanager
def span(what: str, **extra: object) -> Iterator[dict[str, object]]:
    """Time the ``with`` body; ``extra`` (and keys the body adds to the yielded dict) go in the line."""
    path = os.environ.get(ENV)
    t0 = time.time()
    info: dict[str, object] = dict(extra)
    try:
        yield info
    finally:
        if path:
            line = json.dumps({"what": what, "t0": t0, "t1": time.time(), "pid": os.getpid(), **info})
            with open(path, "a", encoding="utf-8") as f:  # O_APPEND: one short write per line
                f.write(line + "\n")
