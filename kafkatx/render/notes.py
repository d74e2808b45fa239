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

import re
from collections.abc import Iterable

# quoted names, then names ending in -N (partitions, ids), then bare numbers
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|\b[\w.]+(?:-[\w.]+)*-\d+\b|\b\d[\d,_]*\b")

KEEP = 3  # a kind repeated up to this many times is printed note by note
NAMES = 3  # names shown on an aggregated line


def aggregate_notes(notes: Iterable[str], *, keep: int = KEEP, names: int = NAMES) -> list[str]:
    """``notes`` with every kind repeated more than ``keep`` times said in one line."""
    kinds: dict[str, list[str]] = {}
    for note in notes:
        kinds.setdefault(_VARYING.sub("#", note), []).append(note)
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
