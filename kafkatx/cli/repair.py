"""Repair commands: ``kafkatx undo JOURNAL`` and ``kafkatx abort-hanging``.

Each command makes one library call (``kafkatx.repair``) and renders its rows; refusals
are ``RepairError``/``LogDirLocked`` (exit 3), which the app prints as one stderr line.
Shared repair options live here so ``abort-hanging`` can reuse them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from msgspec.structs import replace

from kafkatx.cli import options as opt
from kafkatx.cli.main import app
from kafkatx.cli.txn import (
    DEFAULT_READ_WINDOW,
    AllowPartialOpt,
    ReadWindowOpt,
    check_now,
    incomplete_line,
    is_human,
    one_topic,
    say_notices,
)
from kafkatx.render import emit, human_views

JournalOpt = Annotated[Path | None, typer.Option(
    "--journal", metavar="FILE", dir_okay=False,
    help="Where to write the repair journal (never inside a log dir). Default: "
         "./kafkatx-repair-<UTC time>.journal, or beside the first log dir when the current "
         "directory is inside one. Replaced/removed files are kept in FILE.d/.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would be done; change nothing.")]
LockTimeoutOpt = Annotated[float, typer.Option(
    "--lock-timeout", metavar="SECONDS", min=0,
    help="Wait up to SECONDS for a log dir's .lock held by another repair or undo (then re-read "
         "everything); 0 refuses at once (exit 3). A running broker holds it for good.")]

@app.command("undo")
def undo(
    journal: Annotated[Path, typer.Argument(metavar="JOURNAL", dir_okay=False,
                                            help="The journal a repair wrote (kafkatx-repair-*.journal).")],
    dry_run: DryRunOpt = False,
    lock_timeout: LockTimeoutOpt = 0.0,
    fmt: opt.FormatOpt = opt.OutputFormat.table,
) -> None:
    """Reverse a repair from its journal: truncate appends, delete created files, restore backups.

    Refuses (exit 3, nothing changed) when the journal's checksum does not match, a path
    leaves the journal's log dirs or is a symlink, a file changed since the repair in a way
    the repair does not explain (for example the broker appended to it), or a broker holds
    a log dir's .lock (after --lock-timeout), or a file to change has a second hard link.
    Works on a repair that crashed half-way; running it twice is harmless.
    """
    from kafkatx.repair import undo_journal  # imported here so `kafkatx --help` stays fast

    result = undo_journal(journal, dry_run=dry_run, lock_timeout=lock_timeout)
    if is_human(fmt):
        human_views().show_undo(result, fmt.value, journal=str(journal))
    else:
        emit(result.rows, fmt.value)
    for temp in result.temps_removed:
        typer.echo(f"{'would remove' if dry_run else 'removed'} leftover temporary file {temp}", err=True)


# ----------------------------------------------------------------------------- abort-hanging

class Decision(enum.StrEnum):
    commit = "commit"
    abort = "abort"


class GhostStrategy(enum.StrEnum):
    marker = "marker"
    drop_snapshots = "drop-snapshots"


@app.command("abort-hanging")
@opt.source_options()
def abort_hanging(
    flags: opt.SourceOptions = opt.SOURCE,
    transactional_id: Annotated[list[str] | None, typer.Option(
        "--transactional-id", metavar="ID", help="Repair this id's hanging transaction (repeatable).")] = None,
    topics: Annotated[list[str] | None, typer.Option(
        "--topic", metavar="T", help="Only hanging transactions in this topic (one: given twice, exit 2).")] = None,
    partition: Annotated[int | None, typer.Option("--partition", metavar="N", min=0,
                                                  help="Only this partition (needs --topic).")] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id", metavar="P", help="Only this producer id.")
                           ] = None,
    start_offset: Annotated[int | None, typer.Option(
        "--start-offset", metavar="OFFSET", min=0, show_default=False,
        help="With --topic and --partition: the transaction that starts at this offset, as "
             "kafka-transactions.sh abort --start-offset (describe-producers shows current_txn_first_offset).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every hanging transaction found.")] = False,
    execute: Annotated[bool, typer.Option(
        "--execute", help="Apply the plan (default: only print it). Offline the broker must be stopped.")] = False,
    journal: JournalOpt = None,
    lock_timeout: LockTimeoutOpt = 0.0,
    now: Annotated[int | None, typer.Option("--now", metavar="MS", help="Fix the clock (epoch ms).")] = None,
    max_timeout_min: opt.MaxTxnTimeoutOpt = None,
    max_timeout_ms: opt.MaxTxnTimeoutMsOpt = None,
    ghost_strategy: Annotated[GhostStrategy, typer.Option(
        "--ghost-strategy", case_sensitive=False,
        help="Offline ghost transactions (open only in a .snapshot, data deleted): 'marker' appends an ABORT "
             "marker; 'drop-snapshots' moves the partition's snapshots (and .kafka_cleanshutdown) to the "
             "journal backup so the broker rebuilds producer state from the log.")] = GhostStrategy.marker,
    index_interval_bytes: Annotated[int, typer.Option(
        "--index-interval-bytes", metavar="BYTES", min=0,
        help="Offline: the topics' index.interval.bytes, for the offset index entries recovery would add.")] = 4096,
    decision: Annotated[Decision | None, typer.Option(
        "--decision", case_sensitive=False,
        help="Offline: the outcome for orphaned transactions whose coordinator decision neither the "
             "__transaction_state history nor the same transaction's markers on its other partitions show "
             "(those rows are left untouched without it, exit 3). Never overrides a decision they show.")] = None,
    force_terminate: Annotated[list[str] | None, typer.Option(
        "--force-terminate", metavar="ID",
        help="Abort this prepared two-phase-commit transaction (kind prepared-2pc, repeatable), as "
             "Admin.forceTerminateTransaction does; without it such a transaction is left untouched "
             "(exit 3).")] = None,
    metadata_log_dir: Annotated[Path | None, typer.Option(
        "--metadata-log-dir", metavar="DIR", file_okay=False,
        help="Offline: where __cluster_metadata-0 is (the node's metadata.log.dir) when no --log-dir holds it; "
             "the __transaction_state partition count and the cluster's transaction.version come from it.")] = None,
    kafka_version: Annotated[str | None, typer.Option(
        "--kafka-version", metavar="X.Y",
        help="Offline: the Kafka release whose coordinator the repair follows (4.0 aborts a timed-out "
             "transaction-version-2 transaction at epoch E+2, 4.1 on at E+1). Default: the release of the "
             "metadata log's finalized metadata.version, else the newest modelled (the plan says which).")
    ] = None,
    transaction_timeout_ms: Annotated[int, typer.Option(
        "--transaction-timeout-ms", metavar="MS", min=1,
        help="--force-terminate: the transaction timeout of the InitProducerId that fences the id, which "
             "the final Empty record carries (Kafka's producer default).")] = 60_000,
    force: Annotated[bool, typer.Option(
        "--force",
        help="Offline: also abort the selected open transactions that do not hang yet (within their timeout), "
             "as kafka-transactions.sh abort aborts the transaction it is told; without it they are named "
             "with the time they would hang.")] = False,
    fmt: opt.TableFormatOpt = opt.OutputFormat.table,
    read_window: ReadWindowOpt = DEFAULT_READ_WINDOW,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """Finish hanging transactions as Kafka would: abort timed-out ones (epoch bump), complete decided
    ones with their decision, abort orphans and ghosts (see --ghost-strategy offline). Prints the
    plan; --execute applies it (journal first, offline). Rows have the same keys offline and online.
    A prepared two-phase-commit transaction (kind prepared-2pc) is never aborted unless named by
    --force-terminate ID: the rest of the plan runs and the command exits 3 naming it.

    Orphans get the marker of the coordinator's decision in the __transaction_state history
    (COMMIT when it committed a transaction including the partition), else of the same
    transaction's marker on its other partitions (the row's why names it); where neither tells,
    the row is left untouched with the --decision command that decides it, the rest runs, exit 3.

    Exit 0 when nothing is hanging (or the repair succeeded), 1 when a plan has something to do,
    2 for no selection, 3 when a row is refused or left untouched (prepared-2pc, undecided), a log dir is
    locked, a post-check fails, an id is unknown, or a partition in the selection could not be
    read (--allow-partial plans the rest; a transaction touching an unreadable partition is
    refused regardless). The post-check judges what the repair changed: conditions already
    there before it are a note.
    """
    import time

    from kafkatx.errors import EXIT_INPUT, UsageError

    check_now(now)
    release = None
    if kafka_version is not None:
        from kafkatx.coordinator.versions import parse_kafka_version

        try:
            release = parse_kafka_version(kafka_version)
        except ValueError as err:
            raise UsageError(f"--kafka-version: {err}") from None
    topic = one_topic(topics, "abort-hanging")
    # None: neither flag given; offline the broker configs' transaction.max.timeout.ms, else 15 minutes.
    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms, default=False)
    source = flags.resolve()
    if start_offset is not None:
        producer_id = _producer_at(source, topic, partition, start_offset, producer_id,
                                   now if now is not None else int(time.time() * 1000))
    forced = list(dict.fromkeys(force_terminate or ()))
    from kafkatx.session.offline import require_selection

    # the one check of a selection, before anything is read or locked (the library's own callers meet it in
    # repair.analysis)
    require_selection(transactional_ids=[*(transactional_id or ()), *forced], topic=topic, partition=partition,
                      producer_id=producer_id, all_=all_)
    now_ms = now if now is not None else int(time.time() * 1000)
    from kafkatx.render.descriptions import abort_selection

    inv = flags.invocation(now=now, max_timeout_ms=max_timeout)
    again = inv.command("abort-hanging", *abort_selection(transactional_id or (), topic, partition, producer_id, all_),
                        *[a for tid in forced for a in ("--force-terminate", tid)],
                        *_offline_flags(source, ghost_strategy, index_interval_bytes),
                        *(["--decision", decision.value] if decision is not None else []),
                        *(["--allow-partial"] if allow_partial else []),
                        *(["--force"] if force else []),
                        *(["--metadata-log-dir", str(metadata_log_dir)] if metadata_log_dir is not None else []),
                        *(["--kafka-version", kafka_version] if kafka_version is not None else []),
                        *(["--transaction-timeout-ms", str(transaction_timeout_ms)]
                          if forced and transaction_timeout_ms != 60_000 else []),
                        "--execute", rules=True)

    def show(rows: list[Any], title: str | None = None, operations_list: Sequence[Any] = (), **kw: Any) -> None:
        files = plan_files(operations_list)
        if is_human(fmt):
            human_views().show_abort(rows, fmt.value, inv, title=title, execute_command=again,
                                     files=[(f["op"], f["path"]) for f in files], **kw)
        else:
            emit([with_files(r, files) for r in rows], fmt.value)

    if isinstance(source, opt.OnlineSource):
        if release is not None:
            raise UsageError("--kafka-version is for offline repairs (--log-dir): online the brokers write "
                             "what their own release writes")
        _abort_online(source, transactional_id or (), topic, partition, producer_id, all_, execute,
                      opt.resolve_max_timeout(None, max_timeout), now_ms, show, forced, transaction_timeout_ms)
        return
    from kafkatx.repair.offline import execute_abort_hanging
    from kafkatx.repair.plan import plan_abort_hanging

    dirs = source.dirs()  # with --broker-config, opened here, each carrying its broker's settings
    selection: dict[str, Any] = dict(topic=topic, partition=partition, producer_id=producer_id, all_=all_,
                                     max_timeout_ms=max_timeout, ghost_strategy=ghost_strategy.value,
                                     index_interval_bytes=index_interval_bytes, force_terminate=forced,
                                     decision=decision.value if decision is not None else None,
                                     allow_partial=allow_partial, metadata_log_dir=metadata_log_dir,
                                     read_window=read_window, kafka_version=release,
                                     transaction_timeout_ms=transaction_timeout_ms, force=force)
    result = None
    pre_existing: tuple[str, ...] = ()
    if execute:
        # The log dirs' locks are held from before the analysis to after the post-check.
        done = execute_abort_hanging(dirs, now=now_ms, journal=journal, lock_timeout=lock_timeout,
                                     transactional_ids=transactional_id or (), **selection)
        planned, result, pre_existing = done.planned, done.applied, done.pre_existing
    else:
        planned = plan_abort_hanging(dirs, transactional_ids=transactional_id or (), now=now_ms,
                                     **selection)
    say_notices(planned)
    if planned.incomplete and (planned.blocked or not allow_partial):
        # A partition the selection depends on could not be read: it may hold a hanging transaction too,
        # or be one the repair would have to write. Nothing is planned.
        if planned.rows and not is_human(fmt):
            emit({"rows": planned.rows, "incomplete": planned.incomplete}, fmt.value)
        typer.echo("kafkatx: refused: nothing will be changed while a partition of the selection is unreadable"
                   + ("" if planned.blocked else " (--allow-partial plans the rest)"), err=True)
        typer.echo(incomplete_line(planned.incomplete), err=True)
        raise typer.Exit(EXIT_INPUT)
    if planned.refused:
        show(planned.rows, "refused: nothing will be changed")
        raise typer.Exit(EXIT_INPUT)
    if planned.incomplete:
        typer.echo(incomplete_line(planned.incomplete, allow_partial=True), err=True)
    _say_untouched(planned.untouched, inv)
    if result is None:
        changed = len(plan_files(planned.plan.operations))  # two appends to one file: one file to change
        forced = inv.command("abort-hanging", *abort_selection(transactional_id or (), topic, partition, producer_id,
                                                              all_), "--force", rules=True)
        show(planned.rows, f"plan: {changed} file{'s' if changed != 1 else ''} to change",
             operations=changed, operations_list=planned.plan.operations,
             waiting=planned.in_timeout, now_ms=now_ms, force_command=forced)
        if planned.untouched:
            raise typer.Exit(EXIT_INPUT)
        if planned.rows:
            raise typer.Exit(opt.EXIT_FOUND)
        return
    outcome = "ok" if not result.problems else f"failed: {result.problems[0]}"
    rows = [replace(r, result=outcome if not r.untouched else "untouched") for r in planned.rows]
    shown = str(journal) if journal is not None else str(result.journal_path)
    show(rows, f"applied; journal {shown}", applied=True, journal=shown, operations_list=planned.plan.operations)
    # the human view's summary says how to undo it: the command is said once there
    how = f"undo with `kafkatx undo {result.journal_path}`" if not is_human(fmt) else "the summary says how to undo it"
    typer.echo(f"kafkatx: journal: {result.journal_path} ({how})", err=True)
    for line in pre_existing:  # once each, not per row: the repair did not cause or touch them
        typer.echo(f"kafkatx: note: post-check: pre-existing, not changed by the repair: {line}", err=True)
    for problem in result.problems:
        typer.echo(f"kafkatx: post-check: {problem}", err=True)
    if result.problems or planned.untouched:
        raise typer.Exit(EXIT_INPUT)


def _producer_at(source: opt.OfflineSource | opt.OnlineSource, topic: str | None, partition: int | None, start_offset: int, producer_id: int | None,
                 now_ms: int) -> int:
    """The producer whose open transaction starts at ``start_offset`` on the partition: kafka-transactions.sh
    abort's ``--start-offset`` (``TransactionsCommand.AbortTransactionCommand.buildAbortSpec`` picks the active
    producer whose ``currentTransactionStartOffset`` equals it)."""
    from kafkatx.errors import UsageError

    if topic is None or partition is None:
        raise UsageError("--start-offset needs --topic and --partition (as kafka-transactions.sh abort)")
    producers = list(source.describe_producers(topic=topic, partition=partition, now=now_ms).rows)
    found = [p.producer_id for p in producers if p.current_txn_first_offset == start_offset]
    if not found:
        raise UsageError(f"no open transaction starts at offset {start_offset} on {topic}-{partition} "
                         f"(describe-producers lists each producer's current_txn_first_offset)")
    if producer_id is not None and producer_id != found[0]:
        raise UsageError(f"the transaction at offset {start_offset} on {topic}-{partition} is producer "
                         f"{found[0]}'s, not --producer-id {producer_id}'s")
    return int(found[0])


def _say_untouched(rows: Sequence[Any], inv: Any = None) -> None:
    """One stderr line per row left alone, naming it and the exact command that decides it: a prepared 2PC
    transaction (``--force-terminate ID``), an orphan no evidence decides (``--decision commit|abort``)."""
    from kafkatx.coordinator.rules import PREPARED_2PC_MEANING
    from kafkatx.render.descriptions import abort_selection
    from kafkatx.rows import UNTOUCHED_2PC

    seen: set[object] = set()
    for r in rows:
        if r.action != UNTOUCHED_2PC:
            where = f"{r.topic}-{r.partition}"
            decide = (inv.command("abort-hanging", *abort_selection((), r.topic, r.partition, r.producer_id),
                                  "--decision", "abort", rules=True) if inv is not None
                      else f"--topic {r.topic} --partition {r.partition} --producer-id {r.producer_id} "
                           "--decision abort")
            typer.echo(f"kafkatx: left untouched: producer {r.producer_id}'s transaction on {where} (from offset "
                       f"{r.first_offset}): {r.why}; decide it with: {decide} (--decision commit if it was "
                       "committed)", err=True)
            continue
        key = r.transactional_id if r.transactional_id is not None else (r.topic, r.partition, r.producer_id)
        if key in seen:
            continue
        seen.add(key)
        typer.echo(f"kafkatx: left untouched: transactional id {r.transactional_id!r} (producer {r.producer_id}) "
                   f"is a prepared two-phase-commit transaction {PREPARED_2PC_MEANING}; "
                   f"--force-terminate {r.transactional_id} aborts it", err=True)


def plan_files(operations: Iterable[Any]) -> list[dict[str, str]]:
    """Every file a plan changes, in the order it changes them: ``{"op": create|append|replace|move, "path"}``
    (move: out of the log dir into the journal's backup)."""
    from kafkatx.repair.ops import OP_NAMES

    seen = dict.fromkeys((OP_NAMES[type(op)], str(op.path)) for op in operations)  # two appends: one line
    return [{"op": op, "path": path} for op, path in seen]


def with_files(row: Any, files: list[dict[str, str]]) -> dict[str, Any]:
    """A plan row for JSON with ``files``: the plan's file operations in the row's partition folder, plus the
    shared ones (checkpoints, ``__transaction_state``, anything outside a data partition's folder), listed
    under every row. Online (no files) and refused: ``[]``."""
    from kafkatx.render import to_plain

    obj: dict[str, Any] = to_plain(row)
    own = f"{obj.get('topic')}-{obj.get('partition')}"
    obj["files"] = [f for f in files if Path(f["path"]).parent.name in (own,)
                    or not _data_partition_folder(Path(f["path"]).parent.name)]
    return obj


def _data_partition_folder(name: str) -> bool:
    """A ``topic-N`` folder other than ``__transaction_state-N`` (whose files every coordinator-side row shares)."""
    from kafkatx.storage.partition import parse_partition_dir_name

    parsed = parse_partition_dir_name(name)
    return parsed is not None and parsed[0] != "__transaction_state"


def _offline_flags(source: opt.OfflineSource | opt.OnlineSource, ghost_strategy: GhostStrategy, index_interval_bytes: int) -> list[str]:
    if not isinstance(source, opt.OfflineSource):
        return []
    flags = [a for p in source.broker_configs for a in ("--broker-config", str(p))]
    flags += [] if ghost_strategy is GhostStrategy.marker else ["--ghost-strategy", ghost_strategy.value]
    return flags + ([] if index_interval_bytes == 4096 else ["--index-interval-bytes", str(index_interval_bytes)])


def _abort_online(source: opt.OnlineSource, transactional_ids: Sequence[str], topic: str | None,
                  partition: int | None, producer_id: int | None, all_: bool, execute: bool, max_timeout: int,
                  now_ms: int, show: Callable[..., None], force_terminate: Sequence[str] = (),
                  transaction_timeout_ms: int = 60_000) -> None:
    from kafkatx.errors import EXIT_INPUT
    from kafkatx.rows import Report

    # Not one Source question: the plan and its execution share one connection, and offline the
    # plan is a file-operation plan with a journal, not a list of rows.
    report = Report()
    with source.connect() as (service, backend):
        rows = service.plan_abort(backend, transactional_ids=list(transactional_ids), topic=topic,
                                  partition=partition, producer_id=producer_id, all_=all_,
                                  max_timeout_ms=max_timeout, now_ms=now_ms, force_terminate=force_terminate,
                                  report=report)
        if execute and rows:
            rows = service.execute_abort(backend, rows, transaction_timeout_ms=transaction_timeout_ms)
    say_notices(report)  # as offline: "kafkatx: note: ..." on stderr
    untouched = [r for r in rows if r.untouched]
    _say_untouched(untouched)
    show(rows, applied=execute)
    if untouched or any((r.result or "").startswith("failed") for r in rows):
        raise typer.Exit(EXIT_INPUT)
    if rows and not execute:
        raise typer.Exit(opt.EXIT_FOUND)
