"""Golden files of what a person sees: every command's table/text output on the fixtures at 80 and 120 columns.

A change of look is a reviewed diff of ``tests/golden/*.txt``. Regenerate after an intended change with

    KAFKATX_REGEN_GOLDEN=1 python -m pytest tests/render/test_golden.py

(the regenerating run skips its cases, so it is never mistaken for a passing check). Every run
forces the width (``COLUMNS``) and no colour (``NO_COLOR``, and the output is not a terminal);
ages are computed against the fixtures' ``--now`` (1700007200000 = 2023-11-15 00:13:20Z).

Besides the byte-for-byte comparison, every golden file is checked for what the look promises:
ASCII only, no line longer than its width, no escape codes, no trailing blanks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
FIX = REPO / "fixtures"
NOW = "1700007200000"
REGEN = os.environ.get("KAFKATX_REGEN_GOLDEN", "") not in ("", "0")
WIDTHS = (80, 120)

# paths relative to the repo root (the cases run there), as a user in a checkout would type them
H = "fixtures/hanging"
G = "fixtures/ghost"
SEG = Path("fixtures/hanging/orders-0")

# name -> (argv, expected exit code). Exit codes are cli.md's: 1 when the command found what it looks for.
CASES: dict[str, tuple[list[str], int]] = {
    # --now: the oldest-open column says how long each holder has been open
    "lag-hanging": (["lag", "--log-dir", H, "--now", NOW], 0),
    "lag-hanging-text": (["lag", "--log-dir", H, "--format", "text", "--now", NOW], 0),
    "lag-ghost": (["lag", "--log-dir", G, "--now", NOW], 0),
    "lag-two-brokers": (["lag", "--log-dir", "fixtures/two-brokers/broker-1",
                         "--log-dir", "fixtures/two-brokers/broker-2", "--now", "1700007200000"], 0),
    "find-hanging-hanging": (["find-hanging", "--log-dir", H, "--now", NOW], 1),
    "find-hanging-ghost": (["find-hanging", "--log-dir", G, "--now", NOW], 1),
    "find-hanging-hanging-text": (["find-hanging", "--log-dir", H, "--now", NOW, "--format", "text"], 1),
    "list-txn-hanging": (["list-txn", "--log-dir", H, "--now", NOW], 0),
    "list-txn-ghost": (["list-txn", "--log-dir", G, "--now", NOW], 0),
    "describe-txn-hanging-stale-loader": (["describe-txn", "stale-loader", "--log-dir", H, "--now", NOW,
                                           "--format", "text"], 0),
    "describe-txn-hanging-stale-loader-table": (["describe-txn", "stale-loader", "--log-dir", H, "--now", NOW,
                                                 "--format", "table"], 0),
    "describe-txn-hanging-incomplete-commit": (["describe-txn", "incomplete-commit", "--log-dir", H, "--now", NOW,
                                                "--format", "table"], 0),
    "describe-txn-ghost-ghost-writer": (["describe-txn", "ghost-writer", "--log-dir", G, "--now", NOW,
                                         "--format", "table"], 0),
    "describe-producers-hanging-orders-0": (["describe-producers", "--log-dir", H, "--topic", "orders",
                                             "--partition", "0", "--now", NOW], 0),
    "describe-producers-ghost-events-0": (["describe-producers", "--log-dir", G, "--topic", "events",
                                           "--partition", "0", "--now", NOW, "--format", "text"], 0),
    "verify-torn-tail": (["verify", "--log-dir", "fixtures/loading/torn-tail"], 1),
    "verify-stray-snapshots": (["verify", "--log-dir", "fixtures/loading/stray-snapshots"], 1),
    "verify-ghost-crash": (["verify", "--log-dir", "fixtures/loading/ghost-crash", "--format", "text"], 0),
    "abort-hanging-hanging-all": (["abort-hanging", "--log-dir", H, "--all", "--now", NOW], 1),
    "abort-hanging-hanging-one": (["abort-hanging", "--log-dir", H, "--transactional-id", "stale-loader",
                                   "--now", NOW], 1),
    "abort-hanging-ghost-drop": (["abort-hanging", "--log-dir", G, "--all", "--now", NOW,
                                  "--ghost-strategy", "drop-snapshots"], 1),
    "dump-segment-orders-0": (["dump-segment", str(SEG / "00000000000000000109.log"), "--format", "table"], 0),
    "dump-index-orders-0": (["dump-index", str(SEG / "00000000000000000109.index"), "--format", "table"], 0),
    "dump-timeindex-orders-0": (["dump-index", str(SEG / "00000000000000000109.timeindex"), "--format", "table"],
                                0),
    "dump-snapshot-orders-0": (["dump-snapshot", str(SEG / "00000000000000000186.snapshot"), "--format", "table"],
                               0),
    "dump-txnindex-orders-0": (["dump-txnindex", str(SEG / "00000000000000000109.txnindex"), "--format", "table"],
                               0),
}


def run(argv: list[str], width: int, cwd: Path = REPO):
    env = {"COLUMNS": str(width), "NO_COLOR": "1", "KAFKATX_TRACEBACK": "0"}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, argv, env=env, catch_exceptions=False)
    finally:
        os.chdir(old)


def check(name: str, width: int, text: str) -> None:
    path = GOLDEN / f"{name}-{width}.txt"
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} missing: run KAFKATX_REGEN_GOLDEN=1 python -m pytest {__file__}"
    expected = path.read_text()
    assert text == expected, f"{path.name} differs (review, then KAFKATX_REGEN_GOLDEN=1 to accept)"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, width: int) -> None:
    argv, code = CASES[name]
    result = run(argv, width)
    assert result.exit_code == code, result.stderr
    check(name, width, result.stdout)
    regenerated()


def regenerated() -> None:
    if REGEN:
        pytest.skip("golden files regenerated: review the diff")


@pytest.mark.parametrize("width", WIDTHS)
def test_golden_abort_hanging_execute_and_undo(tmp_path: Path, width: int) -> None:
    """The applied view (journal, how to undo) and undo's dry run, on a copy of fixtures/hanging
    (run from its parent, so the paths shown are the relative ones given)."""
    shutil.copytree(FIX / "hanging", tmp_path / "logs")
    applied = run(["abort-hanging", "--log-dir", "logs", "--all", "--execute", "--journal", "r.journal",
                   "--now", NOW], width, cwd=tmp_path)
    assert applied.exit_code == 0, applied.stderr
    undo = run(["undo", "r.journal", "--dry-run"], width, cwd=tmp_path)
    assert undo.exit_code == 0, undo.stderr
    check("abort-hanging-hanging-execute", width, applied.stdout)
    check("undo-dry-run", width, undo.stdout)
    regenerated()


@pytest.mark.parametrize("width", WIDTHS)
def test_golden_scan_summary(width: int) -> None:
    """scan's summary panel (rendered directly: a Spark run is not needed to check its look)."""
    import io

    from kafkatx.render import views
    from kafkatx.render.descriptions import invocation
    from kafkatx.spark.job import ScanSummary

    summary = ScanSummary(output="out", log_dirs=["fixtures/hanging"], segments=31, bytes=48_213, batches=212,
                          crc_errors=0, decode_errors=0, partitions=13, partitions_with_lag=5,
                          transactions_commit=17, transactions_abort=6, transactions_open=8, hanging=8,
                          skipped_partitions=0, wall_time_ms=12_400)
    out = io.StringIO()
    views.show_scan(summary, "text", invocation(["fixtures/hanging"], now=int(NOW)), out=out, width=width)
    check("scan-summary", width, out.getvalue())
    regenerated()


NAMES = set(CASES) | {"abort-hanging-hanging-execute", "undo-dry-run", "scan-summary"}
OTHERS = ("timeline-",)  # tests/render/test_timeline_golden.py's files (its own look: Unicode lanes)


def _golden_files() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("*.txt") if not p.name.startswith(OTHERS))


@pytest.mark.skipif(REGEN, reason="regenerating")
def test_every_case_has_its_golden_files_and_no_stale_ones() -> None:
    expected = {f"{n}-{w}.txt" for n in NAMES for w in WIDTHS}
    assert {p.name for p in _golden_files()} == expected


@pytest.mark.skipif(REGEN, reason="regenerating")
@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.name)
def test_golden_file_keeps_the_promises(path: Path) -> None:
    """ASCII only (so byte-counting tools agree), within the width, no colour codes, no trailing blanks.

    Indented shell commands under a summary are continued with `` \\`` and so fit too.
    """
    width = int(path.stem.rsplit("-", 1)[1])
    data = path.read_bytes()
    assert b"\x1b" not in data
    assert all(b < 128 for b in data), "non-ASCII byte in piped output"
    for line in data.decode().splitlines():
        assert len(line) <= width, f"{path.name}: {line!r} is {len(line)} > {width}"
        assert line == line.rstrip(), f"{path.name}: trailing blank in {line!r}"


@pytest.mark.skipif(REGEN, reason="regenerating")
def test_readme_sample_is_the_golden_file() -> None:
    """The README shows find-hanging as it looks; the copy there must be the golden file."""
    readme = (REPO / "README.md").read_text()
    marker = "<!-- golden: find-hanging-hanging-80"
    assert marker in readme
    block = readme.split(marker, 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    command, _, shown = block.partition("\n")
    assert command == "$ kafkatx find-hanging --log-dir fixtures/hanging --now 1700007200000"
    assert shown == (GOLDEN / "find-hanging-hanging-80.txt").read_text()
