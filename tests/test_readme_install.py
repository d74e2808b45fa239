"""The README's first command works on a stock machine: installed into an environment of its own.

It runs, word for word as README.md prints it, in a fresh copy of the checkout, with a fresh
``$HOME`` and ``PATH=/usr/bin:/bin`` (no pyenv, no activated venv, so ``python3`` is the system's
``/usr/bin/python3``, which on Debian/Ubuntu refuses ``pip install``: PEP 668). ``install.sh`` must
then make its own venv from that interpreter and the command must find the fixture's hanging
transactions. Skips (saying why) where there is no ``/usr/bin/python3`` with ``venv``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = Path("/usr/bin/python3")


def readme_commands() -> list[str]:
    """The lines of README.md's first ```bash block (the two commands a newcomer runs)."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no ```bash block with the first commands"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def test_readme_first_commands_are_install_and_ci():
    first, second = readme_commands()[:2]
    assert first.startswith("sh install.sh && ") and "find-hanging --log-dir fixtures/hanging" in first
    assert second == "bash .ci/run"
    assert "pip install ." not in first  # a stock system Python refuses it (PEP 668)


def _system_python_has_venv() -> str | None:
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} does not exist on this machine"
    probe = subprocess.run([str(SYSTEM_PYTHON), "-c", "import venv, ensurepip"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{SYSTEM_PYTHON} has no venv/ensurepip (Debian: apt install python3-venv)"
    return None


def _fresh_clone(to: Path) -> None:
    """The checkout's files as a clone would have them (tracked plus new, unignored ones)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, to / name)


@pytest.mark.slow
def test_readme_first_command_on_system_python(tmp_path):
    why = _system_python_has_venv()
    if why:
        pytest.skip(why)
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: cannot make a fresh copy of it")
    clone, home = tmp_path / "kafkatx", tmp_path / "home"
    clone.mkdir()
    home.mkdir()
    _fresh_clone(clone)
    # The machine's pip configuration (package index, certificates) is the machine's, not the project's.
    user_pip = Path.home() / ".config" / "pip" / "pip.conf"
    if user_pip.exists():
        (home / ".config" / "pip").mkdir(parents=True)
        shutil.copy2(user_pip, home / ".config" / "pip" / "pip.conf")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYENV", "VIRTUAL_ENV", "PYTHON", "KAFKATX", "CONDA"))}
    env.update(HOME=str(home), PATH="/usr/bin:/bin", KAFKATX_NO_PIPX="1", NO_COLOR="1")
    first = readme_commands()[0]
    proc = subprocess.run(["sh", "-c", first], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])  # 1: found some
    venv = home / ".venvs" / "kafkatx"
    cfg = (venv / "pyvenv.cfg").read_text()
    assert re.search(r"^home = /usr/bin$", cfg, re.M), cfg  # made from the system's python3, no pyenv
    assert os.path.realpath(home / ".local" / "bin" / "kafkatx") == str(venv / "bin" / "kafkatx")
    # Every hanging transaction fixtures/README.md reasons out for `hanging` (fixtures/expected/), one row each.
    expected = json.loads((REPO / "fixtures" / "expected" / "hanging" / "find-hanging.json").read_text())
    rows = [line.split() for line in proc.stdout.splitlines()]
    for want in expected:
        where = f"{want['topic']}-{want['partition']}"
        assert [want["kind"], where, str(want["producer_id"])] in [r[:3] for r in rows], (want, proc.stdout)
