"""Where a command's answer comes from: broker files (:class:`OfflineSource`) or a live cluster
(:class:`OnlineSource`), both answering the :class:`Source` questions.

A command builds its source from the flags (``kafkatx.cli.options.SourceOptions.resolve``) and asks
one question; it never looks at which kind it holds for a question both can answer. Offline each
question is ``kafkatx.session.offline.<question>(log_dirs, ...)`` (the state the broker builds when it
starts on those files); online ``kafkatx.cluster.service.<question>(backend, ...)`` over one
connection opened for the question and closed after it. Every answer has ``rows``, ``notices``,
``skipped`` and ``incomplete`` (the partitions it could not read: never a false all-clear).

Both libraries are imported inside the methods: confluent-kafka and the replay cost start-up time,
and ``kafkatx --help`` pays for neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from msgspec import Struct, field

from kafkatx.errors import UsageError

__all__ = ["DEFAULT_TIMEOUT", "OfflineSource", "OnlineAnswer", "OnlineSource", "Source", "resolve_source"]

DEFAULT_TIMEOUT = 30.0
NO_ONLINE_FORM = "this command reads broker files: give --log-dir (it has no online form)"


@contextmanager
def _window(read_window: int | None) -> Iterator[None]:
    """``--read-window``: the bytes of a segment a read on the pread path holds at most while the
    question is answered (``kafkatx.storage.segment.read_window``; None: its default)."""
    from kafkatx.storage.segment import read_window as segment_read_window

    with segment_read_window(read_window):
        yield


class OnlineAnswer(Struct, frozen=True):
    """An online answer: the rows the cluster gave (it has no notices; what it cannot answer is an error)."""

    rows: list[Any]
    notices: Sequence[str] = ()
    skipped: Sequence[str] = ()
    incomplete: Sequence[Any] = field(default_factory=tuple)


class Source(Protocol):
    """The questions the commands ask. ``progress``: a bar the offline replay advances (online: unused)."""

    def list_transactions(self, *, states: Iterable[str] | None = None, pattern: str | None = None,
                          partitions_count: int | None = None, progress: Any = None,
                          read_window: int | None = None, values: bool = False,
                          producer_ids: Sequence[int] | None = None, duration_ms: int | None = None,
                          now: int | None = None) -> Any: ...
    # values: offline, each row the tuple of TransactionRow's values (list-txn's 1,000,000 rows, no
    # object per id: txn.offline.list_transactions); online rows are what the service gives either way

    def describe_transaction(self, transactional_id: str, *, partitions_count: int | None = None,
                             progress: Any = None, now: int | None = None, max_timeout_ms: int | None = None,
                             read_window: int | None = None) -> Any: ...

    def describe_producers(self, *, topic: str, partition: int, now: int | None = None,
                           expiration_ms: int | None = None, include_expired: bool = False,
                           progress: Any = None, read_window: int | None = None) -> Any: ...

    def find_hanging(self, *, now: int, max_timeout_ms: int | None = None, topic: str | None = None,
                     partitions_count: int | None = None, progress: Any = None,
                     read_window: int | None = None, jobs: int | None = None) -> Any: ...

    def lag(self, *, topic: str | None = None, now: int | None = None, progress: Any = None,
            read_window: int | None = None, jobs: int | None = None) -> Any: ...

    def verify(self, *, partitions_count: int | None = None, progress: Any = None,
               read_window: int | None = None, jobs: int | None = None) -> Any: ...

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int | None = None, partitions_count: int | None = None,
                 progress: Any = None, read_window: int | None = None) -> Any: ...

    def offline_only(self, message: str = NO_ONLINE_FORM) -> OfflineSource:
        """This source if it reads broker files; else a :class:`UsageError` saying ``message``."""
        ...

    def for_broker(self, broker_id: int | None) -> Source:
        """``--broker-id``: only that broker's log dirs (offline; online it is refused)."""
        ...

    def broker_partitions(self, broker_id: int | None) -> set[tuple[str, int]] | None:
        """``find-hanging --broker-id``: the partitions with a replica on that broker (None: all)."""
        ...


class OfflineSource(Struct, frozen=True, kw_only=True):
    """One or more broker log dirs, and the broker configs they were written under (``--broker-config``)."""

    log_dirs: tuple[Path, ...]
    broker_configs: tuple[Path, ...] = ()

    def open(self) -> Any:  # -> list[LogDir]; kafkatx.storage is imported lazily to keep --help fast
        from kafkatx.storage.broker_config import read_broker_config
        from kafkatx.storage.log_dir import open_log_dirs

        return open_log_dirs(self.log_dirs, [read_broker_config(p) for p in self.broker_configs])

    def dirs(self) -> Any:
        """What the library takes: the paths, or with ``--broker-config`` the dirs opened here, each
        carrying its broker's settings."""
        return self.open() if self.broker_configs else self.log_dirs

    @staticmethod
    def _library() -> ModuleType:
        from kafkatx.session import offline

        return offline

    def list_transactions(self, *, states: Iterable[str] | None = None, pattern: str | None = None,
                          partitions_count: int | None = None, progress: Any = None,
                          read_window: int | None = None, values: bool = False,
                          producer_ids: Sequence[int] | None = None, duration_ms: int | None = None,
                          now: int | None = None) -> Any:
        with _window(read_window):
            return self._library().list_transactions(self.dirs(), states=states, pattern=pattern,
                                                     partitions_count=partitions_count, progress=progress,
                                                     values=values, producer_ids=producer_ids,
                                                     duration_ms=duration_ms, now=now)

    def describe_transaction(self, transactional_id: str, *, partitions_count: int | None = None,
                             progress: Any = None, now: int | None = None, max_timeout_ms: int | None = None,
                             read_window: int | None = None) -> Any:
        from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS

        with _window(read_window):
            return self._library().describe_transaction(
                self.dirs(), transactional_id, partitions_count=partitions_count, progress=progress, now=now,
                max_timeout_ms=DEFAULT_MAX_TIMEOUT_MS if max_timeout_ms is None else max_timeout_ms)

    def describe_producers(self, *, topic: str, partition: int, now: int | None = None,
                           expiration_ms: int | None = None, include_expired: bool = False,
                           progress: Any = None, read_window: int | None = None) -> Any:
        with _window(read_window):
            return self._library().describe_producers(self.dirs(), topic=topic, partition=partition, now=now,
                                                      expiration_ms=expiration_ms, include_expired=include_expired,
                                                      progress=progress)

    def find_hanging(self, *, now: int, max_timeout_ms: int | None = None, topic: str | None = None,
                     partitions_count: int | None = None, progress: Any = None,
                     read_window: int | None = None, jobs: int | None = None) -> Any:
        return self._library().find_hanging(self.dirs(), now=now, max_timeout_ms=max_timeout_ms, topic=topic,
                                            partitions_count=partitions_count, progress=progress,
                                            read_window=read_window, jobs=jobs)

    def lag(self, *, topic: str | None = None, now: int | None = None, progress: Any = None,
            read_window: int | None = None, jobs: int | None = None) -> Any:
        return self._library().lag(self.dirs(), topic=topic, progress=progress, now=now, read_window=read_window,
                                   jobs=jobs)

    def verify(self, *, partitions_count: int | None = None, progress: Any = None,
               read_window: int | None = None, jobs: int | None = None) -> Any:
        library = self._library()
        return library.verify(self.dirs(), partitions_count=partitions_count, progress=progress, jobs=jobs,
                              **({} if read_window is None else {"read_window": read_window}))

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int | None = None, partitions_count: int | None = None,
                 progress: Any = None, read_window: int | None = None) -> Any:
        with _window(read_window):
            return self._library().timeline(self.dirs(), now=now, topic=topic, partition=partition,
                                            max_timeout_ms=max_timeout_ms, partitions_count=partitions_count,
                                            progress=progress)

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
                          partitions_count: int | None = None, progress: Any = None,
                          read_window: int | None = None, values: bool = False,
                          producer_ids: Sequence[int] | None = None, duration_ms: int | None = None,
                          now: int | None = None) -> OnlineAnswer:
        from kafkatx.session.offline import parse_states

        wanted = parse_states(states)
        names = sorted(s.kafka_name for s in wanted) if wanted else None  # the broker wants Kafka's spelling
        notes: list[str] = []
        with self.connect() as (service, backend):
            rows = service.list_transactions(backend, states=names, pattern=pattern, producer_ids=producer_ids,
                                             duration_ms=duration_ms, now_ms=now, notes=notes)
        return OnlineAnswer(rows, notices=notes)

    def describe_transaction(self, transactional_id: str, *, partitions_count: int | None = None,
                             progress: Any = None, now: int | None = None, max_timeout_ms: int | None = None,
                             read_window: int | None = None) -> OnlineAnswer:
        with self.connect() as (service, backend):
            found = service.describe_transaction(backend, transactional_id)
        return OnlineAnswer([] if found is None else [found])

    def describe_producers(self, *, topic: str, partition: int, now: int | None = None,
                           expiration_ms: int | None = None, include_expired: bool = False,
                           progress: Any = None, read_window: int | None = None) -> OnlineAnswer:
        with self.connect() as (service, backend):
            return OnlineAnswer(service.describe_producers(backend, topic=topic, partition=partition))

    def find_hanging(self, *, now: int, max_timeout_ms: int | None = None, topic: str | None = None,
                     partitions_count: int | None = None, progress: Any = None,
                     read_window: int | None = None, jobs: int | None = None) -> OnlineAnswer:
        from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS

        with self.connect() as (service, backend):
            return OnlineAnswer(service.find_hanging(
                backend, max_timeout_ms=DEFAULT_MAX_TIMEOUT_MS if max_timeout_ms is None else max_timeout_ms,
                now_ms=now, topic=topic))

    def lag(self, *, topic: str | None = None, now: int | None = None, progress: Any = None,
            read_window: int | None = None, jobs: int | None = None) -> OnlineAnswer:
        with self.connect() as (service, backend):
            return OnlineAnswer(service.lag(backend, topic=topic))

    def verify(self, *, partitions_count: int | None = None, progress: Any = None,
               read_window: int | None = None, jobs: int | None = None) -> Any:
        raise UsageError(NO_ONLINE_FORM)

    def timeline(self, *, now: int, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int | None = None, partitions_count: int | None = None,
                 progress: Any = None, read_window: int | None = None) -> Any:
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
