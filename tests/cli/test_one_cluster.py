"""Several ``--log-dir`` are read as one cluster's brokers, so they must be one.

Before, ``list-txn --log-dir crashed --log-dir tv2-clean`` (two clusters' dirs: different
``cluster.id`` in ``meta.properties``, both ``node.id=1``) took them for two replicas and printed a
mix. Kafka's broker refuses a log dir whose ``cluster.id`` is not its cluster's
(``MetaPropertiesEnsemble.verify``); kafkatx refuses such a mix (exit 2, one line naming both ids),
and two copies of one broker too (same ``node.id``, same ``directory.id``), unless
``--allow-mixed-clusters``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKATX = [sys.executable, "-m", "kafkatx"]
NOW = "1700007200000"


def _broker(tmp_path: Path, name: str, fixture: str, cluster: str, node: int, directory: str | None) -> Path:
    d = tmp_path / name
    shutil.copytree(ROOT / "fixtures" / fixture, d)
    lines = ["version=1", f"cluster.id={cluster}", f"node.id={node}"]
    if directory is not None:
        lines.append(f"directory.id={directory}")
    (d / "meta.properties").write_text("\n".join(lines) + "\n")
    return d


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAFKATX, *args], capture_output=True, text=True, cwd=ROOT)


COMMANDS = [["list-txn"], ["lag"], ["find-hanging", "--now", NOW], ["abort-hanging", "--all", "--now", NOW]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_dirs_of_two_clusters_are_refused(tmp_path: Path, command: list[str]) -> None:
    a = _broker(tmp_path, "a", "hanging", "clusterAAAAAAAAAAAAAAAA", 1, "dirAAAAAAAAAAAAAAAAAAA")
    b = _broker(tmp_path, "b", "clean", "clusterBBBBBBBBBBBBBBBB", 1, "dirBBBBBBBBBBBBBBBBBBB")
    got = _run(*command, "--log-dir", str(a), "--log-dir", str(b))
    assert got.returncode == 2, got.stderr
    assert got.stdout == ""
    (line,) = got.stderr.splitlines()
    assert "clusterAAAAAAAAAAAAAAAA" in line and "clusterBBBBBBBBBBBBBBBB" in line
    allowed = _run(*command, "--log-dir", str(a), "--log-dir", str(b), "--allow-mixed-clusters")
    assert allowed.returncode != 2 and "two clusters" not in allowed.stderr, allowed.stderr  # read together


@pytest.mark.parametrize("directory", ["dirAAAAAAAAAAAAAAAAAAA", None], ids=["directory.id", "no-directory.id"])
def test_two_copies_of_one_broker_are_refused(tmp_path: Path, directory: str | None) -> None:
    a = _broker(tmp_path, "a", "hanging", "clusterAAAAAAAAAAAAAAAA", 1, directory)
    b = tmp_path / "copy"
    shutil.copytree(a, b)
    got = _run("lag", "--log-dir", str(a), "--log-dir", str(b))
    assert got.returncode == 2, got.stderr
    (line,) = got.stderr.splitlines()
    assert "two copies of broker 1" in line
    assert _run("lag", "--log-dir", str(a), "--log-dir", str(b), "--allow-mixed-clusters").returncode == 0


def test_one_brokers_own_log_dirs_and_two_brokers_are_one_cluster(tmp_path: Path) -> None:
    """JBOD (one broker, several log dirs: each its own directory.id) and the two-brokers fixture pass."""
    a = _broker(tmp_path, "a", "hanging", "clusterAAAAAAAAAAAAAAAA", 1, "dirAAAAAAAAAAAAAAAAAAA")
    b = _broker(tmp_path, "b", "hanging", "clusterAAAAAAAAAAAAAAAA", 1, "dirBBBBBBBBBBBBBBBBBBB")
    assert _run("lag", "--log-dir", str(a), "--log-dir", str(b)).returncode == 0
    two = ROOT / "fixtures" / "two-brokers"
    got = _run("lag", "--log-dir", str(two / "broker-1"), "--log-dir", str(two / "broker-2"))
    assert got.returncode == 0, got.stderr

