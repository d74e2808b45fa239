"""Where a command's answer comes from: broker files (:class:`OfflineSource`) or a live cluster
(:class:`OnlineSource`), both answering the :class:`Source` questions.

A command builds its source from the flags (``kafkatx.cli.options.SourceOptions.resolve``) and asks
one question; it never looks at which kind it holds for a question both can answer. Offline each
question is ``kafkatx.session.offline.<question>(log_dirs, ...)`` (the state the broker builds when it
starts on those files); online ``kafkatx.cluster.service.<question>(backend, ...)`` over one
connection opened for the question and closed after it. Every answer is an :class:`~kafkatx.rows.Answer`:
its ``rows`` and its :class:`~kafkatx.rows.Report` (``notices``, ``skipped`` and ``incomplete``, the partitions
it could not read: never a false all-clear).

Both libraries are imported inside the methods: confluent-kafka and the replay cost start-up time,
and ``kafkatx --help`` pays for neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct

from kafkatx.errors import ClusterError, UnsupportedApi, UsageError
from kafkatx.rows import (
    Answer,
    HangingRow,
    LagAnswer,
    LagRow,
    ProducerRow,
    Progress,
    Report,
    TransactionDescription,
    TransactionRow,
)

if TYPE_CHECKING:  # the libraries are imported inside the methods (module docstring)
    from kafkatx.checks.indexes import Problem
    from kafkatx.session.offline import ValuesAnswer
    from kafkatx.session.timeline import PartitionTimeline
    from kafkatx.storage.log_dir import LogDir

__all__ = ["DEFAULT_TIMEOUT", "OfflineSource", "OnlineSource", "Source", "on_broker", "resolve_source"]

DEFAULT_TIMEOUT = 30.0
NO_ONLINE_FORM = "this command reads broker files: give --log-dir (it has no online form)"


@contextmanager
def _window(read_window: int | None) -> Iterator[None]:
    """``--read-window``: the bytes of a segment a read on the pread path holds at most while the
    question is answered (``kafkatx.storage.segment.read_window``; None: its default)."""
    from kafkatx.storage.segment import read_window as segment_read_window

    with segment_read_window(read_window):
        yield


class Source(Protocol):
    """The questions the commands ask, each answered as an :class:`~kafkatx.rows.Answer` (rows and report).
    ``progress``: a bar the offline replay advances (online: unused)."""

    def list_transactions(self, *, states: Iterable[str] | None = None, pattern: str | None = None,
                          partitions_count: int | None = None, progress: Progress | None = None,
                          read_window: int | None = None, values: bool = False,
                          producer_ids: Sequence[int] | None = None, duration_ms: int | None = None,
                          now: int | None = None) -> Answer[TransactionRow] | ValuesAnswer: ...
    # values: offline, each row the tuple of TransactionRow's values (list-txn's 1,000,000 rows, no
    # object per id: session.offline.list_transactions); online rows are what the service gives either way

    def describe_transaction(self, transactional_id: str, *, partitions_count: int | None = None,
                             progress: Progress | None = None, now: int | None = None,
                             max_timeout_ms: int | None = None,
                             read_window: int | None = None) -> Answer[TransactionDescription]: ...

    def describe_producers(self, *, topic: str, partition: int, now: int | None = None,
                           expiration_ms: int | None = None, include_expired: bool = False,
                           progress: Progress | None = None, read_window: int | None = None) -> Answer[ProducerRow]: ...

    def hanging_transactions(self, *, now: int, max_timeout_ms: int | None = None, topic: str | None = None,
                             partition: int | None = None, broker_id: int | None = None,
                             partitions_count: int | None = None, progress: Progress | None = None,
                             read_window: int | None = None, jobs: int | None = None) -> Answer[HangingRow]:
        """find-hanging: the hanging transactions of ``topic`` (``partition`` of it), on the partitions with
        a replica on ``broker_id`` (None: every partition)."""
        ...

    def lag(self, *, topic: str | None = None, topics: Sequence[str | None] | None = None, now: int | None = None,
            progress: Progress | None = None, read_window: int | None = None, jobs: int | None = None,
            holders: bool = False, everything: bool = True) -> LagAnswer:
        """lag of each of ``topics`` (default: ``topic``; None: every topic); ``holders``: with the coordinator's transaction
        holding each held partition back (of every one when ``everything``, else of a ghost's only)."""
        ...

    def verify(self, *, partitions_count: int | None = None, progress: Progress | None = None,
               read_window: int | None = None, jobs: int | None = None) -> Answer[Problem]: ...

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int | None = None, partitions_count: int | None = None,
                 progress: Progress | None = None, read_window: int | None = None) -> Answer[PartitionTimeline]: ...

    def offline_only(self, message: str = NO_ONLINE_FORM) -> OfflineSource:
        """This source if it reads broker files; else a :class:`UsageError` saying ``message``."""
        ...

    def for_broker(self, broker_id: int | None) -> Source:
        """``--broker-id``: only that broker's log dirs (offline; online it is refused)."""
        ...

    def broker_partitions(self, broker_id: int | None) -> set[tuple[str, int]] | None:
        """``find-hanging --broker-id``: the partitions with a replica on that broker (None: all)."""
        ...


def on_broker(answer: Answer[HangingRow], searched: set[tuple[str, int]] | None) -> Answer[HangingRow]:
    """``find-hanging --broker-id``: the rows of the partitions with a replica on that broker, and of what the
    answer could not read, the coordinator's partitions and those partitions (cli.md "Incomplete answers")."""
    if searched is None:
        return answer

    def wanted(name: str) -> bool:
        topic, _, number = name.rpartition("-")
        return name.startswith("__transaction_state-") or not number.isdigit() or (topic, int(number)) in searched

    report = Report(notices=answer.notices, skipped=answer.skipped,
                    incomplete=[u for u in answer.incomplete if wanted(u.partition)])
    return Answer(rows=[r for r in answer.rows if (r.topic, r.partition) in searched], report=report)


class OfflineSource(Struct, frozen=True, kw_only=True):
    """One or more broker log dirs, and the broker configs they were written under (``--broker-config``).
    Each question is one :class:`~kafkatx.session.offline.OfflineSession`'s (``session.offline``)."""

    log_dirs: tuple[Path, ...]
    broker_configs: tuple[Path, ...] = ()

    def open(self) -> list[LogDir]:  # kafkatx.storage is imported lazily to keep --help fast
        from kafkatx.storage.broker_config import read_broker_config
        from kafkatx.storage.log_dir import open_log_dirs

        return open_log_dirs(self.log_dirs, [read_broker_config(p) for p in self.broker_configs])

    def dirs(self) -> Sequence[Path | LogDir]:
        """What the library takes: the paths, or with ``--broker-config`` the dirs opened here, each
        carrying its broker's settings."""
        return self.open() if self.broker_configs else self.log_dirs

    @staticmethod
    def _library() -> ModuleType:
        from kafkatx.session import offline

        return offline

    def list_transactions(self, *, states: Iterable[str] | None = None, pattern: str | None = None,
                          partitions_count: int | None = None, progress: Progress | None = None,
                          read_window: int | None = None, values: bool = False,
                          producer_ids: Sequence[int] | None = None, duration_ms: int | None = None,
                          now: int | None = None) -> Answer[TransactionRow] | ValuesAnswer:
        with _window(read_window):
            answer: Answer[TransactionRow] | ValuesAnswer = self._library().list_transactions(
                self.dirs(), states=states, pattern=pattern, partitions_count=partitions_count, progress=progress,
                values=values, producer_ids=producer_ids, duration_ms=duration_ms, now=now)
            return answer

    def describe_transaction(self, transactional_id: str, *, partitions_count: int | None = None,
                             progress: Progress | None = None, now: int | None = None,
                             max_timeout_ms: int | None = None,
                             read_window: int | None = None) -> Answer[TransactionDescription]:
        from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS

        with _window(read_window):
            answer: Answer[TransactionDescription] = self._library().describe_transaction(
                self.dirs(), transactional_id, partitions_count=partitions_count, progress=progress, now=now,
                max_timeout_ms=DEFAULT_MAX_TIMEOUT_MS if max_timeout_ms is None else max_timeout_ms)
            return answer

    def describe_producers(self, *, topic: str, partition: int, now: int | None = None,
                           expiration_ms: int | None = None, include_expired: bool = False,
                           progress: Progress | None = None, read_window: int | None = None) -> Answer[ProducerRow]:
        with _window(read_window):
            answer: Answer[ProducerRow] = self._library().describe_producers(
                self.dirs(), topic=topic, partition=partition, now=now, expiration_ms=expiration_ms,
                include_expired=include_expired, progress=progress)
            return answer

    def hanging_transactions(self, *, now: int, max_timeout_ms: int | None = None, topic: str | None = None,
                             partition: int | None = None, broker_id: int | None = None,
                             partitions_count: int | None = None, progress: Progress | None = None,
                             read_window: int | None = None, jobs: int | None = None) -> Answer[HangingRow]:
        searched = self.broker_partitions(broker_id)
        answer: Answer[HangingRow] = self._library().find_hanging(
            self.dirs(), now=now, max_timeout_ms=max_timeout_ms, topic=topic, partition=partition,
            partitions_count=partitions_count, progress=progress, read_window=read_window, jobs=jobs)
        return on_broker(answer, searched)

    def lag(self, *, topic: str | None = None, topics: Sequence[str | None] | None = None, now: int | None = None,
            progress: Progress | None = None, read_window: int | None = None, jobs: int | None = None,
            holders: bool = False, everything: bool = True) -> LagAnswer:
        answer: LagAnswer = self._library().lag(self.dirs(), topic=topic, topics=topics, progress=progress, now=now,
                                                read_window=read_window, jobs=jobs, holders=holders,
                                                everything=everything)
        return answer

    def verify(self, *, partitions_count: int | None = None, progress: Progress | None = None,
               read_window: int | None = None, jobs: int | None = None) -> Answer[Problem]:
        library = self._library()
        answer: Answer[Problem] = library.verify(self.dirs(), partitions_count=partitions_count, progress=progress,
                                                 jobs=jobs, **({} if read_window is None else {"read_window": read_window}))
        return answer

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int | None = None, partitions_count: int | None = None,
                 progress: Progress | None = None, read_window: int | None = None) -> Answer[PartitionTimeline]:
        with _window(read_window):
            answer: Answer[PartitionTimeline] = self._library().timeline(
                self.dirs(), now=now, topic=topic, partition=partition, max_timeout_ms=max_timeout_ms,
                partitions_count=partitions_count, progress=progress)
            return answer

    def offline_only(self, message: str = NO_ONLINE_FORM) -> OfflineSource:
        return self

    def for_broker(self, broker_id: int | None) -> OfflineSource:
        if broker_id is None:
            return self
        from kafkatx.storage.log_dir import log_dirs_of_broker

        return OfflineSource(log_dirs=log_dirs_of_broker(self.log_dirs, broker_id), broker_configs=self.broker_configs)

    def broker_partitions(self, broker_id: int | None) -> set[tuple[str, int]] | None:
        # Kafka's FindHangingTransactionsCommand searches the partitions with a replica on the broker, while
        # the coordinator is asked about every transaction: offline every --log-dir still feeds the coordinator.
        if broker_id is None:
            return None
        from kafkatx.storage.log_dir import LogDir

        return {(p.topic, p.partition) for d in self.for_broker(broker_id).log_dirs for p in LogDir(d).partitions()}


class OnlineSource(Struct, frozen=True, kw_only=True):
    """A live cluster. ``kafkatx.cluster.config.resolve`` turns it into client settings."""

    bootstrap_server: str | None
    command_config: Path | None = None
    profile: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    @contextmanager
    def connect(self) -> Iterator[tuple[ModuleType, Any]]:
        """``(kafkatx.cluster.service, backend)``; the backend is closed on exit."""
        from kafkatx.cluster import service

        backend = service.connect(bootstrap_server=self.bootstrap_server, command_config=self.command_config,
                                  profile=self.profile, timeout_s=self.timeout)
        try:
            yield service, backend
        finally:
            close = getattr(backend, "close", None)
            if close is not None:
                close()

    def list_transactions(self, *, states: Iterable[str] | None = None, pattern: str | None = None,
                          partitions_count: int | None = None, progress: Progress | None = None,
                          read_window: int | None = None, values: bool = False,
                          producer_ids: Sequence[int] | None = None, duration_ms: int | None = None,
                          now: int | None = None) -> Answer[TransactionRow]:
        from kafkatx.session.offline import parse_states

        wanted = parse_states(states)
        names = sorted(s.kafka_name for s in wanted) if wanted else None  # the broker wants Kafka's spelling
        report = Report()
        with self.connect() as (service, backend):
            rows = service.list_transactions(backend, states=names, pattern=pattern, producer_ids=producer_ids,
                                             duration_ms=duration_ms, now_ms=now, report=report)
        return Answer(rows=rows, report=report)

    def describe_transaction(self, transactional_id: str, *, partitions_count: int | None = None,
                             progress: Progress | None = None, now: int | None = None,
                             max_timeout_ms: int | None = None,
                             read_window: int | None = None) -> Answer[TransactionDescription]:
        report = Report()
        with self.connect() as (service, backend):
            found = service.describe_transaction(backend, transactional_id, report)
        return Answer(rows=[] if found is None else [found], report=report)

    def describe_producers(self, *, topic: str, partition: int, now: int | None = None,
                           expiration_ms: int | None = None, include_expired: bool = False,
                           progress: Progress | None = None, read_window: int | None = None) -> Answer[ProducerRow]:
        # one partition: a leader that does not answer is the error itself (one line naming it), no partial answer
        with self.connect() as (service, backend):
            return Answer(rows=service.describe_producers(backend, topic=topic, partition=partition))

    def hanging_transactions(self, *, now: int, max_timeout_ms: int | None = None, topic: str | None = None,
                             partition: int | None = None, broker_id: int | None = None,
                             partitions_count: int | None = None, progress: Progress | None = None,
                             read_window: int | None = None, jobs: int | None = None) -> Answer[HangingRow]:
        from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS

        self.broker_partitions(broker_id)  # refused online
        report = Report()
        with self.connect() as (service, backend):
            rows: list[HangingRow] = service.find_hanging(
                backend, max_timeout_ms=DEFAULT_MAX_TIMEOUT_MS if max_timeout_ms is None else max_timeout_ms,
                now_ms=now, topic=topic, report=report)
        return Answer(rows=[r for r in rows if partition is None or r.partition == partition], report=report)

    def lag(self, *, topic: str | None = None, topics: Sequence[str | None] | None = None, now: int | None = None,
            progress: Progress | None = None, read_window: int | None = None, jobs: int | None = None,
            holders: bool = False, everything: bool = True) -> LagAnswer:
        from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
        from kafkatx.session.partition_rows import held_producers, no_coordinator_ghosts

        report = Report()
        rows: list[LagRow] = []
        for asked in topics if topics is not None else [topic]:  # each topic on its own, one after another
            with self.connect() as (service, backend):
                rows.extend(service.lag(backend, topic=asked, report=report))
        found: dict[int, TransactionRow] = {}
        held = held_producers(rows, everything=everything) if holders else set()
        if held:
            try:
                answer = self.list_transactions(states=["Ongoing", "PrepareCommit", "PrepareAbort"])
            except UnsupportedApi:  # no answer to it: a hint only, lag's answer stands without it (as offline)
                answer = Answer(rows=[])
            except ClusterError as err:  # the coordinators did not answer: the ghost verdict rests on them
                report.not_read(TXN_STATE_TOPIC, str(err))
                answer = Answer(rows=[])
            report.take(Report(incomplete=answer.incomplete))  # an id whose coordinator did not answer
            found = {r.producer_id: r for r in answer.rows if r.producer_id in held}
            rows = no_coordinator_ghosts(rows, found)
        return LagAnswer(rows=rows, report=report, holders=found)

    def verify(self, *, partitions_count: int | None = None, progress: Progress | None = None,
               read_window: int | None = None, jobs: int | None = None) -> Answer[Problem]:
        raise UsageError(NO_ONLINE_FORM)

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int | None = None, partitions_count: int | None = None,
                 progress: Progress | None = None, read_window: int | None = None) -> Answer[PartitionTimeline]:
        raise UsageError(NO_ONLINE_FORM)

    def offline_only(self, message: str = NO_ONLINE_FORM) -> OfflineSource:
        raise UsageError(message)

    def for_broker(self, broker_id: int | None) -> OnlineSource:
        if broker_id is None:
            return self
        raise UsageError("--broker-id selects a broker's --log-dir offline; online kafkatx asks each "
                         "partition's leader (leave --broker-id out)")

    def broker_partitions(self, broker_id: int | None) -> set[tuple[str, int]] | None:
        self.for_broker(broker_id)
        return None


def resolve_source(log_dirs: Sequence[Path] | None, bootstrap_server: str | None,
                   command_config: Path | None = None, profile: str | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT, broker_configs: Sequence[Path] | None = None,
                   ) -> OfflineSource | OnlineSource:
    """The one source the flags name. Neither or both: :class:`UsageError` (exit 2).

    ``--command-config`` and ``--profile`` count as online flags (a profile may
    carry the bootstrap server). ``--broker-config`` is offline; alone, its ``log.dirs`` are the
    log dirs.
    """
    online = bootstrap_server is not None or profile is not None or command_config is not None
    if (log_dirs or broker_configs) and online:
        raise UsageError("give either --log-dir/--broker-config (offline) or --bootstrap-server/--profile "
                         "(online), not both")
    if log_dirs or broker_configs:
        return OfflineSource(log_dirs=tuple(log_dirs or ()), broker_configs=tuple(broker_configs or ()))
    if online:
        return OnlineSource(bootstrap_server=bootstrap_server, command_config=command_config,
                            profile=profile, timeout=timeout)
    raise UsageError("no source: give --log-dir DIR (offline) or --bootstrap-server HOST:PORT (online)")
