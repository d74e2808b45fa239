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

import base64
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from kafkatx.errors import EXIT_FOUND, EXIT_INPUT, EXIT_OK, EXIT_USAGE, UsageError

__all__ = [
    "DEFAULT_TIMEOUT", "EXIT_FOUND", "EXIT_INPUT", "EXIT_OK", "EXIT_USAGE",
    "BootstrapServerOpt", "BrokerConfigOpt", "CommandConfigOpt", "FormatOpt", "LogDirOpt", "OfflineSource", "OnlineSource",
    "OutputFormat", "PayloadEncoding", "PayloadEncodingOpt", "ProfileOpt", "TableFormatOpt", "TimeoutOpt",
    "encode_payload", "resolve_source",
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


class PayloadEncoding(enum.StrEnum):
    hex = "hex"
    base64 = "base64"


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


_WHITESPACE = {ord("\t"): None, ord("\n"): None, ord("\r"): None}  # what may sit among printable text


def encode_payload(data: bytes | bytearray | memoryview | None,
                   encoding: PayloadEncoding | str = PayloadEncoding.hex) -> str | None:
    """A key/value for output: UTF-8 text when it decodes (and is printable), else hex/base64."""
    if data is None:
        return None
    raw = data if type(data) is bytes else bytes(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    # Control characters (other than whitespace) mean binary even when the bytes happen to be UTF-8.
    if text is not None and (text.isprintable() or text.translate(_WHITESPACE).isprintable()):
        return text
    enc = getattr(encoding, "value", encoding)
    if enc == "base64":
        return base64.b64encode(raw).decode("ascii")
    if enc == "hex":
        return raw.hex()
    raise UsageError(f"unknown payload encoding {enc!r}; expected hex or base64")
