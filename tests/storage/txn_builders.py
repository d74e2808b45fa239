"""Small hand-driven writers for broker log dirs in the txn tests.

Deliberately dumb (the test says exactly which batch, marker, index entry and
snapshot exists), so each test's expected answer follows from Kafka's rules by
reading the test, not from running kafkatx.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kafkatx.format.checkpoint import encode_offset_checkpoint
from kafkatx.format.control import ControlType
from kafkatx.format.offset_index import OffsetIndexEntry, encode_offset_index
from kafkatx.format.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot
from kafkatx.format.record_batch import Record, build_batch, build_control_batch
from kafkatx.format.time_index import TimeIndexEntry, encode_time_index
from kafkatx.format.txn_index import AbortedTxn, encode_aborted_txn
from kafkatx.format.txn_log import TxnLogValue, TxnState, encode_txn_log_key, encode_txn_log_value


def seg_name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


@dataclass
class Seg:
    base: int
    data: bytearray = field(default_factory=bytearray)
    index: list[OffsetIndexEntry] = field(default_factory=list)
    time_index: list[TimeIndexEntry] = field(default_factory=list)
    txn_index: list[AbortedTxn] = field(default_factory=list)


class PartitionWriter:
    """Appends batches to a partition; ``write(log_dir)`` puts the files on disk."""

    def __init__(self, topic: str, partition: int, *, base: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self.next_offset = base
        self.segments = [Seg(base)]
        self.snapshots: dict[int, bytes] = {}
        self.seq: dict[int, int] = {}

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def seg(self) -> Seg:
        return self.segments[-1]

    def _append(self, raw: bytes, last: int, max_ts: int, *, index: bool) -> int:
        pos = len(self.seg.data)
        if index:
            self.seg.index.append(OffsetIndexEntry(offset=last, position=pos))
            self.seg.time_index.append(TimeIndexEntry(timestamp=max_ts, offset=last))
        self.seg.data += raw
        return pos

    def data(self, pid: int = -1, epoch: int = -1, n: int = 1, *, txn: bool = True, ts: int = 1_000,
             index: bool = True, key: bytes = b"k") -> tuple[int, int]:
        """One data batch of ``n`` records (transactional by default). Returns (first, last) offsets."""
        first = self.next_offset
        records = [Record(offset=first + i, timestamp=ts, key=key, value=b"v%d" % (first + i)) for i in range(n)]
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        raw = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          is_transactional=txn and pid >= 0)
        if pid >= 0:
            self.seq[pid] = seq + n
        self._append(raw, first + n - 1, ts, index=index)
        self.next_offset += n
        return first, first + n - 1

    def marker(self, pid: int, epoch: int, commit: bool, *, coordinator_epoch: int = 0, ts: int = 2_000,
               index: bool = False) -> int:
        off = self.next_offset
        raw = build_control_batch(offset=off, control_type=ControlType.COMMIT if commit else ControlType.ABORT,
                                  producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                                  timestamp=ts)
        self._append(raw, off, ts, index=index)
        self.next_offset += 1
        return off

    def records(self, records: list[Record], *, index: bool = False) -> None:
        """Non-transactional, non-idempotent records in one batch (e.g. __transaction_state values)."""
        raw = build_batch(records)
        self._append(raw, records[-1].offset, max(r.timestamp for r in records), index=index)
        self.next_offset = records[-1].offset + 1

    def abort_entry(self, pid: int, first: int, last: int, lso: int) -> None:
        self.seg.txn_index.append(AbortedTxn(version=0, producer_id=pid, first_offset=first, last_offset=last,
                                             last_stable_offset=lso))

    def roll(self) -> None:
        self.segments.append(Seg(self.next_offset))

    def snapshot(self, entries: list[ProducerSnapshotEntry], offset: int | None = None) -> int:
        off = self.next_offset if offset is None else offset
        self.snapshots[off] = encode_producer_snapshot(entries)
        return off

    def write(self, log_dir: Path) -> Path:
        d = log_dir / self.name
        d.mkdir(parents=True, exist_ok=True)
        for s in self.segments:
            (d / seg_name(s.base, ".log")).write_bytes(bytes(s.data))
            (d / seg_name(s.base, ".index")).write_bytes(encode_offset_index(s.index, s.base))
            (d / seg_name(s.base, ".timeindex")).write_bytes(encode_time_index(s.time_index, s.base))
            if s.txn_index:
                (d / seg_name(s.base, ".txnindex")).write_bytes(b"".join(encode_aborted_txn(e) for e in s.txn_index))
        for off, raw in self.snapshots.items():
            (d / seg_name(off, ".snapshot")).write_bytes(raw)
        return d


def snapshot_entry(pid: int, epoch: int, *, last_seq: int = 0, last_offset: int = 0, ts: int = 1_000,
                   coordinator_epoch: int = -1, txn_first: int = -1) -> ProducerSnapshotEntry:
    return ProducerSnapshotEntry(producer_id=pid, producer_epoch=epoch, last_sequence=last_seq,
                                 last_offset=last_offset, offset_delta=0, timestamp=ts,
                                 coordinator_epoch=coordinator_epoch, current_txn_first_offset=txn_first)


def txn_value(state: TxnState, *, pid: int, epoch: int = 0, parts: dict[str, list[int]] | None = None,
              start: int = 1_000, update: int = 1_000, timeout_ms: int = 60_000, version: int = 0,
              **tags) -> TxnLogValue:
    if state is TxnState.EMPTY:
        partitions = None
    else:
        partitions = tuple((t, tuple(ps)) for t, ps in sorted((parts or {}).items()))
    return TxnLogValue(version=version, producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=timeout_ms,
                       state=state, partitions=partitions, last_update_timestamp=update,
                       start_timestamp=start if state is not TxnState.EMPTY else -1, **tags)


class TxnLogWriter(PartitionWriter):
    """A ``__transaction_state-N`` partition: one record per batch, like the coordinator writes."""

    def __init__(self, partition: int) -> None:
        super().__init__("__transaction_state", partition)

    def put(self, tid: str, value: TxnLogValue | None, *, ts: int = 1_000) -> int:
        off = self.next_offset
        self.records([Record(offset=off, timestamp=ts, key=encode_txn_log_key(tid),
                             value=encode_txn_log_value(value) if value is not None else None)])
        return off


def write_checkpoint(log_dir: Path, name: str, entries: dict[tuple[str, int], int]) -> None:
    (log_dir / name).write_text(encode_offset_checkpoint(entries))


def write_log_dir(log_dir: Path, parts: list[PartitionWriter], *, hw: dict[str, int] | None = None,
                  checkpoints: bool = True, clean_shutdown: bool = False) -> Path:
    """Write partitions and a replication-offset-checkpoint (HW = log end unless overridden).

    ``clean_shutdown`` writes ``.kafka_cleanshutdown`` as a cleanly stopped broker does; without
    it the broker recovers the segments from the recovery point on (storage/loading.py).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    if clean_shutdown:
        (log_dir / ".kafka_cleanshutdown").write_text("")
    for p in parts:
        p.write(log_dir)
    if checkpoints:
        hw = hw or {}
        write_checkpoint(log_dir, "replication-offset-checkpoint",
                         {(p.topic, p.partition): hw.get(p.name, p.next_offset) for p in parts})
        write_checkpoint(log_dir, "recovery-point-offset-checkpoint",
                         {(p.topic, p.partition): p.next_offset for p in parts})
    return log_dir
