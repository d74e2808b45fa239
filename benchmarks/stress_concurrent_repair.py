"""Two ``abort-hanging --all --execute`` at once on one copy of fixtures/hanging, ``--runs`` times.

Each run copies ``fixtures/hanging``, starts two kafkatx processes on it with random start delays
(0-``--jitter`` ms) and ``--lock-timeout 60``, waits for both, and compares every file of the log dir
(sha256, ``.lock`` aside) with what one repair leaves. Reports the outcomes (exit codes, how many runs
applied twice) and how many runs ended byte-identical to one repair.

    PYTHONPATH=. python benchmarks/stress_concurrent_repair.py [--runs 48] [--jitter 300]
        [--kafkatx OLD_CHECKOUT --no-wait]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOW = 1_700_007_200_000  # fixtures/README.md: T0 + 2 h


def digest(root: Path) -> dict[str, str]:
    return {(Path(d) / f).relative_to(root).as_posix(): hashlib.sha256((Path(d) / f).read_bytes()).hexdigest()
            for d, _dirs, files in os.walk(root) for f in files if f != ".lock"}


WAIT = ["--lock-timeout", "60"]


def cmd(ld: Path, journal: Path) -> list[str]:
    return [sys.executable, "-m", "kafkatx", "abort-hanging", "--log-dir", str(ld), "--all", "--execute",
            "--now", str(NOW), "--journal", str(journal), *WAIT, "--format", "json"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=48)
    ap.add_argument("--jitter", type=int, default=300, help="max random start delay, ms")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kafkatx", type=Path, default=REPO,
                    help="checkout whose kafkatx to run (e.g. an older commit, for a before figure)")
    ap.add_argument("--no-wait", action="store_true", help="omit --lock-timeout (for kafkatx versions without it)")
    args = ap.parse_args()
    if args.no_wait:
        WAIT.clear()
    rnd = random.Random(args.seed)
    env = dict(os.environ, PYTHONPATH=str(args.kafkatx.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        ref = base / "ref" / "hanging"
        shutil.copytree(REPO / "fixtures" / "hanging", ref)
        subprocess.run(cmd(ref, base / "ref.journal"), check=True, env=env, capture_output=True, cwd=base)
        want = digest(ref)
        identical = 0
        outcomes: collections.Counter[tuple[int, int, int]] = collections.Counter()
        t0 = time.monotonic()
        for i in range(args.runs):
            ld = base / f"run{i}" / "hanging"
            shutil.copytree(REPO / "fixtures" / "hanging", ld)
            delays = [rnd.uniform(0, args.jitter / 1000) for _ in range(2)]
            procs = []
            start = time.monotonic()
            for k, delay in sorted(enumerate(delays), key=lambda kd: kd[1]):
                time.sleep(max(0.0, start + delay - time.monotonic()))
                # cwd outside any checkout: `python -m` puts the cwd first on sys.path, before PYTHONPATH
                procs.append(subprocess.Popen(cmd(ld, base / f"run{i}-{k}.journal"), env=env, cwd=base,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            codes = sorted(p.wait() for p in procs)
            journals = sum((base / f"run{i}-{k}.journal").exists() for k in range(2))
            outcomes[(codes[0], codes[1], journals)] += 1
            same = digest(ld) == want
            identical += same
            print(f"run {i + 1:2}/{args.runs}: delays {delays[0] * 1000:5.0f}/{delays[1] * 1000:5.0f} ms, exit codes "
                  f"{codes}, journals written {journals}, {'identical' if same else 'DIFFERENT'} to one repair",
                  flush=True)
        took = time.monotonic() - t0
    print(f"\n{identical}/{args.runs} runs byte-identical to one repair ({took:.0f} s)")
    for (a, b, j), n in sorted(outcomes.items()):
        print(f"  {n:2} run(s): exit codes {a} and {b}, {j} journal(s) written (= repairs applied)")
    if identical != args.runs:
        sys.exit(1)


if __name__ == "__main__":
    main()
