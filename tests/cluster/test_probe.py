"""A refused bootstrap list fails at once, before the client's own (timeout-bounded) connection."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app
from kafkatx.cluster import service
from kafkatx.errors import ClusterError


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_every_address_refused_raises_naming_them(monkeypatch):
    a, b = _closed_port(), _closed_port()
    with pytest.raises(ClusterError) as err:
        service.probe_bootstrap(f"127.0.0.1:{a},PLAINTEXT://localhost:{b}", timeout_s=4)
    assert f"127.0.0.1:{a}" in str(err.value) and f"localhost:{b}" in str(err.value)
    assert "refused" in str(err.value).lower()


def test_one_listening_address_is_enough():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        service.probe_bootstrap(f"127.0.0.1:{_closed_port()},127.0.0.1:{port}", timeout_s=4)  # no raise


def test_cli_refused_broker_fails_without_waiting_for_the_timeout(monkeypatch):
    """The live client (which would retry until --timeout) is never even created."""
    def no_client(*_a, **_k):
        raise AssertionError("LiveCluster created although every bootstrap address refused")

    monkeypatch.setattr(service, "LiveCluster", no_client)
    port = _closed_port()
    result = CliRunner().invoke(app, ["lag", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "60"])
    assert result.exit_code == 3
    lines = [line for line in result.stderr.splitlines() if line]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "Traceback" not in result.stderr
