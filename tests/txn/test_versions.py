"""The epochs of a coordinator-side abort per transaction version (kafkatx.txn.versions).

Reasoned from Kafka 4.x ``TransactionMetadata``: ``prepareFenceProducerEpoch`` bumps once (not past
Short.MAX_VALUE); ``prepareAbortOrCommit`` bumps again when ``supportsEpochBump`` (TV2+), keeps the epoch at
Short.MAX_VALUE for a PrepareAbort; ``isEpochExhausted`` is ``epoch >= Short.MAX_VALUE - 1`` (TV2 then moves
to ``nextProducerId``).
"""

from __future__ import annotations

from kafkatx.txn.versions import (
    AbortEpochs,
    coordinator_abort_epochs,
    is_epoch_exhausted,
    supports_epoch_bump,
)


def test_supports_epoch_bump_from_tv2() -> None:
    assert [supports_epoch_bump(v) for v in (0, 1, 2, 3)] == [False, False, True, True]


def test_tv0_and_tv1_abort_at_the_fenced_epoch() -> None:
    for tv in (0, 1):
        assert coordinator_abort_epochs(0, tv) == AbortEpochs(fence=1, final=1, needs_new_producer_id=False)
        assert coordinator_abort_epochs(32766, tv) == AbortEpochs(fence=32767, final=32767, needs_new_producer_id=False)


def test_tv2_bumps_twice_and_rotates_when_exhausted() -> None:
    assert coordinator_abort_epochs(0, 2) == AbortEpochs(fence=1, final=2, needs_new_producer_id=False)
    assert coordinator_abort_epochs(32764, 2) == AbortEpochs(fence=32765, final=32766, needs_new_producer_id=False)
    assert coordinator_abort_epochs(32765, 2) == AbortEpochs(fence=32766, final=32767, needs_new_producer_id=True)
    assert coordinator_abort_epochs(32767, 2).final == 32767  # already broken: no overflow
    assert is_epoch_exhausted(32766) and not is_epoch_exhausted(32765)
