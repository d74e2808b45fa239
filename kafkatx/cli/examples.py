"""One example per command, shown at the end of its ``--help`` (the Typer epilog).

:func:`add_examples` gives every registered command without an epilog of its own the example
here; a command may instead pass ``epilog=`` to ``@app.command``. tests/test_docs.py checks
that every command's help ends with at least one ``kafkatx <command>`` example. The paths are
the bundled fixtures, so each example runs as it is in a checkout.
"""

from __future__ import annotations

from typing import Any

HEADING = "Examples:"
WIDTH = 76  # Click indents the epilog by 2 and each example by 2 more: 80 columns

EXAMPLES: dict[str, tuple[str, ...]] = {
    "dump-segment": (
        "kafkatx dump-segment fixtures/hanging/orders-0/00000000000000000109.log --deep-iteration --print-data",
        "kafkatx dump-segment fixtures/hanging/__transaction_state-3/00000000000000000000.log "
        "--decoder transaction-log",
    ),
    "dump-index": ("kafkatx dump-index fixtures/hanging/orders-0/00000000000000000109.timeindex",),
    "dump-snapshot": ("kafkatx dump-snapshot fixtures/hanging/orders-0/00000000000000000186.snapshot",),
    "dump-txnindex": ("kafkatx dump-txnindex fixtures/hanging/orders-0/00000000000000000109.txnindex",),
    "list-txn": (
        "kafkatx list-txn --log-dir fixtures/hanging --state Ongoing --state PrepareCommit",
        "kafkatx list-txn --bootstrap-server localhost:9092 --transactional-id-pattern 'billing-.*'",
    ),
    "describe-txn": ("kafkatx describe-txn stale-loader --log-dir fixtures/hanging",),
    "describe-producers": ("kafkatx describe-producers --log-dir fixtures/hanging --topic orders --partition 0",),
    "find-hanging": (
        "kafkatx find-hanging --log-dir fixtures/hanging --now 1700007200000",
        "kafkatx find-hanging --bootstrap-server localhost:9092 --format json | jq '.[].transactional_id'",
    ),
    "lag": (
        "kafkatx lag --log-dir fixtures/hanging",
        "kafkatx lag --bootstrap-server localhost:9092 --topic orders",
    ),
    "verify": ("kafkatx verify --log-dir fixtures/loading/torn-tail",),
    "abort-hanging": (
        "kafkatx abort-hanging --log-dir fixtures/hanging --transactional-id stale-loader   # the plan only",
        "kafkatx abort-hanging --log-dir /var/lib/kafka/data --all --execute   # broker stopped",
    ),
    "describe-cluster": ("kafkatx describe-cluster --log-dir fixtures/kraft",),
    "undo": ("kafkatx undo kafkatx-repair-20231115T001320Z.journal --dry-run",),
    "scan": ("kafkatx scan --log-dir fixtures/hanging --output /tmp/kafkatx-scan --master 'local[2]'",),
    "exporter": (
        "kafkatx exporter --bootstrap-server localhost:9092 --listen 127.0.0.1:9308 --interval 15",
        "kafkatx exporter --bootstrap-server localhost:9092 --once   # one refresh to stdout",
    ),
}


def epilog(name: str) -> str | None:
    """The epilog text for ``name``: the heading, then one example a line (Click keeps the lines
    of a paragraph that starts with ``\\b``)."""
    lines = EXAMPLES.get(name)
    if not lines:
        return None
    return "\b\n" + HEADING + "\n" + "\n".join("  " + line for example in lines for line in wrap_command(example))


def wrap_command(example: str, width: int = WIDTH) -> list[str]:
    """One example as shell lines of at most ``width`` columns: continued with `` \\``, the rest indented."""
    command, hash_, comment = example.partition("   # ")
    words = command.split()
    lines: list[str] = []
    line = ""
    for word in words:
        candidate = f"{line} {word}" if line else word
        if line and len(candidate) + 2 > width:  # room for " \\"
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = candidate
    if hash_:
        tail = f"{line}   # {comment}"
        if len(tail) <= width:
            line = tail
        else:
            lines.append(line + " \\")  # the comment alone on the last line would end the command
            line = f"    # {comment}"
            lines[-1] = lines[-1][:-2]
            lines.append(line)
            return lines
    lines.append(line)
    return lines


def add_examples(registered: list[Any]) -> None:
    """Give each ``typer`` ``CommandInfo`` without an epilog the example of :data:`EXAMPLES`."""
    for info in registered:
        name = info.name
        if name and not info.epilog:
            info.epilog = epilog(name)
