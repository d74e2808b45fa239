"""list-txn's JSON written by two processes taking turns (``emit_json_values``: pieces of rows, the even ones by
this process, the odd ones by a forked one, each skipping the other's rows): the very bytes one process writes,
to a file and to a pipe, for any number of rows and pieces; a failing second process is an error (no hang, no
zombie); a reader going away ends both quietly, as with one process.

The thresholds are lowered by parameters (``piece``, ``turns_from``) or, for the CLI in a subprocess, by
setting the module's defaults before it runs."""

from __future__ import annotations

import importlib.util
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkatx.render.formats as formats
from kafkatx.coordinator.state_manager import RowCursor
from kafkatx.errors import OutputIncomplete
from kafkatx.format import compiled
from kafkatx.render.formats import emit_json_values
from kafkatx.session import offline

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork: always one process")

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("transactional_id", "producer_id", "start", "partitions")


def _rows(count: int) -> list[tuple[object, ...]]:
    return [(f"txn-{i:05d}\u00e9", i * 10**12, None if i % 3 else i, [f"t-{j}" for j in range(i % 4)], 7)
            for i in range(count)]


def _written(rows, names=NAMES, *, turns: bool, piece: int = 3, errors: str = "strict") -> bytes:  # type: ignore[no-untyped-def]
    """What emit_json_values writes to a real file under a UTF-8 text stream (stdout's shape): in turns (from
    0 rows on) or in one process."""
    import tempfile

    with tempfile.TemporaryFile() as f:
        out = io.TextIOWrapper(os.fdopen(os.dup(f.fileno()), "wb"), encoding="utf-8", errors=errors, newline="")
        out.write("before\n")  # text not yet flushed: written before the document, once
        emit_json_values(rows, names, out, piece=piece, turns_from=0 if turns else 10**12)
        out.write("after\n")
        out.close()
        f.seek(0)
        return f.read()


@pytest.mark.parametrize("piece", [1, 3, 1024])
@pytest.mark.parametrize("pieces", [0, 1, 2, 3, 4, 7])
@pytest.mark.parametrize("extra", [0, 1, -1])
def test_turns_write_the_bytes_one_process_writes(piece, pieces, extra) -> None:  # type: ignore[no-untyped-def]
    # 0 rows, 1 row, exactly n pieces, a row more or fewer: odd and even piece counts, a last piece short, full
    # or empty; as a list, and as a RowCursor
    count = max(0, pieces * piece + extra)
    if piece == 1024 and pieces > 3:
        count = min(count, 3 * 1024 + 1)
    rows = _rows(count)
    want = _written(rows, turns=False)
    assert want.startswith(b"before\n") and want.endswith(b"after\n")
    assert _written(rows, turns=True, piece=piece) == want
    assert _written(RowCursor(list(rows)), turns=True, piece=piece) == want


values = st.tuples(st.text(max_size=8), st.integers(-(2**63), 2**64), st.none() | st.integers(),
                   st.lists(st.text(max_size=4), max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(values, max_size=40), st.integers(1, 9))
def test_turns_on_generated_rows(rows, piece) -> None:  # type: ignore[no-untyped-def]
    # any strings (lone surrogates: a chunk msgspec refuses goes the dict way in either process), big ints
    want = _written(rows, turns=False, errors="surrogateescape")
    assert _written(rows, turns=True, piece=piece, errors="surrogateescape") == want


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules.setdefault("bench_scale", mod)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def ids_dir(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("turns")
    _bench().gen_ids(root / "ids", 2000)
    return root / "ids"


def _names() -> tuple[str, ...]:
    names = offline.TRANSACTION_ROW_FIELDS
    return names[:names.index("coordinator_id")]


@pytest.mark.parametrize("pure", [False, True], ids=["SortedRows", "RowCursor"])
@pytest.mark.parametrize("piece", [7, 1000, 1024])
def test_turns_on_a_replay(ids_dir, pure, piece) -> None:  # type: ignore[no-untyped-def]
    # list-txn's own rows (the compiled SortedRows, or the pure-Python RowCursor), skipped and taken by both
    if not pure and not compiled.modules():
        pytest.skip("the C extension is not built")

    def answer(states=None):  # type: ignore[no-untyped-def]
        with compiled.pure_python() if pure else _nothing():
            return offline.list_transactions([ids_dir], values=True, states=states).rows

    for states in (None, ["Ongoing"]):
        want = _written(answer(states), _names(), turns=False)
        assert _written(answer(states), _names(), turns=True, piece=piece) == want
        assert want.count(b'"transactional_id"') == (2000 if states is None else 20)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_failing_second_process_is_an_error_not_a_hang(monkeypatch, forked) -> None:  # type: ignore[no-untyped-def]
    parent = os.getpid()
    real = formats._json_piece

    def piece(*args):  # type: ignore[no-untyped-def]
        if os.getpid() != parent:
            raise RuntimeError("made to fail")
        return real(*args)

    monkeypatch.setattr(formats, "_json_piece", piece)
    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(20)  # a hang: KeyboardInterrupt, the test fails
    try:
        with pytest.raises(OutputIncomplete, match="RuntimeError: made to fail") as err:
            _written(_rows(50), turns=True, piece=3)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert "\n" not in str(err.value) and err.value.exit_code == 4
    assert len(forked) == 1 and forked.all_reaped()


def test_a_killed_second_process_is_an_error(monkeypatch, forked) -> None:  # type: ignore[no-untyped-def]
    parent = os.getpid()
    real = formats._json_piece

    def piece(*args):  # type: ignore[no-untyped-def]
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args)

    monkeypatch.setattr(formats, "_json_piece", piece)
    with pytest.raises(OutputIncomplete, match="incomplete"):
        _written(_rows(50), turns=True, piece=3)
    assert len(forked) == 1 and forked.all_reaped()


def test_one_process_when_asked_or_too_few_rows(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert formats._json_processes(10, 10) == (2 if len(os.sched_getaffinity(0)) >= 2 else 1)
    assert formats._json_processes(9, 10) == 1
    monkeypatch.setenv("KAFKATX_JOBS", "1")
    assert formats._json_processes(10**9, 10) == 1
    # a text stream that is no UTF-8 stream over bytes: one process, whatever the rows
    out = io.StringIO()
    emit_json_values(_rows(10), NAMES, out, piece=1, turns_from=0)
    want = io.StringIO()
    emit_json_values(_rows(10), NAMES, want)
    assert out.getvalue() == want.getvalue()
    # a UTF-8 stream over bytes in memory (no file descriptor): one process
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    emit_json_values(_rows(10), NAMES, stream, piece=1, turns_from=0)
    stream.flush()
    assert raw.getvalue() == want.getvalue().encode()


def _cli(ids_dir: Path, jobs: str) -> list[str]:
    boot = ("import kafkatx.render.formats as f; f._JSON_TURNS_FROM = 0; f._JSON_PIECE = 5; "
            "from kafkatx.cli.main import run; run()")
    return [sys.executable, "-c", boot, "list-txn", "--log-dir", str(ids_dir), "--format", "json"]


def _env(jobs: str) -> dict[str, str]:
    return dict(os.environ, KAFKATX_JOBS=jobs, PYTHONPATH=str(ROOT))


def test_cli_to_a_file_and_a_pipe(ids_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    serial = subprocess.run(_cli(ids_dir, "1"), env=_env("1"), capture_output=True, timeout=120, check=True).stdout
    assert serial.startswith(b"[\n  {") and serial.endswith(b"}\n]\n")
    piped = subprocess.run(_cli(ids_dir, "2"), env=_env("2"), capture_output=True, timeout=120, check=True)
    assert piped.stdout == serial and piped.stderr == b""
    path = tmp_path / "out.json"
    with path.open("wb") as f:
        subprocess.run(_cli(ids_dir, "2"), env=_env("2"), stdout=f, timeout=120, check=True)
    assert path.read_bytes() == serial


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_cli_reader_gone_ends_quietly(ids_dir, jobs) -> None:  # type: ignore[no-untyped-def]
    # `kafkatx list-txn ... --format json | head -c 100`: no traceback, the exit code of one process (141)
    proc = subprocess.Popen(_cli(ids_dir, jobs), env=_env(jobs), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100).startswith(b"[\n")
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == b""
