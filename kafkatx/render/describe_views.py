"""The ``table``/``text`` views of ``describe-txn`` and ``describe-producers``: one panel per transactional id
(its state, the partitions and the history) or per partition (its producers, open transactions and ghosts
first), built of :mod:`kafkatx.render.views`'s pieces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from rich.console import Group, RenderableType
from rich.text import Text

from kafkatx.render import descriptions as d
from kafkatx.render.human import (
    NONE,
    Column,
    Rows,
    Severity,
    by_severity,
    cell,
    colour_wanted,
    duration,
    output_console,
    styled,
    table,
    tp,
    when,
)
from kafkatx.render.views import (
    STATE_SEVERITY,
    boxed,
    facts_table,
    late,
    print_body,
    severity_panel,
    state_cell,
    txn_severity,
    valid_ms,
    view_stream,
)
from kafkatx.rows import (
    ProducerRow,
    ProducerRowWithExpiry,
    TransactionDescription,
)

H = d.HEADERS


HISTORY_COLUMNS = (
    Column("offset", H["offset"], 0, justify="right"),
    Column("state", H["state"], 0),
    Column("producer", H["producer_id"], 2),
    Column("partitions", H["partitions"], 1, shrink=True),
    Column("at", "at", 3),
)


STATUS_COLUMNS = (
    Column("partition", H["partition"], 0, shrink=True),
    Column("status", H["status"], 0),
)


def show_description(desc: TransactionDescription, fmt: str, inv: d.Invocation, now_ms: int, *, online: bool = False,
                     out: TextIO | None = None, width: int | None = None) -> None:
    """``kafkatx describe-txn``: a panel with the state, epoch, timeout and age, the partitions and
    their status, and the history as a compact table."""
    txn = desc.transaction
    sev = txn_severity(txn, now_ms)
    start = valid_ms(txn.start_timestamp_ms)
    facts: list[tuple[str, Any]] = [
        ("state", styled(state_cell(txn, now_ms), sev)),
        ("producer", f"{txn.producer_id}, epoch {txn.producer_epoch}"),
        ("timeout", duration(txn.timeout_ms)),
        ("started", when(start, now_ms)),
        ("updated", when(valid_ms(txn.last_update_timestamp_ms), now_ms)),
    ]
    if txn.state == "Ongoing" and start is not None:
        facts.append(("open for", duration(now_ms - start)))
    facts.append(("coordinator", f"broker {txn.coordinator_id}" if online else
                  f"__transaction_state-{txn.coordinator_partition}" if txn.coordinator_partition is not None
                  else NONE))
    if not desc.partition_status:
        facts.append(("partitions", cell(txn.partitions)))
    console = output_console(view_stream(out), width)
    inner = console.width - (4 if boxed(fmt) else 0)
    ascii_only = not colour_wanted(view_stream(out))
    parts: list[RenderableType] = [facts_table(facts)]
    if desc.partition_status:
        status = Rows(STATUS_COLUMNS)
        for p in sorted(desc.partition_status, key=lambda p: (not p.open, p.partition)):
            text = f"open since offset {p.first_offset}" if p.open else "closed (marker written)"
            status.add({"partition": p.partition, "status": text}, Severity.WARNING if p.open else Severity.OK)
        parts += [Text(""), table(status, inner, title="partitions", boxed=boxed(fmt),
                                  colour_keys=("partition", "status"), ascii_only=ascii_only)]
    if desc.history:
        hist = Rows(HISTORY_COLUMNS)
        for h in desc.history:
            state = h.state if h.state is not None else "tombstone"
            hist.add({"offset": h.offset, "state": state,
                      "producer": NONE if h.producer_id is None else f"{h.producer_id}/{h.producer_epoch}",
                      "partitions": cell(h.partitions), "at": when(valid_ms(h.last_update_timestamp_ms), now_ms)},
                     STATE_SEVERITY.get(state, Severity.MUTED))
        parts += [Text(""), table(hist, inner, title="history", boxed=boxed(fmt), colour_keys=("state",),
                                  ascii_only=ascii_only)]
    opened = desc.open_partitions
    current = {p.partition for p in desc.partition_status if p.open}
    elsewhere = [o for o in opened if o.partition not in current]  # the partitions table shows the rest
    if elsewhere:
        # One story: where a producer of this id holds a transaction open, with find-hanging's kind.
        held = Rows(STATUS_COLUMNS)
        for o in elsewhere:
            text = f"{o.kind or 'open'} since offset {o.first_offset} (producer {o.producer_id}/{o.producer_epoch})"
            held.add({"partition": o.partition, "status": text},
                     Severity.CRITICAL if o.kind is not None else Severity.WARNING)
        parts += [Text(""), table(held, inner, title="held open by this id's producers", boxed=boxed(fmt),
                                  colour_keys=("partition", "status"), ascii_only=ascii_only)]
    open_count = len({p.partition for p in desc.partition_status if p.open} | {o.partition for o in opened})
    hanging_kinds = sorted({o.kind for o in opened if o.kind is not None})
    summary = d.describe_summary(txn.transactional_id, open_count, late(txn, now_ms),
                                 str(txn.state).startswith("Prepare"), inv, hanging_kinds=hanging_kinds)
    blocked = [line for o in opened for line in d.blocked_group_lines(o.partition, o.blocked_groups)]
    summary = summary[:1] + blocked + summary[1:]
    print_body(out, width, severity_panel(Group(*parts), f"transaction {txn.transactional_id}", fmt, sev, out), summary)


PRODUCER_COLUMNS = (
    Column("producer_id", H["producer_id"], 0, justify="right"),
    Column("producer_epoch", H["producer_epoch"], 2, justify="right"),
    Column("coordinator_epoch", H["coordinator_epoch"], 5, justify="right"),
    Column("last_sequence", H["last_sequence"], 4, justify="right"),
    Column("last_timestamp_ms", H["last_timestamp_ms"], 3),
    Column("current_txn_first_offset", H["current_txn_first_offset"], 0, justify="right"),
    Column("ghost", H["ghost"], 1),
    Column("expired", H["expired"], 1),
)


def _expired(row: ProducerRow) -> bool:
    """``--include-expired``'s verdict (a plain :class:`ProducerRow` is never expired)."""
    return isinstance(row, ProducerRowWithExpiry) and row.expired


def producer_severity(row: ProducerRow) -> Severity:
    if row.ghost:
        return Severity.CRITICAL
    if _expired(row):
        return Severity.MUTED
    if row.current_txn_first_offset is not None:
        return Severity.WARNING
    return Severity.OK


def _kafka_optional(value: Any) -> Any:
    """A cell as ``kafka-transactions.sh describe-producers`` prints it (TransactionsCommand's
    DescribeProducersCommand): an absent CurrentTransactionStartOffset (no open transaction, -1 on
    the wire) is ``None``; the coordinator epoch is printed as the wire has it (-1 when unknown)."""
    return "None" if value is None else value


def show_producers(rows: Sequence[ProducerRow], fmt: str, inv: d.Invocation, now_ms: int, *, topic: str, partition: int,
                   out: TextIO | None = None, width: int | None = None) -> None:
    """``kafkatx describe-producers``: a panel per partition, open transactions and ghosts first."""
    ordered = by_severity(rows, producer_severity, lambda r: r.producer_id)
    data = Rows(PRODUCER_COLUMNS)
    for r in ordered:
        data.add({"producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
                  "coordinator_epoch": r.coordinator_epoch, "last_sequence": r.last_sequence,
                  "last_timestamp_ms": when(valid_ms(r.last_timestamp_ms), now_ms),
                  "current_txn_first_offset": _kafka_optional(r.current_txn_first_offset),
                  "ghost": "GHOST" if r.ghost else "", "expired": "expired" if _expired(r) else ""},
                 producer_severity(r))
    console = output_console(view_stream(out), width)
    body = table(data, console.width - (4 if boxed(fmt) else 0), boxed=boxed(fmt),
                 colour_keys=("producer_id", "current_txn_first_offset", "ghost"),
                 ascii_only=not colour_wanted(view_stream(out)))
    name = tp(topic, partition)
    summary = d.producers_summary(name, len(rows),
                                  sum(1 for r in rows if r.current_txn_first_offset is not None),
                                  sum(1 for r in rows if r.ghost), sum(1 for r in rows if _expired(r)),
                                  inv)
    worst = producer_severity(ordered[0]) if ordered else Severity.OK
    print_body(out, width, severity_panel(body, f"producers of {name}", fmt, worst, out), summary)
