"""``kafkatx timeline``: transaction spans per partition, drawn in the terminal or as one HTML page."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.cli.txn import (
    DEFAULT_READ_WINDOW,
    AllowPartialOpt,
    ReadWindowOpt,
    TopicFilterOpt,
    TxnStatePartitionsOpt,
    ask,
    check_now,
    emit_machine,
    finish,
    one_topic,
    with_rows,
)
from kafkatx.errors import KafkaTxError, UsageError

EXAMPLE = """

Example (the orders topic in the terminal, and a page to share):

\b
    kafkatx timeline --log-dir /var/lib/kafka/data --topic orders
    kafkatx timeline --log-dir /var/lib/kafka/data --html timeline.html
"""


def _write_atomically(path: Path, text: str) -> None:
    target = path.expanduser()
    if target.is_dir():
        raise UsageError(f"--html {path}: is a directory; give a file name")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
        # mkstemp makes it 0600; a report is readable like any file the user writes: 0666 less the umask
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
    except OSError as err:
        raise KafkaTxError(f"--html {path}: cannot write: {err.strerror or err}") from err
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise KafkaTxError(f"--html {path}: cannot write: {err.strerror or err}") from err


@app.command("timeline", help=(
    "Draw each partition's transactions over its offsets: committed, aborted and open spans, one lane per "
    "producer, with the log start (S), LSO (L), high watermark (H) and log end (E) marked. --html FILE also "
    "writes one self-contained page (inline SVG, no network) with the timelines and the lag and find-hanging "
    "tables. Offline only (--log-dir): it reads the partitions' files." + EXAMPLE))
@opt.source_options(offline_only=True)
def timeline(
    flags: opt.SourceOptions = opt.SOURCE,
    topics: TopicFilterOpt = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", metavar="N", min=0, help="Only this partition number.")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", metavar="FILE", dir_okay=False,
        help="Also write the timelines with the lag and find-hanging tables as one self-contained HTML "
             "file.")] = None,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS", help="Fix the clock (epoch ms) for reproducible runs.")] = None,
    max_timeout_min: opt.MaxTxnTimeoutOpt = None,
    max_timeout_ms: opt.MaxTxnTimeoutMsOpt = None,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.FormatOpt = opt.OutputFormat.text,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    allow_partial: AllowPartialOpt = False,
) -> None:
    check_now(now)
    files = flags.resolve().offline_only(
        "timeline reads the partitions' log files: give --log-dir (it has no online form)")
    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms, default=False)  # None: --broker-config's
    now_ms = now if now is not None else int(time.time() * 1000)
    topic = one_topic(topics, "timeline")
    answer = ask(files.timeline, now=now_ms, topic=topic, partition=partition, max_timeout_ms=max_timeout,
                 partitions_count=txn_state_partitions, read_window=read_window)
    partitions = answer.rows
    from kafkatx.render import timeline as render

    if html is not None:
        lag_rows = [p.lag for p in partitions]
        hanging_rows = [h for p in partitions for h in p.hanging]
        dirs = ", ".join(str(d) for d in files.log_dirs)
        from kafkatx.render import human_views

        inv = flags.invocation(now=now, max_timeout_ms=max_timeout)
        _write_atomically(html, render.timeline_html(
            partitions, now=now_ms, lag_rows=lag_rows, hanging_rows=hanging_rows,
            title=f"kafkatx timeline: {dirs}", next_steps=human_views().hanging_summary_lines(hanging_rows, inv, now_ms),
            incomplete=answer.incomplete))
        typer.echo(f"kafkatx: wrote {html}", err=True)
    if fmt.value in ("text", "table"):
        from rich.console import Console

        render.print_timeline(partitions, now=now_ms, console=Console(file=sys.stdout, highlight=False))
    else:
        emit_machine(with_rows(answer, [s for p in partitions for s in p.spans]), fmt.value)
    finish(answer, allow_partial)
