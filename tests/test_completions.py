"""The shell scripts under completions/ must be what completions/generate.py produces now."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _generator():
    return load_script("completions/generate.py")


def test_completion_scripts_are_fresh():
    gen = _generator()
    scripts = gen.scripts()
    assert {p.name for p in scripts} == {"kafkatx.bash", "kafkatx.zsh", "kafkatx.fish"}
    for path, text in scripts.items():
        assert path.exists(), f"{path.name} missing: run python completions/generate.py"
        assert path.read_text() == text, f"{path.name} is stale: run python completions/generate.py"


def test_scripts_complete_kafkatx_with_its_variable():
    for shell in ("bash", "zsh", "fish"):
        text = (REPO / "completions" / f"kafkatx.{shell}").read_text()
        assert f"_KAFKATX_COMPLETE=complete_{shell}" in text
        assert "kafkatx" in text


def test_completion_answers_for_commands(monkeypatch):
    """The bash protocol end to end: the app itself answers with its commands."""
    import subprocess
    import sys

    env = {"COMP_WORDS": "kafkatx dump-", "COMP_CWORD": "1", "_KAFKATX_COMPLETE": "complete_bash",
           "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", "import sys; from kafkatx.cli.main import main; sys.exit(main())"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert "dump-segment" in r.stdout.split() and "dump-index" in r.stdout.split()
