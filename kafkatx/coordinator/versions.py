"""Transaction versions (KIP-890) and Kafka releases: what a coordinator writes when it aborts a transaction itself.

One place for the epochs of a coordinator-side abort (the timeout abort, a fence by
``InitProducerId`` and ``forceTerminateTransaction``), read from Kafka's ``TransactionMetadata``
and ``TransactionCoordinator`` as each release has them:

* ``prepareFenceProducerEpoch`` bumps the epoch once into the in-memory pending state
  ``PrepareEpochFence`` (never logged); it does not bump past ``Short.MAX_VALUE``.
* ``endTransaction`` then runs ``prepareAbortOrCommit(PrepareAbort)`` with the cluster's finalized
  ``transaction.version`` (``TransactionStateManager.transactionVersionLevel``: the abort is not from
  a client). Before TV2 it keeps the fenced epoch. With TV2 (``TransactionVersion.supportsEpochBump``)
  it bumps once more from the epoch it finds in ``txnMetadata``:

  - Kafka 4.0 (the trunk the recorded ``4.0-tv2`` broker ran) first sets ``txnMetadata.producerEpoch``
    to the fenced epoch, so the abort lands at **E+2** (the recorded broker wrote tx-timeout-E at 0 -> 2);
    at E = 32766 the second bump overflows (``prepareAbortOrCommit`` fails: KAFKA-19367).
  - Kafka 4.1 on (KAFKA-19367, PR #19910: "let prepareAbortOrCommit handle it naturally") leaves
    ``txnMetadata.producerEpoch`` at E, so the abort lands at **E+1**.

* ``PrepareAbort``, the ABORT markers and ``CompleteAbort`` carry that final epoch.
* Producer-id rotation: a TV2 completion moves to a new producer id (``nextProducerId``, then
  ``prepareComplete`` at epoch 0) when the epoch is exhausted (``isProducerEpochExhausted``: >=
  ``Short.MAX_VALUE - 1``) -- but not for a fence/timeout abort: 4.0 tests
  ``!pendingState.contains(PrepareEpochFence)``, 4.1/4.2 ``!isEpochFence && isProducerEpochExhausted``.
  Trunk dropped the ``!isEpochFence`` guard in February 2026 (KAFKA-20090, PR #21506), modelled here
  for releases after 4.2; the new id comes from the controller's producer-id blocks at run time, so
  an offline repair cannot allocate it (:attr:`AbortEpochs.needs_new_producer_id`).

Which release wrote the data is :func:`release_of_metadata_version` of the finalized
``metadata.version`` (``MetadataVersion`` in server-common) unless ``--kafka-version`` says.

Pure.
"""

from __future__ import annotations

import re

from msgspec import Struct

SHORT_MAX = 32767  # Short.MaxValue

KafkaVersion = tuple[int, int]  # (major, minor): a release line, 4.0, 4.1, ...

KAFKA_4_0: KafkaVersion = (4, 0)
KAFKA_4_1: KafkaVersion = (4, 1)  # KAFKA-19367: one bump for a coordinator-side TV2 abort
KAFKA_4_2: KafkaVersion = (4, 2)  # KIP-1228: WriteTxnMarkers v2 carries the transaction version
KAFKA_4_3: KafkaVersion = (4, 3)  # after KAFKA-20090: fence aborts rotate an exhausted producer id
NEWEST_MODELLED: KafkaVersion = KAFKA_4_2  # the newest release whose coordinator rules are modelled here

# MetadataVersion (server-common/.../MetadataVersion.java): feature level -> release. Levels 1-21 are
# 3.0-3.9; 22-25 are 4.0-IV0..IV3, 26-27 4.1-IV0/IV1, 28-29 4.2-IV0/IV1, 30 4.3-IV0, 31-33 4.4-IV0..IV2,
# 34 4.5-IV0 (as read in trunk forks; a newer level is "newer than 4.5").
_LEVEL_RELEASES: tuple[tuple[int, KafkaVersion, str], ...] = (
    (1, (3, 0), "IV1"), (2, (3, 1), "IV0"), (3, (3, 2), "IV0"), (4, (3, 3), "IV0"), (5, (3, 3), "IV1"),
    (6, (3, 3), "IV2"), (7, (3, 3), "IV3"), (8, (3, 4), "IV0"), (9, (3, 5), "IV0"), (10, (3, 5), "IV1"),
    (11, (3, 5), "IV2"), (12, (3, 6), "IV0"), (13, (3, 6), "IV1"), (14, (3, 6), "IV2"), (15, (3, 7), "IV0"),
    (16, (3, 7), "IV1"), (17, (3, 7), "IV2"), (18, (3, 7), "IV3"), (19, (3, 7), "IV4"), (20, (3, 8), "IV0"),
    (21, (3, 9), "IV0"), (22, (4, 0), "IV0"), (23, (4, 0), "IV1"), (24, (4, 0), "IV2"), (25, (4, 0), "IV3"),
    (26, (4, 1), "IV0"), (27, (4, 1), "IV1"), (28, (4, 2), "IV0"), (29, (4, 2), "IV1"), (30, (4, 3), "IV0"),
    (31, (4, 4), "IV0"), (32, (4, 4), "IV1"), (33, (4, 4), "IV2"), (34, (4, 5), "IV0"),
)
_BY_LEVEL = {level: (release, iv) for level, release, iv in _LEVEL_RELEASES}
HIGHEST_KNOWN_LEVEL = _LEVEL_RELEASES[-1][0]

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")


def parse_kafka_version(text: str) -> KafkaVersion:
    """``"4.1"`` (or ``"4.1.0"``) -> ``(4, 1)``; ValueError for anything else."""
    m = _VERSION_RE.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a Kafka version X.Y (for example 4.0 or 4.1)")
    return int(m.group(1)), int(m.group(2))


def version_text(version: KafkaVersion) -> str:
    return f"{version[0]}.{version[1]}"


def release_of_metadata_version(level: int) -> tuple[KafkaVersion, str] | None:
    """``MetadataVersion`` feature level -> (release, its ``X.Y-IVn`` name); None below 3.0-IV1 or unknown."""
    got = _BY_LEVEL.get(level)
    if got is None:
        return None
    release, iv = got
    return release, f"{version_text(release)}-{iv}"


def supports_epoch_bump(transaction_version: int) -> bool:
    """``TransactionVersion.supportsEpochBump``: TV2 and above bump the epoch at every EndTxn."""
    return transaction_version >= 2


def is_epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: ``epoch >= Short.MAX_VALUE - 1``."""
    return epoch >= SHORT_MAX - 1


def tv2_markers_need_greater_epoch(transaction_version: int, kafka_version: KafkaVersion) -> bool:
    """KIP-1228 (Kafka 4.2, PR #20882): a TV2 coordinator sends WriteTxnMarkers v2 with the transaction
    version, and the partition leader (``ProducerAppendInfo.checkProducerEpoch``) accepts a TV2 marker
    only with an epoch strictly greater than the producer's current one; a legacy marker needs >=."""
    return supports_epoch_bump(transaction_version) and kafka_version >= KAFKA_4_2


class AbortEpochs(Struct, frozen=True):
    """The epochs of a coordinator-side abort of an ``Ongoing`` transaction at epoch ``current``."""

    fence: int  # after prepareFenceProducerEpoch (in memory only)
    final: int  # PrepareAbort, ABORT markers, CompleteAbort
    needs_new_producer_id: bool  # the release rotates the producer id here (nextProducerId)
    fails: str | None = None  # the release cannot abort it at all (why), or None


def coordinator_abort_epochs(current: int, transaction_version: int,
                             kafka_version: KafkaVersion = NEWEST_MODELLED) -> AbortEpochs:
    """Fence, then ``prepareAbortOrCommit(PrepareAbort)`` as ``kafka_version``'s coordinator does it at
    the cluster's ``transaction_version`` (module docstring)."""
    fence = current if current >= SHORT_MAX else current + 1
    if not supports_epoch_bump(transaction_version):
        return AbortEpochs(fence=fence, final=fence, needs_new_producer_id=False)
    rotates = kafka_version >= KAFKA_4_3 and is_epoch_exhausted(current)
    if kafka_version < KAFKA_4_1:
        # TransactionCoordinator.endTransaction (4.0): txnMetadata.producerEpoch = fenced epoch, then +1.
        if fence >= SHORT_MAX:
            return AbortEpochs(fence=fence, final=fence, needs_new_producer_id=False,
                               fails=f"Kafka {version_text(kafka_version)} bumps the fenced epoch {fence} once more "
                                     "under transaction version 2 and overflows Short.MaxValue (KAFKA-19367)")
        return AbortEpochs(fence=fence, final=fence + 1, needs_new_producer_id=False)
    # 4.1+: prepareAbortOrCommit bumps the epoch txnMetadata still holds (the unfenced one).
    return AbortEpochs(fence=fence, final=fence, needs_new_producer_id=rotates)


__all__ = ["HIGHEST_KNOWN_LEVEL", "KAFKA_4_0", "KAFKA_4_1", "KAFKA_4_2", "KAFKA_4_3", "NEWEST_MODELLED",
           "SHORT_MAX", "AbortEpochs", "KafkaVersion", "coordinator_abort_epochs", "is_epoch_exhausted",
           "parse_kafka_version", "release_of_metadata_version", "supports_epoch_bump",
           "tv2_markers_need_greater_epoch", "version_text"]
