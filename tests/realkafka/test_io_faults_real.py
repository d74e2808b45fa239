"""A file of a real broker's log dir that cannot be read is never data (storage/fdio.py's one read contract).

Kafka 3.8.0 crashed dir: without ``.kafka_cleanshutdown`` the loader recovers the unflushed segments
(``LogLoader.recoverLog`` -> ``LogSegment.recover``); a segment it cannot open was read as zero bytes,
"a partial batch; recovery truncates the segment there", so ``lag`` showed payments-0 empty (exit 0),
``describe-producers`` said "no producers" and ``find-hanging`` dropped tx-hang-F's payments-0 row. A
``__transaction_state`` partition that cannot be read made every producer it coordinates "orphaned ...
nothing will ever end it". The files are made unreadable with the fault hook (as root, chmod would not).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tests import io_faults

FULL = os.environ.get(io_faults.FULL_ENV, "") not in ("", "0")
PAYMENTS_LOG = "payments-0/00000000000000000000.log"
COORDINATOR_LOG = "__transaction_state-24/00000000000000000000.log"  # tx-hang-F's coordinator partition


def _unreadable(path: Path):
    """A fault hook: every open of ``path`` is refused (EACCES), as for a file mode 000 to a non-root reader."""
    where = str(path)

    def hook(op: str, got: str) -> None:
        if op == "open" and got == where:
            raise PermissionError(errno.EACCES, "Permission denied", got)
    return hook


@pytest.fixture(scope="module")
def crashed(real_kafka) -> Path:
    return real_kafka.extract("3.8.0/crashed")


def _now() -> str:
    return str(io_faults.real_now("3.8.0/crashed"))


@pytest.mark.parametrize("args", [
    ["lag"],
    ["describe-producers", "--topic", "payments", "--partition", "0"],
    ["find-hanging", "--now", "NOW"],
    ["timeline", "--now", "NOW"],
], ids=lambda a: a[0])
def test_unreadable_segment_of_a_crashed_broker_is_exit_3_naming_it(crashed: Path, args: list[str]) -> None:
    log = crashed / PAYMENTS_LOG
    with io_faults.hooked(_unreadable(log)):  # type: ignore[arg-type]
        out = io_faults.run_cli([args[0], "--log-dir", str(crashed), *(_now() if a == "NOW" else a for a in args[1:])])
    assert out.code == 3, out.stdout + out.stderr
    assert f"could not read {log}: Permission denied" in out.stderr
    assert "partial batch" not in out.stderr  # never "the data ends here"
    assert "no producers\n" not in out.stderr


def test_unreadable_coordinator_partition_leaves_its_producers_unclassified(crashed: Path) -> None:
    log = crashed / COORDINATOR_LOG
    with io_faults.hooked(_unreadable(log)):  # type: ignore[arg-type]
        out = io_faults.run_cli(["find-hanging", "--log-dir", str(crashed), "--now", _now(), "--format", "json"])
    assert out.code == 3, out.stderr
    assert f"could not read {log}: Permission denied" in out.stderr
    rows = json.loads(out.stdout)
    rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    # producer 6 (tx-hang-F) is coordinated by the partition that could not be read: its transactions are
    # not orphaned (no coordinator transaction of it) but unknown
    assert [r for r in rows if r.get("kind") == "orphaned"] == []
    assert "its coordinator is unknown" in out.stderr


# the sampled sweep on the real broker's dirs (the full one: KAFKATX_FAULTS_FULL=1)
REAL_SAMPLED = [("3.8.0/crashed", "lag", 30), ("3.8.0/crashed", "find-hanging", 30),
                ("3.8.0/crashed", "describe-producers", 20), ("3.8.0/crashed", "abort-hanging", 20),
                ("3.8.0/clean", "list-txn", 20), ("3.8.0/clean", "verify", 30)]


@pytest.mark.parametrize(("name", "command", "limit"), REAL_SAMPLED, ids=[f"{n}-{c}" for n, c, _ in REAL_SAMPLED])
def test_fault_sweep_on_the_real_dirs(real_kafka, tmp_path: Path, name: str, command: str, limit: int) -> None:
    source = real_kafka.extract(name)
    now = str(io_faults.real_now(name))
    case = next(c for c in io_faults.cases(name, source, now, repairs=False) if c.name == command)
    res = io_faults.sweep(case, tmp_path, full=FULL, per_site=3 if FULL else 0, limit=None if FULL else limit)
    assert res.calls > 0 and res.injected > 0
    assert res.false == [], "\n".join(res.false[:10])
