"""A broker log directory (one entry of ``log.dirs``).

It holds one folder per partition replica plus broker-wide files
(``LogManager`` in core/src/main/scala/kafka/log/LogManager.scala):
``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``.kafka_cleanshutdown`` (written on a clean
shutdown so the next start skips recovery) and ``.lock`` (flocked by a running
broker). Partition folders being deleted or moved carry a ``-delete``, ``-future``
or ``-stray`` suffix (``UnifiedLog.DeleteDirSuffix``, ``FutureDirSuffix``,
``StrayDirSuffix``); they are not live replicas, so they are skipped with a notice.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kafkatx.errors import DecodeError, MissingFile
from kafkatx.format.checkpoint import read_offset_checkpoint
from kafkatx.log.partition import Partition, parse_partition_dir_name, read_text_file

REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

_SKIP_SUFFIXES = {
    "-delete": "partition folder scheduled for deletion",
    "-future": "future replica being moved between log dirs",
    "-stray": "stray replica not assigned to this broker",
}


class LogDir:
    """One log directory. Folders are listed at construction; checkpoints read on first use."""

    __slots__ = ("path", "skipped", "_partitions", "_checkpoints")

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise MissingFile(f"{self.path}: no such log dir")
        if not self.path.is_dir():
            raise MissingFile(f"{self.path}: not a directory (expected a broker log dir)")
        self.skipped: list[str] = []
        self._checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        partitions: list[Partition] = []
        try:
            entries = sorted(self.path.iterdir())
        except OSError as err:
            raise MissingFile(f"{self.path}: cannot list: {err.strerror or err}") from err
        for entry in entries:
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            parsed = parse_partition_dir_name(entry.name)
            if parsed is None:
                self.skipped.append(f"{entry}: skipped, {_why_skipped(entry.name)}")
                continue
            partitions.append(Partition(entry, log_dir=self, topic=parsed[0], partition=parsed[1]))
        partitions.sort(key=lambda p: (p.topic, p.partition))
        self._partitions = partitions

    def __repr__(self) -> str:
        return f"LogDir({str(self.path)!r}, partitions={len(self._partitions)})"

    def partitions(self) -> list[Partition]:
        """Live partition folders, sorted by (topic, partition)."""
        return list(self._partitions)

    def partition(self, topic: str, partition: int) -> Partition | None:
        for p in self._partitions:
            if p.topic == topic and p.partition == partition:
                return p
        return None

    def _checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        if name not in self._checkpoints:
            path = self.path / name
            if not path.is_file():
                self._checkpoints[name] = {}
            else:
                try:
                    self._checkpoints[name] = dict(read_offset_checkpoint(read_text_file(path)))
                except DecodeError as err:
                    raise err.at(path) from err
        return self._checkpoints[name]

    @property
    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """From ``replication-offset-checkpoint``; {} when absent."""
        return self._checkpoint(REPLICATION_CHECKPOINT)

    @property
    def recovery_points(self) -> dict[tuple[str, int], int]:
        """From ``recovery-point-offset-checkpoint``; {} when absent."""
        return self._checkpoint(RECOVERY_CHECKPOINT)

    @property
    def log_start_offsets(self) -> dict[tuple[str, int], int]:
        """From ``log-start-offset-checkpoint``; {} when absent."""
        return self._checkpoint(LOG_START_CHECKPOINT)

    @property
    def clean_shutdown(self) -> bool:
        """True when ``.kafka_cleanshutdown`` exists (the broker will not recover segments)."""
        return (self.path / CLEAN_SHUTDOWN).exists()

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE


def _why_skipped(name: str) -> str:
    for suffix, why in _SKIP_SUFFIXES.items():
        if name.endswith(suffix):
            return why
    return "not a <topic>-<partition> folder"


def open_log_dirs(paths: Iterable[Path | str]) -> list[LogDir]:
    """Open every log dir given, in order. Raises :class:`MissingFile` for a missing one."""
    return [LogDir(Path(p)) for p in paths]
