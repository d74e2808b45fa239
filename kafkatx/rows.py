"""Result rows shared by the offline (storage, coordinator, checks, session) and online (``cluster/``) paths.

Field names are the JSON keys of cli.md, in cli.md's order; the renderer emits
them in declaration order. Offsets and ids are ints, timestamps epoch ms,
absent values ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from msgspec import Struct, field

from kafkatx.errors import ReadFailed

T = TypeVar("T")


class TransactionRow(Struct, frozen=True, kw_only=True):
    """One transactional id as the coordinator sees it (``list-txn``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str  # Kafka's state name: Empty, Ongoing, PrepareCommit, ...
    timeout_ms: int
    start_timestamp_ms: int | None
    last_update_timestamp_ms: int | None
    partitions: list[str]  # sorted "topic-N"
    coordinator_partition: int | None = None  # offline: the __transaction_state partition
    coordinator_id: int | None = None  # the coordinator broker id (offline: node.id of the dir holding the partition)


class RowChunks(Protocol):
    """Rows taken in order a chunk at a time (``coordinator.RowCursor`` and its compiled twin; list-txn's
    1,000,000 rows): the next ``n`` at most, each the tuple of its values or ``make(*row[:k])``; ``[]`` once
    every row was taken (:func:`kafkatx.render.formats.emit_json_values` writes them a chunk at a time)."""

    def take(self, n: int, make: Callable[..., Any] | None = None, k: int = 0) -> list[Any]: ...


class HistoryEntry(Struct, frozen=True, kw_only=True):
    """One ``__transaction_state`` record of a transactional id (``describe-txn`` history)."""

    offset: int
    state: str | None  # None for a tombstone
    producer_id: int | None
    producer_epoch: int | None
    partitions: list[str] | None
    last_update_timestamp_ms: int | None


class Unreadable(Struct, frozen=True, kw_only=True):
    """A partition an answer depends on that could not be read (cli.md "Incomplete answers").

    Not a torn tail the broker truncates at startup (that is the loading rule, and the answer
    stands): bytes the broker could not load either, or a file kafkatx could not open.
    """

    partition: str  # "topic-N"
    file: str | None
    position: int | None
    reason: str


def unreadable(partition: str, err: BaseException) -> Unreadable:
    """The :class:`Unreadable` for an error raised reading ``partition`` (a ``DecodeError`` or an ``OSError``)."""
    if isinstance(err, OSError):
        file = err.filename if isinstance(err.filename, str) else None
        why = err.strerror or str(err)
        return Unreadable(partition=partition, file=file, position=None,
                          reason=f"could not read {file}: {why}" if file is not None else why)
    if isinstance(err, ReadFailed):  # storage/fdio.py's one error of a failed read: the line names the file
        return Unreadable(partition=partition, file=err.path, position=getattr(err, "position", None),
                          reason=f"could not read {err.path}: {err.reason}")
    return Unreadable(partition=partition, file=getattr(err, "path", None), position=getattr(err, "position", None),
                      reason=getattr(err, "reason", None) or getattr(err, "message", None) or str(err))


class PartitionStatus(Struct, frozen=True, kw_only=True):
    """Whether a partition of the current transaction still has it open (``describe-txn``)."""

    partition: str  # "topic-N"
    open: bool
    first_offset: int | None


class OpenPartition(Struct, frozen=True, kw_only=True):
    """A partition where a producer of a transactional id holds a transaction open (``describe-txn``)."""

    partition: str  # "topic-N"
    producer_id: int
    producer_epoch: int
    first_offset: int
    kind: str | None  # find-hanging's kind, None when the transaction is not hanging
    # a __consumer_offsets partition: the groups whose pending offset commits it holds (coordinator/groups.py)
    blocked_groups: list[str] | None = None


class TransactionDescription(Struct, frozen=True, kw_only=True):
    """``describe-txn``: the list-txn row plus history and per-partition status."""

    transaction: TransactionRow
    history: list[HistoryEntry] = field(default_factory=list)
    partition_status: list[PartitionStatus] = field(default_factory=list)
    # Offline: every partition where a producer id of this transactional id (current, previous,
    # TV2-rotated) holds a transaction open, with find-hanging's kind (None: not hanging).
    open_partitions: list[OpenPartition] = field(default_factory=list)


class ProducerRow(Struct, frozen=True, kw_only=True):
    """One producer id's state in one partition (``describe-producers``)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp_ms: int | None
    current_txn_first_offset: int | None
    ghost: bool = False  # offline: its open transaction began below the log start (only a snapshot remembers it)


class ProducerRowWithExpiry(ProducerRow, frozen=True, kw_only=True):
    """``describe-producers --include-expired``: a row that also says whether the broker expires it."""

    expired: bool = False  # idle past producer.id.expiration.ms at --now with no open transaction


class HangingRow(Struct, frozen=True, kw_only=True):
    """One (partition, producer) whose open transaction holds the partition's LSO back."""

    kind: str  # orphaned | timed-out | prepared-2pc | incomplete-markers | ghost
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    transactional_id: str | None
    coordinator_state: str | None
    first_offset: int
    start_ms: int | None
    duration_ms: int | None
    # a row about a __consumer_offsets partition: the consumer groups whose pending transactional offset
    # commits this transaction holds, sorted (their OffsetFetch answers UNSTABLE_OFFSET_COMMIT until it
    # ends: coordinator/groups.py); None for the other rows, and where the partition could not be read
    blocked_groups: list[str] | None = None
    # A tiered partition (KIP-405), offline: the local bytes the transaction keeps from the remote tier and
    # from local retention (from the segment holding the LSO on), and the last offset copied
    # (__remote_log_metadata); None elsewhere.
    upload_blocked_bytes: int | None = None
    remote_copied_offset: int | None = None


class RemoteSegmentRow(Struct, frozen=True, kw_only=True):
    """One remote segment of a tiered partition, as ``__remote_log_metadata`` leaves it: the one record of
    it, made where the records are folded (``storage.remote_log_metadata``) and shown by ``lag`` as it is."""

    start_offset: int
    end_offset: int
    state: str  # RemoteLogSegmentState: COPY_SEGMENT_STARTED/FINISHED, DELETE_SEGMENT_STARTED/FINISHED
    size_bytes: int
    segment_id: str


class LagRow(Struct, frozen=True, kw_only=True):
    """LSO / high-watermark lag of one partition (``lag``)."""

    topic: str
    partition: int
    log_start_offset: int | None
    lso: int | None
    high_watermark: int | None
    log_end_offset: int | None
    lag: int | None  # high_watermark - lso
    open_transactions: int | None  # None online when DescribeProducers is unavailable
    oldest_open_producer_id: int | None
    oldest_open_first_offset: int | None
    held_by_ghost: bool | None = False  # the LSO is held by a ghost transaction (find-hanging kind ghost);
    #                                    None online when DescribeProducers is unavailable
    # UnifiedLog.localLogStartOffset (the first local segment; the log start but for a tiered partition);
    # None online
    local_log_start_offset: int | None = None
    # Tiered storage (KIP-405), offline, for a tiered partition (else None): what decided it is tiered
    # (kafkatx.storage.tiered's codes), its remote segments in __remote_log_metadata, the last offset copied,
    # and the local bytes an open transaction holding the LSO keeps from upload and deletion.
    remote_storage: str | None = None
    remote_segments: list[RemoteSegmentRow] | None = None
    remote_copied_offset: int | None = None
    upload_blocked_bytes: int | None = None


class RowAction(StrEnum):
    """What an ``abort-hanging`` row does (its ``action``), offline and online alike.

    A row that is carried out does one of the repairs; a row that is not says why in its reason, and its
    ``action`` text (cli.md's JSON contract) is ``<state>: <reason>`` (:meth:`text`). Read a row's as
    :attr:`AbortPlanRow.state` and :attr:`AbortPlanRow.reason`, never by its text's prefix.
    """

    # offline (kafkatx.repair.plan)
    ABORT_TIMED_OUT = "abort-timed-out"  # TransactionMetadata.prepareAbortOrCommit after an epoch bump
    COMPLETE_COMMIT = "complete-commit"  # the coordinator's PrepareCommit finished: markers, then CompleteCommit
    COMPLETE_ABORT = "complete-abort"
    WRITE_ABORT_MARKER = "write-abort-marker"  # online too
    WRITE_COMMIT_MARKER = "write-commit-marker"  # online too
    DROP_SNAPSHOTS = "drop-snapshots"  # --ghost-strategy drop-snapshots
    FORCE_TERMINATE = "force-terminate"  # online too: Admin.forceTerminateTransaction (KIP-939)
    # online (kafkatx.cluster.service)
    FENCE_EPOCH = "fence-epoch"  # InitProducerId for the id: the coordinator bumps the epoch and aborts
    # not carried out, each with its reason
    REFUSED = "refused"  # the row cannot be repaired safely: nothing of the plan is changed
    NOT_PLANNED = "not planned"  # the selection touches a partition that could not be read
    UNTOUCHED = "untouched"  # left alone (prepared-2pc, undecided): the rest of the plan still runs

    def text(self, reason: str = "") -> str:
        """The row's ``action`` as cli.md has it: the state's name, then ``: reason`` when there is one."""
        return f"{self.value}: {reason}" if reason else str(self.value)


class RowResult(StrEnum):
    """What became of an executed ``abort-hanging`` row (its ``result``; None in a plan)."""

    OK = "ok"
    FAILED = "failed"  # with the reason: ``failed: <reason>``
    UNTOUCHED = "untouched"  # a row left alone (RowAction.UNTOUCHED) stays so when the plan runs

    def text(self, reason: str = "") -> str:
        """The row's ``result`` as cli.md has it: the outcome, then ``: reason`` when there is one."""
        return f"{self.value}: {reason}" if reason else str(self.value)


_WITH_REASON = frozenset({RowAction.REFUSED, RowAction.NOT_PLANNED, RowAction.UNTOUCHED})


def _split(text: str) -> tuple[str, str]:
    head, sep, reason = text.partition(": ")
    return (head, reason) if sep else (text, "")


UNTOUCHED_2PC_REASON = "prepared-2pc"  # a prepared 2PC transaction left alone (no --force-terminate ID)
UNTOUCHED_UNDECIDED_REASON = "undecided"  # an orphan whose outcome no evidence tells (no --decision)
UNTOUCHED_2PC = RowAction.UNTOUCHED.text(UNTOUCHED_2PC_REASON)  # that row's whole action text


class AbortPlanRow(Struct, frozen=True, kw_only=True):
    """One ``abort-hanging`` row, offline and online alike: a find-hanging row plus what is done.

    The first ten fields are :class:`HangingRow`'s, in cli.md's order; they are optional here
    because an online fence requested by transactional id on a broker without
    DescribeTransactions knows no partition or producer. ``kind`` is a find-hanging kind, or
    ``requested`` for an online row selected by id/partition that find-hanging would not list.

    ``action``: offline ``abort-timed-out``, ``complete-commit``, ``complete-abort``,
    ``write-abort-marker``, ``drop-snapshots``, ``force-terminate`` (``kafkatx.repair.plan``); online
    ``fence-epoch``, ``write-abort-marker``, ``write-commit-marker``, ``force-terminate``
    (``kafkatx.cluster.service``); ``refused: <why>`` when the row cannot be repaired safely;
    ``not planned: <why>`` beside a refusal when the selection touches an unreadable partition;
    ``untouched: prepared-2pc`` for a two-phase-commit transaction not named by ``--force-terminate``;
    ``untouched: undecided`` for an orphan whose outcome neither the history nor its other partitions'
    markers show, without ``--decision``. The text is :meth:`RowAction.text`'s; read it as :attr:`state`
    (a :class:`RowAction`) and :attr:`reason`.
    ``result`` is None in a plan, ``ok``, ``untouched`` or ``failed: <reason>`` once executed
    (:class:`RowResult`; read it as :attr:`outcome` and :attr:`failure`).
    ``coordinator_epoch`` is the one the marker carries (a broker rejects a marker from an
    older coordinator epoch: ``ProducerAppendInfo.appendEndTxnMarker``).
    ``control_type`` (``ABORT``/``COMMIT``), ``marker_offset`` and ``marker_epoch`` describe the
    marker written to the partition; None when no marker is written by us (a fence, where the
    coordinator writes them, ``drop-snapshots``, a refusal) or when only the broker can know
    it (online the leader assigns the marker's offset).
    """

    kind: str  # orphaned | timed-out | prepared-2pc | incomplete-markers | ghost | requested
    topic: str | None
    partition: int | None
    producer_id: int | None
    producer_epoch: int | None
    transactional_id: str | None
    coordinator_state: str | None
    first_offset: int | None
    start_ms: int | None
    duration_ms: int | None
    action: str  # RowAction.text(reason)
    result: str | None = None  # RowResult.text(reason)
    coordinator_epoch: int | None = None
    control_type: str | None = None
    marker_offset: int | None = None
    marker_epoch: int | None = None
    why: str | None = None  # offline orphans: the coordinator decision the marker follows (coordinator/decision.py)
    # An online fence: the transactionTimeoutMs its InitProducerId sends, which the coordinator keeps
    # for the id afterwards (TransactionMetadata.prepareIncrementProducerEpoch); None for other actions.
    transaction_timeout_ms: int | None = None
    blocked_groups: list[str] | None = None  # HangingRow.blocked_groups

    @property
    def state(self) -> RowAction:
        """What the row does, as the enum (``action`` is its text)."""
        head, _ = _split(self.action)
        return RowAction(head) if head in _WITH_REASON else RowAction(self.action)

    @property
    def reason(self) -> str:
        """Why a row is not carried out (refused, not planned, untouched); "" for a repair."""
        head, reason = _split(self.action)
        return reason if head in _WITH_REASON else ""

    @property
    def outcome(self) -> RowResult | None:
        """What became of the row once executed, as the enum (``result`` is its text); None in a plan."""
        return None if self.result is None else RowResult(_split(self.result)[0])

    @property
    def failure(self) -> str | None:
        """The reason an executed row failed (``failed: <reason>``); None unless it failed."""
        if self.result is None:
            return None
        head, reason = _split(self.result)
        return reason if head == RowResult.FAILED else None

    @property
    def refused(self) -> bool:
        return self.state is RowAction.REFUSED

    @property
    def untouched(self) -> bool:
        """A row left alone (``prepared-2pc``, or an orphan no evidence decides): the rest of the plan still
        runs, the command exits 3 naming the command that decides it."""
        return self.state is RowAction.UNTOUCHED


class Progress(Protocol):
    """What the replays report progress to (the CLI wraps a rich progress bar; the rooms below the CLI never import rich)."""

    def start(self, total: int, description: str) -> None: ...

    def advance(self, n: int) -> None: ...


class Finding(Struct, frozen=True, kw_only=True):
    """Something the replay found wrong but could step over (reported, replay continues)."""

    check: str  # short machine name: illegal-transition, wrong-coordinator-partition, ...
    message: str
    file: str | None = None
    position: int | None = None
    offset: int | None = None
    partition: str | None = None  # "topic-N" the finding is about
    severity: str = "error"


class Report(Struct, kw_only=True):
    """What an answer has to say beside its rows, collected in one place while a command runs: notes (replica
    choices, settings, snapshot fallbacks, findings stepped over), the partitions skipped (named, left out, the
    rest still answered) and the partitions it could not read (``incomplete``: never a false all-clear). The one
    place the text of a skipped partition, a finding, the settings used and the high watermarks missing is made.

    Mutable, and a msgspec Struct: one partition's report crosses the fan-out (``storage.fanout``) whole and
    is taken into the command's (:meth:`take`)."""

    notices: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    incomplete: list[Unreadable] = field(default_factory=list)

    def note(self, *lines: str) -> None:
        self.notices.extend(lines)

    def findings(self, found: Iterable[Finding]) -> None:
        """The findings a replay stepped over, each one note."""
        self.notices.extend(finding_note(f) for f in found)

    def skip(self, partition: str, path: object, err: BaseException) -> None:
        """A partition that does not decode (or open): named in ``skipped`` and ``incomplete``."""
        self.skipped.append(skipped_line(partition, path, err))
        self.incomplete.append(unreadable(partition, err))

    def unread(self, partition: str, err: BaseException) -> None:
        """A partition the answer depends on that could not be read (``incomplete`` only)."""
        self.incomplete.append(unreadable(partition, err))

    def not_read(self, partition: str, reason: str) -> None:
        """A partition the answer depends on that a live cluster did not answer for (``incomplete`` only:
        the broker's error is the reason; no file, no byte)."""
        self.incomplete.append(Unreadable(partition=partition, file=None, position=None, reason=reason))

    def settings(self, described: Iterable[str]) -> None:
        """The one note naming each broker setting a command used and where it came from
        (``Setting.describe()`` of each)."""
        self.notices.append("broker settings: " + ", ".join(described))

    def no_high_watermark(self, names: list[str]) -> None:
        """The one note naming the partitions whose log end offset stood in for a missing high watermark."""
        if names:
            self.notices.append(no_high_watermark_note(names))

    def unclassified(self, partition: str, producer_id: int, first_offset: int, why: str) -> None:
        """An open transaction find-hanging cannot classify because its coordinator is unknown (``why``: what
        could not be read or asked): the note beside the coordinator's ``incomplete`` entry."""
        self.notices.append(f"{partition}: producer {producer_id}'s open transaction (from offset {first_offset}) "
                            f"is not classified: its coordinator is unknown, since {why} (the answer is incomplete)")

    def groups_unknown(self, partition: str, err: object) -> None:
        """A ``__consumer_offsets`` partition whose blocked consumer groups could not be read or asked."""
        self.notices.append(groups_unknown_note(partition, err))

    def lacks(self, broker: str, api: str, since: str, consequence: str) -> None:
        """A live broker without an API a command would ask (its ApiVersions answer): what the answer lacks."""
        self.notices.append(f"broker {broker} has no {api}, which needs {since}: {consequence}")

    def take(self, other: Report) -> None:
        """Another report's lines after this one's."""
        self.notices.extend(other.notices)
        self.skipped.extend(other.skipped)
        self.incomplete.extend(other.incomplete)


def groups_unknown_note(partition: str, err: object) -> str:
    """The note of a ``__consumer_offsets`` partition whose blocked groups are unknown (:meth:`Report.groups_unknown`)."""
    return f"{partition}: the blocked consumer groups are unknown: {err}"


def no_high_watermark_note(names: list[str]) -> str:
    """The note naming the partitions whose log end stood in for their high watermark
    (:meth:`Report.no_high_watermark`)."""
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return f"no high watermark in replication-offset-checkpoint for {shown}: using the log end offset instead"


def finding_note(f: Finding) -> str:
    """A finding the replay stepped over, as a note."""
    return f"{f.severity}: {f.message}"


def skipped_line(partition: str, path: object, err: BaseException) -> str:
    """A partition that does not decode (or open), as a ``skipped`` line: its name, folder and why."""
    where = f"{err.filename}: " if isinstance(err, OSError) and err.filename else ""
    return f"{partition} ({path}): {where}{err}"


class Reported(Struct, frozen=True, kw_only=True):
    """An answer's :class:`Report` and its three parts, read as the answer's own (``answer.notices``...)."""

    report: Report = field(default_factory=Report)

    @property
    def notices(self) -> list[str]:
        return self.report.notices

    @property
    def skipped(self) -> list[str]:
        return self.report.skipped

    @property
    def incomplete(self) -> list[Unreadable]:
        return self.report.incomplete


class Answer(Reported, Generic[T], frozen=True, kw_only=True):
    """What a :class:`kafkatx.cluster.source.Source` question answers, offline and online alike: the rows
    and the :class:`Report` said beside them (``notices``, ``skipped``, ``incomplete``)."""

    rows: list[T]


class LagAnswer(Answer[LagRow], frozen=True, kw_only=True):
    """``lag``'s answer: its rows, and the coordinator's open transaction (Ongoing, PrepareCommit,
    PrepareAbort) of each producer holding a partition back, by producer id (:attr:`holders`)."""

    holders: dict[int, TransactionRow] = field(default_factory=dict)
