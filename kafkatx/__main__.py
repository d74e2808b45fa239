"""``python -m kafkatx``."""

from kafkatx.cli.main import run

run()
