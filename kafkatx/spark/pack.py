"""Build the packed virtualenv ``kafkatx scan --pack-env FILE`` ships to executors without kafkatx.

    python -m kafkatx.spark.pack kafkatx-env.zip
    kafkatx scan --master spark://HOST:7077 --pack-env kafkatx-env.zip --log-dir ... --output ...

Use ``.zip`` for standalone and Kubernetes: Spark unpacks archives itself there and keeps
file modes only for zip files (a ``.tar.gz`` arrives with ``bin/python`` not executable:
"Permission denied"). YARN unpacks either format correctly.

This is the way Spark's documentation ships Python packages ("Python Package Management",
*Using Virtualenv*): a fresh virtualenv with kafkatx (its C extension compiled), its
dependencies (crc32c, cramjam, ...) and pyarrow (the executors write the Parquet files),
packed with ``venv-pack``. The scan passes it as ``spark.archives FILE#environment``; each
executor unpacks it into its working directory and runs ``./environment/bin/python``.
pyspark itself is not packed: executors put Spark's own ``pyspark.zip`` on the workers'
path. (The same archive works with ``spark-submit --archives FILE#environment``.)

The venv is made with ``--copies``: its ``bin/python`` is a copy of the interpreter binary
(Spark refuses to unpack a symlink pointing outside the archive), but the standard library
and any ``libpython`` stay those of the interpreter the venv was made from (``--python``,
default this one), so every executor host needs that Python (same version, same path). For hosts without it, build a
conda environment and pack it with ``conda-pack`` instead (it includes the interpreter);
the scan takes either archive.

kafkatx is installed from the source tree this kafkatx was imported from when it has a
``pyproject.toml`` (a checkout, an editable install), else ``kafkatx==<this version>`` from
the package index; pyarrow at this interpreter's version. pip uses its usual index and cache.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkatx.errors import KafkaTxError

EXECUTOR_EXTRAS = ("pyarrow", "pandas")  # beyond kafkatx's own dependencies: what executor code imports


def kafkatx_requirement() -> str:
    """What pip installs for kafkatx: this source tree (if it is one) or this version."""
    import kafkatx

    root = Path(kafkatx.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and 'name = "kafkatx"' in (root / "pyproject.toml").read_text():
        return str(root)
    return f"kafkatx=={kafkatx.__version__}"


def _pinned(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{name}=={version(name)}"
    except PackageNotFoundError:
        return name


def _run(cmd: list[str], what: str, verbose: bool) -> None:
    if verbose:
        print("+ " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, stdout=None if verbose else subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout or "").strip().splitlines()[-15:]
        raise KafkaTxError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def build_env(output: Path, *, python: str = sys.executable, requirement: str | None = None,
              extra: tuple[str, ...] = (), verbose: bool = False, compress_level: int = 4) -> Path:
    """Create a virtualenv with kafkatx and pyarrow in a temp dir and venv-pack it to ``output``
    (``.zip``; ``.tar.gz``, ``.tgz``, ``.tar`` unpack with their file modes only on YARN)."""
    try:
        import venv_pack
    except ImportError as err:
        raise KafkaTxError("packing needs venv-pack: pip install 'kafkatx[spark]' (or pip install venv-pack)") from err
    output = Path(output).absolute()
    if not output.parent.is_dir():
        raise KafkaTxError(f"{output.parent}: no such directory")
    with tempfile.TemporaryDirectory(prefix="kafkatx-pack-") as tmp:
        venv = Path(tmp) / "venv"
        # --copies: bin/python is a copy of the interpreter, not a symlink to its absolute path,
        # which Spark (Hadoop's untar) refuses to unpack ("would create entry outside of ...").
        _run([python, "-m", "venv", "--copies", str(venv)], "creating the virtualenv", verbose)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
        if not verbose:
            pip.append("-q")
        reqs = [requirement or kafkatx_requirement(), *(_pinned(n) for n in EXECUTOR_EXTRAS), *extra]
        _run([*pip, *reqs], "pip install " + " ".join(reqs), verbose)
        check = ("import kafkatx.format.record_batch as rb, kafkatx.spark.rows, pyarrow; "
                 "from kafkatx.format import _batch, _fold, _txn_log; from kafkatx.storage import _replay; from kafkatx.coordinator import _coordinator; "
                 "from kafkatx.render import _dump")
        _run([str(venv / "bin" / "python"), "-c", check], "importing kafkatx (with its C extension) in the venv",
             verbose)
        output.unlink(missing_ok=True)
        # lib64 is a symlink to lib (some platforms); a zip would store the whole tree twice
        venv_pack.pack(prefix=str(venv), output=str(output), verbose=verbose, compress_level=compress_level,
                       filters=[("exclude", "lib64")])
    return output


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafkatx.spark.pack", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", type=Path, help="the archive to write: NAME.zip (or .tar.gz for YARN only)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter to base the venv on (must exist at this path on every executor host)")
    ap.add_argument("--requirement", help="what pip installs for kafkatx (default: this source tree or version)")
    ap.add_argument("--extra", action="append", default=[], metavar="PKG", help="another package to install")
    ap.add_argument("--compress-level", type=int, default=4, help="gzip level 0-9 (default 4)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    t = time.monotonic()
    try:
        out = build_env(args.output, python=args.python, requirement=args.requirement, extra=tuple(args.extra),
                        verbose=args.verbose, compress_level=args.compress_level)
    except KafkaTxError as err:
        print(f"kafkatx: {err}", file=sys.stderr)
        return 3
    size = out.stat().st_size / (1 << 20)
    print(f"{out} ({size:.0f} MB, {time.monotonic() - t:.0f} s): kafkatx scan --pack-env {out} ...", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
