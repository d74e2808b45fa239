"""The package a user installs: an sdist and a wheel built as a release is, each installed into a fresh venv.

``python -m build`` makes the sdist and builds the platform wheel *from that sdist* (so a file the
sdist forgets fails here); ``KAFKATX_PURE_PYTHON=1`` at build time makes the pure-Python wheel a
machine without a compiler gets. Each wheel goes into a venv of its own, and everything below runs
from an empty working directory with no ``PYTHONPATH``, so the checkout is not on ``sys.path``:
the installed ``kafkatx`` must carry all it needs (its compiled modules, for the platform wheel).

Checked: ``kafkatx --version`` and ``python -m kafkatx --version``; the README's main job on the
bundled fixture; every command's ``--help``; a run of every offline command on the fixtures, the
same bytes from the compiled and the pure wheel; the compiled modules in use (all of them from the
platform wheel, none from the pure one); the man pages installed under ``share/man/man1``.
Skips, saying why, without the ``build`` package (``pip install 'kafkatx[test]'``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kafkatx import __version__

REPO = Path(__file__).resolve().parents[1]
HANGING = REPO / "fixtures" / "hanging"
NOW = "1700007200000"  # the README's main job: fixtures/hanging at its --now
COMPILED = ["kafkatx.format._batch", "kafkatx.format._fold", "kafkatx.format._txn_log", "kafkatx.storage._replay",
            "kafkatx.coordinator._coordinator", "kafkatx.render._dump", "kafkatx.storage._mapguard", "kafkatx.storage._partition"]

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if check and done.returncode != 0:
        raise AssertionError(f"{argv} exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "KAFKATX", "_KAFKATX"))}
    env.update(COLUMNS="80", NO_COLOR="1", **extra)
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("build", reason="the 'build' package is not installed (pip install 'kafkatx[test]')")
    out = tmp_path_factory.mktemp("dist")
    pure = tmp_path_factory.mktemp("dist-pure")
    # --no-isolation: the build uses this environment's setuptools and wheel (.ci/run installs them), so
    # the test does not depend on fetching a build environment.
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)], cwd=REPO)
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(pure), str(REPO)], cwd=REPO,
         env=_clean_env(KAFKATX_PURE_PYTHON="1"))
    (sdist,) = out.glob(f"kafkatx-{__version__}.tar.gz")
    (wheel,) = out.glob(f"kafkatx-{__version__}-*.whl")
    (pure_wheel,) = pure.glob(f"kafkatx-{__version__}-*.whl")
    return {"sdist": sdist, "wheel": wheel, "pure": pure_wheel}


def _venv(root: Path, wheel: Path) -> Path:
    """A fresh venv from the interpreter under this one (its site-packages hold the dependencies where
    the machine has them; pip fetches the rest), with ``wheel`` installed into it."""
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", "--system-site-packages", str(root)], cwd=root.parent)
    _run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=root.parent,
         env=_clean_env())
    return root


@pytest.fixture(scope="module")
def installs(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {kind: _venv(tmp_path_factory.mktemp(f"venv-{kind}") / "v", dist[kind]) for kind in ("wheel", "pure")}


@pytest.fixture(scope="module")
def away(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty working directory: nothing of the checkout importable from it."""
    return tmp_path_factory.mktemp("cwd")


def test_wheel_names_and_contents(dist: dict[str, Path]) -> None:
    assert dist["wheel"].name.endswith("linux_x86_64.whl") or "-cp3" in dist["wheel"].name
    assert dist["pure"].name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    for module in COMPILED:
        assert any(n.startswith(module.replace(".", "/") + ".") and n.endswith(".so") for n in names), module
    pure_names = zipfile.ZipFile(dist["pure"]).namelist()
    assert not [n for n in pure_names if n.endswith(".so")]
    assert any(n.endswith("share/man/man1/kafkatx.1") for n in names)


@pytest.mark.parametrize("kind", ["wheel", "pure"])
def test_installed_package_is_the_wheel_not_the_checkout(installs: dict[str, Path], away: Path, kind: str) -> None:
    py = installs[kind] / "bin" / "python"
    where = _run([str(py), "-c", "import kafkatx; print(kafkatx.__file__)"], cwd=away, env=_clean_env()).stdout
    assert str(installs[kind]) in where and str(REPO) not in where
    assert _run([str(installs[kind] / "bin" / "kafkatx"), "--version"], cwd=away,
                env=_clean_env()).stdout == f"kafkatx {__version__}\n"
    assert _run([str(py), "-m", "kafkatx", "--version"], cwd=away, env=_clean_env()).stdout == f"kafkatx {__version__}\n"
    assert (installs[kind] / "share" / "man" / "man1" / "kafkatx-find-hanging.1").is_file()


# Each compiled module and the global its Python twin keeps it in (None when the pure path is in use).
OWNERS = [("kafkatx.format.record_batch", "_batch"), ("kafkatx.format.segment_fold", "_fold"),
          ("kafkatx.format.txn_log", "_txn_log"), ("kafkatx.storage.producer_state", "_replay"),
          ("kafkatx.coordinator.state_manager", "_coordinator"), ("kafkatx.render.kafka_dump", "_dump"),
          ("kafkatx.storage.segment", "_mapguard"), ("kafkatx.storage.partition", "_partition")]


def _compiled_in_use(py: Path, away: Path) -> dict[str, str]:
    """Compiled module name -> the file it was loaded from, for each one its owner uses."""
    probe = ("import importlib, sys\n"
             f"for owner, attr in {OWNERS!r}:\n"
             "    module = getattr(importlib.import_module(owner), attr)\n"
             "    if module is not None:\n"
             "        print(module.__name__, module.__file__)\n")
    out = _run([str(py), "-c", probe], cwd=away, env=_clean_env()).stdout.split()
    return dict(zip(out[::2], out[1::2], strict=True))


def test_platform_wheel_uses_every_compiled_module_and_pure_wheel_none(installs: dict[str, Path], away: Path) -> None:
    used = _compiled_in_use(installs["wheel"] / "bin" / "python", away)
    assert sorted(used) == sorted(COMPILED)
    assert all(path.startswith(str(installs["wheel"])) for path in used.values()), used
    assert _compiled_in_use(installs["pure"] / "bin" / "python", away) == {}


def test_readme_main_job_from_the_wheel(installs: dict[str, Path], away: Path) -> None:
    """README's first command, run by the installed kafkatx: exit 1, the fixture's hanging transactions."""
    argv = ["find-hanging", "--log-dir", str(HANGING), "--now", NOW]
    tree = _run([sys.executable, "-m", "kafkatx", *argv], cwd=REPO, env=_clean_env(), check=False)
    assert tree.returncode == 1 and tree.stdout
    for kind in ("wheel", "pure"):
        got = _run([str(installs[kind] / "bin" / "kafkatx"), *argv], cwd=away, env=_clean_env(), check=False)
        assert (got.returncode, got.stdout, got.stderr) == (tree.returncode, tree.stdout, tree.stderr), kind


def _commands(py: Path, away: Path) -> list[str]:
    probe = ("import typer.main\nfrom kafkatx.cli.main import app\n"
             "print('\\n'.join(sorted(typer.main.get_command(app).commands)))")
    return _run([str(py), "-c", probe], cwd=away, env=_clean_env()).stdout.split()


def test_every_command_has_help_from_the_wheel(installs: dict[str, Path], away: Path) -> None:
    kafkatx = installs["wheel"] / "bin" / "kafkatx"
    commands = _commands(installs["wheel"] / "bin" / "python", away)
    assert {"find-hanging", "lag", "verify", "dump-segment", "abort-hanging", "undo", "scan"} <= set(commands)
    for command in commands:
        done = _run([str(kafkatx), command, "--help"], cwd=away, env=_clean_env())
        assert command in done.stdout and "--help" in done.stdout, command


def _smoke_runs() -> list[tuple[list[str], int]]:
    """One offline run of every command that reads a log dir, with its documented exit code."""
    orders = HANGING / "orders-0"
    log = sorted(orders.glob("*.log"))[0]
    index, snapshot = log.with_suffix(".index"), sorted(orders.glob("*.snapshot"))
    runs: list[tuple[list[str], int]] = [
        (["find-hanging", "--log-dir", str(HANGING), "--now", NOW, "--format", "json"], 1),
        (["lag", "--log-dir", str(HANGING), "--now", NOW, "--format", "json"], -1),
        (["list-txn", "--log-dir", str(HANGING), "--now", NOW, "--format", "json"], 0),
        (["describe-producers", "--log-dir", str(HANGING), "--topic", "orders", "--partition", "0",
          "--now", NOW, "--format", "json"], 0),
        (["verify", "--log-dir", str(HANGING), "--format", "json"], -1),
        (["timeline", "--log-dir", str(HANGING), "--now", NOW], -1),
        (["abort-hanging", "--log-dir", str(HANGING), "--all", "--now", NOW, "--format", "json"], -1),
        (["dump-segment", "--files", str(log), "--deep-iteration"], 0),
        (["dump-index", str(index)], 0),
    ]
    if snapshot:
        runs.append((["dump-snapshot", str(snapshot[0])], 0))
    return runs


@pytest.mark.parametrize("argv,code", _smoke_runs(), ids=lambda v: v[0] if isinstance(v, list) else str(v))
def test_offline_commands_from_both_wheels_agree(installs: dict[str, Path], away: Path, argv: list[str],
                                                 code: int) -> None:
    """The platform wheel (compiled) and the pure wheel give the same bytes and exit code; never a crash."""
    got = {kind: _run([str(installs[kind] / "bin" / "kafkatx"), *argv], cwd=away, env=_clean_env(), check=False)
           for kind in ("wheel", "pure")}
    compiled, pure = got["wheel"], got["pure"]
    assert compiled.returncode in (0, 1, 3) and "internal error" not in compiled.stderr, compiled.stderr
    if code >= 0:
        assert compiled.returncode == code, compiled.stderr
    assert (compiled.returncode, compiled.stdout) == (pure.returncode, pure.stdout)
