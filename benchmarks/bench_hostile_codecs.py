"""Hostile compressed batches cost what a valid batch of their size costs.

For every case of ``fixtures/hostile_codecs.py`` and a valid batch of the same codec and
about the same size, a fresh child process decodes the batch ``--repeat`` times (after one
small valid batch of the codec warmed it up) with ``iter_records`` and reports:

  rss+      growth of the child's peak resident memory (ru_maxrss) over the decodes, KiB:
            every allocation counts (Python, the codec's Rust code, anonymous maps)
  traced    tracemalloc peak of one decode (Python allocations only), KiB
  cpu/batch user+system CPU time per decode, microseconds

    PYTHONPATH=. python benchmarks/bench_hostile_codecs.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, tracemalloc
from fixtures import hostile_codecs as hc
from kafkatx.errors import DecodeError
from kafkatx.format.record_batch import iter_records, read_batch_header
case, label, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
codec, build = hc.HOSTILE[case]
batch = build()
if label == "valid":
    batch = hc.valid(codec, len(batch))
def once(b=batch):
    try:
        return len(list(iter_records(b, read_batch_header(b, 0))))
    except DecodeError as err:
        return str(err).split(":", 1)[0]
once(hc.valid(codec, 100))  # the codec's first use (imports, tables) before the baseline
base = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(repeat):
    once()
r = resource.getrusage(resource.RUSAGE_SELF)
tracemalloc.start(); outcome = once(); traced = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
cpu = (r.ru_utime + r.ru_stime) - (base.ru_utime + base.ru_stime)
print(json.dumps({"size": len(batch), "outcome": outcome, "rss_kib": r.ru_maxrss - base.ru_maxrss,
                  "traced_kib": traced // 1024, "cpu_us": cpu / repeat * 1e6}))
"""


def measure(case: str, label: str, repeat: int) -> dict[str, object]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD, case, label, str(repeat)], capture_output=True, text=True,
                         check=True, cwd=root, env=env)
    got: dict[str, object] = json.loads(out.stdout)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fixtures.hostile_codecs import HOSTILE

    print(f"{'case':22} {'batch':8} {'bytes':>6} {'rss+ KiB':>9} {'traced KiB':>10} {'cpu/batch us':>12}  outcome")
    for case in HOSTILE:
        for label in ("hostile", "valid"):
            m = measure(case, label, args.repeat)
            print(f"{case:22} {label:8} {m['size']:>6} {m['rss_kib']:>9} {m['traced_kib']:>10} "
                  f"{m['cpu_us']:>12.1f}  {m['outcome']}")


if __name__ == "__main__":
    main()
