"""Folding runs (format/segment_fold.py) gives what folding every batch gives.

The reference event source below is the one-event-per-batch source ``file_events`` was
before runs: every batch read with ``Partition.iter_batch_buffers``, control records with
``read_control_record``. Every fixture partition is replayed both ways (and with the
compiled fold switched off), with the options the commands use, and must come out equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from kafkatx.checks.verify import verify
from kafkatx.errors import DecodeError, KafkaTxError
from kafkatx.format import compiled
from kafkatx.format.record_batch import crc_valid, read_control_record
from kafkatx.storage.events import BatchEvent
from kafkatx.storage.log_dir import open_log_dirs
from kafkatx.storage.partition import Partition
from kafkatx.storage.replay import replay_partition, replay_partition_events
from kafkatx.storage.replicas import mixed_clusters_allowed

ROOT = Path(__file__).resolve().parents[2]
LOG_DIRS = [ROOT / "fixtures" / n for n in ("hanging", "clean", "ghost")] + sorted(
    p for p in (ROOT / "fixtures" / "loading").iterdir() if p.is_dir()) + [ROOT / "fixtures" / "two-brokers" / "broker-1"]


@pytest.fixture(autouse=True)
def _unrelated_dirs_read_together() -> Iterator[None]:
    """LOG_DIRS are unrelated fixtures (copies of one broker, node.id 1), read in one call on purpose."""
    with mixed_clusters_allowed():
        yield


def _per_batch(partition: Partition, start: int, *, verify_crc: bool) -> Iterator[BatchEvent]:
    for segment, buf, header in partition.iter_batch_buffers(start):
        log_path = str(segment.log_path)
        if header.is_control and header.producer_id >= 0:
            if not crc_valid(buf, header):
                yield BatchEvent(log_path, header, crc_valid=False)
                continue
            if header.records_count == 0:
                yield BatchEvent(log_path, header)
                continue
            try:
                control = read_control_record(buf, header)
            except DecodeError as err:
                raise err.at(segment.log_path) from err
            yield BatchEvent(log_path, header, control_type=control.type_id,
                             coordinator_epoch=control.coordinator_epoch)
        elif verify_crc and not header.is_control:
            yield BatchEvent(log_path, header, crc_valid=crc_valid(buf, header))
        else:
            yield BatchEvent(log_path, header)


def _partitions() -> list[Partition]:
    return [p for d in open_log_dirs(LOG_DIRS) for p in d.partitions()]


def _outcome(call, *args, **kw):  # type: ignore[no-untyped-def]
    try:
        return call(*args, **kw)
    except KafkaTxError as err:
        return type(err), str(err)


@pytest.mark.parametrize("kw", [{}, {"now": 1700007200000}, {"use_snapshot": False, "keep_completed": True},
                                {"verify_crc": True, "now": 1700007200000}], ids=str)
def test_runs_fold_like_batches_on_every_fixture_partition(kw: dict) -> None:
    checked = 0
    for part in _partitions():
        source = partial(_per_batch, part, verify_crc=kw.get("verify_crc", False))
        expected = _outcome(replay_partition_events, part, source, **kw)
        got = _outcome(replay_partition, part, **kw)
        with compiled.pure_python():
            pure = _outcome(replay_partition, part, **kw)
        assert got == expected, part
        assert pure == expected, part
        checked += 1
    assert checked > 20


def test_verify_is_the_same_with_and_without_the_compiled_fold() -> None:
    fast = verify(LOG_DIRS)
    with compiled.pure_python():
        pure = verify(LOG_DIRS)
    assert fast == pure
    assert any(p.check.startswith("snapshot") or p.check.startswith("startup") for p in fast)
