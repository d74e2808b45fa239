"""Options shared by every command, and the helpers commands use with them.

Use them as parameter annotations in a Typer command; the Source panel's flags are declared once,
by :func:`source_options`, in place of a ``source`` parameter::

    from kafkatx.cli.main import app
    from kafkatx.cli import options as opt
    from kafkatx.render import emit

    @app.command("list-txn")
    @opt.source_options()
    def list_txn(
        flags: opt.SourceOptions = opt.SOURCE,  # --log-dir ... --broker-config, in this place of --help
        fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    ) -> None:
        \"\"\"One line of help (test_docs checks every command has some).\"\"\"
        answer = flags.resolve().list_transactions(...)  # one question of the Source protocol
        emit(answer.rows, fmt.value)
        if rows_are_findings:
            raise typer.Exit(opt.EXIT_FOUND)

- ``FormatOpt`` (default ``text``) / ``TableFormatOpt`` (default ``table``):
  ``--format text|table|json|jsonl|yaml``; pass ``fmt.value`` to ``render.emit``.
- ``PayloadEncodingOpt``: ``--payload-encoding hex|base64`` (default hex); turn
  keys/values into strings with :func:`encode_payload` before rendering.
- SOURCE: :func:`source_options` (``--log-dir`` repeatable, ``--bootstrap-server``,
  ``--command-config``, ``--profile``, ``--timeout`` seconds, ``--broker-config``) gives the command a
  :class:`SourceOptions`; its ``resolve()`` returns the :class:`~kafkatx.cluster.source.Source`
  (``OfflineSource`` or ``OnlineSource``) and raises ``UsageError`` (exit 2) for neither/both.
- Errors: raise ``kafkatx.errors`` exceptions (or let the library's escape);
  the app prints one line and exits with their ``exit_code``. A finding is
  ``raise typer.Exit(EXIT_FOUND)`` after rendering.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar, overload

import typer
from msgspec import Struct

from kafkatx.cluster.source import DEFAULT_TIMEOUT, OfflineSource, OnlineSource, resolve_source
from kafkatx.errors import EXIT_FOUND, EXIT_INPUT, EXIT_OK, EXIT_USAGE, UsageError
from kafkatx.render.payload import PayloadEncoding, encode_payload

__all__ = [
    "DEFAULT_TIMEOUT", "EXIT_FOUND", "EXIT_INPUT", "EXIT_OK", "EXIT_USAGE",
    "BootstrapServerOpt", "BrokerConfigOpt", "CommandConfigOpt", "FormatOpt", "LogDirOpt", "OfflineSource", "OnlineSource",
    "OutputFormat", "PayloadEncoding", "PayloadEncodingOpt", "ProfileOpt", "TableFormatOpt", "TimeoutOpt",
    "BrokerIdOpt", "MaxTxnTimeoutMsOpt", "MaxTxnTimeoutOpt", "SOURCE", "SourceOptions", "encode_payload",
    "resolve_max_timeout", "resolve_source", "source_options",
]

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


AllowMixedClustersOpt = Annotated[bool, typer.Option(
    "--allow-mixed-clusters", rich_help_panel=SOURCE_PANEL,
    help="Offline: read several --log-dir together even when their meta.properties name two cluster.id "
         "values, or are two copies of one broker (the same node.id and directory.id): copies are then "
         "taken as replicas. Without it such dirs are refused (exit 2).")]
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
    help="Minutes (default 15: Kafka's transaction.max.timeout.ms). As kafka-transactions.sh find-hanging, "
         "an open transaction the coordinator does not hold open for the partition (orphaned, "
         "incomplete-markers) is listed once its producer's last write to the partition is more than this "
         "long ago; a prepared-2pc one once it began more than this long ago. One the coordinator holds "
         "Ongoing is timed-out by its own timeout only (start + timeout_ms < now), whatever this says.",
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
    ``--broker-config``'s ``transaction.max.timeout.ms``, else Kafka's default: ``session.session.OfflineSession.resolve_settings``).
    """
    from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS

    if minutes is not None and ms is not None:
        raise UsageError("give --max-transaction-timeout (minutes) or --max-transaction-timeout-ms, not both")
    if ms is not None:
        return ms
    if minutes is None:
        return DEFAULT_MAX_TIMEOUT_MS if default else None
    return minutes * 60_000


# Offline-only commands (verify, timeline) take the online flags only to refuse them with a useful line
# ("it has no online form"); hidden, so their --help does not offer what they refuse.
_REFUSED = "Refused: this command reads broker files (--log-dir) only."
OfflineOnlyBootstrapServerOpt = Annotated[str | None, typer.Option("--bootstrap-server", hidden=True, help=_REFUSED)]
OfflineOnlyCommandConfigOpt = Annotated[Path | None, typer.Option("--command-config", hidden=True, help=_REFUSED)]
OfflineOnlyProfileOpt = Annotated[str | None, typer.Option("--profile", hidden=True, help=_REFUSED)]
OfflineOnlyTimeoutOpt = Annotated[float, typer.Option("--timeout", min=0.0, hidden=True, help=_REFUSED)]


class SourceOptions(Struct, frozen=True):
    """The Source panel's flags as the user gave them (declared once, by :func:`source_options`).

    :meth:`resolve` gives the :class:`~kafkatx.cluster.source.Source` they name (a command calls it
    where a wrong source should be refused); :meth:`invocation` repeats them in the commands a
    summary suggests."""

    log_dir: list[Path] | None = None
    bootstrap_server: str | None = None
    command_config: Path | None = None
    profile: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    broker_config: list[Path] | None = None
    allow_mixed_clusters: bool = False

    def resolve(self) -> OfflineSource | OnlineSource:
        if self.allow_mixed_clusters:
            from kafkatx.storage.replicas import allow_mixed_clusters

            allow_mixed_clusters()
        return resolve_source(self.log_dir, self.bootstrap_server, self.command_config, self.profile,
                              timeout=self.timeout, broker_configs=self.broker_config)

    def invocation(self, **rules: Any) -> Any:
        """``render.descriptions.Invocation`` of these flags (and ``now``, ``max_timeout_ms``)."""
        from kafkatx.render.descriptions import invocation

        return invocation(self.log_dir, self.bootstrap_server, self.command_config, self.profile, **rules)


SOURCE = SourceOptions()  # the default of a command's ``source`` parameter: replaced by the flags' values
_SOURCE_FLAGS = ("log_dir", "bootstrap_server", "command_config", "profile", "timeout", "broker_config",
                 "allow_mixed_clusters")
_FLAG_TYPES = {"log_dir": LogDirOpt, "bootstrap_server": BootstrapServerOpt, "command_config": CommandConfigOpt,
               "profile": ProfileOpt, "timeout": TimeoutOpt, "broker_config": BrokerConfigOpt,
               "allow_mixed_clusters": AllowMixedClustersOpt}
_OFFLINE_ONLY_TYPES = {**_FLAG_TYPES, "bootstrap_server": OfflineOnlyBootstrapServerOpt,
                       "command_config": OfflineOnlyCommandConfigOpt, "profile": OfflineOnlyProfileOpt,
                       "timeout": OfflineOnlyTimeoutOpt}

Command = TypeVar("Command", bound=Callable[..., Any])


def source_options(*, offline_only: bool = False) -> Callable[[Command], Command]:
    """The Source panel's flags for a command, declared here once (as sqlite-utils' ``output_options``).

    The command declares a parameter ``flags: opt.SourceOptions = opt.SOURCE`` where the flags belong in
    its ``--help``; that parameter becomes ``--log-dir``, ``--bootstrap-server``, ``--command-config``,
    ``--profile``, ``--timeout``, ``--broker-config``, and the command is called with their values as one
    :class:`SourceOptions`. ``offline_only``: the online flags are hidden and taken only to be refused
    (``source.resolve().offline_only(...)``)."""
    types = _OFFLINE_ONLY_TYPES if offline_only else _FLAG_TYPES

    def declare(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        params = list(signature.parameters.values())
        (at, name), = [(i, p.name) for i, p in enumerate(params) if p.annotation is SourceOptions]
        flags = [inspect.Parameter(flag, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                   default=getattr(SOURCE, flag), annotation=types[flag])
                 for flag in _SOURCE_FLAGS]
        params[at:at + 1] = flags

        @functools.wraps(command)
        def with_source(**kwargs: Any) -> Any:
            kwargs[name] = SourceOptions(*(kwargs.pop(flag) for flag in _SOURCE_FLAGS))
            return command(**kwargs)

        with_source.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        with_source.__annotations__ = {p.name: p.annotation for p in params} | {
            "return": signature.return_annotation}
        return with_source  # type: ignore[return-value]

    return declare
