"""``kafkatx scan``: the PySpark data pipeline (one library call: ``kafkatx.spark.job.run_scan``).

The summary goes to stdout in the usual ``--format``s; Spark's progress (a transient rich
status fed by the job's status-tracker poller), notices and skipped partitions go to
stderr. Exit 1 when hanging rows were found, 3 when Spark cannot start (no pyspark, no
Java) or the input cannot be read.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import _traceback_wanted, app
from kafkatx.cli.txn import AllowPartialOpt, check_now, finish
from kafkatx.errors import UsageError
from kafkatx.render import emit, human_views, to_plain
from kafkatx.rows import Answer, Report, Unreadable


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


class _SparkStatus:
    """A transient rich status on stderr (a terminal): a spinner while the work is unknown (Spark starting,
    the plan), then a bar of tasks and bytes done / total once the job says how many."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._console = Console(file=sys.stderr)
        self._bar: Any = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=self._console, transient=True)
        self._task: Any = self._bar.add_task("starting Spark", total=None)
        self._known = False
        self._bar.start()

    def _switch_to_bar(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar.stop()
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("tasks {task.fields[size]}"), TimeElapsedColumn(),
                             console=self._console, transient=True)
        self._task = self._bar.add_task("", total=1, size="")
        self._known = True
        self._bar.start()

    def update(self, description: str, completed: int, total: int, bytes_done: int, bytes_total: int) -> None:
        if not total:  # nothing known yet: the spinner, never a bar drawn full for 0/?
            self._bar.update(self._task, description=description)
            return
        if not self._known:
            self._switch_to_bar()
        self._bar.update(self._task, description=description, completed=completed, total=total,
                         size=f"{_size(bytes_done)}/{_size(bytes_total)}")

    @property
    def columns(self) -> list[str]:
        """The kinds of columns shown now (for tests): a spinner until the work is known, then a bar."""
        return [type(c).__name__ for c in self._bar.columns]

    def close(self) -> None:
        self._bar.stop()


class _PlainStatus:
    """stderr is no terminal (a log file) and the output is text: one line every ``every`` seconds."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self._next = time.monotonic() + every

    def update(self, description: str, completed: int, total: int, bytes_done: int, bytes_total: int) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every
        typer.echo(f"kafkatx: scan: {description}: {completed}/{total} tasks, "
                   f"{_size(bytes_done)}/{_size(bytes_total)} decoded", err=True)

    def close(self) -> None:
        pass


def _status(fmt: str) -> _SparkStatus | _PlainStatus | None:
    """The rich bar on a terminal; plain periodic lines for text output to a non-terminal; else
    nothing (``--format json`` etc. piped or logged stays free of progress noise)."""
    if sys.stderr.isatty():
        return _SparkStatus()
    if fmt == opt.OutputFormat.text.value:
        return _PlainStatus()
    return None


def parse_conf(items: list[str] | None) -> dict[str, str]:
    """``--conf k=v`` pairs (as ``spark-submit --conf``) -> dict; a malformed one is a usage error."""
    conf: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {item!r}: expected KEY=VALUE (for example spark.executor.memory=4g)")
        conf[key.strip()] = value
    return conf


def _new_log() -> Path:
    fd, name = tempfile.mkstemp(prefix="kafkatx-spark-", suffix=".log")
    os.close(fd)
    return Path(name)


def _log_python_to(path: Path | None) -> Any:
    """Python's own log records (py4j logs a KeyboardInterrupt mid-call with its whole stack, pyspark its
    warnings) go to the Spark log file with the JVM's, not to the terminal. Returns the handler."""
    if path is None:
        return None
    import logging

    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return handler


def _interrupted(output: Path, jvm_log: Path | None) -> None:
    """Ctrl-C: the processes are stopped (run_scan), the datasets it left half-written removed; one line,
    exit 130 (128 + SIGINT, what a shell reports)."""
    from kafkatx.spark.job import remove_incomplete, stop_started_processes

    stopped = stop_started_processes()  # whatever run_scan's own stop left (none, normally)
    try:
        removed = remove_incomplete(output)
    except Exception as err:  # noqa: BLE001 - the interrupt is the news; a removal problem is said in it
        gone = f"could not remove the incomplete datasets under {output} ({err}); they lack _SUCCESS"
    else:
        gone = (f"removed the incomplete datasets {', '.join(n + '/' for n in removed)} under {output}"
                if removed else f"no dataset was written under {output}")
    where = f"; Spark's log: {jvm_log}" if jvm_log is not None and jvm_log.exists() else ""
    extra = f" ({stopped} more stopped now)" if stopped else ""
    from kafkatx.render.plain import wrapped_note

    # on a terminal wrapped between words (as every note), piped one line
    typer.echo(wrapped_note(f"kafkatx: interrupted: scan stopped, Spark's processes ended{extra}; {gone}{where}",
                            sys.stderr), err=True)
    raise typer.Exit(130)


@app.command("scan")
def scan(
    ctx: typer.Context,
    log_dir: opt.LogDirOpt = None,
    output: Annotated[Path | None, typer.Option(
        "--output", metavar="DIR", file_okay=False,
        help="Where to write the Parquet datasets batches/, transactions/, partitions/, hanging/ "
             "(each replaced if present). Any Spark path (hdfs://, s3a://) works.")] = None,
    master: Annotated[str | None, typer.Option(
        "--master", metavar="URL",
        help="Spark master URL: local[*], local[N], spark://HOST:7077, yarn, k8s://... "
             "[default: local[*]; under spark-submit, its --master]", show_default=False)] = None,
    conf: Annotated[list[str] | None, typer.Option(
        "--conf", metavar="KEY=VALUE", help="Spark configuration, repeatable (as spark-submit --conf).")] = None,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS", help="Fix the clock (epoch ms) for reproducible runs.")] = None,
    max_timeout_min: opt.MaxTxnTimeoutOpt = None,
    max_timeout_ms: opt.MaxTxnTimeoutMsOpt = None,
    txn_state_partitions: Annotated[int | None, typer.Option(
        "--txn-state-partitions", metavar="N", min=1,
        help="transaction.state.log.num.partitions (default: highest __transaction_state partition on disk + 1).")
    ] = None,
    split_mb: Annotated[int | None, typer.Option(
        "--split-mb", metavar="MB", min=1,
        help="Split a partition holding more than this by segment, and cut a segment larger than this "
             "into byte ranges at batch boundaries (default: a partition above a task's share of the "
             "bytes is split by segment).")
    ] = None,
    pack_env: Annotated[Path | None, typer.Option(
        "--pack-env", metavar="FILE", dir_okay=False,
        help="A packed virtualenv holding kafkatx and its dependencies (build it with "
             "python -m kafkatx.spark.pack FILE) that the executors unpack and run "
             "(spark.archives FILE#environment): for executors without kafkatx installed.")] = None,
    fmt: opt.FormatOpt = opt.OutputFormat.text,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """Decode every segment of every partition on Spark and write Parquet datasets plus a summary.

    The partitions/ and hanging/ datasets equal `kafkatx lag` and `kafkatx find-hanging` on the
    same input. Exit 1 when hanging transactions were found, 3 when a partition could not be read
    (the datasets leave it out; see --allow-partial).
    """
    check_now(now)
    if not log_dir:
        raise UsageError("scan reads broker log dirs: give --log-dir DIR (repeatable)")
    if output is None:
        raise UsageError("scan writes Parquet datasets: give --output DIR")
    from kafkatx.spark.job import run_scan  # pyspark itself is imported only when the job starts

    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms)
    settings = parse_conf(conf)
    now_ms = now if now is not None else int(time.time() * 1000)
    # Spark's JVM logs to a file (named in errors) unless the user asked for stacks.
    jvm_log = None if _traceback_wanted(ctx) else _new_log()
    status = _status(fmt.value)
    python_log = _log_python_to(jvm_log)
    try:
        result = run_scan(log_dir, output, now=now_ms, max_timeout_ms=max_timeout,
                          partitions_count=txn_state_partitions, master=master, conf=settings,
                          split_bytes=split_mb * 1024 * 1024 if split_mb else None, progress=status,
                          pack_env=pack_env, jvm_log=jvm_log)
    except KeyboardInterrupt:
        if status is not None:
            status.close()
            status = None
        _interrupted(output, jvm_log)
    except BaseException:
        if jvm_log is not None and jvm_log.exists() and jvm_log.stat().st_size == 0:
            jvm_log.unlink()  # nothing to look at (the scan stopped before Spark wrote anything)
        raise
    finally:
        if status is not None:
            status.close()
        if python_log is not None:
            import logging

            logging.getLogger().removeHandler(python_log)
            python_log.close()
    if jvm_log is not None:
        jvm_log.unlink(missing_ok=True)  # kept (and named) only when the scan failed
    from kafkatx.render.notes import aggregate_notes

    for line in aggregate_notes(result.notices):
        typer.echo(f"kafkatx: note: {line}", err=True)
    for line in result.skipped:
        typer.echo(f"kafkatx: skipped: {line}", err=True)
    if fmt.value in ("text", "table"):
        from kafkatx.render.descriptions import invocation

        human_views().show_scan(result.summary, fmt.value, invocation(log_dir, now=now, max_timeout_ms=max_timeout))
    else:
        incomplete = [skipped_entry(line) for line in result.skipped]
        emit({**to_plain(result.summary), "incomplete": to_plain(incomplete)} if incomplete else result.summary,
             fmt.value)
    finish(Answer(rows=[], report=Report(incomplete=[skipped_entry(line) for line in result.skipped])), allow_partial)
    if result.summary.hanging:
        raise typer.Exit(opt.EXIT_FOUND)


_SKIPPED = re.compile(r"^(?P<name>\S+) \((?P<path>[^)]*)\): (?:(?P<file>/[^:]+): )?(?:byte (?P<pos>\d+): )?"
                      r"(?P<reason>.*)$", re.S)
_SKIPPED_TXN = re.compile(r"^(?P<path>/[^:]+): (?:(?P<file>/[^:]+): )?(?:byte (?P<pos>\d+): )?(?P<reason>.*)$", re.S)


def skipped_entry(line: str) -> Unreadable:
    """A scan's skipped-partition line ("name (path): file: byte N: reason", or "path: ..." for a
    __transaction_state partition) as the ``incomplete`` entry the other commands give."""
    m = _SKIPPED.match(line)
    if m is not None:
        return Unreadable(partition=m["name"], file=m["file"], position=int(m["pos"]) if m["pos"] else None,
                          reason=m["reason"])
    m = _SKIPPED_TXN.match(line)
    if m is not None:
        return Unreadable(partition=Path(m["path"]).name, file=m["file"],
                          position=int(m["pos"]) if m["pos"] else None, reason=m["reason"])
    return Unreadable(partition="?", file=None, position=None, reason=line)
