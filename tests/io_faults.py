"""I/O fault injection over whole commands, as SQLite's tests fail its VFS calls one at a time.

Every read of a log dir goes through ``kafkatx/storage/fdio.py`` (open, stat, fstat, pread, preadv, mmap,
listing). For one command on one dir, :func:`sweep` runs it once with a hook that counts those calls
(``N``, and the code line each comes from: its call site), then again with call ``k`` failing, for each
``k`` chosen (every call of a small run; where N is large, the first and last call of every call site and
a sample of the others): permission denied (EACCES), an I/O error (EIO), a file deleted under the reader
(ENOENT), too many open files (EMFILE), a short read (half the bytes) or a file cut to half its size
while it is read (every later stat and read of it says so, until it is opened again). The contract: the answer is the unfailed answer byte for byte (stdout and exit
code: the call was not needed, or a short read was read on), or exit 3 with a line naming the file whose
call failed. Anything else is a *false answer*. A repair (``abort-hanging --execute``, ``undo``) must
also leave its dir as it was, or as the unfailed run leaves it.

The commands run in this process through Typer's runner, with ``KAFKATX_JOBS=1`` (one process: the hook
counts every call) and the compiled partition readers stepping aside for their Python twins while a
hook is installed (``fdio.faults_active``).

``python -m tests.io_faults [--full] [--dirs fixtures/hanging,...]`` prints the table: command x dir, I/O
calls, faults injected, false answers (``KAFKATX_FAULTS_FULL=1`` or ``--full``: every call with every
fault that applies to it). ``tests/storage/test_io_faults.py`` runs a sample of it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kafkatx.storage import fdio

REPO = Path(__file__).resolve().parents[1]
REAL_KAFKA = Path(os.environ.get("KAFKATX_REAL_KAFKA") or REPO.parent / "shared" / "real-kafka")
FDIO_FILE = fdio.__file__
FULL_ENV = "KAFKATX_FAULTS_FULL"

# The faults each kind of call can meet (the first of each is the one the default sample injects)
# ("shrank" only where the reader took the file's size since it opened it: a file cut while it is being
# read; a file cut before the reader first learns its size is a shorter file, not a change it could see)
FAULTS: dict[str, tuple[str, ...]] = {
    "open": ("EACCES", "ENOENT", "EMFILE", "EIO"),
    "stat": ("EIO", "EACCES", "ENOENT", "shrank"),
    "fstat": ("EIO", "shrank"),
    "pread": ("EIO", "short", "shrank"),
    "preadv": ("short", "EIO", "shrank"),
    "mmap": ("EIO",),
    "list": ("EACCES", "EIO", "ENOENT"),
}
_ERRNO = {"EACCES": errno.EACCES, "EIO": errno.EIO, "ENOENT": errno.ENOENT, "EMFILE": errno.EMFILE}


@dataclass
class Call:
    op: str
    path: str
    site: str  # file:line of the first frame outside fdio


class Hook:
    """The fault hook: counts calls (``record``: with their call sites) and fails call ``fail_at`` with ``fault``."""

    def __init__(self, *, record: bool = False, fail_at: int = 0, fault: str = "") -> None:
        self.n = 0
        self.record = record
        self.calls: list[Call] = []
        self.fail_at, self.fault = fail_at, fault
        self.injected: Call | None = None

    def __call__(self, op: str, path: str) -> str | None:
        self.n += 1
        if self.record:
            self.calls.append(Call(op, path, _site()))
        if self.n != self.fail_at:
            return None
        self.injected = Call(op, path, "")
        if self.fault == "short":
            return fdio.SHORT
        if self.fault == "shrank":
            return fdio.CUT
        code = _ERRNO[self.fault]
        raise OSError(code, os.strerror(code), path)


LOG_LAYER = os.path.dirname(FDIO_FILE) + os.sep
PACKAGE = os.path.dirname(os.path.dirname(FDIO_FILE)) + os.sep


def _site() -> str:
    """Where a call comes from: the line that called fdio, and the first line above it outside kafkatx/log
    (the loader's recovery, its snapshot read, the coordinator replay, verify, a dump, the repair)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename == FDIO_FILE:
        f = f.f_back
    if f is None:  # pragma: no cover
        return "?"
    inner = f"{os.path.relpath(f.f_code.co_filename, REPO)}:{f.f_lineno}"
    while f is not None and (f.f_code.co_filename.startswith(LOG_LAYER)
                             or not f.f_code.co_filename.startswith(PACKAGE)):  # contextlib's frames too
        f = f.f_back
    outer = f"{os.path.relpath(f.f_code.co_filename, REPO)}:{f.f_lineno}" if f is not None else "?"
    return f"{inner} <- {outer}"


@contextmanager
def hooked(hook: Hook) -> Iterator[Hook]:
    before = fdio.set_fault_hook(hook)
    try:
        yield hook
    finally:
        fdio.set_fault_hook(before)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    state: str = ""  # the dir's contents' hash, for a repair


def run_cli(args: Sequence[str]) -> Outcome:
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    result = CliRunner().invoke(app, list(args), env={"KAFKATX_JOBS": "1", "COLUMNS": "200"})
    return Outcome(result.exit_code, result.stdout, result.stderr)


def dir_state(path: Path) -> str:
    """A hash of every file under ``path`` (names, bytes; ``.lock`` left out: a run may create it)."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            if name == ".lock":
                continue
            p = Path(root, name)
            h.update(str(p.relative_to(path)).encode() + b"\0")
            with open(p, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def copy_dir(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)


@dataclass
class Case:
    """One command on one dir. ``args`` takes the dir it runs on (a fresh copy for a repair) and the
    scratch folder; ``prepare`` (a repair's undo) makes what the run needs in the copy first."""

    name: str
    dir_name: str
    source: Path
    args: Callable[[Path, Path], list[str]]
    writes: bool = False  # a repair: runs on a fresh copy, its dir's state is compared
    prepare: Callable[[Path, Path], None] | None = None


@dataclass
class Result:
    case: Case
    calls: int = 0
    sites: int = 0
    injected: int = 0
    false: list[str] = field(default_factory=list)


def _fresh(case: Case, scratch: Path) -> Path:
    """A fresh copy of a repair's dir in ``scratch`` (no journal left from an earlier run), prepared."""
    where = scratch / "dir"
    copy_dir(case.source, where)
    for leftover in (scratch / "repair.journal", scratch / "repair.journal.d"):
        if leftover.is_dir():
            shutil.rmtree(leftover)
        elif leftover.exists():
            leftover.unlink()
    if case.prepare is not None:
        case.prepare(where, scratch)
    return where


def _run(case: Case, scratch: Path, hook: Hook | None) -> Outcome:
    where = _fresh(case, scratch) if case.writes else case.source
    args = case.args(where, scratch)
    if hook is None:
        out = run_cli(args)
    else:
        with hooked(hook):
            out = run_cli(args)
    if case.writes:
        out.state = dir_state(where)
    return out


def choose(calls: list[Call], full: bool, per_site: int, rng: random.Random) -> list[tuple[int, str]]:
    """The (call number, fault) pairs to inject: every call site's first and last call with each of its
    faults, and ``per_site`` more of its calls at random with one fault each; ``full``: every call with
    every fault."""
    picks: set[tuple[int, str]] = set()
    by_site: dict[str, list[int]] = {}
    sized: set[str] = set()  # paths whose size the reader took since it last opened them
    faults: list[tuple[str, ...]] = []  # the faults that apply to each call
    for i, c in enumerate(calls, 1):
        by_site.setdefault(f"{c.op}@{c.site}", []).append(i)
        if c.op == "open":
            sized.discard(c.path)
        faults.append(tuple(f for f in FAULTS[c.op] if f != "shrank" or c.path in sized))
        if c.op in ("stat", "fstat", "pread", "preadv"):
            sized.add(c.path)
        if full:
            picks.update((i, f) for f in faults[-1])
    if not full:
        for ks in by_site.values():
            for k in {ks[0], ks[-1]}:
                picks.update((k, f) for f in faults[k - 1])
            for k in rng.sample(ks, min(per_site, len(ks))):
                picks.add((k, rng.choice(faults[k - 1])))
    return sorted(picks)


def judge(case: Case, base: Outcome, got: Outcome, injected: Call | None) -> str | None:
    """None when ``got`` keeps the contract against the unfailed ``base``, else why not."""
    if injected is None:
        return None if (got.code, got.stdout) == (base.code, base.stdout) else "changed answer, no fault injected"
    if (got.code, got.stdout) == (base.code, base.stdout) and (not case.writes or got.state == base.state):
        return None
    if got.code == 3:
        said = got.stderr + got.stdout  # a repair plan names it in its refused rows
        # the path, or its name where the line says which folder (dump-index: "no X.log beside it")
        named = injected.path in said or f" {os.path.basename(injected.path)} " in said
        if not named:
            return f"exit 3 without naming {injected.path}: {got.stderr.strip().splitlines()[-1:]}"
        return None
    return (f"exit {got.code} (unfailed: {base.code}); stderr: {got.stderr.strip().splitlines()[-1:]}; "
            f"stdout {'same' if got.stdout == base.stdout else 'differs'}")


def sweep(case: Case, scratch: Path, *, full: bool = False, per_site: int = 1, seed: int = 0,
          limit: int | None = None) -> Result:
    """Run ``case`` once counting, then once per chosen fault (:func:`choose`); the judged result."""
    scratch.mkdir(parents=True, exist_ok=True)
    counter = Hook(record=True)
    base = _run(case, scratch, counter)
    plain = _run(case, scratch, None)
    res = Result(case, calls=counter.n, sites=len({(c.op, c.site) for c in counter.calls}))
    if (plain.code, plain.stdout) != (base.code, base.stdout):
        res.false.append("the counted run and the plain run differ")
    # a repair that fails part way leaves the dir as it was (before: after its prepare) or as one whole
    # repair leaves it
    before = ""
    if case.writes:
        before = dir_state(_fresh(case, scratch))
    picks = choose(counter.calls, full, per_site, random.Random(seed))
    if limit is not None and len(picks) > limit:
        # every call site keeps its first call with one fault; the rest of the limit at random
        first: dict[str, int] = {}
        for i, c in enumerate(counter.calls, 1):
            first.setdefault(f"{c.op}@{c.site}", i)
        keep = {k for k in first.values()}
        required = sorted({next(p for p in picks if p[0] == k) for k in keep})
        rest = [p for p in picks if p not in set(required)]
        fill = max(0, limit - len(required))
        picks = sorted(required + random.Random(seed).sample(rest, min(fill, len(rest))))
    for k, fault in picks:
        hook = Hook(fail_at=k, fault=fault)
        got = _run(case, scratch, hook)
        if hook.injected is None:
            continue  # the run took another path before call k: nothing failed
        res.injected += 1
        if case.writes and got.state not in (base.state, before):
            res.false.append(f"call {k} ({hook.injected.op} {hook.injected.path}, {fault}): the dir is neither "
                             "as it was nor as the repair leaves it")
            continue
        why = judge(case, base, got, hook.injected)
        if why is not None:
            res.false.append(f"call {k} ({hook.injected.op} {hook.injected.path} at "
                             f"{counter.calls[k - 1].site}, {fault}): {why}")
    return res


# ---------------------------------------------------------------- the cases

FIXTURE_NOW = "1700007200000"  # fixtures/README.md: T0 + 2 h


def _first(folder: Path, suffix: str) -> Path | None:
    got = sorted(p for p in folder.iterdir() if p.name.endswith(suffix) and p.stat().st_size > 0)
    return got[0] if got else None


def cases(name: str, source: Path, now: str, *, repairs: bool = True) -> list[Case]:
    """The commands of the harness on the dir ``source`` (called ``name`` in the table)."""
    ld = lambda d, _s: ["--log-dir", str(d)]  # noqa: E731
    topic = "payments" if (source / "payments-0").is_dir() else "orders"
    out = [
        Case("find-hanging", name, source, lambda d, s: ["find-hanging", *ld(d, s), "--now", now]),
        Case("lag", name, source, lambda d, s: ["lag", *ld(d, s), "--now", now]),
        Case("list-txn", name, source, lambda d, s: ["list-txn", *ld(d, s), "--now", now]),
        Case("describe-producers", name, source,
             lambda d, s: ["describe-producers", *ld(d, s), "--topic", topic, "--partition", "0", "--now", now]),
        Case("verify", name, source, lambda d, s: ["verify", *ld(d, s)]),
        Case("timeline", name, source, lambda d, s: ["timeline", *ld(d, s), "--now", now]),
    ]
    tid = _a_transactional_id(source, now)
    if tid is not None:
        out.append(Case("describe-txn", name, source,
                        lambda d, s: ["describe-txn", *ld(d, s), "--transactional-id", tid, "--now", now]))
    # the dump commands on the first partition folder with data of each kind
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith("__cluster")):
        log = _first(folder, ".log")
        if log is None or "orders" not in folder.name and "payments" not in folder.name:
            continue
        def dump(command: str, file: Path, *extra: str) -> Case:
            rel = file.relative_to(source)
            return Case(command, name, source, lambda d, _s: [command, *(["--files"] if command == "dump-segment"
                                                                         else []), str(d / rel), *extra])

        out.append(dump("dump-segment", log, "--deep-iteration"))
        if (index := log.with_suffix(".index")).exists():
            out.append(dump("dump-index", index, "--verify"))
        if (snap := _first(folder, ".snapshot")) is not None:
            out.append(dump("dump-snapshot", snap))
        if (txn := _first(folder, ".txnindex")) is not None:
            out.append(dump("dump-txnindex", txn))
        break
    out.append(Case("abort-hanging", name, source,
                    lambda d, s: ["abort-hanging", *ld(d, s), "--all", "--decision", "abort", "--now", now]))
    if repairs:
        def execute(d: Path, s: Path) -> list[str]:
            return ["abort-hanging", *ld(d, s), "--all", "--decision", "abort", "--now", now, "--execute",
                    "--journal", str(s / "repair.journal")]

        def repaired(d: Path, s: Path) -> None:
            out = run_cli(execute(d, s))
            assert out.code in (0, 1), out.stderr

        out.append(Case("abort-hanging --execute", name, source, execute, writes=True))
        out.append(Case("undo", name, source, lambda d, s: ["undo", str(s / "repair.journal")], writes=True,
                        prepare=repaired))
    return out


def _a_transactional_id(source: Path, now: str) -> str | None:
    import json

    out = run_cli(["list-txn", "--log-dir", str(source), "--now", now, "--format", "json"])
    try:
        rows = json.loads(out.stdout)
    except ValueError:
        return None
    rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    ongoing = [r["transactional_id"] for r in rows if r.get("state") == "Ongoing"]
    return (ongoing or [r["transactional_id"] for r in rows] or [None])[0]


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import tempfile
    import time

    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--full", action="store_true", default=os.environ.get(FULL_ENV, "") not in ("", "0"))
    p.add_argument("--dirs", default="fixtures/hanging,fixtures/clean,real:3.8.0/clean,real:3.8.0/crashed")
    p.add_argument("--commands", default="", help="comma-separated command names (default: all)")
    p.add_argument("--per-site", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="at most this many faults per command and dir")
    args = p.parse_args(argv)
    wanted = {c for c in args.commands.split(",") if c}
    rows = []
    with tempfile.TemporaryDirectory(prefix="kafkatx-faults-") as tmp:
        for spec in args.dirs.split(","):
            name, source, now = _source(spec, Path(tmp))
            if source is None:
                print(f"# {spec}: absent, skipped", file=sys.stderr)
                continue
            for case in cases(name, source, now, repairs="crashed" not in name):
                if wanted and case.name not in wanted:
                    continue
                t0 = time.monotonic()
                res = sweep(case, Path(tmp) / "scratch", full=args.full, per_site=args.per_site, limit=args.limit)
                rows.append(res)
                print(f"{case.name:<24} {name:<18} {res.calls:>6} {res.sites:>5} {res.injected:>7} "
                      f"{len(res.false):>5}  {time.monotonic() - t0:6.1f}s", flush=True)
                for f in res.false[:5]:
                    print(f"    false: {f}", flush=True)
    print()
    print(f"{'command':<24} {'dir':<18} {'calls':>6} {'sites':>5} {'faults':>7} {'false':>5}")
    for r in rows:
        print(f"{r.case.name:<24} {r.case.dir_name:<18} {r.calls:>6} {r.sites:>5} {r.injected:>7} {len(r.false):>5}")
    total_f = sum(r.injected for r in rows)
    total_false = sum(len(r.false) for r in rows)
    print(f"{'total':<24} {'':<18} {sum(r.calls for r in rows):>6} {'':>5} {total_f:>7} {total_false:>5}")
    return 1 if total_false else 0


def _source(spec: str, tmp: Path) -> tuple[str, Path | None, str]:
    if spec.startswith("real:"):
        rel = spec[5:]
        tarball = REAL_KAFKA / f"{rel}.tar.gz"
        if not tarball.is_file():
            return rel, None, ""
        dest = tmp / rel.replace("/", "__")
        dest.mkdir(parents=True)
        subprocess.run(["tar", "-xzf", str(tarball), "--sparse", "-C", str(dest)], check=True)
        top = next(dest.iterdir())
        return rel, top, str(real_now(rel))
    path = REPO / spec
    return spec, (path if path.is_dir() else None), FIXTURE_NOW


def real_now(rel: str) -> int:
    """The recorded broker clock of a real dir + 1 h (its hanging transaction then times out)."""
    import json

    head, _, leaf = rel.rpartition("/")
    answers = REAL_KAFKA / head / "answers" / leaf / "broker" / "list_offsets.json"
    return int(json.loads(answers.read_text())["recorded_at_ms"]) + 3_600_000


if __name__ == "__main__":
    sys.exit(main())
