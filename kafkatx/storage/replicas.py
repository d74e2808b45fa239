"""Which copy of each partition the offline answers read (replica choice), and the log dirs they read.

When several brokers' log dirs hold the same partition, the longest log wins (a follower only
ever holds a prefix of the leader's log: ``ReplicaFetcherThread`` truncates it to the leader's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from msgspec import Struct

from kafkatx.errors import DecodeError, UsageError
from kafkatx.storage.log_dir import LogDir, open_log_dirs
from kafkatx.storage.partition import Partition, is_log_manager_topic
from kafkatx.storage.segment import iter_batches_windowed, open_windowed


def as_log_dirs(log_dirs: Iterable[str | Path | LogDir]) -> list[LogDir]:
    """Accept paths or already opened :class:`LogDir` objects."""
    items = list(log_dirs)
    paths = [p for p in items if not isinstance(p, LogDir)]
    opened = iter(open_log_dirs([Path(p) for p in paths])) if paths else iter(())
    return [p if isinstance(p, LogDir) else next(opened) for p in items]


def log_end_offset(partition: Partition) -> int:
    """The next offset the partition would assign: last batch's last offset + 1.

    Scans only the last non-empty segment. An empty log's end is its last segment's base
    offset (Kafka's ``nextOffsetMetadata`` after a roll). A torn tail stops the scan at the
    last whole batch (what recovery would truncate to).
    """
    for segment in reversed(partition.segments):
        last = None
        try:
            with open_windowed(segment.log_path) as (buf, win):  # forward only: windows on the pread path
                for header in iter_batches_windowed(buf, win, last_only=True):
                    last = header.last_offset
        except DecodeError:
            pass
        if last is not None:
            return last + 1
    if partition.segments:
        return partition.segments[-1].base_offset
    return partition.log_start_offset


# --allow-mixed-clusters: several log dirs are read together even when they are not one cluster's brokers
_MIXED_ALLOWED: ContextVar[bool] = ContextVar("kafkatx_mixed_clusters_allowed", default=False)


def allow_mixed_clusters(allowed: bool = True) -> None:
    """Let :func:`check_one_cluster` pass dirs of several clusters or copies of one broker (the CLI's
    ``--allow-mixed-clusters``), for the rest of this context."""
    _MIXED_ALLOWED.set(allowed)


@contextmanager
def mixed_clusters_allowed() -> Iterator[None]:
    """:func:`allow_mixed_clusters` inside a ``with`` block only."""
    token = _MIXED_ALLOWED.set(True)
    try:
        yield
    finally:
        _MIXED_ALLOWED.reset(token)


def check_one_cluster(log_dirs: Sequence[LogDir]) -> None:
    """Several log dirs are read as one cluster's brokers (their copies of a partition are replicas of
    one log), so they must be one: :class:`UsageError` (exit 2) for dirs whose ``meta.properties``
    name two ``cluster.id`` values (``MetaProperties``; the broker itself refuses to start on such a
    mix, ``MetaPropertiesEnsemble.verify``: "Invalid cluster.id"), or for two copies of one broker:
    the same ``node.id`` with the same ``directory.id`` (KIP-858; a broker's own log dirs each have
    their own), or, without directory ids, the same ``node.id`` holding the same partition twice
    (a broker holds a partition in one of its log dirs). Unless :func:`allow_mixed_clusters`."""
    if _MIXED_ALLOWED.get():
        return
    clusters: dict[str, LogDir] = {}
    for d in log_dirs:
        cid = d.meta_properties.get("cluster.id")
        if cid:
            clusters.setdefault(cid, d)
    if len(clusters) > 1:
        (a_id, a), (b_id, b) = list(clusters.items())[:2]
        raise UsageError(f"{a.path} (cluster.id {a_id}) and {b.path} (cluster.id {b_id}) are log dirs of two "
                         "clusters; give one cluster's dirs (or --allow-mixed-clusters to read them together)")
    by_node: dict[int, list[LogDir]] = {}
    for d in log_dirs:
        if d.node_id is not None:
            by_node.setdefault(d.node_id, []).append(d)
    for node, dirs in by_node.items():
        for i, a in enumerate(dirs):
            for b in dirs[i + 1:]:
                ida, idb = a.meta_properties.get("directory.id"), b.meta_properties.get("directory.id")
                if ida and idb:
                    same = ida == idb
                else:
                    same = bool({(p.topic, p.partition) for p in a.partitions()}
                                & {(p.topic, p.partition) for p in b.partitions()})
                if same:
                    raise UsageError(f"{a.path} and {b.path} are two copies of broker {node} (node.id {node}"
                                     f"{f', directory.id {ida}' if ida and ida == idb else ', the same partitions'}), "
                                     "not two brokers; give one of them (or --allow-mixed-clusters to read the "
                                     "copies as replicas)")


class ReplicaChoice(Struct, frozen=True, kw_only=True):
    partition: Partition
    log_end_offset: int
    copies: int


def choose_replicas(log_dirs: Sequence[LogDir], *, topic: str | None = None,
                    notices: list[str] | None = None) -> list[ReplicaChoice]:
    """One :class:`Partition` per (topic, partition) over all dirs, sorted.

    When several brokers' dirs hold the same partition (replicas), the copy with the highest
    log end offset is used: followers only ever hold a prefix of the leader's log (they
    truncate to it), so the longest copy is the leader's or an equal one. The choice is noted.
    The KRaft metadata log is no partition of these answers (``is_log_manager_topic``).
    """
    if len(log_dirs) > 1:
        check_one_cluster(log_dirs)
    groups: dict[tuple[str, int], list[Partition]] = {}
    for log_dir in log_dirs:
        for part in log_dir.partitions():
            if (topic is not None and part.topic != topic) or not is_log_manager_topic(part.topic):
                continue
            groups.setdefault((part.topic, part.partition), []).append(part)
    chosen = []
    for key in sorted(groups):
        copies = groups[key]
        if len(copies) == 1:
            chosen.append(ReplicaChoice(partition=copies[0], log_end_offset=-1, copies=1))
            continue
        ends = [(log_end_offset(p), -i, p) for i, p in enumerate(copies)]
        best = max(ends, key=lambda e: (e[0], e[1]))
        if notices is not None:
            others = ", ".join(f"{p.path} (log end {leo})" for leo, _i, p in ends if p is not best[2])
            notices.append(f"{copies[0].name}: {len(copies)} replicas; using {best[2].path} "
                           f"(log end {best[0]}) over {others}")
        chosen.append(ReplicaChoice(partition=best[2], log_end_offset=best[0], copies=len(copies)))
    return chosen
