"""Types of the compiled partition-folder reads (kafkatx/log/_partition.c; twins in kafkatx/log/partition.py)."""

from collections.abc import Sequence
from os import PathLike

def list_folder(path: str | PathLike[str], /) -> tuple[list[str], bool]: ...
def read_small_files(paths: Sequence[str | PathLike[str]], limit: int, stat_first: Sequence[bool], /,
                     ) -> tuple[tuple[bytes, int] | None, ...]: ...
