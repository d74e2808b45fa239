"""``verify``, ``lag`` and ``find-hanging`` with ``jobs``: the real broker's log dirs (clean, kill -9,
startup cases) give the same rows, notices and unreadable partitions with the partitions read by several
processes as by one."""

from __future__ import annotations

import os

import pytest

from kafkatx.session import offline

DIRS = ["3.8.0/clean", "3.8.0/crashed", "4.0-tv2/tv2-clean", *(f"3.8.0/startup/{n}" for n in (
    "powercut", "retention", "idle", "compacted", "stale-clean", "prepare", "crc-clean", "logstart"))]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: the fan-out is one process here")
@pytest.mark.parametrize("name", DIRS)
def test_verify_jobs_same_answer(real_kafka, name):  # type: ignore[no-untyped-def]
    d = real_kafka.extract(name)
    one = offline.verify([d], jobs=1)
    many = offline.verify([d], jobs=4)
    assert (many.rows, many.notices, many.incomplete) == (one.rows, one.notices, one.incomplete)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: the fan-out is one process here")
@pytest.mark.parametrize("name", DIRS)
def test_lag_and_find_hanging_jobs_same_answer(real_kafka, name):  # type: ignore[no-untyped-def]
    d = [real_kafka.extract(name)]
    now = 1_900_000_000_000
    for ask in (lambda jobs: offline.lag(d, now=now, jobs=jobs),
                lambda jobs: offline.find_hanging(d, now=now, jobs=jobs)):
        one, many = ask(1), ask(3)
        assert (many.rows, many.notices, many.skipped, many.incomplete) == \
            (one.rows, one.notices, one.skipped, one.incomplete)
