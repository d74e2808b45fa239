"""Repeated notes, one line per kind.

A log dir of 200,000 transactional ids or 10,000 partitions that break the same rule would
otherwise print one stderr line each. Notes of one *kind* are the same sentence with other
names and numbers in it: the quoted names (``'txn-1'``), partition names (``orders-3``) and
numbers are masked to find the kind. A kind seen more than ``keep`` times is said once: its
first note, the count and the first few names (the first masked token of each note), in
first-seen order. Fewer are printed as they are. JSON output is unchanged (notes go to
stderr only).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# quoted names, then names ending in -N (partitions, ids), then bare numbers
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|\b[\w.]+(?:-[\w.]+)*-\d+\b|\b\d[\d,_]*\b")

KEEP = 3  # a kind repeated up to this many times is printed note by note
NAMES = 3  # names shown on an aggregated line


# A name-N token whose masking is plain: it starts with a word character (so the match begins with it)
# and is made of ASCII word characters, dots and single dashes, ending in -digits (so the match takes
# it whole, up to the ", " or ")" after it).
_TP = r"[A-Za-z0-9_][A-Za-z0-9_.]*(?:-[A-Za-z0-9_.]+)*-[0-9]+"
_INT = r"-?[0-9]+"


@functools.cache
def _owed_abort_shape() -> tuple[re.Pattern[str], str]:
    """``hanging.OWED_ABORT_NOTE`` as a pattern, and the kind its notes have: where the pattern matches
    (its literal text; the id in quotes with no quote or backslash inside; integers; ``none`` or
    ``, ``-separated plain name-N tokens), ``_VARYING.sub`` masks each of those as one ``#`` (a minus
    sign kept) and nothing else: :func:`_kind` gives that without ``_VARYING``'s scan (find-hanging
    says a million of them at once)."""
    from kafkatx.checks.hanging import OWED_ABORT_NOTE

    literals = re.split(r"%[rds]", OWED_ABORT_NOTE)
    fields = [r"'[^'\"\\]*'", f"(?P<producer_id>{_INT})", f"(?P<timeout_ms>{_INT})", f"(?P<start>{_INT})",
              f"(?P<partitions>none|{_TP}(?:, {_TP})*)"]
    if len(literals) != len(fields) + 1 or "%" in "".join(literals):
        raise AssertionError("hanging.OWED_ABORT_NOTE: not the shape render/notes.py knows")
    pattern = "".join(re.escape(lit) + field for lit, field in zip(literals[:-1], fields, strict=True))
    pattern += re.escape(literals[-1])
    template = "#".join(literals[:2]) + "{producer_id}" + literals[2] + "{timeout_ms}" + literals[3] + "{start}" + \
        literals[4] + "{partitions}" + literals[5]
    return re.compile(pattern), template


def _kind(note: str) -> str:
    """``_VARYING.sub("#", note)``: by the owed-abort shape where the note has it (the same answer;
    tests/render/test_notes.py holds the two to each other), else by the scan."""
    if note.startswith("transaction '"):
        m = _owed_abort_shape()[0].fullmatch(note)
        if m is not None:
            pid, timeout, start, parts = m.group("producer_id", "timeout_ms", "start", "partitions")
            return _owed_abort_kind(pid[0] == "-", timeout[0] == "-", start[0] == "-",
                                    -1 if parts == "none" else parts.count(", ") + 1)
    return _VARYING.sub("#", note)


@functools.cache
def _owed_abort_kind(pid_negative: bool, timeout_negative: bool, start_negative: bool, partitions: int) -> str:
    """The kind of an owed-abort note of that shape (``partitions``: how many; -1: ``none``)."""
    return _owed_abort_shape()[1].format(
        producer_id="-#" if pid_negative else "#", timeout_ms="-#" if timeout_negative else "#",
        start="-#" if start_negative else "#",
        partitions="none" if partitions < 0 else ", ".join(["#"] * partitions))


def aggregate_notes(notes: Iterable[str], *, keep: int = KEEP, names: int = NAMES) -> list[str]:
    """``notes`` with every kind repeated more than ``keep`` times said in one line."""
    kinds: dict[str, list[str]] = {}
    for note in notes:
        kinds.setdefault(_kind(note), []).append(note)
    out: list[str] = []
    for group in kinds.values():
        if len(group) <= keep:
            out.extend(group)
            continue
        first = [m.group(0) for note in group[:names] if (m := _VARYING.search(note))]
        if first:
            more = len(group) - len(first)
            out.append(f"{len(group):,} notes like this one ({', '.join(first)} and {more:,} more): {group[0]}")
        else:
            out.append(f"{len(group):,} times: {group[0]}")
    return out
