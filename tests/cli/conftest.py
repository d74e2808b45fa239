"""Shared CLI test fixtures (use the fixtures; do not ``from conftest import``: several test
folders have a conftest.py, and the module name is ambiguous). Shared CLI test helpers: a CliRunner that keeps stderr apart, and small segment folders.

The folders are written with the format layer's own encoders, so the tests check
decoding against independently specified bytes (formats.md), not our output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()  # Typer's runner keeps stdout and stderr apart (result.stdout / result.stderr)


@pytest.fixture
def invoke(runner):
    from kafkatx.cli.main import app

    def run(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    return run


@dataclass
class SegmentFiles:
    folder: Path
    log: Path
    index: Path
    timeindex: Path
    txnindex: Path
    snapshot: Path
    positions: list[int]  # byte position of each batch


PID = 4000


def _batches() -> list[bytes]:
    """offsets 0-2 committed txn, 3 COMMIT marker, 4-5 aborted txn, 6 ABORT marker, 7-8 plain (gzip)."""
    txn1 = build_batch([Record(offset=i, timestamp=1_000 + i, key=b"k%d" % i, value=b"value-%d" % i,
                               headers=(("h1", b"x"), ("h2", None))) for i in range(3)],
                       producer_id=PID, producer_epoch=0, base_sequence=0, is_transactional=True)
    commit = build_control_batch(offset=3, control_type=ControlType.COMMIT, producer_id=PID, producer_epoch=0,
                                 coordinator_epoch=5, timestamp=1_010)
    txn2 = build_batch([Record(offset=4 + i, timestamp=1_020 + i, key=None, value=b"\x00\xffbin")
                        for i in range(2)],
                       producer_id=PID, producer_epoch=0, base_sequence=3, is_transactional=True)
    abort = build_control_batch(offset=6, control_type=ControlType.ABORT, producer_id=PID, producer_epoch=0,
                                coordinator_epoch=5, timestamp=1_030)
    from kafkatx.format.record_batch import Compression

    plain = build_batch([Record(offset=7 + i, timestamp=1_040 + i, key=b"p", value=b"plain")
                         for i in range(2)], compression=Compression.GZIP)
    return [txn1, commit, txn2, abort, plain]


def write_partition(folder: Path, batches: list[bytes] | None = None, base: int = 0) -> SegmentFiles:
    folder.mkdir(parents=True, exist_ok=True)
    batches = _batches() if batches is None else batches
    positions, pos = [], 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    stem = f"{base:020d}"
    log = folder / f"{stem}.log"
    log.write_bytes(b"".join(batches))
    index = folder / f"{stem}.index"
    index.write_bytes(encode_offset_index([OffsetIndexEntry(offset=2, position=positions[0]),
                                           OffsetIndexEntry(offset=5, position=positions[2])], base))
    timeindex = folder / f"{stem}.timeindex"
    timeindex.write_bytes(encode_time_index([TimeIndexEntry(timestamp=1_002, offset=2),
                                             TimeIndexEntry(timestamp=1_021, offset=5)], base))
    txnindex = folder / f"{stem}.txnindex"
    txnindex.write_bytes(encode_aborted_txn(AbortedTxn(version=0, producer_id=PID, first_offset=4,
                                                       last_offset=6, last_stable_offset=7)))
    snapshot = folder / f"{9:020d}.snapshot"
    snapshot.write_bytes(encode_producer_snapshot([
        ProducerSnapshotEntry(producer_id=PID, producer_epoch=0, last_sequence=4, last_offset=5, offset_delta=1,
                              timestamp=1_021, coordinator_epoch=5, current_txn_first_offset=-1),
        ProducerSnapshotEntry(producer_id=PID + 1, producer_epoch=3, last_sequence=9, last_offset=8,
                              offset_delta=0, timestamp=1_041, coordinator_epoch=1, current_txn_first_offset=8),
    ]))
    return SegmentFiles(folder=folder, log=log, index=index, timeindex=timeindex, txnindex=txnindex,
                        snapshot=snapshot, positions=positions)


@pytest.fixture
def segment(tmp_path) -> SegmentFiles:
    return write_partition(tmp_path / "orders-0")


def txn_state_batches() -> list[bytes]:
    ongoing = TxnLogValue(version=0, producer_id=PID, producer_epoch=0, transaction_timeout_ms=60_000,
                          state=TxnState.ONGOING, partitions=(("orders", (1, 0)),),
                          last_update_timestamp=2_000, start_timestamp=1_990)
    return [
        build_batch([Record(offset=0, timestamp=2_000, key=encode_txn_log_key("tx-a"),
                            value=encode_txn_log_value(ongoing))]),
        build_batch([Record(offset=1, timestamp=2_001, key=encode_txn_log_key("tx-gone"), value=None)]),
        build_batch([Record(offset=2, timestamp=2_002, key=b"\x00\x09garbage", value=b"\x00")]),
    ]


@pytest.fixture
def pid() -> int:
    """The producer id of the transactional batches in ``segment``."""
    return PID


@pytest.fixture
def partition_writer():
    """``write_partition(folder, batches=None, base=0) -> SegmentFiles`` for tests that need several."""
    return write_partition


@pytest.fixture
def txn_state_bytes() -> bytes:
    """Three ``__transaction_state`` batches: tx-a Ongoing, tx-gone tombstone, an undecodable key."""
    return b"".join(txn_state_batches())


@pytest.fixture
def txn_state_segment(tmp_path) -> Path:
    folder = tmp_path / "__transaction_state-7"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(b"".join(txn_state_batches()))
    return log

