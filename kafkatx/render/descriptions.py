"""Human wording of the table/text output, in one place (as pyelftools keeps its in ``descriptions.py``).

Column headers, what each hanging kind means, each command's summary and next step, and the
exact ``kafkatx`` command to paste. The views (:mod:`kafkatx.render.views`) only arrange
what is written here; JSON/JSONL/YAML never carry any of it.

Next-step commands repeat the source flags the user gave (:class:`Invocation`), so they can be
pasted as they are; they are always the dry-run form (``abort-hanging`` without ``--execute``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from msgspec import Struct, field

from kafkatx.render.plain import count, duration, when

# ----------------------------------------------------------------------------- headers

HEADERS = {
    "partition": "partition",
    "log_start_offset": "start",
    "local_log_start_offset": "local",
    "lso": "LSO",
    "high_watermark": "HW",
    "log_end_offset": "end",
    "lag": "lag",
    "open_transactions": "open",
    "oldest_open": "oldest open",
    "held_by_ghost": "ghost",
    "kind": "kind",
    "producer_id": "producer",
    "producer_epoch": "epoch",
    "transactional_id": "transactional id",
    "coordinator_state": "coordinator",
    "first_offset": "first",
    "start_ms": "since",
    "duration_ms": "open for",
    "state": "state",
    "timeout_ms": "timeout",
    "start_timestamp_ms": "started",
    "last_update_timestamp_ms": "updated",
    "partitions": "partitions",
    "coordinator_partition": "coord",
    "coordinator_id": "coordinator",
    "coordinator_epoch": "coord epoch",
    "last_sequence": "seq",
    "last_timestamp_ms": "last write",
    "current_txn_first_offset": "open txn from",
    "ghost": "ghost",
    "expired": "expired",
    "severity": "severity",
    "check": "check",
    "where": "where",
    "message": "message",
    "action": "action",
    "marker": "marker",
    "result": "result",
    "op": "op",
    "path": "path",
    "sizes": "bytes",
    "verified": "verified",
    "offset": "offset",
    "status": "status",
}

# Generic tables (the dump commands' --format table): how much each key matters when the terminal is
# too narrow for all of them (0 always shown; the others are dropped highest first). Keys not listed
# come after these, in their order.
TABLE_KEY_PRIORITY = {
    "base_offset": 0, "last_offset": 0, "offset": 0, "producer_id": 1, "is_transactional": 2,
    "is_control": 2, "control_type": 2, "timestamp": 1, "timestamp_ms": 1, "first_offset": 1,
    "last_stable_offset": 2, "position": 3, "count": 4, "producer_epoch": 4, "crc_valid": 3,
    "current_txn_first_offset": 2, "last_sequence": 5, "size": 5, "compression": 6, "coordinator_epoch": 6,
    "max_timestamp_ms": 7, "base_timestamp_ms": 8, "base_sequence": 8, "partition_leader_epoch": 8,
    "magic": 9, "crc": 9,
}

# ----------------------------------------------------------------------------- meanings

HANGING_KINDS = {
    "timed-out": "the coordinator still shows it Ongoing past its own timeout and has not aborted it",
    "orphaned": "the coordinator has no ongoing transaction of this producer on this partition "
                "(a lost marker, KAFKA-12671): nothing will ever end it",
    "incomplete-markers": "the coordinator decided it ({state}) but this partition never got its marker",
    "ghost": "only a producer snapshot remembers it (its data is gone below the log start); "
             "it holds the LSO at the log start",
    "prepared-2pc": "a two-phase-commit transaction (timeout Integer.MAX_VALUE) held open by an external "
                    "transaction manager; the coordinator never times it out, only that manager (or "
                    "--force-terminate) ends it",
    "requested": "selected by the flags given; find-hanging would not list it",
}

ACTIONS = {
    "abort-timed-out": "abort (epoch bump)",
    "complete-commit": "finish commit",
    "complete-abort": "finish abort",
    "write-abort-marker": "write ABORT marker",
    "drop-snapshots": "drop snapshots",
    "fence-epoch": "fence (epoch bump)",
    "write-commit-marker": "write COMMIT marker",
    "force-terminate": "force-terminate (abort)",
    "untouched: prepared-2pc": "left alone (2PC)",
    "untouched: undecided": "left alone (undecided)",
}

UNDO_ACTIONS = {"truncate": "truncate", "delete": "delete", "restore": "restore", "nothing": "nothing to do"}

NEXT = "Next:"
WORST = "Worst:"
FIRST = "First:"
WHY = "Why:"
LABEL_STYLES = {WORST: "bold red", FIRST: "bold red", NEXT: "bold cyan"}  # on a terminal only
DRY_RUN_NOTE = "(a dry run: it prints the plan and changes nothing; add --execute to apply it{offline})"
OFFLINE_NOTE = ", with the broker stopped"


def hanging_reason(kind: str, coordinator_state: str | None) -> str:
    """Why a hanging transaction of this kind holds its partition back."""
    text = HANGING_KINDS.get(kind, kind)
    return text.format(state=coordinator_state or "?")


# ----------------------------------------------------------------------------- commands to paste

class Invocation(Struct, frozen=True):
    """The flags a user gave that a suggested command must repeat: the source and the clock.

    ``source``: ``--log-dir DIR...`` or ``--bootstrap-server``/``--command-config``/``--profile``
    as given; ``rules``: flags that change what counts as hanging (``--now``,
    ``--max-transaction-timeout-ms``), passed on so the suggestion selects the same rows.
    """

    source: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    offline: bool = True
    log_dirs: tuple[str, ...] = field(default_factory=tuple)

    def command(self, name: str, *args: str, rules: bool = False) -> str:
        """``kafkatx NAME <source flags> ARGS`` quoted for a POSIX shell."""
        parts = ["kafkatx", name, *self.source, *args, *(self.rules if rules else ())]
        return shlex.join(parts)


def invocation(log_dirs: Sequence[Path | str] | None = None, bootstrap_server: str | None = None,
               command_config: Path | str | None = None, profile: str | None = None, *,
               now: int | None = None, max_timeout_ms: int | None = None,
               default_max_timeout_ms: int = 900_000) -> Invocation:
    """The :class:`Invocation` of the source flags as the user typed them (paths kept as given)."""
    source: list[str] = []
    for d in log_dirs or ():
        source += ["--log-dir", str(d)]
    if bootstrap_server is not None:
        source += ["--bootstrap-server", bootstrap_server]
    if command_config is not None:
        source += ["--command-config", str(command_config)]
    if profile is not None:
        source += ["--profile", profile]
    rules: list[str] = []
    if max_timeout_ms is not None and max_timeout_ms != default_max_timeout_ms:
        rules += ["--max-transaction-timeout-ms", str(max_timeout_ms)]
    if now is not None:
        rules += ["--now", str(now)]
    return Invocation(source=tuple(source), rules=tuple(rules), offline=bool(log_dirs),
                      log_dirs=tuple(str(d) for d in log_dirs or ()))


def abort_selection(transactional_ids: Sequence[str] = (), topic: str | None = None, partition: int | None = None,
                    producer_id: int | None = None, all_: bool = False) -> list[str]:
    """The ``abort-hanging`` selection flags for these values (None/empty: flag left out)."""
    flags: list[str] = []
    for tid in transactional_ids:
        flags += ["--transactional-id", tid]
    if topic is not None:
        flags += ["--topic", topic]
        if partition is not None:
            flags += ["--partition", str(partition)]
    if producer_id is not None:
        flags += ["--producer-id", str(producer_id)]
    if all_:
        flags.append("--all")
    return flags


def dry_run_note(inv: Invocation) -> str:
    return DRY_RUN_NOTE.format(offline=OFFLINE_NOTE if inv.offline else "")


def paste(command: str) -> str:
    """A command line as printed under a summary: indented by two spaces, never wrapped by us."""
    return "  " + command


# ----------------------------------------------------------------------------- summaries

def lag_summary(held: int, total: int, offsets: int, worst: str | None, worst_lag: int | None,
                holder: str | None, ghost: bool, inv: Invocation, *,
                in_flight: Sequence[tuple[str, int | None, int | None]] = (), all_in_flight: bool = False,
                now_ms: int = 0) -> list[str]:
    """``in_flight``: (transactional id, timeout ms, start ms) of the transactions holding a partition back
    that their coordinator still has Ongoing within their timeout (not hanging: find-hanging does not list
    them); ``all_in_flight``: they hold every held-back partition, so the next step is to look at them."""
    if not held:
        return [f"No partition is held back: in all {count(total, 'partition')} the LSO is at the high watermark."]
    lines = [f"{held} of {count(total, 'partition')} held back: {count(offsets, 'offset')} that read_committed "
             "consumers cannot read yet."]
    why = " by a ghost transaction (only a producer snapshot remembers it)" if ghost else (
        f" by {holder}" if holder else "")
    lines.append(f"{WORST} {worst}, {count(worst_lag or 0, 'offset')} behind its high watermark, held{why}.")
    for tid, timeout, start in in_flight:
        ends = f", until {when(start + timeout, now_ms)}" if start is not None and timeout is not None else ""
        lines.append(f"{tid} is open within its {duration(timeout)} timeout{ends}: in flight, not hanging "
                     "(find-hanging lists it only once the coordinator's timeout has passed; then the "
                     "coordinator aborts it itself).")
    if all_in_flight and in_flight:
        tid = in_flight[0][0]
        lines.append(f"{NEXT} see what holds them (its state, partitions and history):")
        lines.append(paste(inv.command("describe-txn", "--transactional-id", tid, rules=True)))
        lines.append("or, to abort it now rather than wait (a dry run; as kafka-transactions.sh abort):")
        lines.append(paste(inv.command("abort-hanging", "--transactional-id", tid, "--force", rules=True)))
        return lines
    lines.append(f"{NEXT} find the transactions that hold them and why:")
    lines.append(paste(inv.command("find-hanging", rules=True)))
    return lines


def blocked_group_lines(where: str, groups: Sequence[str] | None) -> list[str]:
    """The consumer groups a transaction on a ``__consumer_offsets`` partition blocks (``blocked_groups``):
    one line each, ``where`` naming the partition and the transaction (coordinator/groups.py has the rule)."""
    return [f"{where}: group {g} cannot fetch its offsets (UNSTABLE_OFFSET_COMMIT) until this transaction ends."
            for g in groups or ()]


def upload_blocked_line(partition: str, blocked: int, copied: int | None) -> str:
    """A tiered partition held by an open transaction (KIP-405: RemoteLogManager copies only below the LSO)."""
    last = f" (last offset copied: {copied})" if copied is not None else ""
    return (f"{partition} is tiered: {count(blocked, 'byte')} of local segments can be neither uploaded to "
            f"remote storage nor deleted{last}. The disk grows until the transaction ends.")


def hanging_summary(txns: int, partitions: int, worst_tp: str, worst_since: int | None, now_ms: int,
                    worst_producer: int, worst_id: str | None, worst_kind: str, worst_state: str | None,
                    selection: list[str], inv: Invocation) -> list[str]:
    """``txns``: transactions (one producer id and epoch each, :func:`kafkatx.render.plain.transactions`), not
    rows: one transaction open on five partitions is one hanging transaction holding back five."""
    who = f"producer {worst_producer}" + (f" ({worst_id})" if worst_id else "")
    since = f"since {when(worst_since, now_ms)}" if worst_since is not None else "since before the log start"
    verb = "holds" if txns == 1 else "hold"
    lines = [f"{count(txns, 'hanging transaction')} {verb} back the LSO of {count(partitions, 'partition')}.",
             f"{WORST} {worst_tp}, held {since} by {who}: {worst_kind}, "
             f"{hanging_reason(worst_kind, worst_state)}.",
             f"{NEXT} preview its repair {dry_run_note(inv)}:",
             paste(inv.command("abort-hanging", *selection, rules=True))]
    if txns > 1:
        lines.append("or every one of them at once:")
        lines.append(paste(inv.command("abort-hanging", "--all", rules=True)))
    return lines


def verify_summary(errors: int, warnings: int, infos: int, files: int, worst_where: str | None,
                   worst_message: str | None, dump: str | None, missing: bool = False, hidden: int = 0) -> list[str]:
    """``missing``: the worst row's file does not exist; ``dump`` then shows its segment's .log. ``hidden``:
    the startup notes of ``infos`` that ``--severity`` left out of the table."""
    if not (errors or warnings):
        if infos:
            return [f"No problem found; {count(infos, 'startup note')}: files the broker deletes, recovers or "
                    "truncates when it starts on this dir (nothing to repair)"
                    + (", not shown (--severity info shows them)." if hidden else ".")]
        return ["No problem found."]
    lines = [f"{count(errors, 'error')}, {count(warnings, 'warning')} in {count(files, 'file')}"
             + (f" (and {count(infos, 'startup note')})." if infos else ".")]
    if worst_where:
        lines.append(f"{WORST} {worst_where}: {worst_message}")
    if dump and missing:
        lines.append(f"{NEXT} the file is missing; look at its segment (what recovery rebuilds it from):")
        lines.append(paste(dump))
    elif dump:
        lines.append(f"{NEXT} look at the file as Kafka's kafka-dump-log.sh would print it:")
        lines.append(paste(dump))
    return lines


def abort_summary(rows: int, operations: int | None, refused: int, execute_command: str | None,
                  applied: bool, failed: int, inv: Invocation, journal: str | None,
                  first_problem: str | None = None, txns: int | None = None) -> list[str]:
    """``rows``: the plan's rows (one per partition); ``txns``: the transactions they are (default: as many
    as rows); ``operations``: the files the plan changes. ``first_problem``: the first refused row's action
    or failed row's result, said in full (the table may have cut it)."""
    finished = _txns_on(rows if txns is None else txns, rows)
    if refused:
        lines = [f"{count(refused, 'row')} refused: nothing will be changed."]
        if first_problem:
            lines.append(f"{FIRST} {first_problem}")
        return lines + ["Fix or deselect the refused rows, then run the plan again."]
    if applied:
        if failed:
            lines = [f"{count(failed, 'row')} of {rows} failed: see result and the post-check lines."]
            return lines + ([f"{FIRST} {first_problem}"] if first_problem else [])
        lines = [f"Applied: {finished} finished."]
        if journal:
            lines += ["To reverse it (while the broker is still stopped):",
                      paste(shlex.join(["kafkatx", "undo", journal]))]
        lines += [f"{NEXT} check that nothing is left:", paste(inv.command("find-hanging", rules=True))]
        return lines
    if not rows:
        return ["Nothing is hanging in this selection: nothing to do."]
    ops = f" ({count(operations, 'file')} to change)" if operations is not None else ""
    lines = [f"Plan: {finished} to finish{ops}. Nothing has been changed."]
    if execute_command:
        lines.append(f"{NEXT} apply it" + (OFFLINE_NOTE + " (a journal is written first; "
                                           "`kafkatx undo` reverses it):" if inv.offline else ":"))
        lines.append(paste(execute_command))
    return lines


def in_timeout_lines(waiting: Sequence[tuple[str | None, int, str, str, int | None, int | None]], now_ms: int,
                     force_command: str | None) -> list[str]:
    """Why an abort-hanging selection of open transactions plans nothing: none hangs yet. ``waiting``: per
    partition (transactional id, producer id, the kind it will have, partition, first offset, start ms)."""
    lines = ["Nothing is hanging in this selection yet: its open transactions are within their timeout."]
    by_txn: dict[tuple[str | None, int], list[tuple[str, int | None, str, int | None]]] = {}
    for tid, pid, kind, where, first, start in waiting:
        by_txn.setdefault((tid, pid), []).append((where, first, kind, start))
    for (tid, pid), parts in by_txn.items():
        where, first, kind, start = parts[0]
        who = f"{tid} (producer {pid})" if tid else f"producer {pid}"
        age = f", open {duration(now_ms - start)}," if start is not None else ""
        more = f" and {count(len(parts) - 1, 'more partition')}" if len(parts) > 1 else ""
        lines.append(f"{who}{age} on {where} from offset {first}{more}: {kind} once its timeout passes"
                     + ("; the coordinator then aborts it itself." if kind == "timed-out" else "."))
    if force_command:
        lines += ["To abort it now anyway (as kafka-transactions.sh abort aborts what it is told; a dry run):",
                  paste(force_command)]
    return lines


def _txns_on(txns: int, partitions: int) -> str:
    """``1 hanging transaction on 5 partitions``; ``2 hanging transactions`` when each is on one."""
    text = count(txns, "hanging transaction")
    return text if partitions == txns else f"{text} on {count(partitions, 'partition')}"


def undo_summary(rows: int, dry_run: bool, verified: int, journal: str, already: bool = False) -> list[str]:
    """``rows``: the file operations undone (or to undo); ``already``: every file already is as it was
    before the repair (a second undo of the same journal): nothing counted."""
    if already:
        return [f"Already undone: every file of {journal} is as it was before the repair; nothing to do."]
    if dry_run:
        return [f"Dry run: {count(rows, 'file operation')} would be undone. Nothing has been changed.",
                f"{NEXT} undo it (the broker must be stopped):", paste(shlex.join(["kafkatx", "undo", journal]))]
    return [f"Undone: {count(rows, 'file operation')}, {verified} verified against the journal."]


def list_summary(total: int, ongoing: int, late: int, preparing: int, inv: Invocation) -> list[str]:
    parts = [count(total, "transactional id")]
    if ongoing:
        parts.append(f"{ongoing} Ongoing" + (f" ({late} past {'its' if late == 1 else 'their'} timeout)"
                                             if late else ""))
    if preparing:
        parts.append(f"{preparing} between prepare and complete")
    lines = [", ".join(parts) + "."]
    if late or preparing:
        lines.append(f"{NEXT} see which partitions they hold back:")
        lines.append(paste(inv.command("find-hanging", rules=True)))
    return lines


def describe_summary(transactional_id: str, open_partitions: int, late: bool, preparing: bool,
                     inv: Invocation, hanging_kinds: Sequence[str] = ()) -> list[str]:
    """``hanging_kinds``: find-hanging's kinds for this id's open partitions (offline), so the next
    step is the one find-hanging gives."""
    if not open_partitions:
        return ["No partition has this transaction open."]
    lines = [f"{count(open_partitions, 'partition')} still {'has' if open_partitions == 1 else 'have'} "
             "this transaction open."]
    if late or preparing or hanging_kinds:
        why = ("find-hanging calls it " + ", ".join(hanging_kinds) if hanging_kinds else
               "it is past its timeout" if late else "its coordinator decided it but markers are missing")
        lines.append(f"{NEXT} {why}; preview its repair {dry_run_note(inv)}:")
        lines.append(paste(inv.command("abort-hanging", "--transactional-id", transactional_id, rules=True)))
    return lines


def producers_summary(tp_name: str, total: int, open_txns: int, ghosts: int, expired: int,
                      inv: Invocation) -> list[str]:
    line = f"{count(total, 'producer')} on {tp_name}"
    extra = []
    if open_txns:
        extra.append(f"{open_txns} with an open transaction")
    if ghosts:
        extra.append(f"{ghosts} of them ghost{'s' if ghosts != 1 else ''}")
    if expired:
        extra.append(f"{expired} the broker expires on startup")
    lines = [line + (": " + ", ".join(extra) if extra else "") + "."]
    if open_txns:
        lines.append(f"{NEXT} whether they hold the partition back:")
        topic, _, partition = tp_name.rpartition("-")
        lines.append(paste(inv.command("find-hanging", "--topic", topic, rules=True)))
    return lines


def scan_summary(hanging: int, crc_errors: int, decode_errors: int, inv: Invocation) -> list[str]:
    lines = []
    if crc_errors or decode_errors:
        lines.append(f"{count(crc_errors, 'CRC error')}, {count(decode_errors, 'decode error')}: "
                     "check the files with:")
        lines.append(paste(inv.command("verify")))
    if hanging:
        lines.append(f"{NEXT} see the {count(hanging, 'hanging transaction')} and how to fix them:")
        lines.append(paste(inv.command("find-hanging", rules=True)))
    if not lines:
        lines.append("No hanging transaction and no corrupt batch.")
    return lines


def since_text(ms: int | None, now_ms: int, ghost: bool = False) -> str:
    """The ``since`` cell of a hanging row: when it began, or that retention removed its start."""
    if ms is None:
        return "before log start" if ghost else "-"
    return when(ms, now_ms)
