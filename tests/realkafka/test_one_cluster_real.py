"""The real brokers' dirs of two clusters (3.8.0 crashed and 4.0 tv2-clean: both ``node.id=1``, different
``cluster.id``) are refused together (exit 2, one line naming both ids); before, ``list-txn`` read them as
two replicas and printed one cluster's transactions with the other's producer ids."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_real_brokers_of_two_clusters_are_refused(real_kafka) -> None:
    crashed, tv2 = real_kafka.extract("3.8.0/crashed"), real_kafka.extract("4.0-tv2/tv2-clean")
    for command in (["list-txn"], ["lag"], ["find-hanging", "--now", "1800000000000"]):
        got = subprocess.run([sys.executable, "-m", "kafkatx", *command, "--log-dir", str(crashed),
                              "--log-dir", str(tv2)], capture_output=True, text=True, cwd=REPO)
        assert got.returncode == 2, got.stderr
        assert got.stdout == ""
        (line,) = got.stderr.splitlines()
        assert "efNkIEwCSACi8yblbV43iA" in line and "SdiU_57GRe-3LQU5-Ae8qA" in line
