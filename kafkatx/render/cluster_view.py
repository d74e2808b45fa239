"""``describe-cluster``'s human output (text/table): what the KRaft metadata log says, in 80 columns."""

from __future__ import annotations

import shutil
import textwrap
from typing import Any, TextIO


def cluster_lines(desc: Any, width: int = 80) -> list[str]:
    """The description as short lines: features, brokers, topics, producer-id blocks."""
    from pathlib import Path

    head = (f"Metadata log: {desc.metadata_log} (end offset {desc.end_offset}"
            + (f", snapshot {Path(desc.snapshot).name}" if desc.snapshot else "") + ")")
    lines = textwrap.wrap(head, width, subsequent_indent="  ", break_long_words=True) + [""]
    feats = ", ".join(f"{k}={v}" for k, v in desc.features.items()) or "none (every feature at level 0)"
    lines += textwrap.wrap(f"Finalized features: {feats}", width, subsequent_indent="  ")
    if "transaction.version" not in desc.features:
        lines.append("  transaction.version is not finalized: level 0 (TV0)")
    lines += ["", f"Brokers ({len(desc.brokers)}):"]
    for b in desc.brokers:
        state = "fenced" if b["fenced"] else "unfenced"
        rack = f" rack {b['rack']}" if b["rack"] else ""
        lines += textwrap.wrap(f"  {b['broker_id']}: epoch {b['epoch']}, {state}{rack}, "
                               f"{', '.join(b['endpoints']) or 'no endpoints'}", width, subsequent_indent="     ")
    lines += ["", f"Topics ({len(desc.topics)}):"]
    name_w = min(max((len(t["name"]) for t in desc.topics), default=4), width - 36)
    for t in desc.topics:
        name = t["name"] if len(t["name"]) <= name_w else t["name"][: name_w - 1] + "~"
        lines.append(f"  {name:<{name_w}}  {t['topic_id']:<22}  {t['partitions']:>4} partitions")
    lines += ["", f"Producer-id blocks ({len(desc.producer_id_blocks)}):"]
    for blk in desc.producer_id_blocks:
        lines.append(f"  broker {blk['broker_id']} (epoch {blk['broker_epoch']}): ids below "
                     f"{blk['next_producer_id']}")
    if desc.next_producer_id is not None:
        lines.append(f"  next producer id: {desc.next_producer_id}")
    return lines


def show_cluster(desc: Any, *, out: TextIO | None = None, width: int | None = None) -> None:
    import sys

    out = sys.stdout if out is None else out
    w = width if width is not None else min(shutil.get_terminal_size((80, 24)).columns, 120)
    out.write("\n".join(cluster_lines(desc, max(w, 60))) + "\n")


__all__ = ["cluster_lines", "show_cluster"]
