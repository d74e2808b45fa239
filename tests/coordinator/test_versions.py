"""The epochs of a coordinator-side abort per transaction version and Kafka release (kafkatx.coordinator.versions).

Reasoned from Kafka's ``TransactionMetadata`` and ``TransactionCoordinator.endTransaction``:
``prepareFenceProducerEpoch`` bumps once (not past Short.MAX_VALUE) into the pending state; before TV2
``prepareAbortOrCommit`` keeps that epoch. With TV2 (``supportsEpochBump``) Kafka 4.0 sets
``txnMetadata.producerEpoch`` to the fenced epoch and ``prepareAbortOrCommit`` bumps it again (E+2, the
recorded 4.0 broker's tx-timeout-E went 0 -> 2; at 32766 the second bump overflows, KAFKA-19367); Kafka 4.1
on (PR #19910) leaves the unfenced epoch there, so the one bump lands at E+1. A fence/timeout abort does not
rotate the producer id in 4.0-4.2 (``!pendingState.contains(PrepareEpochFence)`` / ``!isEpochFence``);
KAFKA-20090 (PR #21506) removed that guard after 4.2. ``isEpochExhausted`` is ``epoch >= Short.MAX_VALUE - 1``.
``MetadataVersion``: level 25 is 4.0-IV3, 26/27 4.1-IV0/IV1, 28/29 4.2-IV0/IV1.
"""

from __future__ import annotations

import pytest

from kafkatx.coordinator.versions import (
    AbortEpochs,
    coordinator_abort_epochs,
    is_epoch_exhausted,
    parse_kafka_version,
    release_of_metadata_version,
    supports_epoch_bump,
    tv2_markers_need_greater_epoch,
)


def test_supports_epoch_bump_from_tv2() -> None:
    assert [supports_epoch_bump(v) for v in (0, 1, 2, 3)] == [False, False, True, True]


def test_tv0_and_tv1_abort_at_the_fenced_epoch() -> None:
    for kafka in ((3, 8), (4, 0), (4, 1), (4, 2)):
        for tv in (0, 1):
            assert coordinator_abort_epochs(0, tv, kafka) == AbortEpochs(fence=1, final=1, needs_new_producer_id=False)
            assert coordinator_abort_epochs(32766, tv, kafka) == AbortEpochs(fence=32767, final=32767,
                                                                            needs_new_producer_id=False)


def test_tv2_on_kafka_4_0_bumps_twice_and_never_rotates() -> None:
    assert coordinator_abort_epochs(0, 2, (4, 0)) == AbortEpochs(fence=1, final=2, needs_new_producer_id=False)
    assert coordinator_abort_epochs(32765, 2, (4, 0)) == AbortEpochs(fence=32766, final=32767,
                                                                    needs_new_producer_id=False)
    broken = coordinator_abort_epochs(32766, 2, (4, 0))
    assert broken.fails is not None and "KAFKA-19367" in broken.fails


def test_tv2_from_kafka_4_1_bumps_once_and_fence_aborts_do_not_rotate() -> None:
    for kafka in ((4, 1), (4, 2)):
        assert coordinator_abort_epochs(0, 2, kafka) == AbortEpochs(fence=1, final=1, needs_new_producer_id=False)
        assert coordinator_abort_epochs(32766, 2, kafka) == AbortEpochs(fence=32767, final=32767,
                                                                       needs_new_producer_id=False)
    # after KAFKA-20090 an exhausted epoch rotates even for a fence abort
    assert coordinator_abort_epochs(32766, 2, (4, 3)).needs_new_producer_id
    assert not coordinator_abort_epochs(32765, 2, (4, 3)).needs_new_producer_id
    assert is_epoch_exhausted(32766) and not is_epoch_exhausted(32765)


def test_metadata_version_levels_name_their_release() -> None:
    assert release_of_metadata_version(25) == ((4, 0), "4.0-IV3")
    assert release_of_metadata_version(27) == ((4, 1), "4.1-IV1")
    assert release_of_metadata_version(28) == ((4, 2), "4.2-IV0")
    assert release_of_metadata_version(21) == ((3, 9), "3.9-IV0")
    assert release_of_metadata_version(0) is None and release_of_metadata_version(999) is None


def test_kafka_version_text() -> None:
    assert parse_kafka_version("4.1") == (4, 1) and parse_kafka_version("4.0.0") == (4, 0)
    with pytest.raises(ValueError):
        parse_kafka_version("four")


def test_kip_1228_strict_marker_epochs_only_for_tv2_from_4_2() -> None:
    assert tv2_markers_need_greater_epoch(2, (4, 2))
    assert not tv2_markers_need_greater_epoch(2, (4, 1))
    assert not tv2_markers_need_greater_epoch(0, (4, 2))
