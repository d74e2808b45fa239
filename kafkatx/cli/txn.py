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
from collections.abc import Callable, Sequence
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar, cast

import typer

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.cli.progress import progress_bar
from kafkatx.cli.watch import WatchCommand, WatchOpt, watch
from kafkatx.errors import UsageError
from kafkatx.render import emit, human_views, to_plain
from kafkatx.rows import Answer, Unreadable

if TYPE_CHECKING:
    from kafkatx.session.offline import ValuesAnswer

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


class Said(Protocol):
    """What an answer says beside its rows (:class:`~kafkatx.rows.Answer`'s report; the repair's plan too)."""

    @property
    def notices(self) -> Sequence[str]: ...

    @property
    def skipped(self) -> Sequence[str]: ...


def say_notices(answer: Said) -> None:
    """An offline answer's ``notices`` and ``skipped`` partitions, one stderr line each; a note said
    twice is said once, and a kind of note repeated many times is one line (``render.notes``)."""
    from kafkatx.render.notes import aggregate_notes
    from kafkatx.render.plain import wrapped_note

    for line in aggregate_notes(dict.fromkeys(answer.notices)):  # each said once, in order
        typer.echo(wrapped_note(f"kafkatx: note: {line}", sys.stderr), err=True)
    for line in dict.fromkeys(answer.skipped):
        typer.echo(wrapped_note(f"kafkatx: skipped: {line}", sys.stderr), err=True)


def with_rows(answer: Answer[Any], rows: list[Any]) -> Answer[Any]:
    """``answer`` with other rows (a filter or a different shape of them), its report kept."""
    return Answer(rows=rows, report=answer.report)


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


def incomplete_line(incomplete: Sequence[Unreadable], allow_partial: bool = False) -> str:
    """The last line of a partial answer: how many partitions could not be read and why (first few)."""
    by_partition: dict[str, Unreadable] = {}
    for u in incomplete:
        by_partition.setdefault(u.partition, u)
    shown = "; ".join(f"{name}: {f'byte {u.position}: ' if u.position is not None else ''}{u.reason}"
                      for name, u in list(by_partition.items())[:3])
    more = f"; and {len(by_partition) - 3} more" if len(by_partition) > 3 else ""
    n = len(by_partition)
    head = "partial answer (--allow-partial)" if allow_partial else "incomplete"
    return f"kafkatx: {head}: {n} partition{'s' if n != 1 else ''} could not be read (left out above): {shown}{more}"


def finish(answer: Answer[Any] | ValuesAnswer, allow_partial: bool = False) -> None:
    """After the rows: a partial answer ends with :func:`incomplete_line` and exit 3 (unless ``allow_partial``)."""
    incomplete = answer.incomplete
    if not incomplete:
        return
    typer.echo(incomplete_line(incomplete, allow_partial), err=True)
    if not allow_partial:
        raise typer.Exit(opt.EXIT_INPUT)


def machine_document(answer: Answer[Any], fmt: str) -> Any:
    """cli.md "Incomplete answers": complete -> the rows as always; partial -> json/yaml
    ``{"rows": [...], "incomplete": [...]}`` (a script cannot take it for a whole answer)."""
    incomplete = answer.incomplete
    if not incomplete or fmt == "jsonl":
        return answer.rows
    return {"rows": [to_plain(r) for r in answer.rows], "incomplete": to_plain(incomplete)}


def emit_machine(answer: Answer[Any], fmt: str, **kw: Any) -> None:
    """``emit`` for json/jsonl/yaml with the ``incomplete`` list where the answer is partial; jsonl ends
    with one ``{"incomplete": [...]}`` line."""
    emit(machine_document(answer, fmt), fmt, **kw)
    incomplete = answer.incomplete
    if incomplete and fmt == "jsonl":
        emit([{"incomplete": to_plain(incomplete)}], fmt)


A = TypeVar("A", bound="Answer[Any] | ValuesAnswer")


def ask(question: Callable[..., A], **arguments: Any) -> A:
    """Ask the source one question (a :class:`~kafkatx.cluster.source.Source` method) and return its
    :class:`~kafkatx.rows.Answer`. The progress bar is shown on stderr while the offline replay runs (it is the
    question's ``progress``); the answer's notices and skipped partitions are said on stderr after it; its
    ``incomplete`` partitions stay with it (:func:`finish`)."""
    with progress_bar() as bar:
        answer = question(progress=bar, **arguments)
    say_notices(answer)
    return answer


def _emit(answer: Answer[Any], fmt: opt.OutputFormat, columns: tuple[str, ...] | None = None,
          title: str | None = None, empty: str = "no rows", human: Callable[[], None] | None = None,
          plain: bool = False) -> None:
    """Machine formats: ``emit``. text/table: ``human()`` (a ``render.views`` call), or nothing but one
    stderr line when there are no rows (an empty table is noise to a human). ``plain``: the rows are
    already what ``to_plain`` makes (``emit``'s promise; json/jsonl/yaml skip that copy)."""
    if not answer.rows and is_human(fmt):
        if answer.incomplete:
            empty = f"{empty} in the partitions that could be read"
        typer.echo(f"kafkatx: {empty}", err=True)
        return
    if human is not None and is_human(fmt):
        human()
        return
    if is_human(fmt):
        emit(answer.rows, fmt.value, columns=columns, title=title)
        return
    emit_machine(answer, fmt.value, plain=plain)


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
        answer = ask(source.list_transactions, states=state, pattern=pattern,
                       partitions_count=txn_state_partitions, read_window=read_window,
                       producer_ids=producer_id or None, duration_ms=duration_filter, now=now,
                       **({} if online else {"values": True}))
        rows: list[Any] = []
        if isinstance(answer, Answer):  # online (offline list-txn answers in chunks of values)
            rows = list(answer.rows)  # a copy (the answer's rows stay its own), its rows become their dicts
            for i, r in enumerate(rows):  # in place: each row object let go once its dict is made
                rows[i] = transaction_object(r, online=online)
        else:  # offline: each row the tuple of TransactionRow's values (no row object per id), taken in chunks
            names = _transaction_row_fields()[1]
            shown = names[:names.index("coordinator_id")]  # offline rows end with it: left out
            if fmt.value == "json" and not answer.incomplete:  # the rows' text straight from the replay
                from kafkatx.render.formats import emit_json_values

                emit_json_values(answer.rows, shown)
                return
            while chunk := answer.rows.take(4096):
                rows.extend(dict(zip(shown, r[:len(shown)], strict=True)) for r in chunk)
        objects = Answer(rows=rows, report=answer.report)
        inv = flags.invocation(now=now)
        _emit(objects, fmt, LIST_COLUMNS_ONLINE if online else LIST_COLUMNS_OFFLINE, empty="no transactions",
              human=lambda: human_views().show_list(objects.rows, fmt.value, inv, now_or_wall(now), online=online),
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
    answer = ask(source.describe_transaction, transactional_id=transactional_id,
                 partitions_count=txn_state_partitions, now=now_or_wall(now), max_timeout_ms=max_timeout,
                 read_window=read_window)
    if not answer.rows and answer.incomplete:
        if fmt.value in ("json", "yaml"):
            emit({"rows": [], "incomplete": to_plain(answer.incomplete)}, fmt.value)
        finish(answer, allow_partial)  # the id may sit in the partition that could not be read
    if not answer.rows:
        if online:  # offline, the answer's notices already said why (never written, or tombstoned)
            typer.echo(f"kafkatx: transactional id {transactional_id!r} is not known to the cluster", err=True)
        if fmt.value in ("json", "yaml"):
            typer.echo("null")  # still one document for `| jq` / yaml readers: absent is null (cli.md)
        # an unknown id is input that is not there: exit 3, as abort-hanging --transactional-id (one rule)
        raise typer.Exit(opt.EXIT_INPUT)
    desc = answer.rows[0]
    obj = description_object(desc, online=online)
    if answer.incomplete:
        obj["incomplete"] = to_plain(answer.incomplete)  # cli.md: a partial describe-txn says so in the object
    if fmt.value in ("json", "jsonl", "yaml"):
        emit(obj, fmt.value)
    else:
        human_views("describe_views").show_description(
            desc, fmt.value, flags.invocation(now=now, max_timeout_ms=max_timeout), now_or_wall(now), online=online)
    finish(answer, allow_partial)


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
    answer = ask(source.describe_producers, topic=topic, partition=partition, now=now_ms,
                 expiration_ms=expiration_ms, include_expired=include_expired, read_window=read_window)
    inv = flags.invocation(now=now)
    _emit(answer, fmt, empty="no producers",
          human=lambda: human_views("describe_views").show_producers(answer.rows, fmt.value, inv, now_ms,
                                                                     topic=topic, partition=partition))
    finish(answer, allow_partial)


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
    source.broker_partitions(broker_id)  # online: refused before anything is asked

    def hanging_now() -> Any:  # an Answer[HangingRow]
        now_ms = now if now is not None else int(time.time() * 1000)
        # the filters go down: only --topic's partitions (--partition of it) are replayed; with --broker-id the
        # rows of that broker's partitions (the partitions that could not be read stay with the rows)
        return ask(source.hanging_transactions, now=now_ms, max_timeout_ms=max_timeout, topic=topic,
                   partition=partition, broker_id=broker_id, partitions_count=txn_state_partitions,
                   read_window=read_window, jobs=jobs)

    inv = flags.invocation(now=now, max_timeout_ms=max_timeout)

    def show(answer: Any) -> None:
        _emit(answer, fmt, empty="no hanging transactions",
              human=lambda: human_views().show_hanging(answer.rows, fmt.value, inv, now_or_wall(now)))

    if watch_s is not None:
        last = watch(watch_s, hanging_now, show, fmt=fmt.value, title="find-hanging")
        if last is not None:
            # watch hands back what the question answered (its rows are an Answer here)
            finish(cast("Answer[Any]", last), allow_partial)  # stopped on a partial answer: exit 3
        return
    answer = hanging_now()
    show(answer)
    finish(answer, allow_partial)
    if answer.rows:
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

    def lag_now() -> Any:  # a LagAnswer
        # each topic's partitions one after another; the holders (the coordinator's transaction holding a
        # partition back) for the human view of every held partition, for every format of a ghost's
        return ask(source.lag, topics=topics, now=now_or_wall(now), read_window=read_window, jobs=jobs,
                   holders=True, everything=is_human(fmt))

    inv = flags.invocation(now=now)

    def show(answer: Any) -> None:
        _emit(answer, fmt, empty="no partitions",
              human=lambda: human_views().show_lag(answer.rows, fmt.value, inv, now_ms=now_or_wall(now),
                                                   holders=answer.holders))

    if watch_s is not None:
        last = watch(watch_s, lag_now, show, fmt=fmt.value, title="lag")
        if last is not None:
            # watch hands back what the question answered (its rows are an Answer here)
            finish(cast("Answer[Any]", last), allow_partial)  # stopped on a partial answer: exit 3
        return
    answer = lag_now()
    show(answer)
    finish(answer, allow_partial)


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
    answer = ask(files.verify, partitions_count=txn_state_partitions, read_window=read_window, jobs=jobs)
    floor = VERIFY_SEVERITIES.index(severity.value)
    shown = with_rows(answer, [r for r in answer.rows if VERIFY_SEVERITIES.index(r.severity) >= floor]) \
        if floor else answer
    hidden = len(answer.rows) - len(shown.rows)
    _emit(shown, fmt, VERIFY_COLUMNS, empty="no problems found" + (
              f" ({hidden} startup note{'s' if hidden != 1 else ''} not shown: --severity info shows them)"
              if hidden else ""),
          human=lambda: human_views("verify_views").show_verify(shown.rows, fmt.value, hidden=hidden))
    finish(answer, allow_partial)
    if any(r.severity != "info" for r in answer.rows):
        raise typer.Exit(opt.EXIT_FOUND)
