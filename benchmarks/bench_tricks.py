"""Each speed trick outside the compiled modules against the command it serves: with it and without it,
beside a floor, in one run.

    PYTHONPATH=. python benchmarks/bench_tricks.py --before /path/to/checkout/with/the/tricks
    PYTHONPATH=. python benchmarks/bench_tricks.py --before DIR --variant "C calls the class=/path/to/variant"
    PYTHONPATH=. python benchmarks/bench_tricks.py --only params --repeat 10     # start-up only (seconds)

docs/internals.md ("Speed tricks, measured") holds the figures and what was decided. A trick stays only
where it earns at least 20% on the user-visible command it serves; the columns:

* ``this tree``: this checkout (``PYTHONPATH`` = its root, its C extensions built in place);
* ``before`` (``--before DIR``): another checkout, e.g. the commit before a trick was removed;
* ``Typer's conversion`` (``params`` rows only): this tree with ``kafkatx.cli.fastparams.install`` a no-op,
  so Typer converts every option value through pydantic itself (what the command costs without the patch);
* ``ProcessPoolExecutor`` (``fanout`` rows only): this tree with the fan-out done by
  ``concurrent.futures.ProcessPoolExecutor`` (fork context; ``benchmarks/ppe_fanout.py``), and ``one process``
  (``KAFKATX_JOBS=1``);
* ``--variant NAME=DIR``: any other checkout (e.g. one whose ``_wire.h`` makes records by calling their
  class instead of storing into their slots).

The rows (``--only``, comma-separated):

* ``json``: ``list-txn --format json`` on ``--ids`` transactional ids (1,000,000: the rows from which the
  two-process JSON writer forked its second writer), floor: aiokafka iterating the same records;
* ``params``: ``kafkatx --version`` and ``find-hanging`` on ``fixtures/hanging`` (start-up), floor
  ``python -c "import typer"``;
* ``records``: ``dump-segment --deep-iteration`` as jsonl (rows rendered by compiled code) and as json (a
  ``Record`` per record, made by the compiled framing), ``dump-segment`` (headers), ``verify`` and
  ``find-hanging`` on a ``--size-mb`` partition of bench_commands.py's shape, floor: aiokafka's CRC scan;
* ``fanout``: ``verify``, ``lag`` and ``find-hanging`` on ``--topics`` x 50 partitions of bench_scale.py's
  ``partitions`` shape, floor: every file read once.

Each cell is the best of ``--repeat`` whole processes (stdout to /dev/null, page cache warm, one untimed
run first), the repetitions of every row and column interleaved; beside the wall time, the CPU time
(user + system, the process and the children it waited for): on a shared machine the CPU time is the
steadier figure, and a trick that only moves work to a second process shows there as no saving. The
load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_commands  # noqa: E402
import bench_scale  # noqa: E402

THIS = "this tree"
TYPER = "Typer's conversion"
POOL = "ProcessPoolExecutor"
ONE = "one process"
# kafkatx's CLI with fastparams' install made a no-op: every option value converted by Typer itself.
WITHOUT_FASTPARAMS = ("import sys; import kafkatx.cli.fastparams as f; f.install = lambda param: None; "
                      "sys.argv[0] = 'kafkatx'; from kafkatx.cli.main import run; run()")
CLI = "import sys; sys.argv[0] = 'kafkatx'; from kafkatx.cli.main import run; run()"


@dataclass
class Row:
    label: str
    args: list[str]  # kafkatx's arguments, or a whole argv for a floor
    floor: str | None  # the floor row's label; None: this row is a floor
    columns: tuple[str, ...] = ()  # the columns it runs in (a floor: one)
    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)


def _env(tree: Path, column: str = THIS) -> dict[str, str]:
    env = bench_commands._env(tree)
    env.pop("KAFKATX_JOBS", None)
    if column == ONE:
        env["KAFKATX_JOBS"] = "1"
    return env


def _argv(row: Row, column: str) -> list[str]:
    if row.floor is None:
        return row.args
    if column == POOL:
        return [sys.executable, str(ROOT / "benchmarks" / "ppe_fanout.py"), *row.args]
    return [sys.executable, "-c", WITHOUT_FASTPARAMS if column == TYPER else CLI, *row.args]


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                          cwd=bench_commands.NEUTRAL_CWD)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(rows: list[Row], trees: dict[str, Path], repeat: int) -> None:
    for r in rows:
        for c in r.columns:
            _once(_argv(r, c), _env(trees[c], c))
    for _ in range(repeat):
        for r in rows:
            for c in r.columns:
                wall, cpu = _once(_argv(r, c), _env(trees[c], c))
                r.wall[c] = min(r.wall.get(c, float("inf")), wall)
                r.cpu[c] = min(r.cpu.get(c, float("inf")), cpu)


def table(title: str, rows: list[Row], columns: list[str]) -> None:
    by_label = {r.label: r for r in rows}
    print(f"\n### {title}\n")
    print("| command | " + " | ".join(f"{c}: wall / cpu (x floor)" for c in columns) + " | " +
          " | ".join(f"{c} / {THIS}" for c in columns if c != THIS) + " |")
    print("|---|" + "---|" * (2 * len(columns) - 1))
    for r in rows:
        floor = by_label.get(r.floor) if r.floor else None
        cells = []
        for c in columns:
            if c not in r.wall:
                cells.append("")
                continue
            f_wall = None if floor is None else next(iter(floor.wall.values()))
            ratio = f" ({r.wall[c] / f_wall:.1f}x)" if f_wall else ""
            cells.append(f"{r.wall[c]:.3f}s / {r.cpu[c]:.3f}s{ratio}")
        rel = []
        for c in columns:
            if c == THIS:
                continue
            if c in r.wall and THIS in r.wall:
                rel.append(f"wall {r.wall[c] / r.wall[THIS]:.2f}x, cpu {r.cpu[c] / r.cpu[THIS]:.2f}x")
            else:
                rel.append("")
        print(f"| {r.label} | " + " | ".join(cells) + " | " + " | ".join(rel) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, default=None, help="a checkout with the tricks (its C built in place)")
    ap.add_argument("--variant", action="append", default=[], help="NAME=DIR: another checkout as a column")
    ap.add_argument("--only", default="json,params,records,fanout")
    ap.add_argument("--topics", type=int, default=40, help="fanout rows: topics of 50 partitions (default 40)")
    ap.add_argument("--ids", type=int, default=1_000_000)
    ap.add_argument("--size-mb", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work-dir", type=Path, default=None, help="keep (and reuse) generated data here")
    args = ap.parse_args(argv)
    trees: dict[str, Path] = {THIS: ROOT}
    if args.before is not None:
        trees["before"] = args.before.resolve()
    for v in args.variant:
        name, _, path = v.partition("=")
        trees[name] = Path(path).resolve()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="kafkatx-tricks-"))
    work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    others = [c for c in trees if c != THIS]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.repeat}; work dir {work}", flush=True)
    if "params" in only:
        floor = "python -c 'import typer'"
        rows = [Row(floor, [sys.executable, "-c", "import typer"], None, (THIS,)),
                Row("kafkatx --version", ["--version"], floor, (THIS, TYPER, *others)),
                Row("kafkatx find-hanging (fixtures/hanging)",
                    ["find-hanging", "--log-dir", str(ROOT / "fixtures" / "hanging")], floor, (THIS, TYPER, *others))]
        run(rows, {**trees, TYPER: ROOT}, args.repeat)
        table("start-up: option values converted by fastparams or by Typer", rows, [THIS, TYPER, *others])
    if "json" in only:
        ids = work / f"ids-{args.ids}"
        if not (ids / "done").exists():
            bench_scale.gen_ids(ids, args.ids)
            (ids / "done").write_text("")
        bench_scale.read_tree(ids)
        floor = "aiokafka iteration"
        rows = [Row(floor, [sys.executable, "-c", bench_scale.AIOKAFKA_ITERATION, str(ids)], None, (THIS,)),
                Row(f"list-txn --format json ({args.ids:,} ids)", ["list-txn", "--log-dir", str(ids), "--format", "json"],
                    floor, (THIS, *others))]
        run(rows, trees, args.repeat)
        table("list-txn's JSON", rows, [THIS, *others])
    if "records" in only:
        part = work / f"partition-{args.size_mb:g}"
        if not (part / "done").exists():
            bench_commands.generate_log_dir(part, {f"{bench_commands.TOPIC}-0": (int(args.size_mb * (1 << 20)),
                                                                                 1 << 40, False)}, clean=False)
            (part / "done").write_text("")
        seg = str(next((part / f"{bench_commands.TOPIC}-0").glob("*.log")))
        bench_scale.read_tree(part)
        floor = "aiokafka CRC scan"
        cols = (THIS, *others)
        rows = [Row(floor, [sys.executable, "-c", bench_commands.AIOKAFKA_CRC, seg], None, (THIS,)),
                Row("dump-segment --deep-iteration --format jsonl",
                    ["dump-segment", "--deep-iteration", "--format", "jsonl", seg], floor, cols),
                Row("dump-segment --deep-iteration --format json",
                    ["dump-segment", "--deep-iteration", "--format", "json", seg], floor, cols),
                Row("dump-segment (text)", ["dump-segment", seg], floor, cols),
                Row("verify", ["verify", "--log-dir", str(part)], floor, cols),
                Row("find-hanging", ["find-hanging", "--log-dir", str(part), "--now", str(bench_commands.NOW)],
                    floor, cols)]
        run(rows, trees, args.repeat)
        table(f"records and headers made by the compiled framing ({args.size_mb:g} MB partition)", rows,
              [THIS, *others])
    if "fanout" in only:
        parts = work / f"partitions-{args.topics}x50"
        if not (parts / "done").exists():
            bench_scale.gen_partitions(parts / "logs", args.topics, 50)
            (parts / "done").write_text("")
        logs = parts / "logs"
        bench_scale.read_tree(logs)
        floor = "read every file"
        cols = (THIS, POOL, ONE)
        now = str(bench_scale.NOW)
        rows = [Row(floor, [sys.executable, "-c", bench_scale.READ_EVERY_FILE, str(logs)], None, (THIS,)),
                Row("verify", ["verify", "--log-dir", str(logs)], floor, cols),
                Row("lag", ["lag", "--log-dir", str(logs), "--format", "json"], floor, cols),
                Row("find-hanging", ["find-hanging", "--log-dir", str(logs), "--now", now, "--format", "json"],
                    floor, cols)]
        run(rows, {THIS: ROOT, POOL: ROOT, ONE: ROOT}, args.repeat)
        table(f"the fan-out over {args.topics * 50:,} partitions: os.fork runs, a ProcessPoolExecutor, one process",
              rows, list(cols))
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
