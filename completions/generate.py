"""Regenerate the shell completion scripts in this folder from the kafkatx app.

    python completions/generate.py          # rewrite kafkatx.bash, kafkatx.zsh, kafkatx.fish
    python completions/generate.py --check  # exit 1 when a script is stale (tests/test_completions.py)

The scripts are Typer's (Click's) completion sources for prog name ``kafkatx`` with
the ``_KAFKATX_COMPLETE`` variable: at completion time the shell asks ``kafkatx``
itself, so commands added later complete without regenerating; regenerate when
Typer's templates change. Install: ``source completions/kafkatx.bash`` (bash), copy
``kafkatx.zsh`` to a ``$fpath`` dir as ``_kafkatx`` (zsh), or copy ``kafkatx.fish``
to ``~/.config/fish/completions/`` (fish); ``kafkatx --install-completion`` does it
for the current shell.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROG = "kafkatx"
COMPLETE_VAR = "_KAFKATX_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def scripts() -> dict[Path, str]:
    sys.path.insert(0, str(HERE.parent))
    import typer.completion

    import kafkatx.cli.main  # noqa: F401 - builds the app (and registers Typer's completion classes)

    typer.completion.completion_init()
    out = {}
    for shell in SHELLS:
        text = typer.completion.get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell)
        out[HERE / f"{PROG}.{shell}"] = text.strip() + "\n"
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in scripts().items():
        current = path.read_text() if path.exists() else None
        if current != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    if check and stale:
        print("stale completion scripts (run python completions/generate.py): "
              + ", ".join(p.name for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
