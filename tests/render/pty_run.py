"""Run ``python -m kafkatx`` with one of its streams on a pseudo-terminal (used by tests/render)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def kafkatx_on_a_pty(args: list[str], env: dict[str, str], *, stream: str = "stdout") -> str:
    """What kafkatx wrote to ``stream`` ("stdout" or "stderr"), that stream being a pseudo-terminal
    (the other goes to /dev/null); ``env`` is the whole environment of the process."""
    master, slave = os.openpty()
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: slave}
    proc = subprocess.Popen([sys.executable, "-m", "kafkatx", *args], stdout=streams["stdout"],
                            stderr=streams["stderr"], cwd=REPO, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode()
