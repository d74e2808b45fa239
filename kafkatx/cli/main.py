"""The ``kafkatx`` command: the Typer app, error mapping and the process entry point.

Command modules register on :data:`app` when imported (``@app.command(...)``).
Errors are mapped in one place, :class:`KafkaTxGroup.invoke`, so that Typer's
``CliRunner`` and a real process behave the same:

- :class:`kafkatx.errors.KafkaTxError` -> ``kafkatx: <message>`` on stderr, exit ``err.exit_code``;
- an ``OSError`` reading input (permission denied, I/O error, a vanished file) -> one line naming the
  file, exit 3 (input unreadable);
- anything else is a bug, never bad input: one line ``internal error ... (run with --traceback,
  please report)`` and exit 4 (``--traceback`` or ``KAFKATX_TRACEBACK=1`` shows the stack);
- Click's own usage errors keep exit 2 (Typer vendors Click: use ``typer.Exit``/``typer.Abort``, not ``click``); a closed stdout (``| head``) ends quietly.
"""

from __future__ import annotations

import errno
import gc
import importlib
import io
import os
import sys
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from kafkatx import __version__  # pyproject.toml takes its version from here
from kafkatx.cli import fastparams
from kafkatx.cli.examples import EXAMPLES, add_examples, epilog
from kafkatx.errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_USAGE, KafkaTxError

HELP = """Kafka transaction toolkit for on-call engineers.

Decodes a broker's on-disk files (segments, indexes, producer snapshots, txnindex,
checkpoints, __transaction_state and __consumer_offsets records), replays the
transaction coordinator offline to find hanging transactions and repairs them;
the same questions can be asked of a live cluster.

Exit codes: 0 nothing found, 1 found what the command looks for, 2 usage error,
3 input could not be read or decoded, 4 internal error (a bug: please report it).
"""

TRACEBACK_KEY = "kafkatx.traceback"
EXIT_BROKEN_PIPE = 141  # what a shell reports for a process ended by SIGPIPE (128 + 13)

# Command modules, imported for their @app.command registrations. Modules other
# engineers have not written yet are skipped (only a missing module itself, not a
# failing import inside one).
COMMAND_MODULES = ("dump", "txn", "repair", "scan", "timeline", "exporter", "cluster_meta")


def _err_line(message: str) -> None:
    # One line, always: a multi-line message would break "one line on stderr".
    typer.echo("kafkatx: " + " ".join(str(message).split("\n")), err=True)


def _traceback_wanted(ctx: Any) -> bool:
    return bool(ctx.meta.get(TRACEBACK_KEY)) or os.environ.get("KAFKATX_TRACEBACK", "") not in ("", "0")


class _ClosedStdout(io.TextIOBase):
    """``sys.stdout`` when the process started with file descriptor 1 closed (``kafkatx lag >&-``; Python
    then sets ``sys.stdout`` to None): writing to it fails as writing to a full disk does, an
    :class:`OSError` the command ends on with exit 3 and one line, never an internal error."""

    encoding = "utf-8"

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed: the answer cannot be written")


def _guard_closed_stdout() -> None:
    """Started with stdout closed: /dev/null held on descriptor 1 (so that no file this process opens
    gets it, and no write meant for stdout lands in a log dir's file) and :class:`_ClosedStdout` as
    ``sys.stdout``."""
    if sys.stdout is not None:
        return
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != 1:
            os.dup2(fd, 1)
            os.close(fd)
    except OSError:  # pragma: no cover - no /dev/null
        pass
    sys.stdout = _ClosedStdout()


def _quiet_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


# Which module registers which command, so that running one command imports only its module
# (start-up time: the format/storage/coordinator/repair/cluster stacks behind the others stay unimported). A name
# missing here still works: an unknown command name imports every module before giving up.
LAZY_COMMANDS = {
    "dump-segment": "dump", "dump-index": "dump", "dump-snapshot": "dump", "dump-txnindex": "dump",
    "list-txn": "txn", "describe-txn": "txn", "describe-producers": "txn", "find-hanging": "txn", "lag": "txn",
    "verify": "txn", "undo": "repair", "abort-hanging": "repair", "scan": "scan", "timeline": "timeline",
    "exporter": "exporter", "describe-cluster": "cluster_meta",
}


# kafka-transactions.sh's subcommands (TransactionsCommand: list, describe, describe-producers, abort,
# find-hanging) as kafkatx names them: a habit typed here gets its kafkatx name suggested
KAFKA_TRANSACTIONS_NAMES = {"list": ("list-txn",), "describe": ("describe-txn", "describe-producers"),
                            "abort": ("abort-hanging",)}


class KafkaTxCommand(fastparams.FastParams, TyperCommand):
    """A kafkatx command: Typer's, with option values converted by :mod:`kafkatx.cli.fastparams`."""


class KafkaTxGroup(fastparams.FastParams, TyperGroup):
    """The root group: maps exceptions from any command to one stderr line and an exit code.

    Command modules are imported on demand (:data:`LAZY_COMMANDS`): :meth:`get_command` loads
    the module of the command asked for; listing the commands (help, completion, the
    ``commands`` attribute) loads them all.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loaded: set[str] = set()
        super().__init__(*args, **kwargs)
        self._fill_epilogs()

    def _fill_epilogs(self) -> None:
        # A command module imported before this group was built (a test importing it directly)
        # was converted by typer before add_examples saw it: give its command the example here.
        for name, cmd in self._commands.items():
            if not getattr(cmd, "epilog", None) and name in EXAMPLES:
                cmd.epilog = epilog(name)
            if getattr(cmd, "short_help", None) is None and cmd.help:
                # The command list shows the whole first sentence, wrapped, not Click's cut at ~45 columns.
                cmd.short_help = first_sentence(cmd.help)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Click's, with kafka-transactions.sh's subcommand names (``abort``) answered with their kafkatx
        names ("did you mean abort-hanging"), which Click's close-match suggestion does not find."""
        name = str(args[0]) if args else None
        if name in KAFKA_TRANSACTIONS_NAMES and self.get_command(ctx, name) is None:
            names = KAFKA_TRANSACTIONS_NAMES[name]
            ctx.fail(f"No such command {name!r}. Did you mean {', '.join(repr(n) for n in names)}? "
                     f"(kafka-transactions.sh {name})")
        return super().resolve_command(ctx, args)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, Any]:
        self._load(COMMAND_MODULES)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, Any]) -> None:
        self._commands = value

    def add_command(self, cmd: Any, name: str | None = None) -> None:
        key = name or cmd.name
        if key is None:
            raise TypeError("Command has no name.")
        self._commands[key] = cmd

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = self._commands.get(cmd_name)
        if cmd is None:
            module = LAZY_COMMANDS.get(cmd_name)
            self._load((module,) if module is not None else COMMAND_MODULES)
            cmd = self._commands.get(cmd_name)
            if cmd is None and module is not None:
                self._load(COMMAND_MODULES)
                cmd = self._commands.get(cmd_name)
        return cmd

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def _load(self, modules: tuple[str, ...]) -> None:
        todo = [m for m in modules if m not in self._loaded]
        if not todo:
            return
        for name in todo:
            self._loaded.add(name)
            _import_command_module(name)
        import typer.main

        add_examples(app.registered_commands)
        for info in app.registered_commands:
            cmd_name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else None)
            if cmd_name is not None and cmd_name not in self._commands:
                if info.cls in (None, TyperCommand):  # Typer's default: ours adds the fast option values
                    info.cls = KafkaTxCommand
                self.add_command(typer.main.get_command_from_info(
                    info, pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode), cmd_name)
        self._fill_epilogs()

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # `--traceback` is accepted anywhere on the line (the crash line tells users to add it, and they add
        # it at the end): moved in front of the command name, where the root option lives. Not after `--`.
        end = args.index("--") if "--" in args else len(args)
        if "--traceback" in args[1:end]:
            args = ["--traceback", *(a for a in args[:end] if a != "--traceback"), *args[end:]]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:  # a (vendored) click.Context
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException):
            raise
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except KafkaTxError as err:
            if _traceback_wanted(ctx):
                import traceback

                traceback.print_exc(file=sys.stderr)
            _err_line(str(err))
            raise typer.Exit(err.exit_code) from None
        except KeyboardInterrupt:
            _err_line("interrupted")
            raise typer.Exit(130) from None
        except OSError as err:  # reading input failed: unreadable input, not a bug
            if _traceback_wanted(ctx):
                import traceback

                traceback.print_exc(file=sys.stderr)
            where = f"{err.filename}: " if err.filename is not None else ""
            _err_line(f"{where}{err.strerror or err}")
            raise typer.Exit(EXIT_INPUT) from None
        except Exception as err:  # noqa: BLE001 - the last resort: never a bare traceback
            if _traceback_wanted(ctx):
                import traceback

                traceback.print_exc(file=sys.stderr)
            _err_line(f"internal error: {type(err).__name__}: {err} (run with --traceback, please report)")
            raise typer.Exit(EXIT_INTERNAL) from None


app = typer.Typer(
    name="kafkatx",
    help=HELP,
    cls=KafkaTxGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def first_sentence(text: str) -> str:
    """The first sentence of a command's help (up to ``. `` or the first blank line), on one line."""
    para = " ".join(text.strip().split("\n\n", 1)[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kafkatx {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    ctx: typer.Context,
    version_: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                           help="Print the version and exit.")] = False,
    show_traceback: Annotated[bool, typer.Option("--traceback",
                                                 help="Show the Python stack on errors.")] = False,
) -> None:
    """Kafka transaction toolkit for on-call engineers."""
    ctx.meta[TRACEBACK_KEY] = show_traceback


def _import_command_module(name: str) -> None:
    module = f"kafkatx.cli.{name}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise


def _register_commands() -> None:
    """Import every command module now (what the group does lazily)."""
    for name in COMMAND_MODULES:
        _import_command_module(name)


def main(argv: list[str] | None = None) -> int:
    """Run the app as the ``kafkatx`` process; returns the exit code (``python -m kafkatx``)."""
    _guard_closed_stdout()
    try:
        app(args=argv, prog_name="kafkatx", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        _err_line(str(code))
        return EXIT_USAGE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    return 0


def run() -> NoReturn:
    """The ``kafkatx`` process (its console script, ``python -m kafkatx``): :func:`main`, then exit with its
    code. Every object still alive then is first moved out of the cyclic collector's reach
    (``gc.freeze()``): the interpreter's collections at exit would walk them all to free nothing the exit
    needs (~0.1 s after an answer over 10,000 partitions). Finalization is otherwise the same:
    atexit handlers run and the standard streams are flushed. :func:`main` itself, called in a process that
    goes on (tests, embedding), freezes nothing."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
