"""``kafkatx exporter``: LSO lag and hanging transactions as Prometheus metrics.

Consumer-lag exporters (Burrow, kafka-lag-exporter) watch committed consumer offsets; a
hanging transaction shows there only once read_committed consumers have stalled. This
exporter watches the last stable offset itself, through the same service calls ``kafkatx lag``
and ``kafkatx find-hanging --bootstrap-server`` make (:func:`kafkatx.cluster.service.lag`,
:func:`kafkatx.cluster.service.find_hanging`), so a page and the command an on-call engineer
runs next agree.

Shape (prometheus_client's custom-collector pattern):

- a background loop refreshes every ``interval_s``: a fresh connection per refresh
  (:func:`kafkatx.cluster.service.connect`, every call bounded by ``timeout_s``), the lag rows,
  the hanging rows, then the connection is closed; a broker that went away and came back is
  simply reached again on the next refresh;
- :meth:`Exporter.collect` turns the latest refresh into metric families, so a Prometheus
  scrape never waits on the cluster and series of partitions that disappeared (or of a refresh
  that failed) are simply not produced again: nothing stale lingers;
- a failed refresh keeps the HTTP server answering with ``kafkatx_scrape_success 0`` and no
  per-partition series (stale numbers would resolve or fire alerts wrongly).

Label cardinality is bounded: per-partition series for the partitions of ``topics`` (all
topics when empty), ``kafkatx_hanging_transactions`` for a fixed set of kinds, and at most
``max_series`` ``kafkatx_hanging_transaction_info`` series (the longest-hanging first; the
rest counted in ``kafkatx_hanging_transaction_info_dropped``), each with a
``kafkatx_consumer_group_blocked`` series per consumer group it blocks.

The oldest open transaction's age counts from when the broker says it began
(:func:`kafkatx.cluster.open_starts.open_transaction_starts`): the coordinator's
transactionStartTimeMs (DescribeTransactions) for a transaction it knows, otherwise the timestamp
of the record at the transaction's first offset (Fetch of DescribeProducers'
currentTransactionStartOffset, or of the LSO on a broker without DescribeProducers), otherwise the
producer's last write (a lower bound). So an exporter started after a transaction has been open
for an hour reports an hour on its first scrape. The age is this machine's clock minus the
broker's timestamp, as ``kafka-transactions.sh describe``'s TransactionDurationMs is. Where no
broker answer gives a start it falls back to lower bounds: how long the exporter has seen the
LSO held at the same offset, or find-hanging's ``duration_ms``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from kafkatx.cluster import service
from kafkatx.cluster.backend import ClusterBackend, TopicPartitionKey
from kafkatx.cluster.open_starts import OpenStart, open_transaction_starts
from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS, HangingKind
from kafkatx.errors import KafkaTxError, UnsupportedApi, UsageError
from kafkatx.rows import HangingRow, LagRow

if TYPE_CHECKING:
    from kafkatx.cluster.source import OfflineSource

log = logging.getLogger("kafkatx.exporter")

DEFAULT_LISTEN = "127.0.0.1:9308"
DEFAULT_INTERVAL_S = 30.0
DEFAULT_MAX_SERIES = 100
MAX_DEFAULT_TIMEOUT_S = 10.0
# How long a stop waits for a refresh in flight; past it the refresh thread (a daemon) is left
# to die with the process, so SIGTERM never waits out a hung cluster call.
STOP_GRACE_S = 1.0

# The find-hanging kinds of cli.md. Each always has a kafkatx_hanging_transactions series (0 when
# none) so `> 0` alerts and dashboards see a steady set; a kind not listed here still gets one.
HANGING_KINDS = tuple(kind.value for kind in HangingKind)
# The KIP-664 read APIs the hanging check needs; kafkatx_api_supported says which the broker has.
HANGING_APIS = ("DescribeProducers", "ListTransactions", "DescribeTransactions")

PARTITION_LABELS = ("topic", "partition")
INFO_LABELS = ("kind", "topic", "partition", "producer_id", "transactional_id")
BLOCKED_LABELS = ("group", "topic", "partition", "producer_id", "transactional_id")

Connect = Callable[[], ClusterBackend]
Clock = Callable[[], float]


def default_timeout(interval_s: float) -> float:
    """Each cluster call's bound when ``--timeout`` is not given: the interval, at most 10 s."""
    return min(interval_s, MAX_DEFAULT_TIMEOUT_S)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT`` listens on every address) -> (host, port)."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen must be HOST:PORT, got {value!r}")
    host = host.strip("[]")
    return (host or "0.0.0.0"), int(port)


class Refresh(Struct, frozen=True, kw_only=True):
    """What one refresh learned. ``hanging`` is None when the broker cannot answer find-hanging
    (no DescribeProducers / ListTransactions / DescribeTransactions: KIP-664, Kafka 3.0)."""

    success: bool
    duration_s: float
    finished_at: float  # epoch seconds
    lag: tuple[LagRow, ...] = ()
    hanging: tuple[HangingRow, ...] | None = None
    starts: dict[TopicPartitionKey, OpenStart] = field(default_factory=dict)
    ages_s: dict[TopicPartitionKey, float] = field(default_factory=dict)
    supported: dict[str, bool] = field(default_factory=dict)
    error: str | None = None


class Exporter:
    """A prometheus_client collector over periodic refreshes of a cluster's lag and hanging rows.

    ``connect`` opens a backend (the CLI passes :func:`live_connector`'s answer; tests pass a
    fake); it is called once per refresh and the backend closed afterwards. ``offline`` (the CLI's
    ``--log-dir``: :func:`offline_gatherer`) answers each refresh from broker log dirs instead. ``notify`` hears one
    line when the cluster becomes unreachable and one when it answers again (not every failure).
    """

    def __init__(self, connect: Connect, *, topics: Sequence[str] = (), interval_s: float = DEFAULT_INTERVAL_S,
                 max_series: int = DEFAULT_MAX_SERIES, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 clock: Clock = time.time, notify: Callable[[str], None] | None = None,
                 offline: Gather | None = None) -> None:
        if interval_s <= 0:
            raise UsageError(f"--interval must be positive, got {interval_s:g}")
        if max_series < 0:
            raise UsageError(f"--max-series must not be negative, got {max_series}")
        if max_timeout_ms < 0:
            raise UsageError(f"--max-transaction-timeout must not be negative, got {max_timeout_ms}")
        self._connect = connect
        self._offline = offline
        self.topics = tuple(dict.fromkeys(topics))  # as given, duplicates dropped
        self.interval_s = interval_s
        self.max_series = max_series
        self.max_timeout_ms = max_timeout_ms
        self._clock = clock
        self._notify = notify or (lambda line: log.warning("%s", line))
        self._lock = threading.Lock()
        self._last: Refresh | None = None
        self._scrapes = 0
        self._errors = 0
        self._last_success: float | None = None
        # (topic, partition) -> (the LSO held below the high watermark, when first seen held there)
        self._held_since: dict[TopicPartitionKey, tuple[int, float]] = {}

    # ------------------------------------------------------------------ refreshing

    def refresh(self) -> Refresh:
        """One pass over the cluster; never raises (a failure becomes ``success=False``), so one
        surprising answer cannot stop the refresh loop and leave the last numbers standing."""
        started = time.monotonic()
        try:
            lag_rows, hanging, supported, starts = self._gather()
        except KafkaTxError as err:
            result = Refresh(success=False, duration_s=time.monotonic() - started, finished_at=self._clock(),
                             error=str(err))
        except Exception as err:  # noqa: BLE001 - a client's surprise must not end the refresh loop
            log.debug("refresh failed", exc_info=True)
            result = Refresh(success=False, duration_s=time.monotonic() - started, finished_at=self._clock(),
                             error=f"internal error: {type(err).__name__}: {err}")
        else:
            now = self._clock()
            ages = self._ages(lag_rows, hanging, starts, now)
            result = Refresh(success=True, duration_s=time.monotonic() - started, finished_at=now,
                             lag=tuple(lag_rows), hanging=None if hanging is None else tuple(hanging),
                             starts=starts, ages_s=ages, supported=supported)
        self._record(result)
        return result

    def _gather(self) -> tuple[list[LagRow], list[HangingRow] | None, dict[str, bool],
                               dict[TopicPartitionKey, OpenStart]]:
        if self._offline is not None:  # broker log dirs: the ages come from find-hanging's durations
            return (*self._offline(int(self._clock() * 1000), self.topics, self.max_timeout_ms), {})
        backend = self._connect()
        try:
            topics: Iterable[str | None] = self.topics or (None,)
            lag_rows = [row for t in topics for row in service.lag(backend, topic=t)]
            supported = {api: bool(backend.supports(api)) for api in HANGING_APIS}
            try:
                starts = open_transaction_starts(backend, lag_rows)
            except UnsupportedApi:  # e.g. no Fetch through this client: the lower bounds below remain
                starts = {}
            hanging: list[HangingRow] | None = None
            if supported["DescribeProducers"]:
                now_ms = int(self._clock() * 1000)
                try:
                    hanging = [row for t in topics
                               for row in service.find_hanging(backend, max_timeout_ms=self.max_timeout_ms,
                                                               now_ms=now_ms, topic=t)]
                except UnsupportedApi:  # e.g. DescribeProducers without ListTransactions
                    hanging = None
            return lag_rows, hanging, supported, starts
        finally:
            try:
                backend.close()
            except Exception:  # noqa: BLE001 - closing a broken connection must not hide the answer
                pass

    def _ages(self, lag_rows: Sequence[LagRow], hanging: Sequence[HangingRow] | None,
              starts: dict[TopicPartitionKey, OpenStart], now: float) -> dict[TopicPartitionKey, float]:
        """Per partition: now minus the broker's start of its oldest open transaction (``starts``), at
        least how long this exporter has seen the LSO held at the same offset and find-hanging's
        duration; 0 when the LSO is not held."""
        held: dict[TopicPartitionKey, tuple[int, float]] = {}
        ages: dict[TopicPartitionKey, float] = {}
        for row in lag_rows:
            tp = (row.topic, row.partition)
            if row.lso is None or row.high_watermark is None:
                continue
            if row.lso < row.high_watermark:
                prev = self._held_since.get(tp)
                since = prev[1] if prev is not None and prev[0] == row.lso else now
                held[tp] = (row.lso, since)
                ages[tp] = max(now - since, 0.0)
                start = starts.get(tp)
                if start is not None:
                    ages[tp] = max(ages[tp], now - start.start_ms / 1000)
            else:
                ages[tp] = 0.0
        for h in hanging or ():
            tp = (h.topic, h.partition)
            if tp in ages and h.duration_ms is not None:
                ages[tp] = max(ages[tp], h.duration_ms / 1000)
        self._held_since = held  # partitions no longer listed, or no longer held, are forgotten
        return ages

    def _record(self, result: Refresh) -> None:
        with self._lock:
            was_ok = self._last is None or self._last.success
            self._last = result
            self._scrapes += 1
            if result.success:
                self._last_success = result.finished_at
            else:
                self._errors += 1
        if not result.success and was_ok:
            self._notify(f"cluster refresh failed (serving kafkatx_scrape_success 0, retrying every "
                         f"{self.interval_s:g}s): {result.error}")
        elif result.success and not was_ok:
            self._notify("cluster answers again (kafkatx_scrape_success 1)")

    def run(self, stop: threading.Event) -> None:
        """Refresh every ``interval_s`` until ``stop`` is set (a refresh in flight finishes first)."""
        while not stop.is_set():
            started = time.monotonic()
            self.refresh()
            stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    @property
    def last(self) -> Refresh | None:
        with self._lock:
            return self._last

    # ------------------------------------------------------------------ prometheus_client Collector

    def describe(self) -> list[Metric]:
        # Registering must not run a collect (it would report "no refresh yet" families only).
        return []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            last, scrapes, errors, last_success = self._last, self._scrapes, self._errors, self._last_success
        scrapes_total = CounterMetricFamily("kafkatx_scrapes", "Cluster refreshes made since the exporter started.")
        scrapes_total.add_metric([], scrapes)
        yield scrapes_total
        errors_total = CounterMetricFamily("kafkatx_scrape_errors", "Cluster refreshes that failed.")
        errors_total.add_metric([], errors)
        yield errors_total
        if last is None:
            return  # no refresh finished yet: no verdict to report
        yield _gauge("kafkatx_scrape_success", "1 when the last refresh of the cluster succeeded, else 0.",
                     1 if last.success else 0)
        yield _gauge("kafkatx_scrape_duration_seconds", "How long the last refresh of the cluster took.",
                     last.duration_s)
        if last_success is not None:
            yield _gauge("kafkatx_last_successful_scrape_timestamp_seconds",
                         "When the last successful refresh finished (epoch seconds).", last_success)
        if not last.success:
            return
        yield from self._partition_families(last)
        yield from self._hanging_families(last)

    def _partition_families(self, last: Refresh) -> Iterator[Metric]:
        lso = GaugeMetricFamily("kafkatx_partition_lso", "Last stable offset (ListOffsets latest, read_committed).",
                                labels=PARTITION_LABELS)
        hw = GaugeMetricFamily("kafkatx_partition_high_watermark",
                               "High watermark (ListOffsets latest, read_uncommitted).", labels=PARTITION_LABELS)
        start = GaugeMetricFamily("kafkatx_partition_log_start_offset", "Log start offset (ListOffsets earliest).",
                                  labels=PARTITION_LABELS)
        lag = GaugeMetricFamily("kafkatx_partition_lso_lag",
                                "High watermark minus LSO: offsets read_committed consumers cannot read yet.",
                                labels=PARTITION_LABELS)
        opened = GaugeMetricFamily("kafkatx_partition_open_transactions",
                                   "Open transactions on the partition (needs DescribeProducers).",
                                   labels=PARTITION_LABELS)
        age = GaugeMetricFamily("kafkatx_oldest_open_transaction_age_seconds",
                                "Age of the oldest open transaction holding the LSO (0 when none is): since "
                                "the coordinator's transactionStartTimeMs, else the timestamp of its first "
                                "record, else its producer's last write (a lower bound).",
                                labels=PARTITION_LABELS)
        # a partition whose offsets the cluster did not answer is not "no lag": count it.
        unreadable = _gauge("kafkatx_partitions_unreadable",
                            "Partitions the last refresh could not read (no LSO or high watermark answered); "
                            "their lag series are missing, not zero.",
                            sum(1 for row in last.lag if row.lso is None or row.high_watermark is None))
        yield unreadable
        for row in last.lag:
            labels = [row.topic, str(row.partition)]
            for family, value in ((lso, row.lso), (hw, row.high_watermark), (start, row.log_start_offset),
                                  (lag, row.lag), (opened, row.open_transactions)):
                if value is not None:
                    family.add_metric(labels, value)
            tp_age = last.ages_s.get((row.topic, row.partition))
            if tp_age is not None:
                age.add_metric(labels, tp_age)
        blocked = GaugeMetricFamily(
            "kafkatx_partition_upload_blocked_bytes",
            "Tiered partitions (KIP-405), offline (--log-dir): bytes of local segments from the LSO on that an "
            "open transaction keeps from remote storage (RemoteLogManager copies only below the LSO) and from "
            "local retention; the disk grows until the transaction ends. 0 when nothing holds the LSO.",
            labels=PARTITION_LABELS)
        for row in last.lag:
            if row.remote_storage is not None:  # a tiered partition: its series, 0 when no transaction holds it
                blocked.add_metric([row.topic, str(row.partition)], row.upload_blocked_bytes or 0)
        yield from (lso, hw, start, lag, opened, age, blocked)

    def _hanging_families(self, last: Refresh) -> Iterator[Metric]:
        supported = GaugeMetricFamily("kafkatx_api_supported",
                                      "1 when the broker has the KIP-664 API find-hanging needs, else 0.",
                                      labels=("api",))
        for api in HANGING_APIS:
            if api in last.supported:
                supported.add_metric([api], 1 if last.supported[api] else 0)
        yield supported
        if last.hanging is None:
            return  # the broker cannot tell: no series rather than a reassuring 0
        counts = dict.fromkeys(HANGING_KINDS, 0)
        for row in last.hanging:
            counts[row.kind] = counts.get(row.kind, 0) + 1
        by_kind = GaugeMetricFamily("kafkatx_hanging_transactions",
                                    "Hanging transactions (find-hanging rows) by kind.", labels=("kind",))
        for kind, n in counts.items():
            by_kind.add_metric([kind], n)
        yield by_kind
        info = GaugeMetricFamily("kafkatx_hanging_transaction_info",
                                 "One series per hanging transaction (the longest-hanging first, at most "
                                 "--max-series); value 1.", labels=INFO_LABELS)
        ranked = sorted(last.hanging, key=_hanging_rank)
        for row in ranked[: self.max_series]:
            info.add_metric([row.kind, row.topic, str(row.partition), str(row.producer_id),
                             row.transactional_id or ""], 1)
        yield info
        blocked = GaugeMetricFamily("kafkatx_consumer_group_blocked",
                                    "One series per consumer group whose offsets a hanging transaction on "
                                    "__consumer_offsets holds (its OffsetFetch answers UNSTABLE_OFFSET_COMMIT "
                                    "until the transaction ends), for the rows kafkatx_hanging_transaction_info "
                                    "keeps; value 1.", labels=BLOCKED_LABELS)
        for row in ranked[: self.max_series]:
            for group in row.blocked_groups or ():
                blocked.add_metric([group, row.topic, str(row.partition), str(row.producer_id),
                                    row.transactional_id or ""], 1)
        yield blocked
        yield _gauge("kafkatx_hanging_transaction_info_dropped",
                     "Hanging transactions left out of kafkatx_hanging_transaction_info by --max-series.",
                     max(len(ranked) - self.max_series, 0))


def exposition(exporter: Exporter) -> str:
    """The Prometheus text exposition of the last refresh, as ``/metrics`` serves it."""
    return generate_latest(registry_for(exporter)).decode()


def sample_rows(exporter: Exporter) -> list[dict[str, object]]:
    """The last refresh's samples as rows ``name, labels, value`` (for ``--once --format json``)."""
    return [{"name": s.name, "labels": dict(s.labels), "value": s.value}
            for family in exporter.collect() for s in family.samples]


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation)
    family.add_metric([], value)
    return family


def _hanging_rank(row: HangingRow) -> tuple[float, str, int, int]:
    """Longest-hanging first; a ghost (no duration: its data is gone) counts as the oldest."""
    duration = float("inf") if row.duration_ms is None else float(row.duration_ms)
    return (-duration, row.topic, row.partition, row.producer_id)


# ---------------------------------------------------------------------- offline: broker log dirs

# (now in ms, topics, max timeout in ms) -> (lag rows, hanging rows or None, API support by name)
Gather = Callable[[int, Sequence[str], int], tuple[list[LagRow], list[HangingRow] | None, dict[str, bool]]]


def offline_gatherer(source: OfflineSource) -> Gather:
    """Each refresh from broker log dirs (``kafkatx.cluster.source.OfflineSource``): ``lag`` and ``find-hanging``
    as the offline commands answer them, both from one :class:`~kafkatx.session.offline.OfflineSession` per
    refresh (settings resolved, high watermarks and the coordinator read once), so tiered partitions'
    ``kafkatx_partition_upload_blocked_bytes`` is known (KIP-405). An answer that could not read every partition
    is a failed refresh (no series)."""

    def gather(now_ms: int, topics: Sequence[str], max_timeout_ms: int,
               ) -> tuple[list[LagRow], list[HangingRow] | None, dict[str, bool]]:
        from kafkatx.session.offline import OfflineSession

        session = OfflineSession(source.dirs(), now=now_ms, max_timeout_ms=max_timeout_ms)
        session.resolve_settings(max_timeout=True)
        asked: Sequence[str | None] = list(topics) or [None]
        lag_rows = session.lag(topics=asked).rows
        hanging = [r for t in asked for r in session.hanging(now=now_ms, topic=t).rows]
        incomplete = session.report.incomplete
        if incomplete:
            names = ", ".join(u.partition or "?" for u in incomplete[:5])
            raise KafkaTxError(f"could not read every partition ({names})")
        return lag_rows, hanging, {}

    return gather


# ---------------------------------------------------------------------- the live process

def live_connector(*, bootstrap_server: str | None, command_config: Path | None = None,
                   profile: str | None = None, timeout_s: float) -> Connect:
    """A ``connect`` for :class:`Exporter` over a real cluster.

    The settings are checked now (a bad ``--command-config`` or unknown ``--profile`` is a usage
    error at startup, not a failing scrape); the cluster itself is only contacted per refresh.
    """
    from kafkatx.cluster.config import resolve

    if timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout_s:g}")
    resolve(bootstrap_server=bootstrap_server, command_config=command_config, profile=profile)

    def connect() -> ClusterBackend:
        return service.connect(bootstrap_server=bootstrap_server, command_config=command_config,
                               profile=profile, timeout_s=timeout_s)

    return connect


def registry_for(exporter: Exporter) -> CollectorRegistry:
    """A registry holding only the exporter's families (no process/GC collectors: stable output)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)  # a Collector by protocol
    return registry


def serve(exporter: Exporter, listen: str, stop: threading.Event,
          on_listening: Callable[[str, int], None] | None = None) -> None:
    """Serve ``/metrics`` on ``listen`` and refresh in the background until ``stop`` is set.

    Returns once the HTTP server is shut down. A refresh still waiting on the cluster when
    ``stop`` is set is waited for at most :data:`STOP_GRACE_S`: its thread is a daemon.
    """
    from prometheus_client.exposition import start_http_server

    host, port = parse_listen(listen)
    try:
        server, server_thread = start_http_server(port, addr=host, registry=registry_for(exporter))
    except OSError as err:
        raise KafkaTxError(f"--listen {listen}: cannot listen on {host}:{port}: {err.strerror or err}") from err
    app = server.get_app()
    if app is not None:
        server.set_app(metrics_only(app))  # wsgiref asks the server for its app per request
    bound = server.server_address[1]
    refresher = threading.Thread(target=exporter.run, args=(stop,), name="kafkatx-exporter-refresh", daemon=True)
    refresher.start()
    if on_listening is not None:
        on_listening(host, int(bound))
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        server_thread.join(timeout=5)
        refresher.join(timeout=STOP_GRACE_S)


METRICS_PATH = "/metrics"


def metrics_only(app: Callable[..., Any]) -> Callable[..., Any]:
    """``app`` (prometheus_client's, which answers every path with the metrics) on ``/metrics`` only; any
    other path is 404, as Prometheus exporters (node_exporter, the JMX exporter) answer it."""
    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO", "") not in (METRICS_PATH, METRICS_PATH + "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [f"404 Not Found: the metrics are at {METRICS_PATH}\n".encode()]
        return app(environ, start_response)

    return wsgi


def describe_listen(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"


__all__ = ["DEFAULT_INTERVAL_S", "DEFAULT_LISTEN", "DEFAULT_MAX_SERIES", "HANGING_APIS", "HANGING_KINDS",
           "Exporter", "Gather", "Refresh", "default_timeout", "describe_listen", "exposition", "live_connector",
           "offline_gatherer",
           "parse_listen", "registry_for", "sample_rows", "serve"]
