"""dump-segment's memory is bounded by one batch's decompressed records, in every output format.

The hostile file: zstd batches of a few KB each holding one record of 250 MB of zeros (under the
256 MiB decompression bound, so every batch is valid and is dumped). Before: each batch's records
were decompressed, copied, and (json, yaml) kept until the end, and hex-printed whole: 1 GB per
batch for jsonl, 6 GB for six. Now the records section is decompressed once, not copied, keys and
values are views of it, and a key or value over ``PRINT_BOUND`` bytes is printed cut with its length.

Peak memory is the child's ``ru_maxrss`` as a fresh parent sees it (``RUSAGE_CHILDREN``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import hostile_codecs as hc
from kafkatx.render import kafka_dump as kd

ROOT = Path(__file__).resolve().parents[2]
KAFKATX = [sys.executable, "-m", "kafkatx"]
VALUE = 250_000_000
LIMIT_KIB = 300 * 1024

MEASURE = r"""
import json, resource, subprocess, sys
got = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
print(json.dumps({"code": got.returncode, "stdout_bytes": len(got.stdout), "tail": got.stdout[-300:].decode(errors="replace"),
                  "stderr": got.stderr[-2000:].decode(errors="replace"),
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""

FORMATS = {
    "text": ["--deep-iteration", "--print-data"],
    "json": ["--deep-iteration", "--format", "json"],
    "jsonl": ["--deep-iteration", "--format", "jsonl"],
    "yaml": ["--deep-iteration", "--format", "yaml"],
    "print-data-log": ["--print-data-log", "--files"],
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    part = tmp_path_factory.mktemp("hostile") / "huge-0"
    part.mkdir()
    seg = part / "00000000000000000000.log"
    seg.write_bytes(hc.huge_record_segment(2, VALUE))
    assert seg.stat().st_size < 48 * 1024
    return seg


def _run(args: list[str]) -> dict:
    got = subprocess.run([sys.executable, "-c", MEASURE, *KAFKATX, *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    return json.loads(got.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_dump_of_batches_of_250_mb_records_stays_under_300_mb(hostile: Path, fmt: str) -> None:
    got = _run(["dump-segment", *FORMATS[fmt], str(hostile)])
    assert got["code"] == 0, got["stderr"]
    assert got["maxrss_kib"] < LIMIT_KIB, got["maxrss_kib"]  # before: 0.7-1.9 GB with two batches
    # each value is printed cut, with its length: two records, two marks, never 250 MB of text
    assert got["stdout_bytes"] < 2 * 4 * kd.PRINT_BOUND
    assert kd.cut_suffix(VALUE) in " ".join(got["tail"].split())  # YAML folds the long string at a space


def test_a_value_over_the_bound_is_printed_cut_with_its_length(tmp_path: Path) -> None:
    """The same form on every path (C hands such a record to Python) and every codec."""
    from kafkatx.format.compression import Compression
    from kafkatx.format.record_batch import Record, build_batch

    big = b"x" * (kd.PRINT_BOUND + 10)
    part = tmp_path / "t-0"
    part.mkdir()
    seg = part / "00000000000000000000.log"
    data = b"".join(build_batch([Record(offset=i, timestamp=1_700_000_000_000, key=b"k", value=big,
                                        headers=(("h", big),))], base_offset=i, compression=c)
                    for i, c in enumerate(Compression))
    seg.write_bytes(data)
    shown = "x" * kd.PRINT_BOUND + kd.cut_suffix(len(big))
    text = subprocess.run([*KAFKATX, "dump-segment", "--deep-iteration", "--print-data", str(seg)],
                          capture_output=True, text=True, cwd=ROOT, check=True).stdout
    lines = [line for line in text.splitlines() if line.startswith("| offset")]
    assert len(lines) == len(Compression)
    for line in lines:
        assert f"valueSize: {len(big)} " in line  # the size is the record's own
        assert line.endswith(f" key: k payload: {shown}")
    for fmt in ("jsonl", "json"):
        out = subprocess.run([*KAFKATX, "dump-segment", "--deep-iteration", "--format", fmt, str(seg)],
                             capture_output=True, text=True, cwd=ROOT, check=True).stdout
        batches = [json.loads(x) for x in out.splitlines()] if fmt == "jsonl" else json.loads(out)
        assert [b["records"][0]["value"] for b in batches] == [shown] * len(Compression)
        assert [b["records"][0]["headers"] for b in batches] == [[{"key": "h", "value": shown}]] * len(Compression)
