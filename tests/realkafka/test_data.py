"""The real-broker data is what its README says it is (a guard for every other test here)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("name", ["3.8.0/clean", "3.8.0/crashed", "4.0-tv2/tv2-clean"])
def test_log_dirs_hold_the_scenario_topics(real_kafka, name):
    d = real_kafka.extract(name)
    names = {p.name for p in d.iterdir()}
    assert {"orders-0", "orders-1", "orders-2", "payments-0", "payments-1", "__cluster_metadata-0"} <= names
    assert sum(n.startswith("__transaction_state-") for n in names) == 50
    recorded = real_kafka.answer_json(name, "list_offsets")["recorded_at_ms"]
    assert recorded > 10**12  # milliseconds


def test_crashed_dir_keeps_preallocated_sparse_indexes(real_kafka):
    """kill -9 leaves the active segment's index at segment.index.bytes (10 MiB), zero-filled."""
    d = real_kafka.extract("3.8.0/crashed")
    assert not (d / ".kafka_cleanshutdown").exists()
    assert (real_kafka.extract("3.8.0/clean") / ".kafka_cleanshutdown").exists()
    sizes = {p.stat().st_size for p in (d / "orders-0").glob("*.index")}
    assert 10 * 1024 * 1024 in sizes
