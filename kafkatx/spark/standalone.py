"""A Spark standalone cluster on this machine, from pyspark's own distribution (tests, benchmarks).

``start_standalone(workers=2)`` starts ``org.apache.spark.deploy.master.Master`` and
``workers`` ``org.apache.spark.deploy.worker.Worker`` processes with
``$SPARK_HOME/bin/spark-class`` (``SPARK_HOME`` = the installed pyspark package, which
ships ``bin/`` and the jars), bound to 127.0.0.1 on free ports, and returns once the
master's web UI JSON (``http://127.0.0.1:W/json/``) lists every worker ALIVE. Each process
runs in its own process group; :meth:`StandaloneCluster.stop` kills the groups (the
executors the workers started included). Real separate JVMs: executors are processes of
their own, started by a worker with the worker's environment, not the driver's.

    with start_standalone(workers=2, cores=1) as cluster:
        run_scan(dirs, out, master=cluster.master_url)

``env`` adds to (or, with a value of None, removes from) the environment of the master and
workers, e.g. a ``PATH`` whose ``python3`` lacks kafkatx's dependencies.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from kafkatx.errors import KafkaTxError

HOST = "127.0.0.1"


def spark_home() -> Path:
    """pyspark's own distribution (``bin/spark-class``, ``jars/``)."""
    try:
        import pyspark
    except ImportError as err:
        raise KafkaTxError("a standalone cluster needs pyspark: pip install 'kafkatx[spark]'") from err
    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class StandaloneCluster(Struct):
    master_url: str
    web_url: str
    workdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as resp:
            got: dict[str, Any] = json.loads(resp.read())
        return got

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def logs(self) -> str:
        """The master's and workers' own logs (their stdout/stderr), for failure messages."""
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.workdir.glob("*.out")))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)
                proc.wait(timeout=5)
        for proc in self.procs:  # executors a worker started live in its group too
            _kill_group(proc, signal.SIGKILL)
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def start_standalone(workers: int = 1, cores: int = 1, memory: str = "1g", *,
                     env: dict[str, str | None] | None = None, workdir: Path | None = None,
                     timeout: float = 120.0) -> StandaloneCluster:
    """Start a master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1."""
    home = spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists():
        raise KafkaTxError(f"{spark_class}: not found (pyspark without its bin/ scripts)")
    root = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="kafkatx-standalone-"))
    root.mkdir(parents=True, exist_ok=True)
    base = dict(os.environ)
    base.update({
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_PID_DIR": str(root),
        "SPARK_DAEMON_MEMORY": "256m",  # the master and worker daemons themselves
        "SPARK_NO_DAEMONIZE": "1",
    })
    for key, value in (env or {}).items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    port, web = free_port(), free_port()
    cluster = StandaloneCluster(master_url=f"spark://{HOST}:{port}", web_url=f"http://{HOST}:{web}", workdir=root)

    def launch(name: str, *args: str) -> None:
        with open(root / f"{name}.out", "wb") as out:
            cluster.procs.append(subprocess.Popen(
                [str(spark_class), *args], env=base, cwd=root, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))

    try:
        launch("master", "org.apache.spark.deploy.master.Master",
               "--host", HOST, "--port", str(port), "--webui-port", str(web))
        for i in range(workers):
            wdir = root / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            launch(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                   "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(cores),
                   "--memory", memory, "--work-dir", str(wdir), cluster.master_url)
        deadline = time.monotonic() + timeout
        while True:
            for proc in cluster.procs:
                if proc.poll() is not None:
                    raise KafkaTxError(f"standalone cluster: a daemon exited (pid {proc.pid}, "
                                       f"status {proc.returncode}):\n{cluster.logs()}")
            try:
                if cluster.alive_workers() >= workers:
                    return cluster
            except (OSError, ValueError):
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                raise KafkaTxError(f"standalone cluster: {workers} worker(s) not ALIVE after {timeout:.0f} s:\n"
                                   f"{cluster.logs()}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
