"""``kafkatx exporter``: serve LSO lag and hanging transactions as Prometheus metrics.

The command parses its options, builds :class:`kafkatx.cluster.exporter.Exporter` and hands it
to :func:`kafkatx.cluster.exporter.serve` until SIGTERM or SIGINT, which stop the HTTP server
and exit 0. The library (and prometheus_client, confluent-kafka under it) is imported inside
the command so ``kafkatx --help`` stays fast.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType, ModuleType
from typing import Annotated, Any

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.errors import UsageError
from kafkatx.render import emit

# The library's defaults (kafkatx.cluster.exporter), repeated here because Typer needs them at
# import time and importing the library pulls in prometheus_client and confluent-kafka;
# tests/cluster/test_exporter.py checks the two agree.
DEFAULT_LISTEN = "127.0.0.1:9308"
DEFAULT_INTERVAL_S = 30.0
DEFAULT_MAX_SERIES = 100
EXPORTER_PANEL = "Exporter"


@app.command("exporter")
def exporter(
    bootstrap_server: opt.BootstrapServerOpt = None,
    log_dir: Annotated[list[Path] | None, typer.Option(
        "--log-dir", metavar="DIR", rich_help_panel=opt.SOURCE_PANEL,
        help="Offline: broker log dirs instead of a cluster (repeatable), answered as lag and find-hanging "
             "answer them; adds kafkatx_partition_upload_blocked_bytes for tiered partitions.")] = None,
    broker_config: opt.BrokerConfigOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    listen: Annotated[str, typer.Option(
        "--listen", metavar="HOST:PORT", rich_help_panel=EXPORTER_PANEL,
        help="Where to serve /metrics (':PORT' listens on every address).")] = DEFAULT_LISTEN,
    interval: Annotated[float, typer.Option(
        "--interval", metavar="SECONDS", min=0.1, rich_help_panel=EXPORTER_PANEL,
        help="How often to ask the cluster (scrapes are answered from the last refresh).")] = DEFAULT_INTERVAL_S,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", metavar="T", rich_help_panel=EXPORTER_PANEL,
        help="Only these topics (repeatable; default every topic, internal ones included).")] = None,
    max_series: Annotated[int, typer.Option(
        "--max-series", metavar="N", min=0, rich_help_panel=EXPORTER_PANEL,
        help="At most N kafkatx_hanging_transaction_info series (the longest-hanging first); the rest are "
             "counted in kafkatx_hanging_transaction_info_dropped.")] = DEFAULT_MAX_SERIES,
    max_timeout_min: Annotated[int | None, typer.Option(
        "--max-transaction-timeout", metavar="MINUTES", min=0, rich_help_panel=EXPORTER_PANEL, show_default=False,
        help="As find-hanging: an open transaction counts as hanging once its producer's last write is "
             "older than this many minutes (default 15).")] = None,
    max_timeout_ms: Annotated[int | None, typer.Option(
        "--max-transaction-timeout-ms", metavar="MS", min=0, rich_help_panel=EXPORTER_PANEL, show_default=False,
        help="The same in milliseconds (default 900000).")] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", metavar="SECONDS", min=0.0, rich_help_panel=opt.SOURCE_PANEL,
        help="Bound on each cluster call (default: the interval, at most 10).")] = None,
    once: Annotated[bool, typer.Option(
        "--once", rich_help_panel=EXPORTER_PANEL,
        help="Refresh once, print the metrics to stdout and exit (0; 1 when hanging transactions were "
             "found; 3 when the cluster could not be read) instead of serving.")] = False,
    fmt: Annotated[opt.OutputFormat, typer.Option(
        "--format", case_sensitive=False, rich_help_panel=opt.OUTPUT_PANEL,
        help="With --once: text (the Prometheus exposition /metrics serves), table, json, jsonl or yaml "
             "(one row per sample: name, labels, value).")] = opt.OutputFormat.text,
) -> None:
    """Serve Prometheus metrics at /metrics: per-partition LSO, high watermark, LSO lag and the age
    of the oldest open transaction; hanging transactions by kind; refresh success and duration.

    It keeps serving while the cluster is unreachable (kafkatx_scrape_success 0) and reconnects at
    the next interval. SIGTERM or SIGINT stop it with exit 0.
    """
    from kafkatx.cluster import exporter as lib

    offline = bool(log_dir or broker_config)
    if offline and (bootstrap_server is not None or profile is not None):
        raise UsageError("give either --log-dir (offline) or --bootstrap-server/--profile (a cluster), not both")
    if not offline and bootstrap_server is None and profile is None:
        raise UsageError("no cluster: give --bootstrap-server HOST:PORT (or --profile NAME), or --log-dir DIR")
    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms)
    lib.parse_listen(listen)  # a bad --listen is a usage error before anything starts
    gather = None
    if offline:
        from kafkatx.cluster.source import OfflineSource

        source = OfflineSource(log_dirs=tuple(log_dir or ()), broker_configs=tuple(broker_config or ()))
        source.dirs()  # a missing dir or a bad broker config is refused now (exit 3 / 2), not at the first refresh
        gather = lib.offline_gatherer(source)

        def connect() -> Any:
            raise UsageError("offline: no cluster to connect to")
    else:
        bound = lib.default_timeout(interval) if timeout is None else timeout
        connect = lib.live_connector(bootstrap_server=bootstrap_server, command_config=command_config,
                                     profile=profile, timeout_s=bound)

    def notify(line: str) -> None:
        if not once:  # --once reports its one failure itself, after the output
            typer.echo(f"kafkatx: {line}", err=True)

    export = lib.Exporter(connect, topics=topic or (), interval_s=interval, max_series=max_series,
                          max_timeout_ms=max_timeout, notify=notify, offline=gather)
    if once:
        _print_once(lib, export, fmt)
        return

    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        lib.serve(export, listen, stop, on_listening=lambda host, port: typer.echo(
            f"kafkatx: serving {lib.describe_listen(host, port)} (refresh every {interval:g}s); "
            "SIGTERM or Ctrl-C stops", err=True))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    typer.echo(f"kafkatx: exporter stopped ({received[0] if received else 'stop'})", err=True)


def _print_once(lib: ModuleType, export: Any, fmt: opt.OutputFormat) -> None:
    result = export.refresh()
    if fmt.value == "text":
        sys.stdout.write(lib.exposition(export))
        sys.stdout.flush()
    else:
        emit(lib.sample_rows(export), fmt.value)
    if not result.success:
        typer.echo(f"kafkatx: {result.error}", err=True)
        raise typer.Exit(opt.EXIT_INPUT)
    if result.hanging:
        raise typer.Exit(opt.EXIT_FOUND)
