"""kafkatx.coordinator.rules: the hanging rule book as pure functions, each rule and each boundary by hand."""

from __future__ import annotations

import pytest

from kafkatx.coordinator.rules import (
    DEFAULT_MAX_TIMEOUT_MS,
    HangingKind,
    below_log_start,
    classify,
    ghost_kind,
    is_old,
    is_timed_out,
    state_from_name,
)
from kafkatx.format.txn_log import TxnState

S = TxnState
NOW = 10_000_000
MAX = 900_000


def verdict(state, *, includes=True, start=0, timeout=60_000, last=0, now=NOW, max_timeout=MAX):
    return classify(state=state, includes_partition=includes, start_ms=start, timeout_ms=timeout,
                    last_write_ms=last, now=now, max_timeout_ms=max_timeout)


def test_default_max_timeout_is_kafkas_transaction_max_timeout_ms():
    assert DEFAULT_MAX_TIMEOUT_MS == 15 * 60 * 1000


def test_kind_values_are_the_cli_contract():
    assert [k.value for k in HangingKind] == ["orphaned", "timed-out", "incomplete-markers", "ghost", "prepared-2pc"]


def test_timed_out_is_strictly_after_start_plus_timeout():
    assert not is_timed_out(1_000, 500, 1_500)  # now == start + timeout: not yet (Kafka: start + timeout < now)
    assert is_timed_out(1_000, 500, 1_501)
    assert not is_timed_out(1_000, 500, 1_499)
    assert not is_timed_out(-1, 500, NOW)  # no transaction started (Empty carries -1)
    assert not is_timed_out(None, 500, NOW)


def test_old_is_strictly_more_than_max_timeout():
    assert not is_old(NOW - MAX, NOW, MAX)
    assert is_old(NOW - MAX - 1, NOW, MAX)
    assert is_old(None, NOW, MAX) and is_old(-1, NOW, MAX)


def test_ongoing_is_timed_out_only_past_its_own_timeout_whatever_the_last_write():
    assert verdict(S.ONGOING, start=NOW - 60_000, last=0) is None  # boundary; old last write changes nothing
    assert verdict(S.ONGOING, start=NOW - 60_001, last=NOW) is HangingKind.TIMED_OUT


def test_prepare_epoch_fence_is_never_timed_out():
    # Past its timeout and old: orphaned (no coordinator finishes it); young: nothing yet.
    assert verdict(S.PREPARE_EPOCH_FENCE, start=0, timeout=1, last=0) is HangingKind.ORPHANED
    assert verdict(S.PREPARE_EPOCH_FENCE, start=0, timeout=1, last=NOW) is None


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_prepare_states_owe_markers(state):
    assert verdict(state, last=NOW - MAX) is None
    assert verdict(state, last=NOW - MAX - 1) is HangingKind.INCOMPLETE_MARKERS
    # not listed any more (that partition got its marker): orphaned
    assert verdict(state, includes=False, last=NOW - MAX - 1) is HangingKind.ORPHANED


@pytest.mark.parametrize("state", [None, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD])
def test_everything_else_old_is_orphaned(state):
    assert verdict(state, includes=state is not None, last=NOW - MAX - 1) is HangingKind.ORPHANED
    assert verdict(state, includes=state is not None, last=NOW - MAX) is None


def test_ongoing_not_including_the_partition_is_orphaned_when_old():
    assert verdict(S.ONGOING, includes=False, start=NOW, last=NOW - MAX - 1) is HangingKind.ORPHANED


def test_ghost_only_relabels_orphaned_strictly_below_the_log_start():
    assert below_log_start(9, 10) and not below_log_start(10, 10)
    assert not below_log_start(None, 10) and not below_log_start(9, None)
    assert ghost_kind("orphaned", first_offset=9, log_start=10) == "ghost"
    assert ghost_kind("orphaned", first_offset=10, log_start=10) == "orphaned"
    assert ghost_kind("timed-out", first_offset=0, log_start=10) == "timed-out"
    assert ghost_kind("incomplete-markers", first_offset=0, log_start=10) == "incomplete-markers"


def test_state_from_name_reads_kafkas_names():
    assert state_from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE
    assert state_from_name("Ongoing") is S.ONGOING
    assert state_from_name("Unknown") is None and state_from_name(None) is None
