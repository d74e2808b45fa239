"""Options shared by every command, and the helpers commands use with them.

Use them as parameter annotations in a Typer command::

    from kafkatx.cli.main import app
    from kafkatx.cli import options as opt
    from kafkatx.render import emit

    @app.command("list-txn")
    def list_txn(
        log_dir: opt.LogDirOpt = None,
        bootstrap_server: opt.BootstrapServerOpt = None,
        command_config: opt.CommandConfigOpt = None,
        profile: opt.ProfileOpt = None,
        timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
        fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    ) -> None:
        \"\"\"One line of help (test_docs checks every command has some).\"\"\"
        source = opt.resolve_source(log_dir, bootstrap_server, command_config, profile, timeout=timeout)
        rows = ...  # one library call
        emit(rows, fmt.value)
        if rows_are_findings:
            raise typer.Exit(opt.EXIT_FOUND)

- ``FormatOpt`` (default ``text``) / ``TableFormatOpt`` (default ``table``):
  ``--format text|table|json|jsonl|yaml``; pass ``fmt.value`` to ``render.emit``.
- ``PayloadEncodingOpt``: ``--payload-encoding hex|base64`` (default hex); turn
  keys/values into strings with :func:`encode_payload` before rendering.
- SOURCE: ``LogDirOpt`` (repeatable ``--log-dir``), ``BootstrapServerOpt``,
  ``CommandConfigOpt``, ``ProfileOpt``, ``TimeoutOpt`` (seconds) and
  :func:`resolve_source`, which returns an :class:`OfflineSource` or an
  :class:`OnlineSource` and raises ``UsageError`` (exit 2) for neither/both.
- Errors: raise ``kafkatx.errors`` exceptions (or let the library's escape);
  the app prints one line and exits with their ``exit_code``. A finding is
  ``raise typer.Exit(EXIT_FOUND)`` after rendering.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, overload

import typer

from kafkatx.errors import EXIT_FOUND, EXIT_INPUT, EXIT_OK, EXIT_USAGE, UsageError
from kafkatx.render.payload import PayloadEncoding, encode_payload

__all__ = [
    "DEFAULT_TIMEOUT", "EXIT_FOUND", "EXIT_INPUT", "EXIT_OK", "EXIT_USAGE",
    "BootstrapServerOpt", "BrokerConfigOpt", "CommandConfigOpt", "FormatOpt", "LogDirOpt", "OfflineSource", "OnlineSource",
    "OutputFormat", "PayloadEncoding", "PayloadEncodingOpt", "ProfileOpt", "TableFormatOpt", "TimeoutOpt",
    "BrokerIdOpt", "MaxTxnTimeoutMsOpt", "MaxTxnTimeoutOpt", "encode_payload", "resolve_max_timeout",
    "resolve_source",
]

DEFAULT_TIMEOUT = 30.0
SOURCE_PANEL = "Source"
OUTPUT_PANEL = "Output"


class OutputFormat(enum.StrEnum):
    text = "text"
    table = "table"
    json = "json"
    jsonl = "jsonl"
    yaml = "yaml"


_FORMAT_HELP = "Output format: text (or table), json, jsonl (one object per line) or yaml."

FormatOpt = Annotated[OutputFormat, typer.Option("--format", help=_FORMAT_HELP, case_sensitive=False,
                                                 rich_help_panel=OUTPUT_PANEL)]
TableFormatOpt = FormatOpt  # same option; commands with tabular results default it to OutputFormat.table
PayloadEncodingOpt = Annotated[PayloadEncoding, typer.Option(
    "--payload-encoding", case_sensitive=False, rich_help_panel=OUTPUT_PANEL,
    help="How keys/values that are not valid UTF-8 are printed.")]

LogDirOpt = Annotated[list[Path] | None, typer.Option(
    "--log-dir", help="Offline source: a broker log dir (repeatable, several brokers' dirs at once).",
    rich_help_panel=SOURCE_PANEL, metavar="DIR")]  # a file given here is refused by LogDir (exit 3)
BootstrapServerOpt = Annotated[str | None, typer.Option(
    "--bootstrap-server", metavar="HOST:PORT", help="Online source: a live cluster.",
    rich_help_panel=SOURCE_PANEL)]
CommandConfigOpt = Annotated[Path | None, typer.Option(
    "--command-config", metavar="FILE", dir_okay=False, rich_help_panel=SOURCE_PANEL,
    help="Kafka client properties file (security.protocol, sasl.*, ssl.*), as for the Java tools.")]
ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", metavar="NAME", rich_help_panel=SOURCE_PANEL,
    help="A named entry of ~/.config/kafkatx/profiles.yaml.")]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout", metavar="SECONDS", min=0.0, rich_help_panel=SOURCE_PANEL,
    help="Online: how long to wait for the cluster.")]


BrokerConfigOpt = Annotated[list[Path] | None, typer.Option(
    "--broker-config", metavar="FILE", dir_okay=False, rich_help_panel=SOURCE_PANEL,
    help="Offline: the server.properties the broker ran with (repeatable, one per broker: each applies to "
         "the --log-dir its log.dirs names; one applies to all). Its producer.id.expiration.ms, "
         "transaction.max.timeout.ms, transaction.state.log.num.partitions are used unless a flag says "
         "otherwise; without --log-dir, its log.dirs are read.")]


# kafka-transactions.sh find-hanging's --max-transaction-timeout is in MINUTES (default 15; Kafka's
# TransactionsCommand.FindHangingTransactionsCommand: TimeUnit.MINUTES.toMillis). kafkatx takes it the same
# way, and the millisecond form (transaction.max.timeout.ms) under its own name.
MaxTxnTimeoutOpt = Annotated[int | None, typer.Option(
    "--max-transaction-timeout", metavar="MINUTES", min=0,
    help="An open transaction counts as hanging once its producer's last write is older than this many "
         "minutes, as kafka-transactions.sh (default 15: Kafka's transaction.max.timeout.ms).",
    show_default=False)]
MaxTxnTimeoutMsOpt = Annotated[int | None, typer.Option(
    "--max-transaction-timeout-ms", metavar="MS", min=0,
    help="The same in milliseconds (default 900000).", show_default=False)]
BrokerIdOpt = Annotated[int | None, typer.Option(
    "--broker-id", metavar="ID", min=0, show_default=False,
    help="Offline: only the --log-dir of this broker (node.id or broker.id in its meta.properties), as "
         "kafka-transactions.sh --broker-id.")]


@overload
def resolve_max_timeout(minutes: int | None, ms: int | None) -> int: ...


@overload
def resolve_max_timeout(minutes: int | None, ms: int | None, *, default: bool) -> int | None: ...


def resolve_max_timeout(minutes: int | None, ms: int | None, *, default: bool = True) -> int | None:
    """The hanging threshold in ms from ``--max-transaction-timeout MINUTES`` / ``--max-transaction-timeout-ms``.

    Neither given: Kafka's default, or None with ``default=False`` (offline commands then take the
    ``--broker-config``'s ``transaction.max.timeout.ms``, else Kafka's default: ``txn.offline.hanging_settings``).
    """
    from kafkatx.txn.rules import DEFAULT_MAX_TIMEOUT_MS

    if minutes is not None and ms is not None:
        raise UsageError("give --max-transaction-timeout (minutes) or --max-transaction-timeout-ms, not both")
    if ms is not None:
        return ms
    if minutes is None:
        return DEFAULT_MAX_TIMEOUT_MS if default else None
    return minutes * 60_000


def for_broker(source: OfflineSource | OnlineSource, broker_id: int | None) -> OfflineSource | OnlineSource:
    """``--broker-id``: offline, the given log dirs that belong to that broker; online it is refused."""
    if broker_id is None:
        return source
    if isinstance(source, OnlineSource):
        raise UsageError("--broker-id selects a broker's --log-dir offline; online kafkatx asks each "
                         "partition's leader (leave --broker-id out)")
    from kafkatx.log import log_dirs_of_broker

    return OfflineSource(log_dirs=log_dirs_of_broker(source.log_dirs, broker_id), broker_configs=source.broker_configs)


def broker_partitions(source: OfflineSource | OnlineSource, broker_id: int | None) -> set[tuple[str, int]] | None:
    """``find-hanging --broker-id``: the partitions with a replica in that broker's log dirs (Kafka's
    ``FindHangingTransactionsCommand`` searches the partitions with a replica on the broker, while the
    coordinator is asked about every transaction: offline every --log-dir still feeds the coordinator)."""
    if broker_id is None:
        return None
    only = for_broker(source, broker_id)
    assert isinstance(only, OfflineSource)
    from kafkatx.log import LogDir

    return {(p.topic, p.partition) for d in only.log_dirs for p in LogDir(d).partitions()}

# Offline-only commands (verify, timeline) take the online flags only to refuse them with a useful line
# ("it has no online form"); hidden, so their --help does not offer what they refuse.
_REFUSED = "Refused: this command reads broker files (--log-dir) only."
OfflineOnlyBootstrapServerOpt = Annotated[str | None, typer.Option("--bootstrap-server", hidden=True, help=_REFUSED)]
OfflineOnlyCommandConfigOpt = Annotated[Path | None, typer.Option("--command-config", hidden=True, help=_REFUSED)]
OfflineOnlyProfileOpt = Annotated[str | None, typer.Option("--profile", hidden=True, help=_REFUSED)]
OfflineOnlyTimeoutOpt = Annotated[float, typer.Option("--timeout", min=0.0, hidden=True, help=_REFUSED)]


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineSource:
    """One or more broker log dirs, and the broker configs they were written under (``--broker-config``)."""

    log_dirs: tuple[Path, ...]
    broker_configs: tuple[Path, ...] = ()

    def open(self):  # -> list[LogDir]; kafkatx.log is imported lazily to keep --help fast
        from kafkatx.log import open_log_dirs
        from kafkatx.log.broker_config import read_broker_config

        return open_log_dirs(self.log_dirs, [read_broker_config(p) for p in self.broker_configs])


@dataclass(frozen=True, slots=True, kw_only=True)
class OnlineSource:
    """A live cluster. ``kafkatx.cluster.config.resolve`` turns it into client settings."""

    bootstrap_server: str | None
    command_config: Path | None = None
    profile: str | None = None
    timeout: float = DEFAULT_TIMEOUT


def resolve_source(log_dirs: list[Path] | None, bootstrap_server: str | None,
                   command_config: Path | None = None, profile: str | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT, broker_configs: list[Path] | None = None,
                   ) -> OfflineSource | OnlineSource:
    """The one source the flags name. Neither or both: :class:`UsageError` (exit 2).

    ``--command-config`` and ``--profile`` count as online flags (a profile may
    carry the bootstrap server). ``--broker-config`` is offline; alone, its ``log.dirs`` are the
    log dirs.
    """
    online = bootstrap_server is not None or profile is not None or command_config is not None
    if (log_dirs or broker_configs) and online:
        raise UsageError("give either --log-dir/--broker-config (offline) or --bootstrap-server/--profile "
                         "(online), not both")
    if log_dirs or broker_configs:
        return OfflineSource(log_dirs=tuple(log_dirs or ()), broker_configs=tuple(broker_configs or ()))
    if online:
        return OnlineSource(bootstrap_server=bootstrap_server, command_config=command_config,
                            profile=profile, timeout=timeout)
    raise UsageError("no source: give --log-dir DIR (offline) or --bootstrap-server HOST:PORT (online)")
