"""``python -m kafkatx.spark [scan options]``: ``kafkatx scan`` as a Spark application.

The same options as ``kafkatx scan`` (``--log-dir``, ``--output``, ``--master``, ``--conf``,
``--pack-env``, ``--format``, ...; a leading ``scan`` is accepted and ignored). This file
is also the application spark-submit runs, in client or cluster deploy mode::

    spark-submit --master yarn --deploy-mode cluster \\
        --archives kafkatx-env.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        --conf spark.pyspark.driver.python=./environment/bin/python \\
        "$(python -c 'import kafkatx.spark.__main__ as m; print(m.__file__)')" \\
        --log-dir /mnt/kafka/broker-1 --output hdfs:///scans/today --format json

Under spark-submit the master, deploy mode and archives are spark-submit's (no ``--master``
needed). Exit codes as ``kafkatx scan``.
"""

from __future__ import annotations

import os
import sys

if not __package__:
    # Run as a script (spark-submit FILE): Python put this directory first on sys.path,
    # where trace.py would shadow the standard library's trace module.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from kafkatx.cli.main import main  # noqa: E402 - after the sys.path fix above

ROOT_OPTIONS = ("--traceback",)


def run(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["scan"]:
        args = args[1:]
    root = [a for a in args if a in ROOT_OPTIONS]
    rest = [a for a in args if a not in ROOT_OPTIONS]
    return main([*root, "scan", *rest])


if __name__ == "__main__":
    sys.exit(run())
