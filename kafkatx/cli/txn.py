"""Analysis commands: list-txn, describe-txn, describe-producers, find-hanging, lag, verify.

Each command takes the Source panel's flags (``opt.source_options``), resolves its one source
(:mod:`kafkatx.cluster.source`: offline the broker files, online a live cluster) and asks it one
question through :func:`ask`. Rows go to
stdout through ``render.emit``; notices, skipped partitions and the progress bar
go to stderr, so ``--format json | jq`` always works.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.cli.watch import WatchCommand, WatchOpt, watch
from kafkatx.errors import DecodeError, KafkaTxError, ReadFailed, UsageError
from kafkatx.render import emit, human_views, to_plain

LIST_COLUMNS_OFFLINE = ("transactional_id", "producer_id", "producer_epoch", "state", "timeout_ms",
                        "start_timestamp_ms", "last_update_timestamp_ms", "partitions", "coordinator_partition")
LIST_COLUMNS_ONLINE = LIST_COLUMNS_OFFLINE[:-1] + ("coordinator_id",)
VERIFY_COLUMNS = ("check", "severity", "file", "position", "message")

TxnStatePartitionsOpt = Annotated[int | None, typer.Option(
    "--txn-state-partitions", metavar="N", min=1,
    help="Offline: transaction.state.log.num.partitions (default: the highest __transaction_state "
         "partition on disk + 1), for the coordinator-partition check.")]
VERIFY_SEVERITIES = ("info", "warning", "error")  # verify's row severities, mildest first


class VerifySeverity(StrEnum):
    info = "info"
    warning = "warning"
    error = "error"


TopicFilterOpt = Annotated[list[str] | None, typer.Option(
    "--topic", metavar="T", help="Only this topic (one: given twice, exit 2).")]
TopicsOpt = Annotated[list[str] | None, typer.Option(
    "--topic", metavar="T", help="Only these topics (repeatable).")]


def one_topic(topics: list[str] | None, command: str) -> str | None:
    """A command that takes one ``--topic`` (as kafka-transactions.sh's): the topic, or None; a second
    ``--topic`` is refused (exit 2) rather than silently replacing the first."""
    given = list(dict.fromkeys(topics or ()))
    if len(given) > 1:
        raise UsageError(f"--topic given {len(given)} times ({', '.join(given)}): {command} takes one topic "
                         "(lag takes several)")
    return given[0] if given else None


# ----------------------------------------------------------------------------- plumbing

class _Progress:
    """A transient rich progress bar on stderr, shown only on a TTY and only after a moment."""

    DELAY_S = 0.5
    # rich redraws 10 times a second; telling it more often cost more than the work at 10,000 partitions
    # (verify on a terminal: 2.0 s against 0.6 s without the bar)
    EVERY_S = 0.05

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None
        self._total = 0
        self._done = 0
        self._description = ""
        self._started = time.monotonic()
        self._told = 0.0  # when the bar was last told

    def start(self, total: int, description: str) -> None:
        self._total, self._done, self._description = total, 0, description
        if self._bar is not None:
            self._bar.update(self._task, total=total, completed=0, description=description)

    def advance(self, n: int) -> None:
        self._done += n
        now = time.monotonic()
        if now - self._told < self.EVERY_S:
            return
        self._told = now
        if self._bar is None and now - self._started > self.DELAY_S:
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


def say_notices(answer: Any) -> None:
    """An offline answer's ``notices`` and ``skipped`` partitions, one stderr line each; a note said
    twice is said once, and a kind of note repeated many times is one line (``render.notes``)."""
    from kafkatx.render.notes import aggregate_notes
    from kafkatx.render.plain import wrapped_note

    for line in aggregate_notes(dict.fromkeys(getattr(answer, "notices", ()))):  # each said once, in order
        typer.echo(wrapped_note(f"kafkatx: note: {line}", sys.stderr), err=True)
    for line in dict.fromkeys(getattr(answer, "skipped", ())):
        typer.echo(wrapped_note(f"kafkatx: skipped: {line}", sys.stderr), err=True)


class Rows(list):
    """A command's rows plus ``incomplete``: the partitions the answer could not read (cli.md)."""

    incomplete: list[Any]

    def __init__(self, rows: Any = (), incomplete: Any = ()) -> None:
        super().__init__(rows)
        self.incomplete = list(incomplete)


# Offline, when a running broker holds the log dir (segments read with pread, not mapped)
ReadWindowOpt = Annotated[int, typer.Option(
    "--read-window", metavar="BYTES", min=1 << 16,
    help="When a running broker holds the log dir (segments read with pread, not mapped), hold at most "
         "BYTES of a segment at a time (a larger batch is read whole). Default 64 MiB.")]
DEFAULT_READ_WINDOW = 64 << 20

JobsOpt = Annotated[int | None, typer.Option(
    "--jobs", "-j", metavar="N", min=1,
    help="Offline: processes that read the partitions (default: one per CPU, at most 8, from 1,000 "
         "partitions up; 1: this process only). The answer is the same.")]

AllowPartialOpt = Annotated[bool, typer.Option(
    "--allow-partial",
    help="Accept an answer that could not read every partition: exit as if complete (the last line "
         "and the JSON 'incomplete' list still name what was not read).")]

MIN_NOW_MS = 10**11  # below: seconds (the `date +%s` habit), not epoch milliseconds
MAX_FUTURE_MS = 366 * 86_400_000  # --now more than a year ahead cannot be meant


def check_now(now: int | None) -> int | None:
    """``--now`` must be epoch milliseconds: seconds or a far future are refused (exit 2)."""
    if now is None:
        return None
    if now < MIN_NOW_MS:
        hint = f" (seconds? try --now {now * 1000})" if now > 10**8 else ""
        raise UsageError(f"--now {now}: not epoch milliseconds{hint}")
    if now > int(time.time() * 1000) + MAX_FUTURE_MS:
        raise UsageError(f"--now {now}: more than a year in the future (epoch milliseconds expected)")
    return now


def incomplete_line(incomplete: list[Any], allow_partial: bool = False) -> str:
    """The last line of a partial answer: how many partitions could not be read and why (first few)."""
    by_partition: dict[str, Any] = {}
    for u in incomplete:
        by_partition.setdefault(u.partition, u)
    shown = "; ".join(f"{name}: {f'byte {u.position}: ' if u.position is not None else ''}{u.reason}"
                      for name, u in list(by_partition.items())[:3])
    more = f"; and {len(by_partition) - 3} more" if len(by_partition) > 3 else ""
    n = len(by_partition)
    head = "partial answer (--allow-partial)" if allow_partial else "incomplete"
    return f"kafkatx: {head}: {n} partition{'s' if n != 1 else ''} could not be read (left out above): {shown}{more}"


def finish(rows: Any, allow_partial: bool = False) -> None:
    """After the rows: a partial answer ends with :func:`incomplete_line` and exit 3 (unless ``allow_partial``)."""
    incomplete = getattr(rows, "incomplete", None)
    if not incomplete:
        return
    typer.echo(incomplete_line(incomplete, allow_partial), err=True)
    if not allow_partial:
        raise typer.Exit(opt.EXIT_INPUT)


def machine_document(rows: Any, fmt: str) -> Any:
    """cli.md "Incomplete answers": complete -> the rows as always; partial -> json/yaml
    ``{"rows": [...], "incomplete": [...]}`` (a script cannot take it for a whole answer)."""
    incomplete = getattr(rows, "incomplete", None)
    if not incomplete or fmt == "jsonl":
        return rows
    return {"rows": [to_plain(r) for r in rows], "incomplete": to_plain(incomplete)}


def emit_machine(rows: Any, fmt: str, **kw: Any) -> None:
    """``emit`` for json/jsonl/yaml with the ``incomplete`` list where the answer is partial; jsonl ends
    with one ``{"incomplete": [...]}`` line."""
    emit(machine_document(rows, fmt), fmt, **kw)
    incomplete = getattr(rows, "incomplete", None)
    if incomplete and fmt == "jsonl":
        emit([{"incomplete": to_plain(incomplete)}], fmt)


def ask(question: Callable[..., Any], **arguments: Any) -> Rows:
    """Ask the source one question (a :class:`~kafkatx.cluster.source.Source` method) and return its rows
    (:func:`asked`); its ``incomplete`` partitions stay with the rows (:func:`finish`)."""
    answer = asked(question, **arguments)
    return Rows(answer.rows, getattr(answer, "incomplete", ()))


def asked(question: Callable[..., Any], **arguments: Any) -> Any:
    """Ask the source one question and return its answer as it is. The progress bar is shown on stderr
    while the offline replay runs (it is the question's ``progress``); the answer's notices and skipped
    partitions are said on stderr after it."""
    with _progress() as bar:
        answer = question(progress=bar, **arguments)
    say_notices(answer)
    return answer


def _emit(rows: list[Any], fmt: opt.OutputFormat, columns: tuple[str, ...] | None = None,
          title: str | None = None, empty: str = "no rows", human: Callable[[], None] | None = None,
          plain: bool = False) -> None:
    """Machine formats: ``emit``. text/table: ``human()`` (a ``render.views`` call), or nothing but one
    stderr line when there are no rows (an empty table is noise to a human). ``plain``: the rows are
    already what ``to_plain`` makes (``emit``'s promise; json/jsonl/yaml skip that copy)."""
    if not rows and is_human(fmt):
        if getattr(rows, "incomplete", None):
            empty = f"{empty} in the partitions that could be read"
        typer.echo(f"kafkatx: {empty}", err=True)
        return
    if human is not None and is_human(fmt):
        human()
        return
    if is_human(fmt):
        emit(rows, fmt.value, columns=columns, title=title)
        return
    emit_machine(rows, fmt.value, plain=plain)


def is_human(fmt: opt.OutputFormat) -> bool:
    """text/table: for people (``render.views``); json/jsonl/yaml are the contract (``render.emit``)."""
    return fmt.value in ("text", "table")


NowOpt = Annotated[int | None, typer.Option(
    "--now", metavar="MS", help="Fix the clock (epoch ms) for the ages shown (default: now).")]


def now_or_wall(now: int | None) -> int:
    return now if now is not None else int(time.time() * 1000)


# ----------------------------------------------------------------------------- commands

@app.command("list-txn")
@opt.source_options()
def list_txn(
    flags: opt.SourceOptions = opt.SOURCE,
    state: Annotated[list[str] | None, typer.Option(
        "--state", metavar="STATE",
        help="Only these states (repeatable): Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
             "CompleteAbort, Dead, PrepareEpochFence.")] = None,
    pattern: Annotated[str | None, typer.Option(
        "--transactional-id-pattern", metavar="REGEX",
        help="Only ids this regex matches as a whole (Kafka 4.1, KIP-1152: 'tx' lists only 'tx'; "
             "'tx.*' every id starting with tx).")] = None,
    producer_id: Annotated[list[int] | None, typer.Option(
        "--producer-id", metavar="ID", min=0,
        help="Only ids whose current producer id is ID (repeatable).")] = None,
    duration_filter: Annotated[int | None, typer.Option(
        "--duration-filter", metavar="MS",
        help="Only transactions running longer than MS milliseconds (at --now offline); below 0: "
             "all (KIP-994).")] = None,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    now: NowOpt = None,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """List transactional ids and their coordinator state (offline: replays __transaction_state),
    filtered as Kafka's ListTransactions filters. Exit 3 when a __transaction_state partition
    could not be read (see --allow-partial)."""
    from kafkatx.session.offline import compile_pattern, parse_states
    from kafkatx.storage.log_dir import collector_paused

    check_now(now)
    source = flags.resolve()
    parse_states(state)
    compile_pattern(pattern)
    with collector_paused():  # a row and a dict per id, no cycles: no full collections over 1,000,000 ids
        online = isinstance(source, opt.OnlineSource)
        answer = asked(source.list_transactions, states=state, pattern=pattern,
                       partitions_count=txn_state_partitions, read_window=read_window,
                       producer_ids=producer_id or None, duration_ms=duration_filter, now=now,
                       **({} if online else {"values": True}))
        if online:
            rows = Rows(answer.rows, getattr(answer, "incomplete", ()))
            for i, r in enumerate(rows):  # in place: each row object let go once its dict is made
                rows[i] = transaction_object(r, online=online)
        else:  # offline: each row the tuple of TransactionRow's values (no row object per id), taken in chunks
            names = _transaction_row_fields()[1]
            shown = names[:names.index("coordinator_id")]  # offline rows end with it: left out
            if fmt.value == "json" and not answer.incomplete:  # the rows' text straight from the replay
                from kafkatx.render.formats import emit_json_values

                emit_json_values(answer.rows, shown)
                return
            rows = Rows(incomplete=answer.incomplete)
            while chunk := answer.rows.take(4096):
                rows.extend(dict(zip(shown, r[:len(shown)], strict=True)) for r in chunk)
        objects = rows
        inv = flags.invocation(now=now)
        _emit(objects, fmt, LIST_COLUMNS_ONLINE if online else LIST_COLUMNS_OFFLINE, empty="no transactions",
              human=lambda: human_views().show_list(objects, fmt.value, inv, now_or_wall(now), online=online),
              plain=True)  # transaction_object's dicts are plain already
    finish(objects, allow_partial)


def transaction_object(row: Any, *, online: bool) -> dict[str, Any]:
    """A list-txn row as cli.md shows it: ``coordinator_partition`` offline, ``coordinator_id`` online."""
    row_type, names, values = _transaction_row_fields()
    if type(row) is row_type:  # already plain values (str, int, None, a list of str): what to_plain makes
        obj = dict(zip(names, values(row), strict=True))
    else:
        obj = to_plain(row)
    obj.pop("coordinator_partition" if online else "coordinator_id", None)
    return obj


@cache
def _transaction_row_fields() -> tuple[type, tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    """``TransactionRow``, its field names in order and a getter of all of them at once (list-txn makes
    1,000,000 of its objects: one compiled call per row, not a getattr per field)."""
    from operator import attrgetter

    import msgspec

    from kafkatx.rows import TransactionRow

    names = tuple(f.name for f in msgspec.structs.fields(TransactionRow))
    return TransactionRow, names, attrgetter(*names)


def description_object(desc: Any, *, online: bool = False) -> dict[str, Any]:
    """cli.md's describe-txn object: the list-txn keys, then ``history`` and ``partition_status``."""
    obj = transaction_object(desc.transaction, online=online)
    obj["history"] = to_plain(desc.history)
    obj["partition_status"] = to_plain(desc.partition_status)
    if not online:
        obj["open_partitions"] = to_plain(getattr(desc, "open_partitions", []))
    return obj


@app.command("describe-txn")
@opt.source_options()
def describe_txn(
    transactional_id_arg: Annotated[str | None, typer.Argument(
        metavar="[TRANSACTIONAL_ID]", help="The transactional id (or --transactional-id).", show_default=False)] = None,
    transactional_id_opt: Annotated[str | None, typer.Option(
        "--transactional-id", metavar="ID", show_default=False,
        help="The transactional id, as kafka-transactions.sh describe --transactional-id.")] = None,
    flags: opt.SourceOptions = opt.SOURCE,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,  # a panel by default; text: the same without lines
    now: NowOpt = None,
    max_timeout_min: opt.MaxTxnTimeoutOpt = None,
    max_timeout_ms: opt.MaxTxnTimeoutMsOpt = None,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """Describe one transactional id: state, partitions, history (offline) and which partitions
    still have it open; offline also every partition where one of its producer ids holds a
    transaction open, with find-hanging's kind. Exit 3 when the id is unknown (offline the known
    ids are named, as by abort-hanging) or a partition could not be read (see --allow-partial)."""
    if (transactional_id_arg is None) == (transactional_id_opt is None):
        raise UsageError("give the transactional id once: describe-txn ID, or --transactional-id ID")
    transactional_id: str = transactional_id_arg if transactional_id_arg is not None else transactional_id_opt  # type: ignore[assignment]
    check_now(now)
    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms)
    source = flags.resolve()
    online = isinstance(source, opt.OnlineSource)
    rows = ask(source.describe_transaction, transactional_id=transactional_id,
               partitions_count=txn_state_partitions, now=now_or_wall(now), max_timeout_ms=max_timeout,
               read_window=read_window)
    if not rows and getattr(rows, "incomplete", None):
        if fmt.value in ("json", "yaml"):
            emit({"rows": [], "incomplete": to_plain(rows.incomplete)}, fmt.value)
        finish(rows, allow_partial)  # the id may sit in the partition that could not be read
    if not rows:
        if online:  # offline, the answer's notices already said why (never written, or tombstoned)
            typer.echo(f"kafkatx: transactional id {transactional_id!r} is not known to the cluster", err=True)
        if fmt.value in ("json", "yaml"):
            typer.echo("null")  # still one document for `| jq` / yaml readers: absent is null (cli.md)
        # an unknown id is input that is not there: exit 3, as abort-hanging --transactional-id (one rule)
        raise typer.Exit(opt.EXIT_INPUT)
    desc = rows[0]
    obj = description_object(desc, online=online)
    if getattr(rows, "incomplete", None):
        obj["incomplete"] = to_plain(rows.incomplete)  # cli.md: a partial describe-txn says so in the object
    if fmt.value in ("json", "jsonl", "yaml"):
        emit(obj, fmt.value)
    else:
        human_views().show_description(desc, fmt.value, flags.invocation(now=now, max_timeout_ms=max_timeout),
                                       now_or_wall(now), online=online)
    finish(rows, allow_partial)


@app.command("describe-producers")
@opt.source_options()
def describe_producers(
    topic: Annotated[str, typer.Option("--topic", metavar="T", help="Topic of the partition.")],
    partition: Annotated[int, typer.Option("--partition", metavar="N", min=0, help="Partition number.")],
    flags: opt.SourceOptions = opt.SOURCE,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS",
        help="Offline: the clock (epoch ms) for producer expiration (default: now).")] = None,
    expiration_ms: Annotated[int | None, typer.Option(
        "--producer-id-expiration-ms", metavar="MS", min=0, show_default=False,
        help="Offline: the broker's producer.id.expiration.ms (default: --broker-config's, else "
             "86400000).")] = None,
    include_expired: Annotated[bool, typer.Option(
        "--include-expired",
        help="Offline: also list the producers the broker expires, with expired: true.")] = False,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    allow_partial: AllowPartialOpt = False,
    broker_id: opt.BrokerIdOpt = None,
) -> None:
    """Producer state of one partition as the broker builds it on startup (offline: the
    snapshot it loads plus the log after it, idle producers expired at --now).

    ghost: the producer's open transaction began below the log start (see find-hanging).
    """
    check_now(now)
    source = flags.resolve().for_broker(broker_id)
    now_ms = now if now is not None else int(time.time() * 1000)
    rows = ask(source.describe_producers, topic=topic, partition=partition, now=now_ms,
               expiration_ms=expiration_ms, include_expired=include_expired, read_window=read_window)
    inv = flags.invocation(now=now)
    _emit(rows, fmt, empty="no producers",
          human=lambda: human_views().show_producers(rows, fmt.value, inv, now_ms, topic=topic, partition=partition))
    finish(rows, allow_partial)


@app.command("find-hanging", cls=WatchCommand)
@opt.source_options()
def find_hanging(
    flags: opt.SourceOptions = opt.SOURCE,
    max_timeout_min: opt.MaxTxnTimeoutOpt = None,
    max_timeout_ms: opt.MaxTxnTimeoutMsOpt = None,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS", help="Fix the clock (epoch ms) for reproducible runs.")] = None,
    topics: TopicFilterOpt = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", metavar="N", min=0, show_default=False,
        help="Only this partition of --topic (as kafka-transactions.sh).")] = None,
    broker_id: opt.BrokerIdOpt = None,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    watch_s: WatchOpt = None,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    jobs: JobsOpt = None,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """Find transactions that hold a partition's LSO back. Exit 1 when any is found, 3 when a
    partition could not be read (the rows found are still printed; see --allow-partial).

    Kinds: orphaned (the coordinator has no transaction of that producer including the
    partition), timed-out (coordinator Ongoing past its own timeout), incomplete-markers
    (coordinator PrepareCommit/PrepareAbort, this partition never got its marker), ghost (an
    orphaned transaction that only the producer snapshot remembers: its first offset is below
    the log start, retention deleted its data; start_ms/duration_ms are null).
    """
    check_now(now)
    topic = one_topic(topics, "find-hanging")
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic (as kafka-transactions.sh find-hanging)")
    # None: neither flag given; offline the broker configs' transaction.max.timeout.ms, else 15 minutes.
    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms, default=False)
    source = flags.resolve()
    searched = source.broker_partitions(broker_id)

    def hanging_now() -> list[Any]:
        now_ms = now if now is not None else int(time.time() * 1000)
        rows = ask(source.find_hanging, now=now_ms, max_timeout_ms=max_timeout, topic=topic,
                   partitions_count=txn_state_partitions, read_window=read_window, jobs=jobs)
        def wanted(topic_name: str, number: int) -> bool:
            return (partition is None or number == partition) and \
                (searched is None or (topic_name, number) in searched)

        # the partitions that could not be read stay with the rows (cli.md "Incomplete answers")
        gaps = [u for u in getattr(rows, "incomplete", ()) if u.partition.startswith("__transaction_state-")
                or not u.partition.rpartition("-")[2].isdigit()
                or wanted(u.partition.rpartition("-")[0], int(u.partition.rpartition("-")[2]))]
        return Rows([r for r in rows if wanted(r.topic, r.partition)], gaps)

    inv = flags.invocation(now=now, max_timeout_ms=max_timeout)

    def show(rows: list[Any]) -> None:
        _emit(rows, fmt, empty="no hanging transactions",
              human=lambda: human_views().show_hanging(rows, fmt.value, inv, now_or_wall(now)))

    if watch_s is not None:
        last = watch(watch_s, hanging_now, show, fmt=fmt.value, title="find-hanging")
        if last is not None:
            finish(last, allow_partial)  # stopped on a partial answer: exit 3, as without --watch
        return
    rows = hanging_now()
    show(rows)
    finish(rows, allow_partial)
    if rows:
        raise typer.Exit(opt.EXIT_FOUND)


@app.command("lag", cls=WatchCommand)
@opt.source_options()
def lag(
    flags: opt.SourceOptions = opt.SOURCE,
    topic: TopicsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    watch_s: WatchOpt = None,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS",
        help="Offline: the clock (epoch ms) the broker's producer expiration runs at while loading, as "
             "for find-hanging (default: now).")] = None,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    jobs: JobsOpt = None,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """Per partition: log start, LSO, high watermark, log end and lag = high watermark - LSO.
    Exit 3 when a partition could not be read (see --allow-partial).

    held_by_ghost: the LSO is held by a ghost transaction (see find-hanging: one that began below
    the log start and that no coordinator transaction holds; one the coordinator still has Ongoing
    or Prepare* there is find-hanging's timed-out/incomplete-markers, not a ghost); online it needs
    DescribeProducers. The KRaft metadata log __cluster_metadata is no partition of ListOffsets
    and is not listed.
    """
    check_now(now)
    source = flags.resolve()

    topics: list[str | None] = [*dict.fromkeys(topic or ())] or [None]

    holders: dict[int, Any] = {}

    def lag_now() -> list[Any]:
        rows = Rows()
        for t in topics:  # each topic asked on its own (its partitions only), the answers one after another
            answer = ask(source.lag, topic=t, now=now_or_wall(now), read_window=read_window, jobs=jobs)
            rows.extend(answer)
            rows.incomplete.extend(answer.incomplete)
        holders.clear()
        holders.update(_lag_holders(source, rows, rows.incomplete, everything=is_human(fmt)))
        return _no_coordinator_ghosts(rows, holders)

    inv = flags.invocation(now=now)

    def show(rows: list[Any]) -> None:
        _emit(rows, fmt, empty="no partitions",
              human=lambda: human_views().show_lag(rows, fmt.value, inv, now_ms=now_or_wall(now), holders=holders))

    if watch_s is not None:
        last = watch(watch_s, lag_now, show, fmt=fmt.value, title="lag")
        if last is not None:
            finish(last, allow_partial)  # stopped on a partial answer: exit 3, as without --watch
        return
    rows = lag_now()
    show(rows)
    finish(rows, allow_partial)


def _lag_holders(source: Any, rows: list[Any], incomplete: list[Any], everything: bool = True) -> dict[int, Any]:
    """The coordinator's open transaction (Ongoing, PrepareCommit, PrepareAbort) of each producer that holds a
    partition back, by producer id: for the human view (``everything``) to name its id, its age and whether it
    is still within its timeout, and for every format to tell a ghost from a transaction the coordinator
    still holds (:func:`_no_coordinator_ghosts`). Asked only when a partition is held back (by a ghost, when
    not ``everything``); {} when the source cannot answer it (a cluster without the API). What it could not
    read goes to ``incomplete``: the ghost verdict depends on it, so a failed read makes lag's answer
    incomplete (exit 3), never a quieter one."""
    held = {r.oldest_open_producer_id for r in rows if r.oldest_open_producer_id is not None
            and (r.held_by_ghost or (everything and (r.lag or 0) > 0))}
    if not held:
        return {}
    try:
        answer = source.list_transactions(states=["Ongoing", "PrepareCommit", "PrepareAbort"], pattern=None,
                                          partitions_count=None, progress=None)
    except (DecodeError, ReadFailed) as err:  # the coordinator's files: the answer is incomplete, said so
        from kafkatx.rows import unreadable

        incomplete.append(unreadable(_partition_of(err, "__transaction_state"), err))
        return {}
    except KafkaTxError:  # the cluster does not answer it: a hint only, lag's answer stands without it
        return {}
    incomplete.extend(answer.incomplete)
    return {r.producer_id: r for r in answer.rows if r.producer_id in held}


def _partition_of(err: BaseException, default: str) -> str:
    """The partition folder a read error names (its file's folder), else ``default``."""
    from kafkatx.storage.partition import parse_partition_dir_name

    path = getattr(err, "path", None) or getattr(err, "filename", None)
    folder = Path(str(path)).parent.name if path else ""
    return folder if parse_partition_dir_name(folder) is not None else default


def _no_coordinator_ghosts(rows: Rows, holders: dict[int, Any]) -> Rows:
    """A partition held by a transaction that began below its log start is held by a ghost only when no
    coordinator transaction holds it (``txn.rules.coordinator_holds``): one still ``Ongoing`` or
    ``Prepare*`` there is find-hanging's timed-out/incomplete-markers wherever it began, and the coordinator
    ends it (``TransactionStateManager.timedOutTransactions``, the markers it writes), so lag says the same."""
    from msgspec.structs import replace

    from kafkatx.coordinator.rules import coordinator_holds

    for i, r in enumerate(rows):
        holder = holders.get(r.oldest_open_producer_id) if r.held_by_ghost else None
        if holder is not None and coordinator_holds(holder.state, holder.partitions, f"{r.topic}-{r.partition}"):
            rows[i] = replace(r, held_by_ghost=False)
    return rows


@app.command("verify")
@opt.source_options(offline_only=True)
def verify(
    flags: opt.SourceOptions = opt.SOURCE,
    txn_state_partitions: TxnStatePartitionsOpt = None,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    jobs: JobsOpt = None,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    allow_partial: AllowPartialOpt = False,
    severity: Annotated[VerifySeverity, typer.Option(
        "--severity", case_sensitive=False,
        help="Show rows of this severity or worse: info (all), warning (hides the startup notes), error. "
             "The exit code and the summary's counts stay those of every row.")] = VerifySeverity.info,
    now: Annotated[int | None, typer.Option(
        "--now", metavar="MS",
        help="Accepted as by every command, so a walk can pass it along; verify reads no clock.")] = None,
) -> None:
    """Check .log/.index/.timeindex/.txnindex/.snapshot files and checkpoints against each other.
    Exit 1 with one row per problem, 3 when a partition's log does not decode to its end (its
    later checks could not run; see --allow-partial). Rows of severity info (check startup-*) name
    the files the broker deletes, recovers or truncates when it starts on these files
    (startup-rebuild-index: an index a crash left preallocated and zero-filled, rebuilt at
    startup); they alone exit 0."""
    files = flags.resolve().offline_only("verify reads broker files: give --log-dir (it has no online form)")
    check_now(now)
    rows = ask(files.verify, partitions_count=txn_state_partitions, read_window=read_window, jobs=jobs)
    floor = VERIFY_SEVERITIES.index(severity.value)
    shown = Rows([r for r in rows if VERIFY_SEVERITIES.index(r.severity) >= floor], rows.incomplete) \
        if floor else rows
    hidden = len(rows) - len(shown)
    _emit(shown, fmt, VERIFY_COLUMNS, empty="no problems found" + (
              f" ({hidden} startup note{'s' if hidden != 1 else ''} not shown: --severity info shows them)"
              if hidden else ""),
          human=lambda: human_views().show_verify(shown, fmt.value, hidden=hidden))
    finish(rows, allow_partial)
    if any(r.severity != "info" for r in rows):
        raise typer.Exit(opt.EXIT_FOUND)
