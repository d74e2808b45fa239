"""The plain values of every output (no rich): a moment, an age, a duration, a count, a stderr note.

:mod:`kafkatx.render.human` re-exports them with the rest of the human building blocks; the
summaries (:mod:`kafkatx.render.descriptions`) take them from here, so ``--format json`` does not
import rich (imports a command does not need).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the rows are typed only: this module is imported before any command needs msgspec
    from kafkatx.rows import AbortPlanRow, HangingRow

NONE = "-"  # how an absent value looks in a table cell


def duration(ms: int | float | None) -> str:
    """``ms`` in the two largest units: ``850ms``, ``42s``, ``5m20s``, ``1h50m``, ``2d3h``; None -> ``-``."""
    if ms is None:
        return NONE
    ms = int(ms)
    if ms < 0:
        return "-" + duration(-ms)
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def utc(ms: int | None, *, seconds: bool = False) -> str:
    """Epoch ms as ``2023-11-14 22:30Z`` (UTC, minutes; ``seconds=True`` adds them); None -> ``-``."""
    if ms is None:
        return NONE
    if not seconds and type(ms) is int:
        return _utc_minute(ms // 60_000)
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%SZ" if seconds else "%Y-%m-%d %H:%MZ")


@functools.lru_cache(maxsize=4096)
def _utc_minute(minute: int) -> str:
    """:func:`utc` of the minute ``minute`` (epoch ms // 60,000): a table of 200,000 rows has a few
    hundred distinct minutes."""
    return datetime.fromtimestamp(minute * 60, tz=UTC).strftime("%Y-%m-%d %H:%MZ")


def ago(ms: int | None, now_ms: int) -> str:
    """How long before ``now_ms`` the moment ``ms`` was: ``1h50m ago``, ``just now``, ``in 5m``."""
    if ms is None:
        return NONE
    delta = now_ms - ms
    if abs(delta) < 1000:
        return "just now"
    return f"{duration(delta)} ago" if delta > 0 else f"in {duration(-delta)}"


def when(ms: int | None, now_ms: int) -> str:
    """``2023-11-14 22:30Z (1h50m ago)``: a moment as UTC and as an age; None -> ``-``."""
    if ms is None:
        return NONE
    return f"{utc(ms)} ({ago(ms, now_ms)})"


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``1 partition``, ``3 partitions``."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def transactions(rows: Iterable[HangingRow | AbortPlanRow]) -> int:
    """How many transactions ``rows`` (one per partition a transaction holds open) are: a transaction is one
    producer id and epoch (with its transactional id, if any), whatever number of partitions it spans, as
    Kafka's coordinator keeps it (``TransactionMetadata``: one producerId/producerEpoch, a set of
    ``topicPartitions``)."""
    return len({(r.transactional_id, r.producer_id, r.producer_epoch) for r in rows})


def partitions_of(rows: Iterable[HangingRow | AbortPlanRow]) -> int:
    """How many partitions ``rows`` name (``topic``, ``partition``)."""
    return len({(r.topic, r.partition) for r in rows})


def wrapped_note(text: str, out: TextIO | IO[str]) -> str:
    """A stderr note as it should reach ``out``: on a terminal, wrapped at word boundaries to its width
    (COLUMNS, else the terminal's) with continuation lines indented, never cut inside a word; piped, one
    line (what a script greps)."""
    if not (getattr(out, "isatty", None) and out.isatty()):
        return text
    env = os.environ.get("COLUMNS", "")
    width = int(env) if env.isdigit() and int(env) > 0 else shutil.get_terminal_size().columns
    import textwrap

    return "\n".join(textwrap.wrap(text, width=max(width - 1, 20), subsequent_indent="    ",
                                    break_long_words=False, break_on_hyphens=False)) or text
