"""One bounded fuzz target per decoder: seeded mutations of real fixture bytes.

Every target takes real inputs from ``fixtures/`` (or built with the project's encoders),
mutates them (bit flips, interesting integers, truncation, insertion, deletion, splices),
recomputes the checksum where the format has one so mutations get past it, and feeds the
decoder. Only :class:`DecodeError` subclasses may escape, and no input may take longer
than ``HANG_SECONDS`` (a SIGALRM turns a hang into a failure). Each target runs for
``KAFKATX_FUZZ_SECONDS`` (default 2.5 s) or ``MAX_INPUTS`` inputs, whichever comes first,
with a fixed seed (``KAFKATX_FUZZ_SEED``), so the whole set stays well under a minute.
``pytest -s`` prints how many inputs each decoder got.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import crc32c
import pytest

from kafkatx.errors import DecodeError
from kafkatx.format.checkpoint import read_leader_epoch_checkpoint, read_offset_checkpoint
from kafkatx.format.compression import Compression
from kafkatx.format.consumer_offsets import decode_offsets_key, decode_offsets_value
from kafkatx.format.control import (
    ControlType,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
)
from kafkatx.format.legacy import iter_message_set
from kafkatx.format.offset_index import read_offset_index
from kafkatx.format.producer_snapshot import read_producer_snapshot
from kafkatx.format.record_batch import (
    Record,
    build_batch,
    build_control_batch,
    crc_valid,
    iter_batches,
    iter_records,
    read_control_record,
)
from kafkatx.format.time_index import read_time_index
from kafkatx.format.txn_index import read_txn_index
from kafkatx.format.txn_log import decode_txn_log_key, decode_txn_log_value

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SECONDS = float(os.environ.get("KAFKATX_FUZZ_SECONDS", "2.5"))
SEED = int(os.environ.get("KAFKATX_FUZZ_SEED", "15"))
MAX_INPUTS = 50_000
HANG_SECONDS = 5
COUNTS: dict[str, int] = {}

_INTERESTING = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                2**63 - 1, 2**63, 2**64 - 1]


def _files(pattern: str) -> list[Path]:
    return sorted(p for d in ("hanging", "ghost", "clean", "two-brokers") for p in (FIXTURES / d).rglob(pattern)
                  if p.is_file() and p.stat().st_size > 0)


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        kind = rng.randrange(7)
        if not b:
            b += rng.randbytes(rng.randrange(1, 16))
            continue
        i = rng.randrange(len(b))
        if kind == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[i] = rng.choice((0, 0xFF, 0x7F, 0x80, 0x01))
        elif kind == 2:
            width = rng.choice((1, 2, 4, 8))
            value = rng.choice(_INTERESTING) & ((1 << (8 * width)) - 1)
            b[i:i + width] = value.to_bytes(width, "big")
        elif kind == 3:
            del b[rng.randrange(len(b) + 1):]
        elif kind == 4:
            b[i:i] = rng.randbytes(rng.randrange(1, 9))
        elif kind == 5:
            del b[i:i + rng.randrange(1, 9)]
        else:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 64)]
    return bytes(b)


def fix_v2_crc(b: bytes) -> bytes:
    """Recompute the CRC-32C of each v2 batch the length fields frame (so mutations get past it)."""
    out = bytearray(b)
    pos = 0
    while pos + 61 <= len(out):
        (length,) = struct.unpack_from(">i", out, pos + 8)
        end = pos + 12 + length
        if length < 49 or end > len(out) or out[pos + 16] != 2:
            break
        struct.pack_into(">I", out, pos + 17, crc32c.crc32c(bytes(out[pos + 21:end])))
        pos = end
    return bytes(out)


def fix_legacy_crc(b: bytes) -> bytes:
    out = bytearray(b)
    pos = 0
    while pos + 26 <= len(out):
        (size,) = struct.unpack_from(">i", out, pos + 8)
        end = pos + 12 + size
        if size < 14 or end > len(out):
            break
        struct.pack_into(">I", out, pos + 12, zlib.crc32(bytes(out[pos + 16:end])))
        pos = end
    return bytes(out)


def fix_snapshot_crc(b: bytes) -> bytes:
    if len(b) < 10:
        return b
    out = bytearray(b)
    struct.pack_into(">I", out, 2, crc32c.crc32c(bytes(out[10:])))
    return bytes(out)


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hang()


def run_target(name: str, seeds: list[bytes], decode: Callable[[bytes], object],
               fix: Callable[[bytes], bytes] = lambda b: b) -> int:
    assert seeds, f"{name}: no seed inputs found in the fixtures"
    rng = random.Random(f"{SEED}:{name}")
    for seed in seeds:  # the unmutated seeds decode cleanly (or with a DecodeError for corrupt fixtures)
        try:
            decode(seed)
        except DecodeError:
            pass
    old = signal.signal(signal.SIGALRM, _alarm)
    deadline = time.monotonic() + SECONDS
    n = 0
    try:
        while n < MAX_INPUTS and time.monotonic() < deadline:
            data = fix(mutate(rng, rng.choice(seeds)))
            n += 1
            signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
            try:
                decode(data)
            except DecodeError:
                pass
            except _Hang:
                pytest.fail(f"{name}: input took more than {HANG_SECONDS}s: {data[:200].hex()}")
            except Exception as err:  # noqa: BLE001 - the very thing the fuzzer looks for
                pytest.fail(f"{name}: {type(err).__name__}: {err} escaped on input {data[:400].hex()}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    COUNTS[name] = n
    return n


# -- seeds ----------------------------------------------------------------------------------------------------


def _split_batches(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    try:
        for h in iter_batches(data):
            yield data[h.position:h.position + h.size]
    except DecodeError:
        return


def _records(folder_prefix: str) -> list[tuple[bytes | None, bytes | None]]:
    out = []
    for seg in _files("*.log"):
        if not seg.parent.name.startswith(folder_prefix):
            continue
        data = seg.read_bytes()
        try:
            for h in iter_batches(data):
                if not h.is_control:
                    out.extend((r.key, r.value) for r in iter_records(data, h))
        except DecodeError:
            continue
    return out


def _v2_seeds() -> list[bytes]:
    seeds = [b for seg in _files("*.log") if not seg.parent.name.startswith("legacy") for b in _split_batches(seg)
             if len(b) > 16 and b[16] == 2][:400]
    recs = [Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"value %d " % i * 3,
                   headers=(("h", b"v"),)) for i in range(5)]
    for codec in Compression:
        seeds.append(build_batch(recs, base_offset=10, compression=codec, producer_id=7, producer_epoch=1,
                                 is_transactional=True))
    seeds.append(build_control_batch(offset=15, control_type=ControlType.ABORT, producer_id=7, producer_epoch=1,
                                     coordinator_epoch=3, timestamp=1_700_000_000_000))
    return seeds


def _legacy_seeds() -> list[bytes]:
    seeds = []
    for seg in _files("*.log"):
        data = seg.read_bytes()
        if len(data) > 16 and data[16] in (0, 1):
            try:
                seeds.extend(data[m.position:m.position + 12 + m.size] for m in iter_message_set(data))
            except DecodeError:
                pass
    return seeds


# -- decoders -------------------------------------------------------------------------------------------------


def _decode_batches(data: bytes) -> None:
    for h in iter_batches(data):
        crc_valid(data, h)
        for _ in iter_records(data, h, max_decompressed=1 << 20):
            pass
        if h.is_control and h.magic >= 2:
            read_control_record(data, h)


def _decode_checkpoints(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for reader in (read_offset_checkpoint, read_leader_epoch_checkpoint):
        try:
            reader(text)
        except DecodeError:
            pass


def _decode_control(data: bytes) -> None:
    for decoder in (decode_control_key, decode_end_txn_marker):
        try:
            decoder(data)
        except DecodeError:
            pass


def _kv(data: bytes) -> tuple[bytes, bytes]:
    """A fuzzed record: a 2-byte key length prefix splits one mutated buffer into key and value."""
    n = int.from_bytes(data[:2], "big") if len(data) >= 2 else 0
    return data[2:2 + n], data[2 + n:]


def _join(key: bytes | None, value: bytes | None) -> bytes:
    k = key or b""
    return len(k).to_bytes(2, "big") + k + (value or b"")


def _decode_txn_log(data: bytes) -> None:
    key, value = _kv(data)
    try:
        decode_txn_log_key(key)
    finally:
        decode_txn_log_value(value)


def _decode_offsets(data: bytes) -> None:
    key, value = _kv(data)
    decode_offsets_value(decode_offsets_key(key), value)


TARGETS: dict[str, tuple[Callable[[], list[bytes]], Callable[[bytes], object], Callable[[bytes], bytes]]] = {
    "record batch v2": (_v2_seeds, _decode_batches, fix_v2_crc),
    "record batch v0/v1 (legacy)": (_legacy_seeds, _decode_batches, fix_legacy_crc),
    "control record": (lambda: [encode_control_key(t) for t in ControlType] + [encode_end_txn_marker(e)
                                                                              for e in (0, 5, 2**31 - 1)],
                       _decode_control, lambda b: b),
    "offset index": (lambda: [p.read_bytes() for p in _files("*.index")],
                     lambda b: read_offset_index(b, 1000), lambda b: b),
    "time index": (lambda: [p.read_bytes() for p in _files("*.timeindex")],
                   lambda b: read_time_index(b, 1000), lambda b: b),
    "txn index": (lambda: [p.read_bytes() for p in _files("*.txnindex")], read_txn_index, lambda b: b),
    "producer snapshot": (lambda: [p.read_bytes() for p in _files("*.snapshot")],
                          lambda b: read_producer_snapshot(b, verify_crc=True), fix_snapshot_crc),
    "checkpoint": (lambda: [p.read_bytes() for p in _files("*checkpoint")], _decode_checkpoints, lambda b: b),
    "txn_log (__transaction_state)": (lambda: [_join(k, v) for k, v in _records("__transaction_state")],
                                      _decode_txn_log, lambda b: b),
    "consumer_offsets": (lambda: [_join(k, v) for k, v in _records("__consumer_offsets")],
                         _decode_offsets, lambda b: b),
}


@pytest.mark.parametrize("name", list(TARGETS))
def test_fuzz(name: str) -> None:
    seeds, decode, fix = TARGETS[name]
    n = run_target(name, seeds(), decode, fix)
    assert n >= 50, f"{name}: only {n} inputs in {SECONDS}s"


def test_fuzz_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the inputs fuzzed per decoder (run with -s); runs last in this module."""
    with capsys.disabled():
        for name, n in COUNTS.items():
            print(f"\nfuzz: {name}: {n} inputs")
    assert set(COUNTS) <= set(TARGETS)


def test_mutator_gets_past_the_crc() -> None:
    """The CRC fix-ups work: a mutated batch with the fix is CRC-valid (so decoding goes deeper)."""
    rng = random.Random(1)
    seed = build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"v" * 40)], base_offset=0)
    valid = 0
    for _ in range(200):
        data = fix_v2_crc(mutate(rng, seed))
        try:
            h = next(iter_batches(data))
        except (DecodeError, StopIteration):
            continue
        valid += crc_valid(data, h)
    assert valid > 50
