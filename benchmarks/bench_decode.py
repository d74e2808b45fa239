"""Decode throughput and memory: kafkatx vs kafka-python vs aiokafka on the same segment.

Builds a segment of ~1 KB uncompressed magic 2 batches (10 records of ~80 bytes
each, a few headers) in a temp dir, mmaps it, and times three passes per reader:

  header    frame every batch and read its header fields
  crc       header + CRC-32C check of every batch
  deep      header + every record's offset, timestamp, key, value and headers

kafkatx runs twice: with its compiled fast path (kafkatx/format/_batch.c,
built by ``pip install -e .``) and with the pure-Python loops it falls back to
(what ``KAFKATX_PURE_PYTHON=1`` selects).

Memory is the peak of tracemalloc-traced allocations during a pass (the mmap's
pages are not Python allocations), which stays flat when a reader streams and
grows with the segment when it does not.

    PYTHONPATH=. python benchmarks/bench_decode.py [--size-mb 100] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gc
import mmap
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable

import kafkatx.format.record_batch as record_batch
from kafkatx.format import compiled as kafkatx_compiled
from kafkatx.format.record_batch import Record, build_batch, crc_valid, iter_batches, iter_records

RECORDS_PER_BATCH = 10


def build_segment(path: str, size_mb: float) -> tuple[int, int]:
    target = int(size_mb * 1024 * 1024)
    written = 0
    batches = 0
    offset = 0
    ts = 1_700_000_000_000
    with open(path, "wb") as f:
        while written < target:
            recs = [Record(offset=offset + i, timestamp=ts + i, key=b"key-%08d" % (offset + i),
                           value=os.urandom(32).hex().encode() + b"x" * 20,
                           headers=(("trace", b"abcdef"),) if i % 3 == 0 else ())
                    for i in range(RECORDS_PER_BATCH)]
            b = build_batch(recs, producer_id=4242, producer_epoch=3, base_sequence=offset % 2**31)
            f.write(b)
            written += len(b)
            batches += 1
            offset += RECORDS_PER_BATCH
            ts += 10
    return written, batches


# ------------------------------------------------------------------ the passes

def kafkatx_header(buf: mmap.mmap) -> tuple[int, int]:
    n = 0
    last = 0
    for h in iter_batches(buf):
        last = h.base_offset + h.last_offset_delta + h.producer_id
        n += 1
    return n, last


def kafkatx_crc(buf: mmap.mmap) -> tuple[int, int]:
    n = 0
    bad = 0
    for h in iter_batches(buf):
        if not crc_valid(buf, h):
            bad += 1
        n += 1
    return n, bad


def kafkatx_crc_strict(buf: mmap.mmap) -> tuple[int, int]:
    # the strict reader: iter_batches(verify_crc=True) raises CrcMismatch on the first bad batch
    n = 0
    for _ in iter_batches(buf, verify_crc=True):
        n += 1
    return n, 0


def kafkatx_deep(buf: mmap.mmap) -> tuple[int, int]:
    n = 0
    total = 0
    for h in iter_batches(buf):
        for r in iter_records(buf, h):
            total += len(r.value) + len(r.headers) + r.offset
            n += 1
    return n, total


def _kp_batches(buf: mmap.mmap):  # type: ignore[no-untyped-def]
    from kafka.record.memory_records import MemoryRecords
    recs = MemoryRecords(memoryview(buf))
    while True:
        b = recs.next_batch()
        if b is None:
            return
        yield b


def _aio_batches(buf: mmap.mmap):  # type: ignore[no-untyped-def]
    from aiokafka.record.memory_records import MemoryRecords  # compiled (_crecords) when available
    recs = MemoryRecords(bytes(buf))  # the Cython reader needs a bytes object
    while True:
        b = recs.next_batch()
        if b is None:
            return
        yield b


def make_foreign(batches: Callable) -> dict[str, Callable[[mmap.mmap], tuple[int, int]]]:  # type: ignore[type-arg]
    def header(buf: mmap.mmap) -> tuple[int, int]:
        n = 0
        last = 0
        for b in batches(buf):
            last = b.base_offset + b.last_offset_delta + b.producer_id
            n += 1
        return n, last

    def crc(buf: mmap.mmap) -> tuple[int, int]:
        n = 0
        bad = 0
        for b in batches(buf):
            if not b.validate_crc():
                bad += 1
            n += 1
        return n, bad

    def deep(buf: mmap.mmap) -> tuple[int, int]:
        n = 0
        total = 0
        for b in batches(buf):
            for r in b:
                total += len(r.value) + len(r.headers) + r.offset
                n += 1
        return n, total

    return {"header": header, "crc": crc, "deep": deep}


def with_path(compiled: bool, passes: dict[str, Callable[[mmap.mmap], tuple[int, int]]]
              ) -> dict[str, Callable[[mmap.mmap], tuple[int, int]]]:
    """The same kafkatx passes pinned to the compiled or the pure-Python path."""
    def pinned(fn: Callable[[mmap.mmap], tuple[int, int]]) -> Callable[[mmap.mmap], tuple[int, int]]:
        def run(buf: mmap.mmap) -> tuple[int, int]:
            with kafkatx_compiled.pure_python(not compiled):
                return fn(buf)
        return run

    return {name: pinned(fn) for name, fn in passes.items()}


def measure(fn: Callable[[mmap.mmap], tuple[int, int]], buf: mmap.mmap, repeat: int) -> tuple[float, int, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        count, _ = fn(buf)
        best = min(best, time.perf_counter() - t0)
    gc.collect()
    tracemalloc.start()
    fn(buf)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, count, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100.0, help="segment size to build (default 100)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per pass; the best is reported")
    ap.add_argument("--skip", default="", help="comma-separated readers to skip (kafka-python,aiokafka)")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "00000000000000000000.log")
        t0 = time.perf_counter()
        size, batches = build_segment(path, args.size_mb)
        print(f"segment: {size / 1e6:.1f} MB, {batches} batches, {batches * RECORDS_PER_BATCH} records "
              f"(built in {time.perf_counter() - t0:.1f}s)")
        ours = {"header": kafkatx_header, "crc": kafkatx_crc, "deep": kafkatx_deep}
        strict = {"crc": kafkatx_crc_strict}
        readers: dict[str, dict[str, Callable[[mmap.mmap], tuple[int, int]]]] = {}
        if record_batch._batch is not None:
            readers["kafkatx (compiled)"] = with_path(True, ours)
            readers["kafkatx (verify_crc, C)"] = with_path(True, strict)
        else:
            print("kafkatx's compiled fast path is not in use (not built, or KAFKATX_PURE_PYTHON is set)")
        readers["kafkatx (pure Python)"] = with_path(False, ours)
        readers["kafkatx (verify_crc, Py)"] = with_path(False, strict)
        base_name = next(iter(readers))
        if "kafka-python" not in skip:
            readers["kafka-python"] = make_foreign(_kp_batches)
        if "aiokafka" not in skip:
            from aiokafka.record.memory_records import MemoryRecords
            label = "aiokafka (compiled)" if "_crecords" in MemoryRecords.__module__ else "aiokafka (pure)"
            readers[label] = make_foreign(_aio_batches)
        results: dict[tuple[str, str], float] = {}
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            print(f"{'pass':7} {'reader':26} {'MB/s':>9} {'units/s':>14} {'peak KiB':>9}")
            for pass_name in ("header", "crc", "deep"):
                for reader, passes in readers.items():
                    if pass_name not in passes:
                        continue
                    secs, count, peak = measure(passes[pass_name], buf, args.repeat)
                    unit = "rec/s" if pass_name == "deep" else "batch/s"
                    results[(pass_name, reader)] = secs
                    print(f"{pass_name:7} {reader:26} {size / 1e6 / secs:9.1f} {count / secs:12.0f} {unit:>1}"
                          f" {peak / 1024:9.0f}")
        print()
        for pass_name in ("header", "crc", "deep"):
            base = results[(pass_name, base_name)]
            ratios = ", ".join(f"{r}: {results[(pass_name, r)] / base:.2f}x"
                               for r in readers if r != base_name and (pass_name, r) in results)
            print(f"{base_name} speed-up on {pass_name}: {ratios}")
        print("(aiokafka's compiled reader needs a bytes copy of the segment, counted in its peak memory)")


if __name__ == "__main__":
    main()
