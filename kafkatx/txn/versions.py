"""Transaction versions (KIP-890): what a coordinator writes when it aborts a transaction itself.

One place for the epochs of a coordinator-side abort (the timeout abort and
``forceTerminateTransaction``), read from Kafka 4.x's ``TransactionMetadata``
(transaction-coordinator/.../TransactionMetadata.java) and ``TransactionCoordinator``:

* ``prepareFenceProducerEpoch`` bumps the epoch once (``PrepareEpochFence`` is only an
  in-memory pending state); it does not bump past ``Short.MAX_VALUE``.
* ``prepareAbortOrCommit`` then bumps it again when the transaction version
  ``supportsEpochBump`` (``TransactionVersion.TV_2`` and above); before TV2 it keeps the
  fenced epoch. A coordinator-side abort is not from a client, so the version is the
  cluster's finalized ``transaction.version`` (``TransactionStateManager.transactionVersionLevel``);
  the broker of 4.0-tv2 wrote ``ClientTransactionVersion=2`` on tx-timeout-E's
  PrepareAbort/CompleteAbort although the producer's own records carried 0.
* ``PrepareAbort``, the ABORT markers and ``CompleteAbort`` carry that final epoch.
* With TV2 an exhausted epoch (``isEpochExhausted``: >= ``Short.MAX_VALUE - 1``) makes the
  coordinator hand out a new producer id (``nextProducerId``; ``prepareComplete`` moves to it
  at epoch 0). That id comes from the controller's producer-id blocks at run time, so an
  offline repair cannot allocate it: :func:`coordinator_abort_epochs` reports it.

Pure.
"""

from __future__ import annotations

from msgspec import Struct

SHORT_MAX = 32767  # Short.MaxValue


def supports_epoch_bump(transaction_version: int) -> bool:
    """``TransactionVersion.supportsEpochBump``: TV2 and above bump the epoch at every EndTxn."""
    return transaction_version >= 2


def is_epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: ``epoch >= Short.MAX_VALUE - 1``."""
    return epoch >= SHORT_MAX - 1


class AbortEpochs(Struct, frozen=True):
    """The epochs of a coordinator-side abort of an ``Ongoing`` transaction at epoch ``current``."""

    fence: int  # after prepareFenceProducerEpoch
    final: int  # PrepareAbort, ABORT markers, CompleteAbort
    needs_new_producer_id: bool  # TV2 with an exhausted epoch: nextProducerId


def coordinator_abort_epochs(current: int, transaction_version: int) -> AbortEpochs:
    """Fence, then ``prepareAbortOrCommit(PrepareAbort)`` as the cluster's transaction version says."""
    fence = current if current >= SHORT_MAX else current + 1
    if not supports_epoch_bump(transaction_version):
        return AbortEpochs(fence=fence, final=fence, needs_new_producer_id=False)
    final = fence if fence >= SHORT_MAX else fence + 1
    return AbortEpochs(fence=fence, final=final, needs_new_producer_id=is_epoch_exhausted(fence))


__all__ = ["SHORT_MAX", "AbortEpochs", "coordinator_abort_epochs", "is_epoch_exhausted", "supports_epoch_bump"]
