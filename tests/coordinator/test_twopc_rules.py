"""Two-phase-commit transactions (KIP-939) in the rule book and on the 2PC fixture.

Expected values: ``fixtures/expected/twopc/*.json``, literals reasoned by hand in
``fixtures/build_twopc.py`` from Kafka 4.1's ``TransactionMetadata.isDistributedTwoPhaseCommitTxn``
(``txnTimeoutMs == Integer.MAX_VALUE``) and ``TransactionStateManager.timedOutTransactions`` (skips it).
"""

from __future__ import annotations

import json
from pathlib import Path

from msgspec.structs import asdict

from kafkatx.coordinator.rules import (
    PREPARED_2PC_MEANING,
    TWO_PHASE_COMMIT_TIMEOUT_MS,
    HangingKind,
    classify,
    is_distributed_two_phase_commit,
    is_timed_out,
)
from kafkatx.format.txn_log import TxnState as S
from kafkatx.session import offline

REPO = Path(__file__).resolve().parents[2]
TWOPC = REPO / "fixtures" / "twopc"
EXPECTED = REPO / "fixtures" / "expected" / "twopc"
NOW = json.loads((EXPECTED / "scenario.json").read_text())["now_ms"]
DAY = 86_400_000
INT_MAX = 2**31 - 1


def test_the_2pc_timeout_is_integer_max_value() -> None:
    assert TWO_PHASE_COMMIT_TIMEOUT_MS == INT_MAX == 2147483647
    assert is_distributed_two_phase_commit(INT_MAX)
    assert not is_distributed_two_phase_commit(INT_MAX - 1)
    assert not is_distributed_two_phase_commit(900_000)
    assert not is_distributed_two_phase_commit(None)


def test_a_2pc_transaction_never_times_out() -> None:
    start = 1_000
    # start + Integer.MAX_VALUE is 24.8 days; an ordinary rule would call it timed out after that.
    assert not is_timed_out(start, INT_MAX, start + INT_MAX + 1)
    assert not is_timed_out(start, INT_MAX, start + 365 * DAY)
    assert is_timed_out(start, INT_MAX - 1, start + INT_MAX + 1)  # one ms less: an ordinary transaction


def verdict(*, state: S = S.ONGOING, includes: bool = True, start: int, timeout: int = INT_MAX,
            last: int | None = None, now: int, max_timeout: int = 900_000) -> HangingKind | None:
    return classify(state=state, includes_partition=includes, start_ms=start, timeout_ms=timeout,
                    last_write_ms=start if last is None else last, now=now, max_timeout_ms=max_timeout)


def test_classify_prepared_2pc_only_past_the_max_timeout() -> None:
    start = 10_000_000
    assert verdict(start=start, now=start + 900_000) is None  # open exactly the max timeout: not yet
    assert verdict(start=start, now=start + 900_001) is HangingKind.PREPARED_2PC
    assert verdict(start=start, now=start + 30 * DAY) is HangingKind.PREPARED_2PC  # never timed-out
    # the same transaction with an ordinary timeout
    assert verdict(start=start, timeout=60_000, now=start + 30 * DAY) is HangingKind.TIMED_OUT
    # a decided 2PC transaction is an ordinary decided one (the external manager committed it)
    assert verdict(state=S.PREPARE_COMMIT, start=start, now=start + DAY) is HangingKind.INCOMPLETE_MARKERS
    # a partition the 2PC transaction does not list: an orphan as ever
    assert verdict(includes=False, start=start, now=start + DAY) is HangingKind.ORPHANED


def test_find_hanging_on_the_2pc_fixture() -> None:
    answer = offline.find_hanging([TWOPC], now=NOW)
    rows = [asdict(r) for r in answer.rows]
    expected = json.loads((EXPECTED / "find-hanging.json").read_text())
    key = lambda r: (r["topic"], r["partition"], r["first_offset"], r["producer_id"])  # noqa: E731
    assert sorted(rows, key=key) == expected
    assert [r["kind"] for r in expected if r["transactional_id"] == "tx-2pc"] == ["prepared-2pc"] * 2
    assert not any("tx-2pc" in n for n in answer.notices)


def test_lag_on_the_2pc_fixture() -> None:
    rows = {(r.topic, r.partition): asdict(r) for r in offline.lag([TWOPC]).rows}
    for exp in json.loads((EXPECTED / "lag.json").read_text()):
        assert rows[(exp["topic"], exp["partition"])] == exp


def test_the_meaning_is_said_the_same_way_everywhere() -> None:
    from kafkatx.render.descriptions import HANGING_KINDS

    assert PREPARED_2PC_MEANING == "held open by an external transaction manager"
    assert PREPARED_2PC_MEANING in HANGING_KINDS["prepared-2pc"]
