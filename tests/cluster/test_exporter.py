"""``kafkatx exporter``'s library against FakeCluster (tests/cluster/fakes.py).

The hanging kinds and the open-transaction ages need DescribeProducers, ListTransactions and
DescribeTransactions (KIP-664), which Tansu lacks (docs/online.md, T5), so they are tested here
against the fake; test_exporter_online.py runs the real process against Tansu for what Tansu can
answer (ListOffsets lag, unreachable broker, reconnect, signals).

Expected values are worked out by hand from ``test_service_fake.scenario()`` (its comments give
each producer's offsets), and every number is read back through prometheus_client's own text
parser from the exposition the HTTP server would send.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kafkatx.cli import exporter as cli_exporter
from kafkatx.cluster import exporter as lib
from kafkatx.cluster.backend import ClusterBackend
from kafkatx.errors import ClusterError, KafkaTxError, UsageError
from tests.cluster.fakes import FakeCluster
from tests.cluster.test_service_fake import NOW, RECENT, scenario

NOW_S = NOW / 1000


class Clock:
    def __init__(self, t: float = NOW_S) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(exp: lib.Exporter) -> Samples:
    text = generate_latest(lib.registry_for(exp)).decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def tp(name: str, topic: str, partition: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, (("partition", str(partition)), ("topic", topic)))


def plain(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, ())


def named(samples: Samples, name: str) -> Samples:
    return {k: v for k, v in samples.items() if k[0] == name}


def exporter_for(cluster: ClusterBackend, clock: Clock | None = None, **kw) -> lib.Exporter:
    return lib.Exporter(lambda: cluster, clock=clock or Clock(), notify=lambda line: None, **kw)


def refreshed(exp: lib.Exporter) -> lib.Exporter:
    exp.refresh()
    return exp


# ----------------------------------------------------------------------------- partitions

def test_partition_offsets_and_lag_are_the_lag_rows():
    """orders-0: 10 offsets, open transactions from 5 (pid 100), 8, 9: LSO 5, lag 5.
    orders-1: 7 offsets, pid 200 open from 0: LSO 0, lag 7. __consumer_offsets-0: pid 700 open from 0."""
    s = scrape(refreshed(exporter_for(scenario())))
    assert s[tp("kafkatx_partition_lso", "orders", 0)] == 5
    assert s[tp("kafkatx_partition_high_watermark", "orders", 0)] == 10
    assert s[tp("kafkatx_partition_lso_lag", "orders", 0)] == 5
    assert s[tp("kafkatx_partition_open_transactions", "orders", 0)] == 3
    assert s[tp("kafkatx_partition_lso", "orders", 1)] == 0
    assert s[tp("kafkatx_partition_lso_lag", "orders", 1)] == 7
    assert s[tp("kafkatx_partition_log_start_offset", "orders", 1)] == 0
    assert s[tp("kafkatx_partition_lso_lag", "__consumer_offsets", 0)] == 2
    assert len(named(s, "kafkatx_partition_lso_lag")) == 3
    assert s[plain("kafkatx_scrape_success")] == 1
    assert s[plain("kafkatx_scrape_duration_seconds")] >= 0
    assert s[plain("kafkatx_scrapes_total")] == 1 and s[plain("kafkatx_scrape_errors_total")] == 0


def test_partitions_unreadable_counts_partitions_without_offsets(monkeypatch):
    # a partition the cluster gave no LSO for is counted, never silently a lag of 0.
    from msgspec.structs import replace

    from kafkatx.cluster import service

    real = service.lag

    def lag(backend, topic=None):
        rows = real(backend, topic=topic)
        return [replace(r, lso=None, lag=None) if (r.topic, r.partition) == ("orders", 1) else r for r in rows]

    monkeypatch.setattr(service, "lag", lag)
    s = scrape(refreshed(exporter_for(scenario())))
    assert s[plain("kafkatx_partitions_unreadable")] == 1
    assert tp("kafkatx_partition_lso_lag", "orders", 1) not in s
    monkeypatch.setattr(service, "lag", real)
    assert scrape(refreshed(exporter_for(scenario())))[plain("kafkatx_partitions_unreadable")] == 0


def test_topic_filter_limits_the_series():
    s = scrape(refreshed(exporter_for(scenario(), topics=["orders", "orders"])))
    assert sorted(k[1] for k in named(s, "kafkatx_partition_lso_lag")) == [
        (("partition", "0"), ("topic", "orders")), (("partition", "1"), ("topic", "orders"))]
    # pid 700's hanging transaction is on __consumer_offsets: not counted with --topic orders
    assert s[("kafkatx_hanging_transactions", (("kind", "orphaned"),))] == 2


def test_series_of_a_partition_that_disappears_are_removed():
    cluster = scenario()
    exp = exporter_for(cluster)
    exp.refresh()
    assert tp("kafkatx_partition_lso_lag", "__consumer_offsets", 0) in scrape(exp)
    del cluster.partitions[("__consumer_offsets", 0)]
    exp.refresh()
    s = scrape(exp)
    assert all(k[1] != (("partition", "0"), ("topic", "__consumer_offsets")) for k in s)
    assert tp("kafkatx_partition_lso_lag", "orders", 0) in s


# ----------------------------------------------------------------------------- hanging

def test_hanging_transactions_by_kind():
    """scenario(): pids 100, 200, 700 orphaned, 300 timed-out, 400 incomplete-markers; no ghost."""
    s = scrape(refreshed(exporter_for(scenario())))
    assert named(s, "kafkatx_hanging_transactions") == {
        ("kafkatx_hanging_transactions", (("kind", "orphaned"),)): 3,
        ("kafkatx_hanging_transactions", (("kind", "timed-out"),)): 1,
        ("kafkatx_hanging_transactions", (("kind", "incomplete-markers"),)): 1,
        ("kafkatx_hanging_transactions", (("kind", "ghost"),)): 0,
        ("kafkatx_hanging_transactions", (("kind", "prepared-2pc"),)): 0,  # counted apart
    }
    info = named(s, "kafkatx_hanging_transaction_info")
    assert len(info) == 5 and set(info.values()) == {1}
    labels = {dict(k[1])["producer_id"]: dict(k[1]) for k in info}
    assert labels["300"] == {"kind": "timed-out", "topic": "orders", "partition": "0", "producer_id": "300",
                             "transactional_id": "app-b"}
    assert labels["100"]["transactional_id"] == ""  # no id maps to producer 100
    assert s[plain("kafkatx_hanging_transaction_info_dropped")] == 0
    assert s[("kafkatx_api_supported", (("api", "DescribeProducers"),))] == 1


def test_info_series_are_capped_longest_hanging_first():
    """--max-series 2: pid 300 (timed-out, 120 s) is the youngest; the four others hang 1000 s.
    Ties go by topic, partition, producer id: __consumer_offsets-0/700, then orders-0/100."""
    s = scrape(refreshed(exporter_for(scenario(), max_series=2)))
    kept = sorted(dict(k[1])["producer_id"] for k in named(s, "kafkatx_hanging_transaction_info"))
    assert kept == ["100", "700"]
    assert s[plain("kafkatx_hanging_transaction_info_dropped")] == 3
    none = scrape(refreshed(exporter_for(scenario(), max_series=0)))
    assert not named(none, "kafkatx_hanging_transaction_info")
    assert none[plain("kafkatx_hanging_transaction_info_dropped")] == 5


def test_broker_without_describe_producers_has_no_hanging_series():
    """A Tansu-like broker: lag still exported, the hanging check reported as unavailable rather
    than as a reassuring 0."""
    cluster = scenario()
    cluster.missing = {"DescribeProducers", "ListTransactions", "DescribeTransactions"}
    s = scrape(refreshed(exporter_for(cluster)))
    assert s[plain("kafkatx_scrape_success")] == 1
    assert s[tp("kafkatx_partition_lso_lag", "orders", 0)] == 5
    assert tp("kafkatx_partition_open_transactions", "orders", 0) not in s
    assert not named(s, "kafkatx_hanging_transactions")
    assert s[("kafkatx_api_supported", (("api", "DescribeProducers"),))] == 0


# ----------------------------------------------------------------------------- ages

def test_open_transaction_age_grows_while_the_lso_is_held_and_resets_when_it_moves():
    """A transaction younger than the max timeout is no hanging row; its age counts from its first
    record's timestamp (Fetch at DescribeProducers' currentTransactionStartOffset: written at RECENT,
    1 s before NOW), not from when the exporter first saw it."""
    cluster = FakeCluster()
    cluster.add_topic("fresh", 1)
    cluster.append(("fresh", 0), 4, producer_id=1, timestamp=RECENT)  # committed data 0..3
    cluster.append(("fresh", 0), 2, producer_id=9, transactional=True, timestamp=RECENT)  # open at 4
    clock = Clock()
    exp = exporter_for(cluster, clock)
    age = tp("kafkatx_oldest_open_transaction_age_seconds", "fresh", 0)
    exp.refresh()
    assert scrape(exp)[age] == 1
    clock.t += 30
    cluster.append(("fresh", 0), 3, producer_id=1, timestamp=RECENT)  # more data behind the open one
    exp.refresh()
    s = scrape(exp)
    assert s[age] == 31 and s[tp("kafkatx_partition_lso_lag", "fresh", 0)] == 5
    clock.t += 15
    exp.refresh()
    assert scrape(exp)[age] == 46
    # the coordinator's ABORT marker ends it: LSO reaches the high watermark, age 0
    cluster.write_txn_markers(topic="fresh", partition=0, producer_id=9, producer_epoch=0, coordinator_epoch=0)
    clock.t += 5
    exp.refresh()
    s = scrape(exp)
    assert s[tp("kafkatx_partition_lso_lag", "fresh", 0)] == 0 and s[age] == 0


N_MIN = 40  # the transaction has been open this long when the (new) exporter starts
OPENED = NOW - N_MIN * 60_000


def _opened_n_minutes_ago(**missing: bool) -> FakeCluster:
    """Three partitions, each held by a transaction opened N_MIN minutes before NOW whose producer
    wrote again 10 s before NOW (so DescribeProducers' lastTimestamp says "10 s"):

    - known-0: coordinator-known (app-n, Ongoing, started at OPENED: DescribeTransactions; its first
      batch 5 s later, after AddPartitionsToTxn);
    - orphan-0: no transactional id maps to its producer: its first record's timestamp (Fetch);
    - ghost-0: orphaned and its first batch deleted (log start past it): only lastTimestamp is left.
    """
    c = FakeCluster(missing_apis=[api for api, gone in missing.items() if gone])
    for topic in ("known", "orphan", "ghost"):
        c.add_topic(topic, 1)
        c.append((topic, 0), 3, producer_id=1, timestamp=OPENED - 60_000)  # committed data 0..2
    c.append(("known", 0), 2, producer_id=81, transactional=True, timestamp=OPENED + 5_000)  # open at 3
    c.append(("known", 0), 2, producer_id=81, transactional=True, timestamp=NOW - 10_000)
    c.set_txn("app-n", producer_id=81, state="Ongoing", partitions=[("known", 0)], start=OPENED,
              timeout_ms=3_600_000)
    c.append(("orphan", 0), 2, producer_id=82, transactional=True, timestamp=OPENED)  # open at 3
    c.append(("orphan", 0), 2, producer_id=82, transactional=True, timestamp=NOW - 10_000)
    c.append(("ghost", 0), 2, producer_id=83, transactional=True, timestamp=OPENED)  # open at 3
    c.append(("ghost", 0), 2, producer_id=83, transactional=True, timestamp=NOW - 10_000)
    c.delete_records(("ghost", 0), 5)  # the first batch (3, 4) is gone
    return c


def test_an_exporter_started_n_minutes_into_a_transaction_reports_n_minutes_on_its_first_scrape():
    """The age comes from the broker's records, so a fresh exporter (a restart, a deploy) reports the
    transaction's real age on its first scrape, not 0: 40 minutes from the coordinator's start
    time and from the first record's timestamp; the ghost, whose first batch is gone, at least
    the 10 s since its producer's last write. Five minutes later a second fresh exporter agrees
    with the first one, which kept running."""
    cluster = _opened_n_minutes_ago()
    first = exporter_for(cluster, Clock())
    s = scrape(refreshed(first))
    ages = {topic: s[tp("kafkatx_oldest_open_transaction_age_seconds", topic, 0)]
            for topic in ("known", "orphan", "ghost")}
    assert ages == {"known": N_MIN * 60, "orphan": N_MIN * 60, "ghost": 10}
    starts = first.last.starts if first.last is not None else {}
    assert {tp_[0]: start.source for tp_, start in starts.items()} == {
        "known": "DescribeTransactions", "orphan": "Fetch", "ghost": "DescribeProducers"}
    later = Clock(NOW_S + 300)
    first._clock = later  # the same process, five minutes on
    restarted = exporter_for(cluster, later)
    for exp in (first, restarted):
        s = scrape(refreshed(exp))
        assert s[tp("kafkatx_oldest_open_transaction_age_seconds", "known", 0)] == N_MIN * 60 + 300
        assert s[tp("kafkatx_oldest_open_transaction_age_seconds", "orphan", 0)] == N_MIN * 60 + 300


def test_without_describe_producers_the_age_is_the_record_at_the_lso():
    """A broker without DescribeProducers (Tansu, docs/online.md T5): on Kafka the LSO is the first
    offset of the oldest open transaction (UnifiedLog.firstUnstableOffset), so the record there
    (Fetch) dates it: 40 minutes on the first scrape for known-0 and orphan-0 alike."""
    cluster = _opened_n_minutes_ago(DescribeProducers=True, ListTransactions=True, DescribeTransactions=True)
    s = scrape(refreshed(exporter_for(cluster)))
    assert s[tp("kafkatx_oldest_open_transaction_age_seconds", "known", 0)] == N_MIN * 60 - 5
    assert s[tp("kafkatx_oldest_open_transaction_age_seconds", "orphan", 0)] == N_MIN * 60
    # ghost-0: the LSO is clamped to the log start (5), whose record was written 10 s ago
    assert s[tp("kafkatx_oldest_open_transaction_age_seconds", "ghost", 0)] == 10


def test_age_of_a_hanging_partition_is_at_least_its_hanging_duration():
    """orders-0 holds pid 100, whose last write was 1000 s ago (find-hanging's duration_ms)."""
    s = scrape(refreshed(exporter_for(scenario())))
    assert s[tp("kafkatx_oldest_open_transaction_age_seconds", "orders", 0)] == 1000


# ----------------------------------------------------------------------------- failures

def test_unreachable_cluster_serves_scrape_success_0_then_recovers():
    cluster = scenario()
    state = {"down": False}
    heard: list[str] = []

    def connect() -> ClusterBackend:
        if state["down"]:
            raise ClusterError("broker fake:9092: unreachable: Connection refused")
        return cluster

    exp = lib.Exporter(connect, clock=Clock(), notify=heard.append)
    exp.refresh()
    state["down"] = True
    for _ in range(3):
        exp.refresh()
    s = scrape(exp)
    assert s[plain("kafkatx_scrape_success")] == 0
    assert s[plain("kafkatx_scrapes_total")] == 4 and s[plain("kafkatx_scrape_errors_total")] == 3
    assert s[plain("kafkatx_last_successful_scrape_timestamp_seconds")] == NOW_S
    assert not named(s, "kafkatx_partition_lso_lag"), "no stale per-partition numbers"
    assert len(heard) == 1 and "Connection refused" in heard[0]  # once, not per failure
    state["down"] = False
    exp.refresh()
    s = scrape(exp)
    assert s[plain("kafkatx_scrape_success")] == 1 and s[tp("kafkatx_partition_lso_lag", "orders", 0)] == 5
    assert len(heard) == 2 and "answers again" in heard[1]


def test_an_unexpected_error_is_a_failed_refresh_not_a_dead_loop():
    """A client raising something that is no KafkaTxError must not end run(): the next refresh
    still happens and the failure shows as kafkatx_scrape_success 0."""
    calls: list[int] = []
    stop = threading.Event()

    def connect() -> ClusterBackend:
        calls.append(1)
        if len(calls) >= 3:
            stop.set()
        raise RuntimeError("kafka-python surprise")

    heard: list[str] = []
    exp = lib.Exporter(connect, interval_s=0.01, clock=Clock(), notify=heard.append)
    exp.run(stop)
    assert len(calls) == 3
    s = scrape(exp)
    assert s[plain("kafkatx_scrape_success")] == 0 and s[plain("kafkatx_scrape_errors_total")] == 3
    assert heard == ["cluster refresh failed (serving kafkatx_scrape_success 0, retrying every 0.01s): "
                     "internal error: RuntimeError: kafka-python surprise"]


def test_backend_is_closed_after_every_refresh():
    cluster = scenario()
    exp = exporter_for(cluster)
    exp.refresh()
    assert cluster.closed


def test_no_refresh_yet_reports_no_verdict():
    s = scrape(exporter_for(scenario()))
    assert plain("kafkatx_scrape_success") not in s and s[plain("kafkatx_scrapes_total")] == 0


# ----------------------------------------------------------------------------- options

@pytest.mark.parametrize("kw, message", [
    ({"interval_s": 0}, "--interval"), ({"max_series": -1}, "--max-series"),
    ({"max_timeout_ms": -1}, "--max-transaction-timeout")])
def test_bad_settings_are_usage_errors(kw, message):
    with pytest.raises(UsageError, match=message):
        lib.Exporter(lambda: scenario(), **kw)


@pytest.mark.parametrize("value, expected", [
    ("127.0.0.1:9308", ("127.0.0.1", 9308)), (":9308", ("0.0.0.0", 9308)), ("[::1]:0", ("::1", 0))])
def test_parse_listen(value, expected):
    assert lib.parse_listen(value) == expected


@pytest.mark.parametrize("value", ["9308", "host:", "host:port", "host:70000"])
def test_parse_listen_refuses(value):
    with pytest.raises(UsageError, match="--listen"):
        lib.parse_listen(value)


def test_cli_defaults_are_the_librarys():
    from kafkatx.cli.options import resolve_max_timeout

    assert (cli_exporter.DEFAULT_LISTEN, cli_exporter.DEFAULT_INTERVAL_S, cli_exporter.DEFAULT_MAX_SERIES,
            resolve_max_timeout(None, None)) == (lib.DEFAULT_LISTEN, lib.DEFAULT_INTERVAL_S,
                                                 lib.DEFAULT_MAX_SERIES, 900_000)
    assert resolve_max_timeout(15, None) == 900_000  # kafka-transactions.sh's minutes
    assert lib.default_timeout(30) == 10 and lib.default_timeout(0.5) == 0.5


# ----------------------------------------------------------------------------- HTTP

@contextmanager
def serving(exp: lib.Exporter) -> Iterator[str]:
    """``serve(exp)`` in a thread on a kernel-chosen loopback port, after its first refresh;
    yields ``host:port`` and stops it (asserting the thread ended) on exit."""
    stop, ready = threading.Event(), threading.Event()
    bound: list[int] = []

    def listening(host: str, port: int) -> None:
        bound.append(port)
        ready.set()

    thread = threading.Thread(target=lib.serve, args=(exp, "127.0.0.1:0", stop, listening), daemon=True)
    thread.start()
    try:
        assert ready.wait(10), "the exporter did not start listening"
        deadline = time.monotonic() + 10
        while exp.last is None and time.monotonic() < deadline:
            stop.wait(0.05)
        assert exp.last is not None, "no refresh within 10 s"
        yield f"127.0.0.1:{bound[0]}"
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive(), "serve() did not return after stop"


def test_serve_answers_http_and_stops():
    """serve() on a kernel-chosen loopback port; /metrics over real HTTP; stop returns promptly."""
    exp = lib.Exporter(lambda: scenario(), interval_s=0.2, clock=Clock(), notify=lambda line: None)
    with serving(exp) as address:
        url = f"http://{address}/metrics"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert 'kafkatx_partition_lso_lag{partition="0",topic="orders"} 5.0' in body
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def test_serve_answers_404_off_metrics():
    """Only /metrics has the metrics: any other path is 404, as Prometheus exporters answer it."""
    import urllib.error

    exp = lib.Exporter(lambda: scenario(), interval_s=0.2, clock=Clock(), notify=lambda line: None)
    with serving(exp) as address:
        for path in ("/nope", "/", "/metricsx"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"http://{address}{path}", timeout=5)
            assert err.value.code == 404, path
        assert urllib.request.urlopen(f"http://{address}/metrics", timeout=5).status == 200


def test_serve_refuses_a_port_in_use():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exp = exporter_for(scenario())
        with pytest.raises(KafkaTxError, match=f"cannot listen on 127.0.0.1:{port}"):
            lib.serve(exp, f"127.0.0.1:{port}", threading.Event())


# ----------------------------------------------------------------------------- --once

def test_once_prints_the_samples_and_exits_1_on_hanging_transactions(monkeypatch):
    """``kafkatx exporter --once --format json``: one refresh (the fake scenario at a fixed clock
    stands in for the cluster), the samples as rows, exit 1 because find-hanging found some."""
    import json

    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    made: list[lib.Exporter] = []
    real_init = lib.Exporter.__init__

    def fixed_clock_init(self, connect, **kw):
        real_init(self, lambda: scenario(), **{**kw, "clock": Clock()})
        made.append(self)

    monkeypatch.setattr(lib, "live_connector", lambda **kw: (lambda: scenario()))
    monkeypatch.setattr(lib.Exporter, "__init__", fixed_clock_init)
    result = CliRunner().invoke(app, ["exporter", "--bootstrap-server", "fake:9092", "--once", "--format", "json"])
    assert result.exit_code == 1, result.stderr
    rows = json.loads(result.stdout)
    by_key = {(r["name"], tuple(sorted(r["labels"].items()))): r["value"] for r in rows}
    assert by_key[tp("kafkatx_partition_lso_lag", "orders", 0)] == 5
    assert by_key[("kafkatx_hanging_transactions", (("kind", "timed-out"),))] == 1
    assert by_key[plain("kafkatx_scrape_success")] == 1
    assert len(made) == 1


def test_once_with_an_unreachable_cluster_exits_3_with_one_line():
    import socket

    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    result = CliRunner().invoke(app, ["exporter", "--bootstrap-server", closed, "--once"])
    assert result.exit_code == 3
    assert "kafkatx_scrape_success 0.0" in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and closed in lines[0] and "Traceback" not in result.stderr


def test_exporter_needs_a_cluster():
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    result = CliRunner().invoke(app, ["exporter"])
    assert result.exit_code == 2 and "--bootstrap-server" in result.stderr
    bad = CliRunner().invoke(app, ["exporter", "--bootstrap-server", "h:1", "--listen", "nowhere"])
    assert bad.exit_code == 2 and "--listen" in bad.stderr


def test_bad_settings_fail_at_startup_not_per_scrape(tmp_path):
    """An unknown --profile or a missing --command-config is a usage error before anything serves."""
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    profile = CliRunner().invoke(app, ["exporter", "--profile", "nope", "--listen", "127.0.0.1:0"], env=env)
    assert profile.exit_code == 2 and "--profile nope" in profile.stderr
    missing = tmp_path / "missing.properties"
    config = CliRunner().invoke(app, ["exporter", "--bootstrap-server", "h:1", "--command-config", str(missing),
                                      "--listen", "127.0.0.1:0"])
    assert config.exit_code == 2 and "missing.properties" in config.stderr


def test_blocked_consumer_groups_have_a_series_each():
    """tests/cluster/test_blocked_groups_online.py's cluster: eos-app (producer 700) holds two groups'
    pending offset commits on one __consumer_offsets partition; the group coordinator (the fake of the
    backend Protocol) answers UNSTABLE_OFFSET_COMMIT for them."""
    from tests.cluster.test_blocked_groups_online import NOW as BLOCKED_NOW
    from tests.cluster.test_blocked_groups_online import _cluster

    cluster, n, groups = _cluster()
    s = scrape(refreshed(exporter_for(cluster, clock=Clock(BLOCKED_NOW / 1000))))
    got = {dict(k[1])["group"]: dict(k[1]) for k in named(s, "kafkatx_consumer_group_blocked")}
    assert set(got) == set(groups[:2])
    assert got[groups[0]] == {"group": groups[0], "topic": "__consumer_offsets", "partition": str(n),
                              "producer_id": "700", "transactional_id": "eos-app"}
    assert not named(scrape(refreshed(exporter_for(scenario()))), "kafkatx_consumer_group_blocked")
