r"""The offline session: :class:`OfflineSession`, one offline command's analysis, built once per command.

It holds the broker log dirs (paths or opened :class:`LogDir` objects, several brokers' dirs at once), the
settings resolved for them, the coordinator (``TransactionStateManager``'s load of ``__transaction_state``,
loaded once, when first asked), the partitions replayed (``ProducerStateManager``'s state as the broker
rebuilds it at startup) and one :class:`~kafkatx.rows.Report` every step says its notes, skipped and
unreadable partitions into. Its answers are :class:`~kafkatx.rows.Answer`\ s. ``session/offline.py`` has one
function per command that builds one and asks it; the repair's analysis and the exporter's offline mode ask
it too.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Container, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from msgspec import Struct, field
from msgspec.structs import asdict

from kafkatx.checks.ghost import ghost_transactions
from kafkatx.coordinator.fold_index import LiveTransactions
from kafkatx.coordinator.groups import OFFSETS_TOPIC, with_blocked_groups
from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS, listed
from kafkatx.coordinator.state_manager import CoordinatorState, RowCursor, replay_transaction_log
from kafkatx.coordinator.txn_fold import NO_HISTORY, TXN_STATE_TOPIC
from kafkatx.errors import DecodeError, KafkaTxError, ReadFailed, UsageError
from kafkatx.rows import (
    Answer,
    HangingRow,
    LagAnswer,
    LagRow,
    OpenPartition,
    PartitionStatus,
    ProducerRow,
    ProducerRowWithExpiry,
    Progress,
    Report,
    Reported,
    RowChunks,
    TransactionDescription,
    TransactionRow,
    Unreadable,
)
from kafkatx.session.partition_rows import (
    OPEN_STATES,
    HangingPart,
    LagPart,
    hanging_key,
    hanging_rows,
    held_producers,
    lag_row,
    no_coordinator_ghosts,
    owed_notices,
    tiered_hanging,
)
from kafkatx.session.partition_rows import _checkpointed_hw as _checkpointed_hw
from kafkatx.session.partition_rows import _high_watermarks as _high_watermarks
from kafkatx.session.partition_rows import _older_broker_notices as _older_broker_notices
from kafkatx.session.partition_rows import _open_key as _open_key
from kafkatx.session.selection import chosen, refuse_metadata_topic
from kafkatx.session.settings import max_timeout_setting, partitions_count_setting, say_settings
from kafkatx.session.timeline import PartitionTimeline, TransactionSpan, replay_spans, transaction_spans
from kafkatx.session.transactions import (
    _ROW_VALUES,
    _values_row,
    compile_pattern,
    coordinator_ids,
    known_ids,
    parse_states,
    producer_ids_of,
    transaction_row,
)
from kafkatx.storage.broker_config import (
    PRODUCER_ID_EXPIRATION_MS,
    Setting,
    resolve,
)
from kafkatx.storage.events import FileEvents
from kafkatx.storage.fanout import fan_out, jobs_for
from kafkatx.storage.loading import plan_load
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.partition import Partition, log_bytes, parse_partition_dir_name
from kafkatx.storage.producer_state import CompletedTxn, PartitionProducerState
from kafkatx.storage.remote_log import tiered_facts, tiered_notices
from kafkatx.storage.replay import replay_partition
from kafkatx.storage.replicas import ReplicaChoice, as_log_dirs, choose_replicas
from kafkatx.storage.segment import DEFAULT_READ_WINDOW, small_reads

if TYPE_CHECKING:
    from kafkatx.checks.indexes import Problem

T = TypeVar("T")
LogDirs = Iterable["str | Path | LogDir"]


class ValuesAnswer(Reported, frozen=True, kw_only=True):
    """``list_transactions(values=True)``'s answer: an :class:`Answer` whose rows are taken a chunk at a time
    (``RowCursor.take``), each the tuple of a ``TransactionRow``'s values (list-txn's 1,000,000 rows)."""

    rows: RowChunks


# ----------------------------------------------------------------------------- helpers

def _dir_notices(dirs: list[LogDir]) -> list[str]:
    """What the log dirs themselves skipped (-delete/-future folders, unknown entries)."""
    return [n for d in dirs for n in d.skipped]


R = TypeVar("R")


class Reduced(Struct, Generic[R], frozen=True, kw_only=True):
    """One partition of :meth:`OfflineSession.reduce`: what a command keeps of its replay (``value``, None for a
    partition that does not decode) and its report (the replay's notes and findings, or the partition's skipped
    line and unreadable entry)."""

    value: R | None = None
    report: Report = field(default_factory=Report)


# ----------------------------------------------------------------------------- the session

class OfflineSession:
    """One offline command's analysis, built once per command: the log dirs, the settings resolved for them
    (the clock, ``transaction.max.timeout.ms``, the ``__transaction_state`` partition count: flags, else the
    broker configs, else Kafka's defaults), the coordinator (``TransactionStateManager``'s load of
    ``__transaction_state``: loaded once, when first asked), the partitions replayed (``ProducerStateManager``'s
    state as the broker rebuilds it at startup) and one :class:`~kafkatx.rows.Report` every step says what it
    has to say into (notes, skipped and unreadable partitions). The filters (topic, partition, transactional id)
    go down into it: only what a command asks about is replayed.

    find-hanging, lag, describe-txn, describe-producers, list-txn, verify and timeline are its methods; the
    repair's analysis (``repair/analysis.py``) and the exporter's offline mode ask it too."""

    def __init__(self, log_dirs: LogDirs, *, now: int | None = None, max_timeout_ms: int | None = None,
                 partitions_count: int | None = None, progress: Progress | None = None,
                 jobs: int | None = None) -> None:
        self.dirs: list[LogDir] = as_log_dirs(log_dirs)
        self.report = Report()
        self.report.note(*_dir_notices(self.dirs))
        self.now = now
        self.progress = progress
        self.jobs = jobs
        self._max_timeout_flag = max_timeout_ms
        self._partitions_count_flag = partitions_count
        self.max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
        self.partitions_count: int | None = partitions_count
        self._resolved: bool | None = None  # None: not yet; else whether max_timeout_ms was resolved too
        self._coordinator: CoordinatorState | None = None
        self._hws: dict[Path, dict[tuple[str, int], int]] | None = None
        self.parts: dict[tuple[str, int], Partition] = {}  # the partitions chosen to replay, by (topic, partition)
        self.states: dict[tuple[str, int], PartitionProducerState] = {}  # their states (kept whole: replayed())

    # ------------------------------------------------------------------ settings

    def resolve_settings(self, *, max_timeout: bool = False, quiet: bool = False) -> None:
        """The settings a command uses, resolved once (``max_timeout``: also ``transaction.max.timeout.ms``),
        and the one note naming them when a broker config was given (not when ``quiet``: a lookup whose notes
        the answer does not show). Each command resolves what it uses when first asked; asking again does
        nothing."""
        if self._resolved is not None and (self._resolved or not max_timeout):
            return
        used: list[Setting] = []
        if max_timeout:
            if self._max_timeout_flag is not None and self._max_timeout_flag < 0:
                raise UsageError(f"--max-transaction-timeout must not be negative, got {self._max_timeout_flag}")
            self.max_timeout_ms = max_timeout_setting(self.dirs, self._max_timeout_flag, used)
        self.partitions_count = partitions_count_setting(self.dirs, self._partitions_count_flag, used)
        if not quiet:
            say_settings(self.dirs, used, self.report)
        self._resolved = max_timeout

    # ------------------------------------------------------------------ the coordinator

    def coordinator(self, *, history_for: Container[str] | None = (), progress: Progress | None = None,
                    quiet: bool = False) -> CoordinatorState:
        """``__transaction_state`` replayed (``replay_transaction_log``), once per session; its notes and
        findings said in the report (not when ``quiet``: a lookup whose notes the answer does not show), its
        skipped and unreadable partitions always. Full histories only where an answer shows them
        (``history_for``: describe-txn's id; None: every id's, the repair's decisions): memory grows with ids."""
        if self._coordinator is None:
            self.resolve_settings(quiet=quiet)
            coord = replay_transaction_log(self.dirs, partitions_count=self.partitions_count, progress=progress,
                                           history_for=history_for)
            if not quiet:
                self.report.note(*coord.notices)
                self.report.findings(coord.findings)
            self.report.take(Report(skipped=coord.skipped, incomplete=coord.incomplete))
            self._coordinator = coord
        return self._coordinator

    # ------------------------------------------------------------------ the partitions

    def high_watermarks(self) -> dict[Path, dict[tuple[str, int], int]]:
        """Each log dir's ``replication-offset-checkpoint``, read once ({} with a note when it does not read)."""
        if self._hws is None:
            self._hws = _high_watermarks(self.dirs, self.report)
        return self._hws

    def checkpointed_hw(self, part: Partition) -> int | None:
        return _checkpointed_hw(self.high_watermarks(), part)

    def chosen(self, topic: str | None, partition: int | None, report: Report | None = None) -> list[ReplicaChoice]:
        """The partitions a replay reads: of ``topic``, numbered ``partition``, the leader's copy of each;
        "nothing selected" (filters matching nothing) is :class:`MissingFile` (``require_match``), checked here
        once for every command."""
        return chosen(self.dirs, topic, partition, report or self.report)

    def reduce(self, reduce: Callable[[ReplicaChoice, PartitionProducerState], R], result: Any, *,
               topic: str | None = None, partition: int | None = None, jobs: int | None = None,
               replay: Callable[[Partition], PartitionProducerState] | None = None,
               report: Report | None = None) -> list[R]:
        """Every chosen partition (of ``topic``, numbered ``partition``) replayed with ``replay`` (default
        ``replay_partition`` at the session's clock) and its state reduced to what the command keeps (``reduce``,
        a ``result`` msgspec can send), by ``jobs`` processes (``storage.fanout``; None: the session's, one per
        CPU from 1,000 partitions up): the replay's notes and findings, skipped lines and unreadable entries in
        partition order (into ``report``, default the session's), then the values."""
        report = report if report is not None else self.report
        progress = self.progress
        choices = self.chosen(topic, partition, report)
        self.parts.update((c.partition.key, c.partition) for c in choices)
        sizes = log_bytes(c.partition for c in choices) if progress is not None else {}
        if progress is not None:
            progress.start(sum(sizes.values()), "replaying partitions")
        if replay is None:
            replay = functools.partial(replay_partition, now=self.now, small=small_reads())  # small: looked up once

        def each(choice: ReplicaChoice) -> Reduced[R]:
            part = choice.partition
            said = Report()
            try:
                state = replay(part)
            except (KafkaTxError, OSError) as err:  # it does not decode (or open)
                said.skip(part.name, part.path, err)
                return Reduced(report=said)
            # its notices, then its findings as notes
            said.note(*state.notices)
            said.findings(state.findings)
            return Reduced(value=reduce(choice, state), report=said)

        def done(choice: ReplicaChoice) -> None:
            assert progress is not None
            progress.advance(sizes[id(choice.partition)])

        out = []
        for got in fan_out(each, choices, Reduced[result], jobs=jobs_for(len(choices), jobs if jobs is not None
                                                                            else self.jobs),
                           done=done if progress is not None else None):  # no progress: no ticks
            report.take(got.report)
            if got.value is not None:
                out.append(got.value)
        return out

    def replayed(self, *, topic: str | None = None, partition: int | None = None,
                 replay: Callable[[Partition], PartitionProducerState] | None = None,
                 report: Report | None = None) -> list[tuple[ReplicaChoice, PartitionProducerState]]:
        """:meth:`reduce` keeping every state whole, in this process; the states and partitions are kept in
        :attr:`states` and :attr:`parts`."""
        got = self.reduce(lambda choice, state: (choice, state), Any, topic=topic, partition=partition, jobs=1,
                          replay=replay, report=report)
        for choice, state in got:
            self.states[choice.partition.key] = state
        return got

    # ------------------------------------------------------------------ the commands

    def hanging(self, *, now: int, topic: str | None = None, partition: int | None = None) -> Answer[HangingRow]:
        """find-hanging: open transactions that hold an LSO back (``checks/hanging.py``), of ``topic`` and
        ``partition`` only (only those partitions are replayed)."""
        self.resolve_settings(max_timeout=True)
        coord = self.coordinator()
        max_timeout_ms = self.max_timeout_ms
        self.high_watermarks()

        def reduce(choice: ReplicaChoice, state: PartitionProducerState) -> HangingPart:
            said = Report()
            held: set[tuple[str, tuple[str, int]]] = set()
            rows = hanging_rows(coord, [state], now=now, max_timeout_ms=max_timeout_ms, report=said, topic=topic,
                                partition=partition, held_open=held)
            if state.topic == OFFSETS_TOPIC:
                rows = with_blocked_groups(rows, lambda _tp: choice.partition, said, key=hanging_key)
            rows = tiered_hanging(state, choice.partition, self.checkpointed_hw(choice.partition), rows, said)
            return HangingPart(rows=rows, report=said, held=sorted(held))

        parts = self.reduce(reduce, HangingPart, topic=topic, partition=partition)
        # the partitions come sorted (choose_replicas) and each one's rows sorted: the rows in find_hanging's order
        rows = [r for p in parts for r in p.rows]
        for p in parts:
            self.report.take(p.report)
        # as hanging_rows over every state said them: once, after the partitions' own
        self.report.note(*owed_notices(coord, {h for p in parts for h in p.held}, now=now, topic=topic,
                                       partition=partition))
        self.report.note(*_older_broker_notices(rows, self.dirs, coord))
        return Answer(rows=rows, report=self.report)

    def lag(self, *, topics: Sequence[str | None] = (None,), holders: bool = False,
            everything: bool = True) -> LagAnswer:
        """lag: per partition of each of ``topics`` (None: every topic) its log start, LSO, high watermark, log
        end and lag; with ``holders``, the coordinator's open transaction of each producer holding a partition
        back (:meth:`lag_holders`, ``everything``: of every held partition, not only a ghost's) and the ghost
        verdict corrected by it (:func:`no_coordinator_ghosts`)."""
        self.high_watermarks()
        rows: list[LagRow] = []
        for topic in topics:
            rows.extend(self._lag(topic))
        found: dict[int, TransactionRow] = {}
        if holders:
            found = self.lag_holders(rows, everything=everything)
            rows = no_coordinator_ghosts(rows, found)
        return LagAnswer(rows=rows, report=self.report, holders=found)

    def _lag(self, topic: str | None) -> list[LagRow]:
        def reduce(choice: ReplicaChoice, state: PartitionProducerState) -> LagPart:
            said = Report()
            row, stand_in = lag_row(state, self.checkpointed_hw(choice.partition), said, choice.partition)
            return LagPart(row=row, stand_in=choice.partition.name if stand_in else None, report=said)

        parts = self.reduce(reduce, LagPart, topic=topic)
        for p in parts:
            self.report.take(p.report)
        self.report.no_high_watermark([p.stand_in for p in parts if p.stand_in is not None])
        return [p.row for p in parts]

    def lag_holders(self, rows: list[LagRow], *, everything: bool = True) -> dict[int, TransactionRow]:
        """The coordinator's open transaction (Ongoing, PrepareCommit, PrepareAbort) of each producer holding a
        partition of ``rows`` back (:func:`held_producers`), by producer id. The coordinator's notes are not
        said (lag's answer is the partitions'); what it could not read makes the answer incomplete: the ghost
        verdict depends on it (a failed read is never a quieter answer)."""
        held = held_producers(rows, everything=everything)
        if not held:
            return {}
        try:
            coord = self.coordinator(quiet=True, history_for=NO_HISTORY)
        except (DecodeError, ReadFailed) as err:  # the coordinator's files: the answer is incomplete, said so
            self.report.unread(_partition_of_error(err, TXN_STATE_TOPIC), err)
            return {}
        except KafkaTxError:  # no answer to it: a hint only, lag's answer stands without it
            return {}
        coordinators = coordinator_ids(self.dirs)
        tx = coord.transactions
        if isinstance(tx, LiveTransactions):  # rows straight from the replay's records: no metadata per id
            found = [_values_row(t) for t in coord.stream_values(OPEN_STATES, coordinators).take(sys.maxsize)]
        else:
            found = [transaction_row(meta, coordinators) for _tid, meta in sorted(tx.items())
                     if meta.state in OPEN_STATES]
        return {r.producer_id: r for r in found if r.producer_id in held}

    def list_transactions(self, *, states: Iterable[str] | None = None, pattern: str | None = None,
                          values: bool = False, producer_ids: Iterable[int] | None = None,
                          duration_ms: int | None = None) -> Answer[TransactionRow] | ValuesAnswer:
        """list-txn (:func:`list_transactions`)."""
        wanted = parse_states(states)
        regex = compile_pattern(pattern)
        pids = frozenset(producer_ids) if producer_ids else None
        at = int(time.time() * 1000) if self.now is None else self.now
        filtered = regex is not None or pids is not None or duration_ms is not None

        def keep(tid: str, pid: int, state: str, start: int | None) -> bool:
            return listed(transactional_id=tid, producer_id=pid, state=state, start_ms=start, pattern=regex,
                          producer_ids=pids, duration_ms=duration_ms, now=at)
        # no history: the rows read each id's latest record only (no old producer id, no record before)
        coord = self.coordinator(history_for=NO_HISTORY, progress=self.progress)
        if not coord.partitions_found:
            self.report.note("no __transaction_state partitions in these log dirs: nothing to list")
        coordinators = coordinator_ids(self.dirs)
        tx = coord.transactions
        if isinstance(tx, LiveTransactions):  # rows straight from the replay's records: no metadata per id
            cursor = coord.stream_values(wanted, coordinators)  # sorted by id: sorted(transactions.items())'s order
            if filtered:  # tuples in TransactionRow's field order: id, producer id, epoch, state, timeout, start
                cursor = RowCursor([t for t in cursor.take(sys.maxsize)
                                    if keep(t[0], t[1], t[3], t[5])])
            if values:
                return ValuesAnswer(rows=cursor, report=self.report)
            return Answer(rows=[_values_row(t) for t in cursor.take(sys.maxsize)], report=self.report)
        rows = [transaction_row(meta, coordinators) for tid, meta in sorted(tx.items())
                if (wanted is None or meta.state in wanted)
                and keep(tid, meta.producer_id, meta.state.kafka_name,
                         meta.start_timestamp if meta.start_timestamp >= 0 else None)]
        if values:
            return ValuesAnswer(rows=RowCursor([_ROW_VALUES(r) for r in rows]), report=self.report)
        return Answer(rows=rows, report=self.report)

    def describe_transaction(self, transactional_id: str, *,
                             max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> Answer[TransactionDescription]:
        """describe-txn (:func:`describe_transaction`)."""
        report = self.report
        coord = self.coordinator(history_for={transactional_id}, progress=self.progress)
        meta = coord.transactions.get(transactional_id)
        if meta is None:
            if transactional_id in coord.tombstoned:
                report.note(f"transactional id {transactional_id!r} was removed (tombstone at offset "
                            f"{coord.tombstoned[transactional_id]}); {len(coord.history[transactional_id])} "
                            f"record(s) of history remain")
            else:
                report.note(f"transactional id {transactional_id!r} not found in the __transaction_state "
                            f"partitions of these log dirs; {known_ids(coord.transactions)}")
            return Answer(rows=[], report=report)
        now_ms = self.now if self.now is not None else _wall_ms()
        ids = producer_ids_of(coord, transactional_id)
        # every partition replayed (the id's producers may hold any open); the replay's own notes are not this
        # answer's, its skipped and unreadable partitions are
        said = Report(skipped=report.skipped, incomplete=report.incomplete)
        progress, self.progress = self.progress, None
        read = self.replayed(report=said)
        self.progress = progress
        replayed = {(s.topic, s.partition): s for _c, s in read}
        parts = {(s.topic, s.partition): c.partition for c, s in read}
        status: list[PartitionStatus] = []
        unread = {u.partition for u in report.incomplete}
        for tp in sorted(meta.partitions):
            name = f"{tp[0]}-{tp[1]}"
            state = replayed.get(tp)
            if state is None:
                if name not in unread:
                    report.note(f"{name}: not in these log dirs; shown as not open")
                status.append(PartitionStatus(partition=name, open=False, first_offset=None))
                continue
            firsts = [p.current_txn_first_offset for pid, p in state.producers.items()
                      if pid in meta.producer_ids and p.current_txn_first_offset is not None]
            first = min(firsts) if firsts else None
            status.append(PartitionStatus(partition=name, open=first is not None, first_offset=first))
        states = list(replayed.values())
        kinds = {(h.topic, h.partition, h.producer_id): h.kind
                 for h in hanging_rows(coord, states, now=now_ms, max_timeout_ms=max_timeout_ms)}
        opened = [OpenPartition(partition=st.name, producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                                first_offset=t.first_offset, kind=kinds.get((st.topic, st.partition, t.producer_id)))
                  for st in states for t in st.open_transactions if t.producer_id in ids]
        opened.sort(key=lambda o: (o.partition, o.first_offset))
        opened = with_blocked_groups(opened, parts.get, report, key=_open_key)
        desc = TransactionDescription(transaction=transaction_row(meta, coordinator_ids(self.dirs)),
                                      history=list(coord.history[transactional_id]),
                                      partition_status=status, open_partitions=opened)
        return Answer(rows=[desc], report=report)

    def describe_producers(self, *, topic: str, partition: int, expiration_ms: int | None = None,
                           include_expired: bool = False) -> Answer[ProducerRow]:
        """describe-producers (:func:`describe_producers`)."""
        refuse_metadata_topic(topic)
        report = self.report
        now, progress = self.now, self.progress
        part = self.chosen(topic, partition)[0].partition
        config = part.log_dir.broker_config if part.log_dir is not None else None
        used = [resolve(PRODUCER_ID_EXPIRATION_MS, expiration_ms, "--producer-id-expiration-ms",
                        [config] if config is not None else [])]
        expiration_ms = int(used[0].value)
        say_settings(self.dirs, used, report)
        if progress is not None:
            progress.start(sum(s.size for s in part.segments), f"replaying {part.name}")
        try:
            state = replay_partition(part, now=now, expiration_ms=expiration_ms)
        except (KafkaTxError, OSError) as err:
            report.skip(part.name, part.path, err)
            return Answer(rows=[], report=report)
        if progress is not None:
            progress.advance(sum(s.size for s in part.segments))
        report.note(*state.notices)
        report.findings(state.findings)
        tiered = tiered_facts(state, part, state.log_end_offset, False)
        if tiered is not None:  # the remote tier beside the local segments (KIP-405)
            report.note(*tiered_notices(part.name, tiered, state.log_end_offset))
        if state.expired and not include_expired:
            ids = ", ".join(str(pid) for pid in list(state.expired)[:10]) + (" ..." if len(state.expired) > 10 else "")
            report.note(f"{part.name}: {len(state.expired)} producer(s) idle for at least "
                        f"producer.id.expiration.ms ({expiration_ms} ms) at --now {now} are expired by the broker "
                        f"and not listed ({ids}); --include-expired lists them")
        ghosts = {t.producer_id for t in ghost_transactions(state)}
        producers = [(p, False) for p in state.producers.values()]
        if include_expired:
            producers += [(p, True) for p in state.expired.values()]
        rows: list[ProducerRow] = []
        for p, expired in sorted(producers, key=lambda item: item[0].producer_id):
            row = ProducerRow(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                              coordinator_epoch=p.coordinator_epoch, last_sequence=p.last_sequence,
                              last_timestamp_ms=p.last_timestamp if p.last_timestamp >= 0 else None,
                              current_txn_first_offset=p.current_txn_first_offset, ghost=p.producer_id in ghosts)
            rows.append(ProducerRowWithExpiry(**asdict(row), expired=expired) if include_expired else row)
        return Answer(rows=rows, report=report)

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None) -> Answer[PartitionTimeline]:
        """timeline (:func:`timeline`)."""
        self.resolve_settings(max_timeout=True)
        coord = self.coordinator()
        self.high_watermarks()
        report = self.report
        completed: dict[tuple[str, int], list[CompletedTxn]] = {}

        def replay(part: Partition) -> PartitionProducerState:
            done: list[CompletedTxn] = []
            completed[part.key] = done
            plan = plan_load(part)
            return replay_spans(part, FileEvents.of_plan(part, plan), now=now, plan=plan, completed=done)

        replayed: list[tuple[PartitionProducerState, LagRow, list[TransactionSpan]]] = []
        no_hw: list[str] = []
        for choice, state in self.replayed(topic=topic, partition=partition, replay=replay):
            row, stand_in = lag_row(state, self.checkpointed_hw(choice.partition), report, choice.partition)
            if stand_in:
                no_hw.append(choice.partition.name)
            spans = transaction_spans(completed[choice.partition.key], state, coord.transactional_id_for, now)
            spans.sort(key=lambda s: (s.first_offset if s.first_offset is not None else -1, s.producer_id))
            replayed.append((state, row, spans))
        hanging = hanging_rows(coord, [state for state, _row, _spans in replayed], now=now,
                               max_timeout_ms=self.max_timeout_ms, report=report, topic=topic,
                               partition=partition)
        hanging = with_blocked_groups(hanging, self.parts.get, report, key=hanging_key)
        rows = [PartitionTimeline(topic=state.topic, partition=state.partition, lag=row, spans=spans,
                                  hanging=[h for h in hanging if (h.topic, h.partition) == (state.topic, state.partition)])
                for state, row, spans in replayed]
        report.no_high_watermark(no_hw)
        return Answer(rows=rows, report=report)

    def verify(self, *, read_window: int = DEFAULT_READ_WINDOW) -> Answer[Problem]:
        """verify (:func:`verify`)."""
        self.resolve_settings()
        from kafkatx.checks.verify import verify as _verify  # only this command's: not imported by the others

        rows = _verify(self.dirs, partitions_count=self.partitions_count, progress=self.progress,
                       read_window=read_window, jobs=self.jobs)
        suspects = [p for p in rows if p.check in UNREADABLE_CHECKS and p.severity == "error"]
        if suspects:
            # A torn tail the broker's own loading truncates (LogLoader recovery) is a finding, not an
            # unreadable partition: the same test every other command applies (it loads, or it does not).
            parts = {c.partition.name: c.partition for c in choose_replicas(self.dirs, notices=None)}
            loads: dict[str, bool] = {}
            for p in suspects:
                name = p.partition or _partition_of(p.file) or "?"
                if name not in loads:
                    loads[name] = _loads(parts.get(name))
                if not loads[name]:
                    self.report.incomplete.append(Unreadable(partition=name, file=p.file, position=p.position,
                                                             reason=p.message))
        return Answer(rows=rows, report=self.report)


def _partition_of_error(err: BaseException, default: str) -> str:
    """The partition folder a read error names (its file's folder), else ``default``'s partition 0 name."""
    path = getattr(err, "path", None) or getattr(err, "filename", None)
    folder = Path(str(path)).parent.name if path else ""
    return folder if parse_partition_dir_name(folder) is not None else default


def _wall_ms() -> int:
    import time

    return int(time.time() * 1000)


def _loads(part: Partition | None) -> bool:
    if part is None:
        return False
    try:
        replay_partition(part)
    except (KafkaTxError, OSError):
        return False
    return True


UNREADABLE_CHECKS = ("log-decode", "txn-state-decode")  # verify rows after which a partition was not read


def _partition_of(file: str | None) -> str | None:
    return Path(file).parent.name if file else None


