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

import json
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


_TEXT_VALUE = re.compile(r"^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
                         r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)$")
# TransactionState ids (TransactionLogValue.TransactionStatus), as the 4.x JSON prints them
_STATE_IDS = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4,
              "CompleteAbort": 5, "Dead": 6, "PrepareEpochFence": 7}


def _split_record(line: str) -> tuple[str, str | None, str | None]:
    head, _, rest = line.partition(" key: ")
    key, sep, payload = rest.partition(" payload: ")
    return head, key or None, payload if sep else None


def test_tv2_transaction_log_as_kafka_4x_json(real_kafka):
    """The same 4.0 TV2 dumps against kafkatx's 4.x form (``--kafka-version 4.0``: KAFKA-18207's
    ``TransactionLogMessageParser``, ``{"type":"0","data":{"transactionalId":..}}`` keys and
    ``{"version":"V","data":{..}}`` values). That broker's own tool printed 3.x text (it predates
    KAFKA-18207), so the parity is of content: every line but the records' key and payload is the same
    bytes, and each record's JSON carries exactly what Kafka's text says (id, producer id and epoch,
    state, partitions, last update time, timeout)."""
    from kafkatx.cli.main import app

    top = real_kafka.extract("4.0-tv2/tv2-clean")
    dumps = real_kafka.answers("4.0-tv2/tv2-clean") / "dumps"
    if not dumps.is_dir():
        pytest.skip(f"no dumps in {dumps}")
    runner = CliRunner()
    records = 0
    for expected in sorted(dumps.glob("transaction_state-*.txt")):
        n = expected.stem.rpartition("-")[2]
        log = top / f"__transaction_state-{n}" / f"{0:020d}.log"
        r = runner.invoke(app, ["dump-segment", "--files", str(log), "--transaction-log-decoder",
                                "--kafka-version", "4.0"])
        assert r.exit_code == 0, r.output
        want = expected.read_text().replace(f"data/tv2-clean/__transaction_state-{n}/", f"{log.parent}/")
        got_lines, want_lines = r.stdout.splitlines(), want.splitlines()
        assert len(got_lines) == len(want_lines), expected.name
        for got, kafka in zip(got_lines, want_lines, strict=True):
            g_head, g_key, g_payload = _split_record(got)
            k_head, k_key, k_payload = _split_record(kafka)
            assert g_head == k_head, (expected.name, got)
            if k_key is None:
                assert g_key is None and g_payload is None
                continue
            records += 1
            key = json.loads(g_key)
            assert key == {"type": "0", "data": {"transactionalId": k_key.removeprefix(
                "transaction_metadata::transactionalId=")}}
            if k_payload == "<DELETE>":
                assert g_payload == "<DELETE>"
                continue
            m = _TEXT_VALUE.match(k_payload)
            assert m, k_payload
            value = json.loads(g_payload)
            data = value["data"]
            assert value["version"] in ("0", "1")
            assert (data["producerId"], data["producerEpoch"], data["transactionStatus"],
                    data["transactionLastUpdateTimestampMs"], data["transactionTimeoutMs"]) == (
                int(m[1]), int(m[2]), _STATE_IDS[m[3]], int(m[5]), int(m[6]))
            parts = {f"{p['topic']}-{i}" for p in data["transactionPartitions"] or () for i in p["partitionIds"]}
            assert parts == (set(m[4].split(",")) if m[4] else set())
            assert list(data)[:2] == ["producerId", "producerEpoch"]  # schema order, untagged defaults left out
    assert records > 80


def test_offsets_dumps_read_the_same_in_kafka_4x(real_kafka):
    """The 3.8.0 dirs' ``__consumer_offsets`` hold only classic records (types 0-2: cg-eos's offset
    commits and group metadata), which Kafka 4.x's ``OffsetsMessageParser`` (``CoordinatorRecordMessageParser``,
    ``{"type":"<apiKey>"}`` = the key version for 0-2, the same generated converters) prints as 3.8's did:
    the default ``--kafka-version`` (4.2) gives Kafka 3.8's ``--offsets-decoder`` dumps byte for byte."""
    from kafkatx.cli.main import app

    runner = CliRunner()
    checked, differ = 0, []
    for name, expected, dumped, mode in _cases(real_kafka):
        if mode != "offsets":
            continue
        checked += 1
        r = runner.invoke(app, ["dump-segment", "--files", str(dumped), "--offsets-decoder"])
        want = _expected(name, expected, dumped)
        got = r.stdout_bytes + r.stderr_bytes
        if r.exit_code != 0 or got != want:
            differ.append(f"{name}: exit {r.exit_code}, {_first_difference(want, got)}")
    assert checked >= 2
    assert not differ, "\n".join(differ)
