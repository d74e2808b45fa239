"""Test-only launcher: run a repair in this process and SIGKILL it right after one step of ``apply_plan``.

    python fault_launcher.py STEP apply LOG_DIR JOURNAL   # apply_plan(make_plan(LOG_DIR), JOURNAL)
    python fault_launcher.py STEP cli ARG...              # the kafkatx CLI with ARG...

STEP is a step name of ``kafkatx.repair.plan_steps`` or its index, or ``-`` for no fault. The kill
comes from the ``on_step`` hook this script passes to ``apply_plan`` (for the CLI: every
``apply_plan`` the repair commands call gets it); the library reads no fault setting of its own.
SIGKILL runs no cleanup handler and flushes nothing: as close to ``kill -9`` or an OOM kill as a
test gets.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path


def kill_at(want: str) -> Callable[[str], None]:
    """An ``on_step`` hook that SIGKILLs this process at the step named ``want`` (or numbered so)."""
    seen = 0

    def on_step(name: str) -> None:
        nonlocal seen
        index, seen = seen, seen + 1
        if want in (name, str(index)):
            os.kill(os.getpid(), signal.SIGKILL)

    return on_step


def main(argv: list[str]) -> int:
    want, mode, *args = argv
    hook = None if want == "-" else kill_at(want)
    if mode == "apply":
        from repair_fixtures import make_plan

        from kafkatx.repair import apply_plan

        ld, journal = Path(args[0]), Path(args[1])
        apply_plan(make_plan(ld), journal, now=1_700_000_000_000, on_step=hook)
        print("finished")
        return 0
    if mode == "cli":
        import kafkatx.repair.offline as offline
        from kafkatx.cli.main import main as cli_main

        if hook is not None:
            offline.apply_plan = functools.partial(offline.apply_plan, on_step=hook)  # type: ignore[assignment]
        return cli_main(args)
    raise SystemExit(f"fault_launcher: unknown mode {mode!r} (apply | cli)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
