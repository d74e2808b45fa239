"""Ctrl-C during ``kafkatx scan``: one line, exit 130, every process it started stopped (the Spark JVM
included), the half-written datasets removed, the Spark log named.

It used to print ~50 lines of py4j/pyspark stacks, leave four datasets without ``_SUCCESS`` and, at
times, the JVM running. The scan runs as a real process in its own process group on a log dir big enough
that the job is still writing when the output's first dataset folder appears; then the whole group gets
SIGINT, as a terminal's Ctrl-C sends it. Every process seen below kafkatx meanwhile must be gone after.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _java_or_skip() -> None:
    pytest.importorskip("pyspark")
    home = os.environ.get("JAVA_HOME")
    if not (home and Path(home, "bin", "java").exists()) and shutil.which("java") is None:
        pytest.skip("no Java (JAVA_HOME or java on PATH): Spark cannot start")


def _generate(out: Path) -> None:
    """A 24 MB partition of ~1 KB transactional batches (benchmarks/bench_commands.py's generator)."""
    spec = importlib.util.spec_from_file_location("bench_commands", REPO / "benchmarks" / "bench_commands.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_commands"] = bench  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop("bench_commands", None)
    bench.generate_log_dir(out, {"bulk-0": (24 * 2**20, 2**30, False)}, clean=True)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to see the processes scan starts")
def test_ctrl_c_stops_every_process_and_removes_partial_output(tmp_path):
    _java_or_skip()
    from kafkatx.spark.job import started_processes
    from kafkatx.spark.schema import DATASETS

    logs, out = tmp_path / "logs", tmp_path / "out"
    _generate(logs)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "kafkatx", "scan", "--log-dir", str(logs), "--output", str(out),
                             "--master", "local[1]", "--split-mb", "1", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                            start_new_session=True)
    seen: dict[int, str] = {}
    try:
        while proc.poll() is None and not (out / "batches").is_dir():
            seen.update({p: _cmdline(p) for p in started_processes(proc.pid)})
            time.sleep(0.02)
        assert proc.poll() is None, ("the scan ended before it could be interrupted", proc.communicate())
        seen.update({p: _cmdline(p) for p in started_processes(proc.pid)})
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        _stdout, stderr = proc.communicate(timeout=600)  # a guard against a hang, not a timed assertion
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert any("java" in c for c in seen.values()), f"no JVM seen below kafkatx: {seen}"
    text = stderr.decode()
    assert proc.returncode == 130, text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkatx: interrupted: scan stopped"), text
    assert "Traceback" not in text
    left = {p: c for p, c in seen.items() if _alive(p)}
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after the interrupt: {left}"
    for name in DATASETS:  # nothing half-written is left looking like a dataset
        assert not (out / name).exists() or (out / name / "_SUCCESS").exists(), name
    log = re.search(r"Spark's log: (\S+)$", lines[0])
    assert log and Path(log.group(1)).is_file()
    Path(log.group(1)).unlink()


def test_a_sigint_that_pysparks_handler_turns_into_another_error_is_still_seen(monkeypatch):
    """The race CI hit once: Ctrl-C arrives while py4j is mid-call, pyspark's SIGINT handler tries to
    cancel the jobs over the broken gateway and raises that error instead of KeyboardInterrupt.
    ``_sigint_seen`` notes the signal before that handler runs, so run_scan reports an interrupt
    (exit 130), not "Spark job failed" (exit 3). No Spark here: a stand-in for pyspark's handler."""
    from kafkatx.spark import job

    class GatewayGone(Exception):
        pass

    def pyspark_like_handler(signum, frame):
        raise GatewayGone("Gateway must be connected to send cancel cmd")

    previous = signal.signal(signal.SIGINT, pyspark_like_handler)
    try:
        with pytest.raises(GatewayGone):
            with job._sigint_seen() as seen:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler runs at the next bytecode; never reached
        assert seen == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is pyspark_like_handler  # put back as it was
        with job._sigint_seen() as quiet:
            pass
        assert quiet == []
    finally:
        signal.signal(signal.SIGINT, previous)
