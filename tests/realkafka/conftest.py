"""Real Apache Kafka data: log dirs a genuine broker wrote, and its recorded answers.

The data lives beside the repository in ``../shared/real-kafka/`` (CI has it; a plain clone may
not): every test here skips, saying why, where that folder is absent. Tarballs are extracted once
per session into a temporary dir (GNU tar, ``--sparse``: the crashed dir's preallocated indexes are
10 MiB each but sparse on disk) and handed out read-only; a test that writes takes a copy.

Use the fixtures (``real_kafka``, ``real_dir``, ``real_answers``); do not ``from conftest import``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# beside the repository; KAFKATX_REAL_KAFKA names it elsewhere (a git worktree of the repository)
REAL_KAFKA = Path(os.environ.get("KAFKATX_REAL_KAFKA") or REPO.parent / "shared" / "real-kafka")

# name -> tarball, relative to REAL_KAFKA; the top folder inside each tarball is the name's last part
TARBALLS = {
    "3.8.0/clean": "3.8.0/clean.tar.gz",
    "3.8.0/crashed": "3.8.0/crashed.tar.gz",
    "4.0-tv2/tv2-clean": "4.0-tv2/tv2-clean.tar.gz",
    "3.9-tiered/tiered-clean": "3.9-tiered/tiered-clean.tar.gz",  # top folder: logs/
    "3.8.0/dump-log": "3.8.0/dump-log/kafka-dump-log-output.tar.gz",
    **{f"3.8.0/startup/{n}": f"3.8.0/startup/{n}.tar.gz" for n in (
        "powercut", "retention", "idle", "compacted", "stale-clean", "prepare", "crc-clean", "logstart")},
}


def _require() -> Path:
    if not REAL_KAFKA.is_dir():
        pytest.skip(f"real-broker data absent: {REAL_KAFKA} (it is beside the repository in CI)")
    if shutil.which("tar") is None:
        pytest.skip("GNU tar is needed to extract the real-broker tarballs")
    return REAL_KAFKA


class RealKafka:
    """Extracts each tarball once, lazily, under one session temp dir."""

    def __init__(self, root: Path, base: Path) -> None:
        self.root = root
        self.base = base
        self._done: dict[str, Path] = {}

    def extract(self, name: str) -> Path:
        """The extracted top folder of tarball ``name`` (a key of TARBALLS)."""
        if name not in self._done:
            tarball = self.root / TARBALLS[name]
            if not tarball.is_file():
                pytest.skip(f"real-broker tarball absent: {tarball}")
            dest = self.base / name.replace("/", "__")
            dest.mkdir(parents=True)
            subprocess.run(["tar", "-xzf", str(tarball), "--sparse", "-C", str(dest)], check=True)
            tops = [p for p in dest.iterdir()]
            self._done[name] = tops[0] if len(tops) == 1 and tops[0].is_dir() else dest
        return self._done[name]

    def copy(self, name: str, to: Path) -> Path:
        """A writable copy of tarball ``name``'s dir at ``to`` (sparse files stay sparse)."""
        subprocess.run(["cp", "-a", "--sparse=always", str(self.extract(name)), str(to)], check=True)
        return to

    def answers(self, name: str) -> Path:
        """The answers folder of a dir: ``3.8.0/clean`` -> ``3.8.0/answers/clean``,
        ``3.8.0/startup/prepare`` -> ``3.8.0/startup/answers/prepare``."""
        head, _, leaf = name.rpartition("/")
        return self.root / head / "answers" / leaf

    def answer_json(self, name: str, what: str) -> dict:
        """``broker/<what>.json`` of a dir's answers, parsed."""
        return json.loads((self.answers(name) / "broker" / f"{what}.json").read_text())


@pytest.fixture(scope="session")
def real_kafka(tmp_path_factory) -> RealKafka:
    return RealKafka(_require(), tmp_path_factory.mktemp("real-kafka"))


def pytest_terminal_summary(terminalreporter):
    """The field counts ``test_answers.py`` compared, per dir ("N fields compared, D differences")."""
    import sys

    module = sys.modules.get("test_answers") or next(
        (m for n, m in sys.modules.items() if n.endswith("realkafka.test_answers")), None)
    counts = getattr(module, "FIELD_COUNTS", None)
    if counts:
        terminalreporter.section("real-broker fields compared")
        for name, (compared, differences) in sorted(counts.items()):
            terminalreporter.write_line(f"{name}: {compared} fields compared, {differences} differences")
