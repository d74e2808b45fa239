"""kafka-dump-log.sh parity on every file a real Kafka 3.8.0 broker wrote (clean and crashed dirs).

``3.8.0/dump-log/kafka-dump-log-output.tar.gz`` holds what Kafka's own tool
(``kafka.tools.DumpLogSegments``, stdout and stderr together) printed for every ``.log``, ``.index``,
``.timeindex``, ``.txnindex`` and ``.snapshot`` of both dirs: ``<partition>-<file>.<mode>.txt``, mode
``plain`` = ``--files F``, ``deep`` = ``--deep-iteration``, ``data`` = ``--deep-iteration
--print-data-log``, ``txnlog`` = ``--transaction-log-decoder``, ``offsets`` = ``--offsets-decoder``; the
other files are ``--files F``. kafkatx takes the same command line (``dump-segment`` with kafka-dump-log.sh's
flags) and must print the same bytes; the only difference allowed is the file's path (Kafka's run named it
relative to the extracted dir, ``clean/orders-0/...``, in the ``Dumping`` line and in the ``Mismatches in :``
lines, which name the absolute path). One test per renderer (compiled and pure Python) walks every file and
fails listing each file that differs, with its first differing line.

The kafkatx forms without ``--files`` (``dump-snapshot F``, ``dump-txnindex F``, ``dump-index F``) print the
same lines on stdout (``dump-index`` leaves the index-vs-log checks to ``--verify``, so the comparison
drops the lines Kafka's tool writes to stderr after the last file). The 4.0 (TV2) broker's
``--transaction-log-decoder`` dumps are compared too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

NAME = re.compile(r"^(?P<part>.+-\d+)-(?P<file>\d{20}\.(?:log|index|timeindex|txnindex|snapshot))"
                  r"(?:\.(?P<mode>plain|deep|data|txnlog|offsets))?\.txt$")
MODES = {
    None: [],
    "plain": [],
    "deep": ["--deep-iteration"],
    "data": ["--deep-iteration", "--print-data-log"],
    "txnlog": ["--transaction-log-decoder", "--kafka-version", "3.8"],
    "offsets": ["--offsets-decoder", "--kafka-version", "3.8"],
}
# DumpLogSegments prints these on stderr after the last file (misMatchesForIndexFilesMap, TimeIndexDumpErrors)
STDERR_LINE = re.compile(rb"^(Mismatches in :|  Index offset: |Found timestamp mismatch in :|  Index timestamp: |"
                         rb"Found out of order timestamp in :|The following indexed offsets are not found|"
                         rb"Indexed offset: )")


def _cases(real_kafka) -> list[tuple[str, Path, Path, str | None]]:
    """(tarball name, expected output, the file it dumps, mode) for every file of the tarball."""
    out = real_kafka.extract("3.8.0/dump-log")
    dirs = {d: real_kafka.extract(f"3.8.0/{d}") for d in ("clean", "crashed")}
    cases = []
    for d, top in dirs.items():
        for expected in sorted((out / d).iterdir()):
            m = NAME.match(expected.name)
            assert m, f"unexpected file in the dump-log tarball: {d}/{expected.name}"
            cases.append((f"{d}/{expected.name}", expected, top / m["part"] / m["file"], m["mode"]))
    return cases


def _expected(case_name: str, expected: Path, dumped: Path) -> bytes:
    d, _, name = case_name.partition("/")
    m = NAME.match(name)
    assert m
    relative = f"{d}/{m['part']}/{m['file']}".encode()
    return expected.read_bytes().replace(relative, str(dumped).encode())


def _first_difference(want: bytes, got: bytes) -> str:
    a, b = want.split(b"\n"), got.split(b"\n")
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return (f"line {n + 1} ({len(a)} vs {len(b)} lines): kafka {a[n][:200] if n < len(a) else b'<none>'!r}"
            f" kafkatx {b[n][:200] if n < len(b) else b'<none>'!r}")


@pytest.fixture(params=["compiled", "pure-python"])
def renderer(request):
    from kafkatx.format import compiled

    if request.param == "compiled" and not compiled.active("kafkatx.render._dump"):
        pytest.skip("no compiled extension (KAFKATX_PURE_PYTHON or no C compiler): nothing compiled to test")
    with compiled.pure_python(request.param == "pure-python"):
        yield request.param


def test_every_file_dumps_as_kafka_dump_log_does(real_kafka, renderer):
    from kafkatx.cli.main import app

    runner = CliRunner()
    cases = _cases(real_kafka)
    assert len(cases) == 280  # 146 outputs of the clean dir + 134 of the crashed one (the README's tarball)
    differ = []
    for name, expected, dumped, mode in cases:
        r = runner.invoke(app, ["dump-segment", "--files", str(dumped), *MODES[mode]])
        want = _expected(name, expected, dumped)
        got = r.stdout_bytes + r.stderr_bytes  # the tarball holds the tool's stdout and stderr together
        if r.exit_code != 0 or got != want:
            differ.append(f"{name}: exit {r.exit_code}, {_first_difference(want, got)}")
    assert not differ, f"{len(differ)} of {len(cases)} files differ from kafka-dump-log.sh:\n" + "\n".join(differ)


def test_dump_commands_print_the_same_lines(real_kafka):
    from kafkatx.cli.main import app

    runner = CliRunner()
    commands = {".snapshot": "dump-snapshot", ".txnindex": "dump-txnindex", ".index": "dump-index",
                ".timeindex": "dump-index"}
    differ, checked = [], 0
    for name, expected, dumped, _mode in _cases(real_kafka):
        command = commands.get(dumped.suffix)
        if command is None:
            continue
        checked += 1
        r = runner.invoke(app, [command, str(dumped)])
        want = b"".join(line + b"\n" for line in _expected(name, expected, dumped).split(b"\n")[:-1]
                        if not STDERR_LINE.match(line))
        if r.exit_code != 0 or r.stdout_bytes != want:
            differ.append(f"{name} ({command}): exit {r.exit_code}, {_first_difference(want, r.stdout_bytes)}")
    assert checked > 100
    assert not differ, "\n".join(differ)


def test_tv2_transaction_log_dumps(real_kafka):
    """The Kafka 4.0 (transaction version 2) broker's ``--transaction-log-decoder`` dumps
    (``4.0-tv2/answers/tv2-clean/dumps/transaction_state-N.{txt,err}``: stdout and stderr apart).

    That broker is a 4.0.0-SNAPSHOT of 2024-10-25, whose ``DumpLogSegments.scala`` still printed the
    transaction log with ``TransactionLog.formatRecordKeyAndValue`` (3.x text; the JSON form came with
    KAFKA-18207 before 4.0 shipped): ``--kafka-version 3.8`` gives that text."""
    from kafkatx.cli.main import app

    top = real_kafka.extract("4.0-tv2/tv2-clean")
    dumps = real_kafka.answers("4.0-tv2/tv2-clean") / "dumps"
    if not dumps.is_dir():
        pytest.skip(f"no dumps in {dumps}")
    runner = CliRunner()
    differ, checked = [], 0
    for expected in sorted(dumps.glob("transaction_state-*.txt")):
        n = expected.stem.rpartition("-")[2]
        log = top / f"__transaction_state-{n}" / f"{0:020d}.log"
        r = runner.invoke(app, ["dump-segment", "--files", str(log), "--transaction-log-decoder",
                                "--kafka-version", "3.8"])
        want = expected.read_bytes().replace(f"data/tv2-clean/__transaction_state-{n}/".encode(),
                                             f"{log.parent}/".encode())
        checked += 1
        if r.exit_code != 0 or r.stdout_bytes != want or r.stderr_bytes != expected.with_suffix(".err").read_bytes():
            differ.append(f"{expected.name}: exit {r.exit_code}, {_first_difference(want, r.stdout_bytes)}")
    assert checked == 7
    assert not differ, "\n".join(differ)
