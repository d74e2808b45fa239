"""One partition folder of a log dir: its segments, producer snapshots and epochs.

Folder names are ``<topic>-<partition>`` (``UnifiedLog.parseTopicPartitionName`` in
core/src/main/scala/kafka/log/UnifiedLog.scala, ``LogFileUtils`` in Kafka 4): the
partition number is what follows the *last* dash, because topic names may
themselves contain ``-`` and ``.``. Folders of partitions being deleted or moved
between log dirs carry a suffix after a dot (``topic-0.<uuid>-delete``,
``-future``, ``-stray``) and are not live partitions.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatx.errors import DecodeError, MissingFile, ReadFailed
from kafkatx.format import compiled
from kafkatx.format.checkpoint import read_leader_epoch_checkpoint
from kafkatx.format.offset_index import ENTRY_SIZE, iter_offset_index, read_offset_index
from kafkatx.format.record_batch import BatchHeader
from kafkatx.storage import fdio
from kafkatx.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_NAME,
    SMALL_FILE_BYTES,
    SNAPSHOT_NAME,
    SNAPSHOT_SUFFIX,
    TIMEINDEX_SUFFIX,
    TXNINDEX_SUFFIX,
    Buffer,
    FileShrank,
    Segment,
    WindowedSnapshot,
    as_path,
    child_path,
    iter_batches_windowed,
    map_file,
    open_windowed,
)

if TYPE_CHECKING:
    from kafkatx.storage.log_dir import LogDir

# What opens a segment's .log as open_windowed does: (buffer, window or None)
Opener = Callable[[Segment], AbstractContextManager[tuple[Buffer, WindowedSnapshot | None]]]

try:  # the folder listing and small reads in one call each (kafkatx/storage/_partition.c); absent: Python, the same answers
    import kafkatx.storage._partition as _partition
except ImportError:  # pragma: no cover - built without a C compiler
    _partition = None  # type: ignore[assignment]
_partition = compiled.bind(__name__, "_partition", _partition)  # type: ignore[assignment]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
MAX_CHECKPOINT_BYTES = 64 << 20  # checkpoint files are text, one short line per entry

# Kafka's legal topic characters and length (Topic.java: LEGAL_CHARS, MAX_NAME_LENGTH = 249).
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>0|[1-9]\d{0,9})$")


# KRaft's metadata log (``KafkaRaftServer.MetadataTopic``, ``Topic.CLUSTER_METADATA_TOPIC_NAME``): the
# controller's Raft log, opened by ``KafkaRaftManager``/``KafkaMetadataLog``, not by ``LogManager``.
METADATA_TOPIC = "__cluster_metadata"


def is_log_manager_topic(topic: str) -> bool:
    """Does the broker's ``LogManager`` load this topic's partition folders as logs clients read?

    ``LogManager.loadLogs`` skips ``UnifiedLog.parseTopicPartitionName(dir).topic ==
    KafkaRaftServer.MetadataTopic``: ``__cluster_metadata`` is no partition of ListOffsets,
    DescribeProducers or Metadata (so not of ``lag``, ``find-hanging``, ``describe-producers``
    or the exporter); ``dump-segment`` and ``verify`` still read its files.
    """
    return topic != METADATA_TOPIC


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``"my.topic-name-3"`` -> ``("my.topic-name", 3)``; None when ``name`` is no live partition folder.

    The partition is the number after the last dash. ``-delete``/``-future``/``-stray``
    folders end in letters, so they never match.
    """
    m = _PARTITION_DIR.match(name)
    if m is None:
        return None
    topic, partition = m.group("topic"), int(m.group("partition"))
    if not _TOPIC.match(topic) or partition > 2**31 - 1:
        return None
    return topic, partition


def read_text_file(path: Path, limit: int = MAX_CHECKPOINT_BYTES) -> str:
    """Read a small text file (a checkpoint), refusing anything larger than ``limit``; a file that cannot be
    read is :class:`ReadFailed` (``fdio``)."""
    data = fdio.read_bytes(path, limit)
    if len(data) > limit:
        raise DecodeError(f"checkpoint file larger than {limit} bytes", path=path, position=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DecodeError("checkpoint file is not UTF-8 text", path=path, position=err.start) from err


def list_folder(path: Path | str) -> tuple[list[str], bool]:
    """The names of the regular files in the folder ``path`` (symlinks followed: ``os.DirEntry.is_file``)
    in the order the folder lists them, and whether the folder holds any entry at all.

    One listing, no stat per entry unless the folder cannot say its type (a symlink). Errors are
    ``os.scandir``'s (the folder) and ``DirEntry.is_file``'s (an entry: a stat error other than
    ENOENT). One compiled call (``_partition.list_folder``) where it is built: a partition's listing
    at 10,000 partitions."""
    c = _partition
    if c is not None and not fdio.faults_active():
        got: tuple[list[str], bool] = c.list_folder(path)
        return got
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError("list_folder(): path must be a str or os.PathLike of a str")
    try:
        entries = fdio.list_entries(path)
    except ReadFailed as err:  # the very OSError the compiled listing raises (its callers judge both alike)
        cause = err.__cause__
        assert isinstance(cause, OSError)
        raise cause from None
    return [name for name, _d, is_file in entries if is_file], bool(entries)


def classify_listing(names: Sequence[str]) -> tuple[list[tuple[int, str, bool, bool, bool]], list[tuple[int, str]]]:
    """What a partition folder's file ``names`` (:func:`list_folder`'s) hold for the broker: its segments
    (``LogLoader.loadSegmentFiles``: a ``<20 digits>.log``, ``SEGMENT_NAME``; its index files are the
    names with the same 20-digit prefix, ``LogFileUtils``) as ``(base offset, prefix, has .index, has
    .timeindex, has .txnindex)``, and its producer snapshots (``ProducerStateManager.listSnapshotFiles``:
    ``<20 digits>.snapshot``, ``SNAPSHOT_NAME``) as ``(offset, name)``, each list sorted. One compiled
    call (``_partition.classify_listing``) where it is built: a partition's names at 10,000 partitions."""
    c = _partition
    if c is not None:
        got: tuple[list[tuple[int, str, bool, bool, bool]], list[tuple[int, str]]] = c.classify_listing(names)
        return got
    files = set(names)
    segments: list[tuple[int, str, bool, bool, bool]] = []
    snapshots: list[tuple[int, str]] = []
    for name in names:  # the suffix first: most names are no segment (.index, .timeindex, checkpoints)
        if not isinstance(name, str):
            raise TypeError("classify_listing(): names must be str")
        if LOG_SUFFIX in name and SEGMENT_NAME.match(name):
            stem = name[:20]
            segments.append((int(stem), stem, stem + INDEX_SUFFIX in files, stem + TIMEINDEX_SUFFIX in files,
                             stem + TXNINDEX_SUFFIX in files))
        elif SNAPSHOT_SUFFIX in name and (m := SNAPSHOT_NAME.match(name)):
            snapshots.append((int(m.group(1)), name))
    segments.sort()
    snapshots.sort()
    return segments, snapshots


def read_small_files(paths: Sequence[Path | str], limit: int,
                     stat_first: Sequence[bool]) -> tuple[tuple[bytes, int] | None, ...]:
    """Each of ``paths`` read as ``segment.read_small_file`` reads it (open, one read of ``limit + 1``
    bytes, the size after a read that got bytes, close), without its judgements: ``(bytes, size
    after)`` for a file that reads whole (at most ``limit`` bytes; the size 0 when it is empty), None
    for one that does not open, does not read or is larger. A path whose ``stat_first`` item is true
    is asked its size first: an empty regular file is ``(b"", 0)`` without being opened (what reading
    it gives; an open costs about three stats), a path that does not stat None. The caller hands a
    result to ``read_small_file(path, got=...)``, which judges it as it judges its own read, and reads
    a None again itself (its errors, raised where it raises them). One compiled call for all of them
    where it is built (``_partition.read_small_files``): a partition's loader reads three at 10,000
    partitions."""
    c = _partition
    if c is not None and not fdio.faults_active():
        got: tuple[tuple[bytes, int] | None, ...] = c.read_small_files(paths, limit, stat_first)
        return got
    if not 0 <= limit <= 1 << 26:
        raise ValueError("read_small_files(): limit out of range")
    if len(stat_first) != len(paths):
        raise ValueError("read_small_files(): stat_first and paths differ in length")
    return tuple(_read_one(path, limit, bool(first)) for path, first in zip(paths, stat_first, strict=True))


class ReadAhead:
    """A partition's small files read ahead in one :func:`read_small_files` call (``paths``, and for each
    whether it is asked its size first; at most ``SMALL_FILE_BYTES`` each), each handed once to the reader
    that reads it (:meth:`take`), which judges it as its own read (``read_small_file(path, got=...)``).
    The loader (``storage/loading.py``) and ``verify`` (``checks/verify.py``) read ahead through it."""

    __slots__ = ("_read",)

    def __init__(self, paths: Sequence[Path] = (), stat_first: Sequence[bool] = ()) -> None:
        # by the path object's id (the object is kept with its bytes, so its id stays its own): a Path
        # hashes its parts as a tuple, and a list is searched a path at a time
        read: dict[int, tuple[Path, tuple[bytes, int]]] = {}
        self._read = read
        if paths:
            for path, got in zip(paths, read_small_files(paths, SMALL_FILE_BYTES, stat_first), strict=True):
                if got is not None:
                    read[id(path)] = (path, got)

    def take(self, path: Path | None) -> tuple[bytes, int] | None:
        """The read-ahead bytes of ``path``, the very path object read ahead (None: not read ahead, or taken
        already: the reader reads it now)."""
        kept = self._read.pop(id(path), None)
        return kept[1] if kept is not None and kept[0] is path else None


NOTHING_AHEAD = ReadAhead()  # nothing read ahead (take finds nothing there, so it changes nothing): a default


def segment_reads(segment: Segment, paths: list[Path], stat_first: list[bool], *, timeindex: bool = False) -> None:
    """Append a segment's ``.log`` and ``.index`` (and with ``timeindex`` its ``.timeindex``) to a
    :class:`ReadAhead`'s lists: the ``.index`` asked its size first (empty under index.interval.bytes:
    most segments at 10,000 partitions), the others read at once."""
    paths.append(segment.log_path)
    stat_first.append(False)
    if segment.index_path is not None:
        paths.append(segment.index_path)
        stat_first.append(True)
    if timeindex and (path := segment.timeindex_path) is not None:
        paths.append(path)
        stat_first.append(False)


def _read_one(path: Path | str, limit: int, stat_first: bool) -> tuple[bytes, int] | None:
    """One file of :func:`read_small_files`."""
    # ReadFailed is None here: the reader the result is handed to reads the file again itself and
    # raises its error where it raises it (what the compiled twin's None means too)
    if stat_first:
        try:
            st = fdio.stat(path)
        except ReadFailed:
            return None
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            return b"", 0
    try:
        fd = fdio.open_read(path)
    except ReadFailed:
        return None
    try:
        data = fdio.pread(fd, limit + 1, 0, path)
        if len(data) > limit:
            return None
        return data, (fdio.fstat(fd, path).st_size if data else 0)
    except ReadFailed:
        return None
    finally:
        os.close(fd)


class Partition:
    """The files of one ``topic-N`` folder. Listing happens once, at construction."""

    __slots__ = ("log_dir", "topic", "partition", "path", "segments", "snapshots", "_leader_epochs", "listed")

    def __init__(self, path: Path, *, log_dir: LogDir | None = None,
                 topic: str | None = None, partition: int | None = None) -> None:
        self.path = as_path(path)
        if topic is None or partition is None:
            parsed = parse_partition_dir_name(self.path.name)
            if parsed is None:
                raise MissingFile(f"{self.path}: not a partition folder (expected <topic>-<partition>)")
            topic, partition = parsed
        self.log_dir = log_dir
        self.topic = topic
        self.partition = partition
        # One listing per folder: the directory entries say which are regular files (no stat per
        # file unless a symlink must be followed), at 10,000 partitions that is most of the cost.
        try:
            names, any_entry = list_folder(self.path)
            listed, snaps = classify_listing(names)
        except OSError as err:  # the folder (or an entry) cannot be listed: never an empty partition
            raise fdio.failed(err.filename if isinstance(err.filename, str) else self.path, err, "list") from err
        folder = self.path
        listed_segment = Segment.listed
        self.segments: list[Segment] = [listed_segment(folder, *seg) for seg in listed]
        self.snapshots: list[tuple[int, Path]] = [(offset, child_path(folder, name)) for offset, name in snaps]
        self._leader_epochs: list[tuple[int, int]] | None = None
        # what the listing saw besides segments and snapshots: (leader-epoch-checkpoint, partition.metadata,
        # any entry at all); a file listed that is gone when read was deleted under the reader (ReadFailed)
        self.listed = (LEADER_EPOCH_CHECKPOINT in names, PARTITION_METADATA in names, any_entry)

    def __repr__(self) -> str:
        return f"Partition({self.name!r}, path={str(self.path)!r}, segments={len(self.segments)})"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """``(epoch, start_offset)`` from ``leader-epoch-checkpoint``; [] when the file is absent."""
        if self._leader_epochs is None:
            path = self.path / LEADER_EPOCH_CHECKPOINT
            if not self.listed[0]:
                self._leader_epochs = []
            else:
                try:
                    self._leader_epochs = list(read_leader_epoch_checkpoint(read_text_file(path)))
                except DecodeError as err:
                    raise err.at(path) from err
        return self._leader_epochs

    @property
    def log_start_offset(self) -> int:
        """From ``log-start-offset-checkpoint`` when listed there, else the first segment's base."""
        if self.log_dir is not None:
            value = self.log_dir.log_start_offsets.get(self.key)
            if value is not None:
                return value
        return self.segments[0].base_offset if self.segments else 0

    def segment_for(self, offset: int) -> int:
        """Index in :attr:`segments` of the segment that would hold ``offset`` (0 when before all)."""
        bases = [s.base_offset for s in self.segments]
        return max(bisect.bisect_right(bases, offset) - 1, 0)

    def iter_batches(self, start_offset: int | None = None, *,
                     opener: Opener | None = None) -> Iterator[tuple[Segment, BatchHeader]]:
        """Every batch from ``start_offset`` (the batch containing it first) to the log end."""
        for segment, _buf, header in self.iter_batch_buffers(start_offset, opener=opener):
            yield segment, header

    def iter_batch_buffers(self, start_offset: int | None = None, *,
                           opener: Opener | None = None) -> Iterator[tuple[Segment, Buffer, BatchHeader]]:
        """Like :meth:`iter_batches` but also hands out the segment's mapped buffer, for
        ``iter_records(buf, header)``. The buffer is valid only until the next item. ``opener``: what
        opens a segment instead of ``open_windowed`` (``FileEvents.open``: bytes the plan read already).
        """
        if not self.segments:
            return
        first = 0 if start_offset is None else self.segment_for(start_offset)
        for segment in self.segments[first:]:
            # forward only: on the pread path (a live broker) in --read-window windows
            with (opener(segment) if opener is not None else open_windowed(segment.log_path)) as (buf, win):
                pos = 0
                if start_offset is not None and segment is self.segments[first]:
                    pos = seek_position(segment, start_offset, len(buf))
                try:
                    for header in iter_batches_windowed(buf, win, pos):
                        if start_offset is not None and header.last_offset < start_offset:
                            continue
                        yield segment, buf, header
                except DecodeError as err:
                    raise err.at(segment.log_path) from err


def log_bytes(parts: Iterable[Partition]) -> dict[int, int]:
    """Each partition's ``.log`` bytes, by ``id(partition)``: a progress bar's total and steps, one ``stat`` per
    segment (asked twice, once for the total and once per step, they were ~0.2 s at 10,000 partitions)."""
    return {id(p): sum(s.size for s in p.segments) for p in parts}


def seek_position(segment: Segment, offset: int, log_size: int) -> int:
    """Byte position to start reading ``segment`` at for ``offset``, via the sparse offset index.

    Like ``OffsetIndex.lookup``: the entry with the largest offset <= ``offset``; its
    position is the start of the batch that holds the entry's offset. An index that
    is absent, unreadable or points past the log end is ignored (we scan from 0):
    Kafka rebuilds such an index on recovery, so it is not to be trusted blindly. An index that
    cannot be read is :class:`ReadFailed` (a failed read is never an absent index).
    """
    if segment.index_path is None or offset <= segment.base_offset:
        return 0  # the segment's start: no index entry can do better
    best = 0
    try:
        with map_file(segment.index_path) as ibuf:
            if len(ibuf) % ENTRY_SIZE:  # a partial entry: read_offset_index refuses it (unless zeros end it first)
                entries: Iterable[tuple[int, int]] = [(e.offset, e.position)
                                                      for e in read_offset_index(ibuf, segment.base_offset)]
            else:  # read only up to the entry past `offset`, without building the entries
                entries = iter_offset_index(ibuf, segment.base_offset)
            for entry_offset, position in entries:
                if entry_offset > offset:
                    break
                if 0 <= position <= log_size:
                    best = position
    except FileShrank:  # changed size while being read: never taken for damage
        raise
    except (DecodeError, MissingFile):
        return 0
    return best
