"""``kafkatx describe-cluster``: what the KRaft metadata log (``__cluster_metadata-0``) says, offline.

One library call (``kafkatx.checks.cluster.describe_cluster``), rendered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.cli.txn import DEFAULT_READ_WINDOW, ReadWindowOpt
from kafkatx.errors import UsageError

MetadataLogDirOpt = Annotated[Path | None, typer.Option(
    "--metadata-log-dir", metavar="DIR", file_okay=False,
    help="Where __cluster_metadata-0 is (the node's metadata.log.dir), when it is not in a --log-dir.")]


@app.command("describe-cluster")
def describe_cluster(
    log_dir: opt.LogDirOpt = None,
    metadata_log_dir: MetadataLogDirOpt = None,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
) -> None:
    """Show what the KRaft metadata log says (offline): finalized features (metadata.version,
    transaction.version, kraft.version), brokers, topics with ids and partition counts, producer-id
    blocks. Reads __cluster_metadata-0 (newest .checkpoint snapshot, then the log) of a combined
    broker/controller's log dir, or --metadata-log-dir. A record of a newer version than kafkatx
    knows is read as far as its known fields go (a note says so). Exit 3 when there is none, or when
    a record could not be read at all (the answer is then incomplete; the records are named).
    """
    from kafkatx.checks.cluster import describe_cluster as describe
    from kafkatx.render import emit
    from kafkatx.storage.segment import read_window as segment_read_window

    if not log_dir and metadata_log_dir is None:
        raise UsageError("give --log-dir DIR (a combined node's) or --metadata-log-dir DIR")
    with segment_read_window(read_window):  # the metadata log's segments, on the pread path
        desc = describe(log_dir or [], metadata_log_dir=metadata_log_dir)
    for notice in desc.notices:
        typer.echo(f"kafkatx: note: {notice}", err=True)
    if fmt in (opt.OutputFormat.table, opt.OutputFormat.text):
        from kafkatx.render.cluster_view import show_cluster

        show_cluster(desc)
    else:
        emit(desc, fmt.value)
    if desc.unreadable:
        from kafkatx.errors import EXIT_INPUT

        typer.echo(f"kafkatx: incomplete: {len(desc.unreadable)} metadata record(s) could not be read: "
                   f"{desc.unreadable[0]}" + (f" and {len(desc.unreadable) - 1} more" if len(desc.unreadable) > 1
                                               else ""), err=True)
        raise typer.Exit(EXIT_INPUT)
