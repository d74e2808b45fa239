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

import errno
import gc
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kafkatx.errors import DecodeError, KafkaTxError, MissingFile, ReadFailed, UsageError
from kafkatx.format.checkpoint import read_offset_checkpoint
from kafkatx.storage import fdio
from kafkatx.storage.broker_config import BrokerConfig
from kafkatx.storage.partition import Partition, parse_partition_dir_name, read_text_file
from kafkatx.storage.segment import SEGMENT_NAME as SEGMENT_FILE
from kafkatx.storage.segment import child_path

REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
REMOTE_INDEX_CACHE = "remote-log-index-cache"  # RemoteIndexCache.DIR_NAME (tiered storage, KIP-405)
# What marks a directory as a broker log dir (cli.md "Sources"): any of these files, or a topic-N folder.
LOG_DIR_MARKERS = (META_PROPERTIES, REPLICATION_CHECKPOINT, RECOVERY_CHECKPOINT, LOG_START_CHECKPOINT,
                   CLEANER_CHECKPOINT)

# the errnos pathlib's Path.exists reads as "absent" (pathlib._IGNORED_ERRNOS); any other OSError is raised
_ABSENT_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP))

_SKIP_SUFFIXES = {
    "-delete": "partition folder scheduled for deletion",
    "-future": "future replica being moved between log dirs",
    "-stray": "stray replica not assigned to this broker",
}


class LogDir:
    """One log directory. Folders are listed at construction; checkpoints read on first use."""

    __slots__ = ("path", "skipped", "broker_config", "group", "tiered_facts", "remote_metadata", "_partitions",
                 "_checkpoints", "_node_id", "_node_read", "_clean_path", "_clean_listed", "_files", "_meta")

    def __init__(self, path: Path | str, broker_config: BrokerConfig | None = None) -> None:
        self.path = Path(path)
        self.broker_config = broker_config  # the server.properties the broker ran with (--broker-config)
        self.group: list[LogDir] = [self]  # the log dirs opened with it (open_log_dirs): one metadata log
        self.tiered_facts: object = None  # kafkatx.storage.tiered's topic configs, read on the first question
        self.remote_metadata: object = False  # kafkatx.storage.remote_log_metadata's reading (False: not read yet)
        self._clean_path = os.path.join(self.path, CLEAN_SHUTDOWN)
        st = fdio.stat_or_none(self.path)
        if st is None:
            raise MissingFile(f"{self.path}: no such log dir")
        if not stat.S_ISDIR(st.st_mode):
            raise MissingFile(f"{self.path}: not a directory (expected a broker log dir)")
        self.skipped: list[str] = []
        self._checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        self._node_id: int | None = None
        self._node_read = False  # meta.properties is read on first use
        self._meta: dict[str, str] | None = None
        # One listing: the directory entries say which are folders (no stat per entry; 10,000
        # partitions are 10,000 entries), and a Path is made only for the partition folders.
        entries = fdio.list_entries(self.path)
        listed = sorted((name, is_dir) for name, is_dir, _f in entries)
        # the regular files the listing saw: a checkpoint (or .kafka_cleanshutdown) listed is read, and one
        # that is gone when read was deleted under the reader (ReadFailed), never an absent one
        self._files = frozenset(name for name, _d, is_file in entries if is_file)
        self._clean_listed = CLEAN_SHUTDOWN in self._files
        with collector_paused():
            self._partitions = self._read_folders(listed)
        if not self._partitions and not any(fdio.is_file(self.path / m) for m in LOG_DIR_MARKERS):
            raise MissingFile(_not_a_log_dir(self.path, [self.path / name for name, _d in listed]))

    def _read_folders(self, listed: list[tuple[str, bool]]) -> list[Partition]:
        """The live partition folders among the log dir's ``(name, is a folder)`` entries, sorted by (topic,
        partition); the others named in :attr:`skipped`."""
        partitions: list[Partition] = []
        for name, is_dir in listed:
            if not is_dir or name.startswith(".") or name == REMOTE_INDEX_CACHE:
                continue  # REMOTE_INDEX_CACHE: Kafka's own folder in a tiered broker's log dir, no partition
            entry = child_path(self.path, name)
            parsed = parse_partition_dir_name(name)
            if parsed is None:
                self.skipped.append(f"{entry}: skipped, {_why_skipped(name)}")
                continue
            part = Partition(entry, log_dir=self, topic=parsed[0], partition=parsed[1])
            if not _holds_partition_files(part):
                self.skipped.append(f"{entry}: skipped, named like a partition folder but holds no segment, "
                                    f"snapshot or partition.metadata file")
                continue
            partitions.append(part)
        partitions.sort(key=lambda p: (p.topic, p.partition))
        return partitions

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
            if not self.listed(name):  # not listed: absent (the files answered from are the listing's)
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
    def node_id(self) -> int | None:
        """The broker that owns this dir: ``node.id`` (KRaft) or ``broker.id`` (ZooKeeper) of its
        ``meta.properties`` (``MetaProperties``); None when the file is absent, unreadable or names none.
        The coordinator of a ``__transaction_state`` partition found here is this broker."""
        if not self._node_read:
            self._node_read = True
            props = self.meta_properties
            for key in ("node.id", "broker.id"):
                if props.get(key, "").lstrip("-").isdigit():
                    self._node_id = int(props[key])
                    break
        return self._node_id

    @property
    def meta_properties(self) -> dict[str, str]:
        """``meta.properties`` (``MetaProperties``: ``cluster.id``, ``node.id``/``broker.id``,
        ``directory.id``...) as key -> value; {} when the listing saw no such file or its bytes do not
        decode. Listed and not readable: ReadFailed (storage/fdio.py), never "no meta.properties"."""
        if self._meta is None:
            props: dict[str, str] = {}
            text = ""
            if self.listed(META_PROPERTIES):
                try:
                    text = read_text_file(self.path / META_PROPERTIES, limit=1 << 16)
                except ReadFailed:
                    raise
                except KafkaTxError:
                    text = ""
            for line in text.splitlines():
                key, sep, value = line.strip().partition("=")
                if sep and not key.startswith(("#", "!")):
                    props[key.strip()] = value.strip()
            self._meta = props
        return self._meta

    @property
    def clean_shutdown(self) -> bool:
        """True when ``.kafka_cleanshutdown`` exists (the broker will not recover segments)."""
        # one stat of a path made once, Path.exists' answers (any other error: ReadFailed, never "absent")
        try:
            fdio.stat(self._clean_path)
        except ReadFailed as err:
            if err.errno in _ABSENT_ERRNOS:
                return False
            raise
        return True

    def listed(self, name: str) -> bool:
        """Whether the log dir's listing saw a regular file ``name`` (a checkpoint): one listed is read, and
        gone when read it is ReadFailed (storage/fdio.py), not absent."""
        return name in self._files

    @property
    def listed_clean_shutdown(self) -> bool:
        """:attr:`clean_shutdown` as the log dir's listing saw it: what the loader asks for every partition
        (storage/loading.py), whose files are those of that listing (no stat: one per partition was ~4 us each
        at 10,000 partitions)."""
        return self._clean_listed

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE


_MANY_YOUNG = 100_000  # objects the youngest generation counts after a block: a collection over them is felt


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (back on after it when it was on; usable as a
    decorator of the one-shot answers in ``session/offline.py``).

    The replays and the log dir's listing make a few objects per transactional id, partition or folder and
    few reference cycles; with the collector on, every full collection walks all the live ones again: at
    200,000 ids that is more than half the replay's time, at 10,000 partitions a fifth, ~20 ms of the
    listing. Reference counting still frees everything as before; cycles made in the block wait
    for the next full collection after it (they leave it in the oldest generation).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_count()[0] >= _MANY_YOUNG and gc.get_freeze_count() == 0:
                # the objects made in the block join the oldest generation (two list splices; the youngest
                # generation's count starts again at 0), else the first allocation after gc.enable() runs a
                # collection over every one of them: 1.5 s after list-txn's 1,000,000 rows. A
                # block that made few objects leaves them where they are (a long-running exporter's small
                # answers: their cycles go at the next young collection, as before)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _holds_partition_files(part: Partition) -> bool:
    """A ``topic-N`` folder is a partition when it holds a segment, a snapshot or Kafka's per-partition
    files, or nothing at all (``dbus-1`` in /etc, or a ``broker-1`` log dir, are named alike)."""
    epochs, metadata, any_entry = part.listed
    return bool(part.segments or part.snapshots or epochs or metadata or not any_entry)


def looks_like_log_dir(path: Path) -> bool:
    """A broker log dir has meta.properties, a checkpoint file or a ``topic-N`` partition folder."""
    try:
        if any((path / m).is_file() for m in LOG_DIR_MARKERS):
            return True
        for e in path.iterdir():
            parsed = parse_partition_dir_name(e.name) if e.is_dir() else None
            if parsed is not None and _holds_partition_files(Partition(e, topic=parsed[0], partition=parsed[1])):
                return True
    except (OSError, KafkaTxError):
        return False
    return False


def _not_a_log_dir(path: Path, entries: list[Path]) -> str:
    """The one line that refuses a directory that is no log dir, naming what is one below it."""
    why = f"{path}: not a Kafka log dir (no meta.properties, no checkpoint files, no topic-N partition folders)"
    parsed = parse_partition_dir_name(path.name)
    if parsed is not None and any(SEGMENT_FILE.match(e.name) for e in entries):
        return f"{why}; it looks like a partition folder: give its log dir, {path.parent}"
    found: list[str] = []
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        if looks_like_log_dir(entry):
            found.append(str(entry))
            continue
        try:
            found.extend(str(sub) for sub in sorted(entry.iterdir()) if sub.is_dir() and looks_like_log_dir(sub))
        except OSError:
            continue
    if found:
        shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
        return f"{why}; these subfolders look like log dirs: {shown}"
    return why


def _why_skipped(name: str) -> str:
    for suffix, why in _SKIP_SUFFIXES.items():
        if name.endswith(suffix):
            return why
    return "not a <topic>-<partition> folder"


def log_dir_group(log_dir: object) -> list[Any]:
    """``log_dir`` and the log dirs opened with it (``LogDir.group``; another kind of log dir: itself)."""
    return list(getattr(log_dir, "group", None) or [log_dir])


def remember_in_group(log_dir: object, attr: str, value: object) -> None:
    """Set ``attr`` on every log dir of ``log_dir``'s group: a fact of the whole group (the metadata log's topic
    configs, ``__remote_log_metadata``) read once. Another kind of log dir (spark's stub) has no such slot and
    is asked again next time."""
    for d in log_dir_group(log_dir):
        try:
            setattr(d, attr, value)
        except AttributeError:
            pass


def open_log_dirs(paths: Iterable[Path | str], broker_configs: Sequence[BrokerConfig] = ()) -> list[LogDir]:
    """Open every log dir given, in order. Raises :class:`MissingFile` for a missing one.

    ``broker_configs`` (``--broker-config``): each log dir gets the config whose ``log.dirs`` names
    it. A single config applies to every log dir given (its ``log.dirs`` may name the broker's own
    paths, before the files were copied elsewhere); with several, each log dir must be named by
    exactly one (else :class:`UsageError`). No ``paths``: the configs' ``log.dirs``.
    """
    given = [Path(p) for p in paths]
    if not given:
        given = [d for c in broker_configs for d in c.log_dirs]
    dirs = [LogDir(p) for p in given]
    for d in dirs:
        d.group = dirs
    if not broker_configs:
        return dirs
    if len(broker_configs) == 1:
        for d in dirs:
            d.broker_config = broker_configs[0]
        return dirs
    for d in dirs:
        owners = [c for c in broker_configs if any(_same_dir(d.path, named) for named in c.log_dirs)]
        if len(owners) != 1:
            names = ", ".join(str(c.path) for c in (owners or broker_configs))
            raise UsageError(f"{d.path}: {'no' if not owners else 'more than one'} --broker-config names this "
                             f"log dir in log.dirs ({names}); with several broker configs each log dir must be "
                             f"in exactly one's log.dirs")
        d.broker_config = owners[0]
    return dirs


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and a.samefile(b))
    except OSError:
        return False


def broker_id_of(path: Path | str) -> int | None:
    """The broker a log dir belongs to: ``node.id`` (KRaft) or ``broker.id`` (ZooKeeper) in its
    ``meta.properties`` (Kafka's ``RawMetaProperties`` keys ``NodeIdKey`` / ``BrokerIdKey``); None when the
    file is absent or names neither. A Java properties file: ``key=value`` lines, ``#``/``!`` comments."""
    meta = Path(path) / META_PROPERTIES
    if not fdio.is_file(meta):
        return None
    text = read_text_file(meta)
    values: dict[str, tuple[str, int]] = {}
    at = 0
    for raw_line in text.splitlines(keepends=True):
        line = raw_line.strip()
        if line and line[0] not in "#!":
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = (value.strip(), len(text[:at].encode()))
        at += len(raw_line)
    for key in ("node.id", "broker.id"):
        if key in values:
            value, position = values[key]
            try:
                return int(value)
            except ValueError:
                raise DecodeError(f"{key}={value!r} is not a number", path=meta, position=position) from None
    return None


def log_dirs_of_broker(paths: Iterable[Path | str], broker_id: int) -> tuple[Path, ...]:
    """The log dirs among ``paths`` whose ``meta.properties`` names ``broker_id`` (``--broker-id``).

    None of them: :class:`UsageError`, naming the brokers the dirs do belong to."""
    from kafkatx.errors import UsageError

    given = [Path(p) for p in paths]
    owners = {p: broker_id_of(p) for p in given}
    chosen = tuple(p for p in given if owners[p] == broker_id)
    if not chosen:
        seen = ", ".join(f"{p} is broker {owners[p] if owners[p] is not None else '? (no meta.properties id)'}"
                         for p in given)
        raise UsageError(f"--broker-id {broker_id}: no --log-dir belongs to that broker ({seen})")
    return chosen
