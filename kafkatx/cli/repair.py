"""Repair commands: ``kafkatx undo JOURNAL`` and ``kafkatx abort-hanging``.

Each command makes one library call (``kafkatx.repair``) and renders its rows; refusals
are ``RepairError``/``LogDirLocked`` (exit 3), which the app prints as one stderr line.
Shared repair options live here so ``abort-hanging`` can reuse them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

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
from kafkatx.errors import EXIT_INPUT
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
        human_views("repair_views").show_undo(result, fmt.value, journal=str(journal))
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


# abort-hanging's longer options
TransactionalIdOpt = Annotated[list[str] | None, typer.Option(
    "--transactional-id", metavar="ID", help="Repair this id's hanging transaction (repeatable).")]
TopicsOpt = Annotated[list[str] | None, typer.Option(
    "--topic", metavar="T", help="Only hanging transactions in this topic (one: given twice, exit 2).")]
StartOffsetOpt = Annotated[int | None, typer.Option(
    "--start-offset", metavar="OFFSET", min=0, show_default=False,
    help="With --topic and --partition: the transaction that starts at this offset, as "
         "kafka-transactions.sh abort --start-offset (describe-producers shows current_txn_first_offset).")]
ExecuteOpt = Annotated[bool, typer.Option(
    "--execute", help="Apply the plan (default: only print it). Offline the broker must be stopped.")]
GhostStrategyOpt = Annotated[GhostStrategy, typer.Option(
    "--ghost-strategy", case_sensitive=False,
    help="Offline ghost transactions (open only in a .snapshot, data deleted): 'marker' appends an ABORT "
         "marker; 'drop-snapshots' moves the partition's snapshots (and .kafka_cleanshutdown) to the "
         "journal backup so the broker rebuilds producer state from the log.")]
IndexIntervalBytesOpt = Annotated[int, typer.Option(
    "--index-interval-bytes", metavar="BYTES", min=0,
    help="Offline: the topics' index.interval.bytes, for the offset index entries recovery would add.")]
DecisionOpt = Annotated[Decision | None, typer.Option(
    "--decision", case_sensitive=False,
    help="Offline: the outcome for orphaned transactions whose coordinator decision neither the "
         "__transaction_state history nor the same transaction's markers on its other partitions show "
         "(those rows are left untouched without it, exit 3). Never overrides a decision they show.")]
ForceTerminateOpt = Annotated[list[str] | None, typer.Option(
    "--force-terminate", metavar="ID",
    help="Abort this prepared two-phase-commit transaction (kind prepared-2pc, repeatable), as "
         "Admin.forceTerminateTransaction does; without it such a transaction is left untouched "
         "(exit 3).")]
MetadataLogDirOpt = Annotated[Path | None, typer.Option(
    "--metadata-log-dir", metavar="DIR", file_okay=False,
    help="Offline: where __cluster_metadata-0 is (the node's metadata.log.dir) when no --log-dir holds it; "
         "the __transaction_state partition count and the cluster's transaction.version come from it.")]
KafkaVersionOpt = Annotated[str | None, typer.Option(
    "--kafka-version", metavar="X.Y",
    help="Offline: the Kafka release whose coordinator the repair follows (4.0 aborts a timed-out "
         "transaction-version-2 transaction at epoch E+2, 4.1 on at E+1). Default: the release of the "
         "metadata log's finalized metadata.version, else the newest modelled (the plan says which).")]
TransactionTimeoutMsOpt = Annotated[int, typer.Option(
    "--transaction-timeout-ms", metavar="MS", min=1,
    help="--force-terminate: the transaction timeout of the InitProducerId that fences the id, which "
         "the final Empty record carries (Kafka's producer default).")]
ForceOpt = Annotated[bool, typer.Option(
    "--force",
    help="Offline: also abort the selected open transactions that do not hang yet (within their timeout), "
         "as kafka-transactions.sh abort aborts the transaction it is told; without it they are named "
         "with the time they would hang.")]


@app.command("abort-hanging")
@opt.source_options()
def abort_hanging(
    flags: opt.SourceOptions = opt.SOURCE,
    transactional_id: TransactionalIdOpt = None,
    topics: TopicsOpt = None,
    partition: Annotated[int | None, typer.Option("--partition", metavar="N", min=0,
                                                  help="Only this partition (needs --topic).")] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id", metavar="P", help="Only this producer id.")
                           ] = None,
    start_offset: StartOffsetOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Every hanging transaction found.")] = False,
    execute: ExecuteOpt = False,
    journal: JournalOpt = None,
    lock_timeout: LockTimeoutOpt = 0.0,
    now: Annotated[int | None, typer.Option("--now", metavar="MS", help="Fix the clock (epoch ms).")] = None,
    max_timeout_min: opt.MaxTxnTimeoutOpt = None,
    max_timeout_ms: opt.MaxTxnTimeoutMsOpt = None,
    ghost_strategy: GhostStrategyOpt = GhostStrategy.marker,
    index_interval_bytes: IndexIntervalBytesOpt = 4096,
    decision: DecisionOpt = None,
    force_terminate: ForceTerminateOpt = None,
    metadata_log_dir: MetadataLogDirOpt = None,
    kafka_version: KafkaVersionOpt = None,
    transaction_timeout_ms: TransactionTimeoutMsOpt = 60_000,
    force: ForceOpt = False,
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

    check_now(now)
    release = _kafka_release(kafka_version)
    topic = one_topic(topics, "abort-hanging")
    # None: neither flag given; offline the broker configs' transaction.max.timeout.ms, else 15 minutes.
    max_timeout = opt.resolve_max_timeout(max_timeout_min, max_timeout_ms, default=False)
    source = flags.resolve()
    now_ms = now if now is not None else int(time.time() * 1000)
    if start_offset is not None:
        producer_id = _producer_at(source, topic, partition, start_offset, producer_id, now_ms)
    asked = _Asked(transactional_ids=list(transactional_id or ()), topic=topic, partition=partition,
                   producer_id=producer_id, all_=all_, forced=list(dict.fromkeys(force_terminate or ())),
                   max_timeout=max_timeout, ghost_strategy=ghost_strategy, index_interval_bytes=index_interval_bytes,
                   decision=decision, allow_partial=allow_partial, force=force, metadata_log_dir=metadata_log_dir,
                   kafka_version=kafka_version, release=release,
                   transaction_timeout_ms=transaction_timeout_ms, read_window=read_window)
    from kafkatx.session.offline import require_selection

    # the one check of a selection, before anything is read or locked (the library's own callers meet it in
    # repair.analysis)
    require_selection(transactional_ids=[*asked.transactional_ids, *asked.forced], topic=topic,
                      partition=partition, producer_id=producer_id, all_=all_)
    inv = flags.invocation(now=now, max_timeout_ms=max_timeout)
    show = _shower(fmt, inv, asked.execute_command(inv, source))
    if isinstance(source, opt.OnlineSource):
        if asked.release is not None:
            from kafkatx.errors import UsageError

            raise UsageError("--kafka-version is for offline repairs (--log-dir): online the brokers write "
                             "what their own release writes")
        _abort_online(source, asked.transactional_ids, topic, partition, producer_id, all_, execute,
                      opt.resolve_max_timeout(None, max_timeout), now_ms, show, asked.forced, transaction_timeout_ms)
        return
    from kafkatx.repair.offline import abort_hanging_offline

    # source.dirs(): with --broker-config, opened here, each carrying its broker's settings. With --execute the
    # log dirs' locks are held from before the analysis to after the post-check.
    done = abort_hanging_offline(source.dirs(), execute=execute, now=now_ms, journal=journal,
                                 lock_timeout=lock_timeout, transactional_ids=asked.transactional_ids,
                                 **asked.selection())
    say_notices(done.planned)
    _refuse_unreadable(done.planned, fmt, allow_partial)
    if done.planned.refused:
        show(done.planned.rows, "refused: nothing will be changed")
        raise typer.Exit(EXIT_INPUT)
    if done.planned.incomplete:
        typer.echo(incomplete_line(done.planned.incomplete, allow_partial=True), err=True)
    _say_untouched(done.planned.untouched, inv)
    if done.applied is None:
        _show_plan(done.planned, show, asked.force_command(inv), now_ms)
    else:
        _show_applied(done, show, fmt, journal)


@dataclass(frozen=True)
class _Asked:
    """abort-hanging's options, parsed: what the library is asked, and what the commands it prints repeat."""

    transactional_ids: list[str]
    topic: str | None
    partition: int | None
    producer_id: int | None
    all_: bool
    forced: list[str]  # --force-terminate, each id once
    max_timeout: int | None
    ghost_strategy: GhostStrategy
    index_interval_bytes: int
    decision: Decision | None
    allow_partial: bool
    force: bool
    metadata_log_dir: Path | None
    kafka_version: str | None
    release: Any  # coordinator.versions.KafkaVersion of --kafka-version, or None
    transaction_timeout_ms: int
    read_window: int

    def selection(self) -> dict[str, Any]:
        """:func:`kafkatx.repair.plan.plan_abort_hanging`'s keyword arguments (but the transactional ids)."""
        return dict(topic=self.topic, partition=self.partition, producer_id=self.producer_id, all_=self.all_,
                    max_timeout_ms=self.max_timeout, ghost_strategy=self.ghost_strategy.value,
                    index_interval_bytes=self.index_interval_bytes, force_terminate=self.forced,
                    decision=self.decision.value if self.decision is not None else None,
                    allow_partial=self.allow_partial, metadata_log_dir=self.metadata_log_dir,
                    read_window=self.read_window, kafka_version=self.release,
                    transaction_timeout_ms=self.transaction_timeout_ms, force=self.force)

    def _selected(self) -> list[str]:
        from kafkatx.render.descriptions import abort_selection

        return list(abort_selection(self.transactional_ids, self.topic, self.partition, self.producer_id, self.all_))

    def execute_command(self, inv: Any, source: opt.OfflineSource | opt.OnlineSource) -> str:
        """The command that applies this plan: the same selection and options, with ``--execute``."""
        return str(inv.command(
            "abort-hanging", *self._selected(),
            *[a for tid in self.forced for a in ("--force-terminate", tid)],
            *_offline_flags(source, self.ghost_strategy, self.index_interval_bytes),
            *(["--decision", self.decision.value] if self.decision is not None else []),
            *(["--allow-partial"] if self.allow_partial else []),
            *(["--force"] if self.force else []),
            *(["--metadata-log-dir", str(self.metadata_log_dir)] if self.metadata_log_dir is not None else []),
            *(["--kafka-version", self.kafka_version] if self.kafka_version is not None else []),
            *(["--transaction-timeout-ms", str(self.transaction_timeout_ms)]
              if self.forced and self.transaction_timeout_ms != 60_000 else []),
            "--execute", rules=True))

    def force_command(self, inv: Any) -> str:
        """The command that also aborts the selected transactions still within their timeout."""
        return str(inv.command("abort-hanging", *self._selected(), "--force", rules=True))


def _kafka_release(kafka_version: str | None) -> Any:
    """``--kafka-version X.Y`` parsed (None when not given); a malformed one is a usage error."""
    if kafka_version is None:
        return None
    from kafkatx.coordinator.versions import parse_kafka_version
    from kafkatx.errors import UsageError

    try:
        return parse_kafka_version(kafka_version)
    except ValueError as err:
        raise UsageError(f"--kafka-version: {err}") from None


def _shower(fmt: opt.OutputFormat, inv: Any, again: str) -> Callable[..., None]:
    """How abort-hanging prints rows: the human view (with the ``--execute`` command), or JSON/CSV rows each
    with its ``files``."""

    def show(rows: list[Any], title: str | None = None, operations_list: Sequence[Any] = (), **kw: Any) -> None:
        files = plan_files(operations_list)
        if is_human(fmt):
            human_views("repair_views").show_abort(rows, fmt.value, inv, title=title, execute_command=again,
                                                   files=[(f["op"], f["path"]) for f in files], **kw)
        else:
            emit([with_files(r, files) for r in rows], fmt.value)

    return show


def _refuse_unreadable(planned: Any, fmt: opt.OutputFormat, allow_partial: bool) -> None:
    """A partition the selection depends on could not be read: it may hold a hanging transaction too, or be
    one the repair would have to write. Nothing is planned (exit 3); ``--allow-partial`` plans the rest unless
    a selected transaction touches it."""
    if not (planned.incomplete and (planned.blocked or not allow_partial)):
        return
    if planned.rows and not is_human(fmt):
        emit({"rows": planned.rows, "incomplete": planned.incomplete}, fmt.value)
    typer.echo("kafkatx: refused: nothing will be changed while a partition of the selection is unreadable"
               + ("" if planned.blocked else " (--allow-partial plans the rest)"), err=True)
    typer.echo(incomplete_line(planned.incomplete), err=True)
    raise typer.Exit(EXIT_INPUT)


def _show_plan(planned: Any, show: Callable[..., None], force_command: str, now_ms: int) -> None:
    """The plan, not applied: exit 3 when a row is left untouched, 1 when there is something to do."""
    changed = len(plan_files(planned.plan.operations))  # two appends to one file: one file to change
    show(planned.rows, f"plan: {changed} file{'s' if changed != 1 else ''} to change",
         operations=changed, operations_list=planned.plan.operations,
         waiting=planned.in_timeout, now_ms=now_ms, force_command=force_command)
    if planned.untouched:
        raise typer.Exit(EXIT_INPUT)
    if planned.rows:
        raise typer.Exit(opt.EXIT_FOUND)


def _show_applied(done: Any, show: Callable[..., None], fmt: opt.OutputFormat, journal: Path | None) -> None:
    """The applied plan's rows with their results, the journal and how to undo it, the post-check's findings;
    exit 3 when the post-check failed or a row was left untouched."""
    result = done.applied
    shown = str(journal) if journal is not None else str(result.journal_path)
    show(done.applied_rows(), f"applied; journal {shown}", applied=True, journal=shown,
         operations_list=done.planned.plan.operations)
    # the human view's summary says how to undo it: the command is said once there
    how = f"undo with `kafkatx undo {result.journal_path}`" if not is_human(fmt) else "the summary says how to undo it"
    typer.echo(f"kafkatx: journal: {result.journal_path} ({how})", err=True)
    for line in done.pre_existing:  # once each, not per row: the repair did not cause or touch them
        typer.echo(f"kafkatx: note: post-check: pre-existing, not changed by the repair: {line}", err=True)
    for problem in result.problems:
        typer.echo(f"kafkatx: post-check: {problem}", err=True)
    if result.problems or done.planned.untouched:
        raise typer.Exit(EXIT_INPUT)


def _producer_at(source: opt.OfflineSource | opt.OnlineSource, topic: str | None, partition: int | None,
                 start_offset: int, producer_id: int | None, now_ms: int) -> int:
    """``--start-offset``: the partition's producers asked of the source, the one it names chosen by
    :func:`kafkatx.session.selection.producer_at_start_offset`."""
    from kafkatx.errors import UsageError
    from kafkatx.session.selection import producer_at_start_offset

    if topic is None or partition is None:
        raise UsageError("--start-offset needs --topic and --partition (as kafka-transactions.sh abort)")
    producers = source.describe_producers(topic=topic, partition=partition, now=now_ms).rows
    return producer_at_start_offset(producers, topic=topic, partition=partition, start_offset=start_offset,
                                    producer_id=producer_id)


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
    from kafkatx.cluster import abort as online_abort
    from kafkatx.rows import Report

    # Not one Source question: the plan and its execution share one connection, and offline the
    # plan is a file-operation plan with a journal, not a list of rows.
    report = Report()
    with source.connect() as (_service, backend):
        rows = online_abort.plan_abort(backend, transactional_ids=list(transactional_ids), topic=topic,
                                       partition=partition, producer_id=producer_id, all_=all_,
                                       max_timeout_ms=max_timeout, now_ms=now_ms, force_terminate=force_terminate,
                                       report=report)
        if execute and rows:
            rows = online_abort.execute_abort(backend, rows, transaction_timeout_ms=transaction_timeout_ms)
    say_notices(report)  # as offline: "kafkatx: note: ..." on stderr
    untouched = [r for r in rows if r.untouched]
    _say_untouched(untouched)
    show(rows, applied=execute)
    if untouched or any((r.result or "").startswith("failed") for r in rows):
        raise typer.Exit(EXIT_INPUT)
    if rows and not execute:
        raise typer.Exit(opt.EXIT_FOUND)
