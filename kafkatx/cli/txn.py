"""Analysis commands: list-txn, describe-txn, describe-producers, find-hanging, lag, verify.

Each command resolves its one source and makes one library call:
offline ``kafkatx.txn.offline.<command>(log_dirs, ...)``, online
``kafkatx.cluster.service.<command>(backend, ...)`` after ``connect``. Rows go to
stdout through ``render.emit``; notices, skipped partitions and the progress bar
go to stderr, so ``--format json | jq`` always works.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.errors import UsageError
from kafkatx.render import emit, to_plain

DEFAULT_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default

LIST_COLUMNS_OFFLINE = ("transactional_id", "producer_id", "producer_epoch", "state", "timeout_ms",
                        "start_timestamp_ms", "last_update_timestamp_ms", "partitions", "coordinator_partition")
LIST_COLUMNS_ONLINE = LIST_COLUMNS_OFFLINE[:-1] + ("coordinator_id",)
HISTORY_COLUMNS = ("offset", "state", "producer_id", "producer_epoch", "partitions", "last_update_timestamp_ms")
VERIFY_COLUMNS = ("check", "severity", "file", "position", "message")

TxnStatePartitionsOpt = Annotated[int | None, typer.Option(
    "--txn-state-partitions", metavar="N", min=1,
    help="Offline: transaction.state.log.num.partitions (default: the highest __transaction_state "
         "partition on disk + 1), for the coordinator-partition check.")]
TopicFilterOpt = Annotated[str | None, typer.Option("--topic", metavar="T", help="Only this topic.")]


# ----------------------------------------------------------------------------- plumbing

class _Progress:
    """A transient rich progress bar on stderr, shown only on a TTY and only after a moment."""

    DELAY_S = 0.5

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None
        self._total = 0
        self._done = 0
        self._description = ""
        self._started = time.monotonic()

    def start(self, total: int, description: str) -> None:
        self._total, self._done, self._description = total, 0, description
        if self._bar is not None:
            self._bar.update(self._task, total=total, completed=0, description=description)

    def advance(self, n: int) -> None:
        self._done += n
        if self._bar is None and time.monotonic() - self._started > self.DELAY_S:
            self._open()
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done)

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                             console=Console(file=sys.stderr), transient=True)
        self._bar.start()
        self._task = self._bar.add_task(self._description, total=self._total, completed=self._done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@contextmanager
def _progress():
    if not sys.stderr.isatty():
        yield None
        return
    bar = _Progress()
    try:
        yield bar
    finally:
        bar.close()


def _say(answer: Any) -> None:
    for line in getattr(answer, "notices", ()):
        typer.echo(f"kafkatx: note: {line}", err=True)
    for line in getattr(answer, "skipped", ()):
        typer.echo(f"kafkatx: skipped: {line}", err=True)


def _source(log_dir, bootstrap_server, command_config, profile, timeout):
    return opt.resolve_source(log_dir, bootstrap_server, command_config, profile, timeout=timeout)


def _online(source: opt.OnlineSource, call: Callable[[Any], Any]) -> Any:
    from kafkatx.cluster import service  # lazily: confluent-kafka is slow to import

    backend = service.connect(bootstrap_server=source.bootstrap_server, command_config=source.command_config,
                              profile=source.profile, timeout_s=source.timeout)
    try:
        return call(backend)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()


def _emit(rows: list[Any], fmt: opt.OutputFormat, columns: tuple[str, ...] | None = None,
          title: str | None = None) -> None:
    emit(rows, fmt.value, columns=columns if fmt.value in ("text", "table") else None, title=title)


# ----------------------------------------------------------------------------- commands

@app.command("list-txn")
def list_txn(
    log_dir: opt.LogDirOpt = None,
    bootstrap_server: opt.BootstrapServerOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
    state: Annotated[list[str] | None, typer.Option(
        "--state", metavar="STATE",
        help="Only these states (repeatable): Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
             "CompleteAbort, Dead, PrepareEpochFence.")] = None,
    pattern: Annotated[str | None, typer.Option(
        "--transactional-id-pattern", metavar="REGEX", help="Only ids this regex matches (searched).")] = None,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
) -> None:
    """List transactional ids and their coordinator state (offline: replays __transaction_state)."""
    from kafkatx.txn.offline import compile_pattern, list_transactions, parse_states

    source = _source(log_dir, bootstrap_server, command_config, profile, timeout)
    wanted = parse_states(state)
    compile_pattern(pattern)
    if isinstance(source, opt.OfflineSource):
        with _progress() as bar:
            answer = list_transactions(source.log_dirs, states=state, pattern=pattern,
                                       partitions_count=txn_state_partitions, progress=bar)
        _say(answer)
        _emit([transaction_object(r, online=False) for r in answer.rows], fmt, LIST_COLUMNS_OFFLINE)
        return
    names = sorted(s.kafka_name for s in wanted) if wanted else None
    from kafkatx.cluster import service

    rows = _online(source, lambda b: service.list_transactions(b, states=names, pattern=pattern))
    _emit([transaction_object(r, online=True) for r in rows], fmt, LIST_COLUMNS_ONLINE)


def transaction_object(row: Any, *, online: bool) -> dict[str, Any]:
    """A list-txn row as cli.md shows it: ``coordinator_partition`` offline, ``coordinator_id`` online."""
    obj = to_plain(row)
    obj.pop("coordinator_partition" if online else "coordinator_id", None)
    return obj


def description_object(desc: Any, *, online: bool = False) -> dict[str, Any]:
    """cli.md's describe-txn object: the list-txn keys, then ``history`` and ``partition_status``."""
    obj = transaction_object(desc.transaction, online=online)
    obj["history"] = to_plain(desc.history)
    obj["partition_status"] = to_plain(desc.partition_status)
    return obj


@app.command("describe-txn")
def describe_txn(
    transactional_id: Annotated[str, typer.Argument(metavar="TRANSACTIONAL_ID", help="The transactional id.")],
    log_dir: opt.LogDirOpt = None,
    bootstrap_server: opt.BootstrapServerOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.FormatOpt = opt.OutputFormat.text,
) -> None:
    """Describe one transactional id: state, partitions, history (offline) and which partitions
    still have it open. Exit 1 when the id is unknown."""
    source = _source(log_dir, bootstrap_server, command_config, profile, timeout)
    if isinstance(source, opt.OfflineSource):
        from kafkatx.txn.offline import describe_transaction

        with _progress() as bar:
            answer = describe_transaction(source.log_dirs, transactional_id, partitions_count=txn_state_partitions,
                                          progress=bar)
        _say(answer)
        desc = answer.rows[0] if answer.rows else None
    else:
        from kafkatx.cluster import service

        desc = _online(source, lambda b: service.describe_transaction(b, transactional_id))
        if desc is None:
            typer.echo(f"kafkatx: transactional id {transactional_id!r} is not known to the cluster", err=True)
    if desc is None:
        raise typer.Exit(opt.EXIT_FOUND)
    obj = description_object(desc, online=not isinstance(source, opt.OfflineSource))
    if fmt.value in ("json", "jsonl", "yaml"):
        emit(obj, fmt.value)
        return
    head = {k: v for k, v in obj.items() if k not in ("history", "partition_status")}
    emit(head, "text")
    if desc.partition_status:
        emit(desc.partition_status, "table" if fmt.value == "table" else "text", title="partition status")
    if desc.history:
        emit(desc.history, "table" if fmt.value == "table" else "text", columns=HISTORY_COLUMNS, title="history")


@app.command("describe-producers")
def describe_producers(
    topic: Annotated[str, typer.Option("--topic", metavar="T", help="Topic of the partition.")],
    partition: Annotated[int, typer.Option("--partition", metavar="N", min=0, help="Partition number.")],
    log_dir: opt.LogDirOpt = None,
    bootstrap_server: opt.BootstrapServerOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
) -> None:
    """Producer state of one partition (offline: newest .snapshot plus the log after it).

    ghost: the producer's open transaction began below the log start (see find-hanging).
    """
    source = _source(log_dir, bootstrap_server, command_config, profile, timeout)
    if isinstance(source, opt.OfflineSource):
        from kafkatx.txn.offline import describe_producers as offline_describe_producers

        with _progress() as bar:
            answer = offline_describe_producers(source.log_dirs, topic=topic, partition=partition, progress=bar)
        _say(answer)
        rows = answer.rows
    else:
        from kafkatx.cluster import service

        rows = _online(source, lambda b: service.describe_producers(b, topic=topic, partition=partition))
    _emit(rows, fmt)


@app.command("find-hanging")
def find_hanging(
    log_dir: opt.LogDirOpt = None,
    bootstrap_server: opt.BootstrapServerOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
    max_timeout: Annotated[int, typer.Option(
        "--max-transaction-timeout", metavar="MS", min=0,
        help="Orphaned, ghost and incomplete-markers transactions count once the producer's last write is "
             "older than this "
             "(Kafka's transaction.max.timeout.ms, default 900000).")] = DEFAULT_MAX_TIMEOUT_MS,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS", help="Fix the clock (epoch ms) for reproducible runs.")] = None,
    topic: TopicFilterOpt = None,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
) -> None:
    """Find transactions that hold a partition's LSO back. Exit 1 when any is found.

    Kinds: orphaned (the coordinator has no transaction of that producer including the
    partition), timed-out (coordinator Ongoing past its own timeout), incomplete-markers
    (coordinator PrepareCommit/PrepareAbort, this partition never got its marker), ghost (an
    orphaned transaction that only the producer snapshot remembers: its first offset is below
    the log start, retention deleted its data; start_ms/duration_ms are null).
    """
    source = _source(log_dir, bootstrap_server, command_config, profile, timeout)
    now_ms = now if now is not None else int(time.time() * 1000)
    if isinstance(source, opt.OfflineSource):
        from kafkatx.txn.offline import find_hanging as offline_find_hanging

        with _progress() as bar:
            answer = offline_find_hanging(source.log_dirs, now=now_ms, max_timeout_ms=max_timeout, topic=topic,
                                          partitions_count=txn_state_partitions, progress=bar)
        _say(answer)
        rows = answer.rows
    else:
        from kafkatx.cluster import service

        rows = _online(source, lambda b: service.find_hanging(b, max_timeout_ms=max_timeout, now_ms=now_ms,
                                                              topic=topic))
    _emit(rows, fmt)
    if rows:
        raise typer.Exit(opt.EXIT_FOUND)


@app.command("lag")
def lag(
    log_dir: opt.LogDirOpt = None,
    bootstrap_server: opt.BootstrapServerOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
    topic: TopicFilterOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
) -> None:
    """Per partition: log start, LSO, high watermark, log end and lag = high watermark - LSO.

    held_by_ghost: the LSO is held by a ghost transaction (see find-hanging); online it needs
    DescribeProducers.
    """
    source = _source(log_dir, bootstrap_server, command_config, profile, timeout)
    if isinstance(source, opt.OfflineSource):
        from kafkatx.txn.offline import lag as offline_lag

        with _progress() as bar:
            answer = offline_lag(source.log_dirs, topic=topic, progress=bar)
        _say(answer)
        rows = answer.rows
    else:
        from kafkatx.cluster import service

        rows = _online(source, lambda b: service.lag(b, topic=topic))
    _emit(rows, fmt)


@app.command("verify")
def verify(
    log_dir: opt.LogDirOpt = None,
    bootstrap_server: opt.BootstrapServerOpt = None,
    command_config: opt.CommandConfigOpt = None,
    profile: opt.ProfileOpt = None,
    timeout: opt.TimeoutOpt = opt.DEFAULT_TIMEOUT,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
) -> None:
    """Check .log/.index/.timeindex/.txnindex/.snapshot files and checkpoints against each other.
    Exit 1 with one row per problem."""
    source = _source(log_dir, bootstrap_server, command_config, profile, timeout)
    if not isinstance(source, opt.OfflineSource):
        raise UsageError("verify reads broker files: give --log-dir (it has no online form)")
    from kafkatx.txn.offline import verify as offline_verify

    with _progress() as bar:
        answer = offline_verify(source.log_dirs, partitions_count=txn_state_partitions, progress=bar)
    _say(answer)
    _emit(answer.rows, fmt, VERIFY_COLUMNS)
    if answer.rows:
        raise typer.Exit(opt.EXIT_FOUND)
