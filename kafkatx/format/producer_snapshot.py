"""Producer state snapshot (``<offset>.snapshot``).

Kafka schema (``storage/src/main/resources/message/ProducerSnapshot.json``; read and
written by ``ProducerStateManager.readSnapshot`` / ``writeSnapshot``)::

    header (10 bytes):
      version        int16   1 (PRODUCER_SNAPSHOT_VERSION)
      crc            uint32  CRC-32C of every byte from PRODUCER_ENTRIES_OFFSET (6) to the end
      entry count    int32
    entry (46 bytes):
      producerId             int64
      epoch                  int16
      lastSequence           int32
      lastOffset             int64
      offsetDelta            int32
      timestamp              int64
      coordinatorEpoch       int32
      currentTxnFirstOffset  int64   -1 when the producer has no open transaction

The CRC covers the count and the entries but not the version: Kafka computes
``Crc32C.compute(buffer, PRODUCER_ENTRIES_OFFSET, buffer.length - PRODUCER_ENTRIES_OFFSET)``
over the whole file, so trailing garbage would also fail Kafka's check. We
report ``crc_valid`` instead of refusing the file (a finding, not an error);
``verify_crc=True`` raises :class:`CrcMismatch` like Kafka's
``CorruptSnapshotException``. Bytes after the last counted entry are an error
(:class:`DecodeError` at their position): Kafka's writer never produces them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from msgspec import Struct

from kafkatx.errors import BadLength, CrcMismatch, DecodeError, Truncated, UnknownVersion
from kafkatx.format import _primitives
from kafkatx.format._primitives import Buffer

# version int16, crc uint32, entry count int32
_HEADER = struct.Struct(">hIi")
_VERSION = struct.Struct(">h")
HEADER_SIZE = _HEADER.size  # 10
CRC_OFFSET = 2
ENTRIES_OFFSET = 6  # ProducerStateManager.PRODUCER_ENTRIES_OFFSET: where the CRC starts
# producerId int64, epoch int16, lastSequence int32, lastOffset int64, offsetDelta int32,
# timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size  # 46
SNAPSHOT_VERSION = 1


class ProducerSnapshotEntry(Struct, frozen=True, kw_only=True):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: no open transaction


class ProducerSnapshot(Struct, frozen=True, kw_only=True):
    version: int
    crc: int
    crc_valid: bool
    entries: tuple[ProducerSnapshotEntry, ...]
    computed_crc: int = -1  # the CRC-32C of the bytes the crc covers (what Kafka's message names)


def read_producer_snapshot(buf: Buffer, *, verify_crc: bool = False) -> ProducerSnapshot:
    # a context-managed view: an mmap cannot be closed while a view of it is alive,
    # and an exception traceback would otherwise keep this one alive
    with memoryview(buf) as view:
        size = len(view)
        if size < 2:
            raise Truncated(f"producer snapshot: version needs 2 bytes, file has {size}", position=0)
        # the whole header in one unpack when it is there (the version is checked first all the same)
        version, crc, count = _HEADER.unpack_from(view, 0) if size >= HEADER_SIZE else (*_VERSION.unpack_from(view), 0, 0)
        if version != SNAPSHOT_VERSION:
            raise UnknownVersion(f"producer snapshot: unknown file version {version}", position=0)
        if size < HEADER_SIZE:
            field, at = ("crc", CRC_OFFSET) if size < ENTRIES_OFFSET else ("entry count", ENTRIES_OFFSET)
            raise Truncated(f"producer snapshot: {field} is cut off (file has {size} bytes)", position=at)
        if count < 0:
            raise BadLength(f"producer snapshot: negative entry count {count}", position=ENTRIES_OFFSET)
        left = size - HEADER_SIZE
        if count * ENTRY_SIZE > left:
            raise Truncated(
                f"producer snapshot: {count} entries need {count * ENTRY_SIZE} bytes but only {left} follow",
                position=ENTRIES_OFFSET,
            )
        computed = _primitives.crc32c(view[ENTRIES_OFFSET:])
        crc_ok = computed == crc
        if verify_crc and not crc_ok:
            raise CrcMismatch(
                f"producer snapshot: stored crc {crc} != computed crc {computed}", position=CRC_OFFSET
            )
        end = HEADER_SIZE + count * ENTRY_SIZE
        if end != size:
            raise DecodeError(f"producer snapshot: {size - end} trailing bytes after {count} entries",
                              position=end)
        entries = tuple(
            ProducerSnapshotEntry(
                producer_id=f[0], producer_epoch=f[1], last_sequence=f[2], last_offset=f[3],
                offset_delta=f[4], timestamp=f[5], coordinator_epoch=f[6], current_txn_first_offset=f[7],
            )
            for f in _ENTRY.iter_unpack(view[HEADER_SIZE:end])
        )
        return ProducerSnapshot(version=version, crc=crc, crc_valid=crc_ok, entries=entries, computed_crc=computed)


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """Bytes ``ProducerStateManager.writeSnapshot`` would write for these entries (in the given order)."""
    body = bytearray()
    n = 0
    for e in entries:
        try:
            body += _ENTRY.pack(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset,
                                e.offset_delta, e.timestamp, e.coordinator_epoch,
                                e.current_txn_first_offset)
        except struct.error as err:
            raise ValueError(f"producer snapshot entry out of range: {err}") from err
        n += 1
    counted = struct.pack(">i", n) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, _primitives.crc32c(counted)) + counted
