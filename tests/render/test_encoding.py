"""Every human view prints in any output encoding: ASCII where the output cannot show more.

``PYTHONIOENCODING=ascii`` (or ``LC_ALL=C`` with UTF-8 mode off) used to end ``timeline`` with
``UnicodeEncodeError`` (exit 4) while the tables fell back to ASCII. Each view runs as a real process
(the encoding is fixed at interpreter start-up) and must exit with its documented code, print only
ASCII and no internal error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANGING = ROOT / "fixtures" / "hanging"
NOW = "1700007200000"
SEGMENT = HANGING / "orders-0" / f"{0:020d}.log"

# (arguments, exit code): 1 where the command finds something (cli.md "Exit codes")
VIEWS = [
    (["timeline", "--log-dir", str(HANGING), "--now", NOW], 0),
    (["find-hanging", "--log-dir", str(HANGING), "--now", NOW], 1),
    (["find-hanging", "--log-dir", str(HANGING), "--now", NOW, "--format", "text"], 1),
    (["lag", "--log-dir", str(HANGING)], 0),
    (["list-txn", "--log-dir", str(HANGING), "--now", NOW], 0),
    (["describe-txn", "stale-loader", "--log-dir", str(HANGING), "--now", NOW], 0),
    (["describe-producers", "--log-dir", str(HANGING), "--topic", "orders", "--partition", "0", "--now", NOW], 0),
    (["abort-hanging", "--log-dir", str(HANGING), "--all", "--now", NOW], 1),
    (["dump-segment", str(SEGMENT)], 0),
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.mark.skipif(not HANGING.is_dir(), reason="fixtures not built")
@pytest.mark.parametrize("encoding_env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0"}],
                         ids=["PYTHONIOENCODING=ascii", "LC_ALL=C"])
@pytest.mark.parametrize(("args", "code"), VIEWS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in VIEWS])
def test_view_in_ascii_output(args, code, encoding_env):
    proc = subprocess.run([sys.executable, "-m", "kafkatx", *args], capture_output=True, env=_env(**encoding_env),
                          timeout=120)
    assert proc.returncode == code, proc.stderr.decode(errors="replace")
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr
    assert proc.stdout.strip(), "the view printed nothing"
    proc.stdout.decode("ascii")  # raises (fails) on any byte above 0x7f


def test_timeline_ascii_glyphs_keep_the_picture():
    """The ASCII picture is the Unicode one cell for cell: one ASCII character per glyph."""
    from kafkatx.render.timeline import ASCII, EMPTY, GHOST, GLYPH

    glyphs = [*GLYPH.values(), EMPTY, GHOST, "│", "─", "…"]
    mapped = [g.translate(ASCII) for g in glyphs]
    assert all(len(m) == 1 and m.isascii() for m in mapped)
    outcomes = [GLYPH[k].translate(ASCII) for k in ("COMMIT", "ABORT", "OPEN", "HANGING")]
    assert len(set(outcomes)) == 4 and EMPTY.translate(ASCII) not in outcomes
