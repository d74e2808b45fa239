"""What an offline command reads: the partitions its filters select (``--topic``, ``--partition``), the
leader's copy of each (``storage.replicas.choose_replicas``), and the refusals of a selection that cannot be
meant: a topic the broker serves no partition of, a repair told nothing, filters that match no partition
(never an empty answer that reads as "all clear"). Checked here once for every command."""

from __future__ import annotations

from collections.abc import Iterable

from kafkatx.errors import MissingFile, UsageError
from kafkatx.rows import Report
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.partition import is_log_manager_topic
from kafkatx.storage.replicas import ReplicaChoice, choose_replicas

__all__ = ["chosen", "refuse_metadata_topic", "require_match", "require_selection", "topics_found"]


def refuse_metadata_topic(topic: str | None) -> None:
    """``--topic __cluster_metadata`` cannot be what the user meant: the broker serves no such topic
    (``LogManager.loadLogs`` skips it; ``is_log_manager_topic``). One line, exit 2."""
    if topic is not None and not is_log_manager_topic(topic):
        raise UsageError(f"--topic {topic}: the KRaft metadata log is no topic the broker serves (ListOffsets and "
                         f"DescribeProducers have no such partition); dump-segment and verify read its files")


def require_selection(*, transactional_ids: Iterable[str] = (), topic: str | None = None,
                      partition: int | None = None, producer_id: int | None = None, all_: bool = False) -> None:
    """A repair acts on what it is told: no ``--transactional-id``, ``--topic`` or ``--producer-id`` and no
    ``--all`` is refused (exit 2), in these words wherever it is checked; ``--partition`` needs ``--topic``."""
    if not (all_ or any(True for _ in transactional_ids) or topic is not None or producer_id is not None):
        raise UsageError("nothing selected: give --transactional-id ID, --topic T [--partition N] "
                         "[--producer-id P], or --all (acting on everything needs saying so)")
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")


def topics_found(dirs: list[LogDir]) -> list[str]:
    """The topic names in the log dirs, sorted (for a refusal that names what exists)."""
    return sorted({c.partition.topic for c in choose_replicas(dirs, notices=None)})


def require_match(dirs: list[LogDir], topic: str | None, partition: int | None) -> None:
    """A ``--topic``/``--partition`` that matches no partition of the log dirs is refused (exit 3),
    naming the topics found: an empty answer would read as "all clear"."""
    if topic is None and partition is None:
        return
    keys = [c.partition.key for c in choose_replicas(dirs, notices=None)]
    if any((topic is None or t == topic) and (partition is None or p == partition) for t, p in keys):
        return
    found = sorted({t for t, _p in keys})
    shown = ", ".join(found[:12]) + (f" and {len(found) - 12} more" if len(found) > 12 else "")
    if topic is not None and any(t == topic for t, _p in keys):
        numbers = sorted(p for t, p in keys if t == topic)
        raise MissingFile(f"--partition {partition}: topic {topic!r} has partitions "
                          f"{', '.join(map(str, numbers))} in these log dirs")
    what = f"--topic {topic!r}" if topic is not None else f"--partition {partition}"
    raise MissingFile(f"{what} matches no partition in these log dirs (topics found: {shown or 'none'})")


def chosen(dirs: list[LogDir], topic: str | None, partition: int | None, report: Report) -> list[ReplicaChoice]:
    """The partitions a replay reads: of ``topic``, numbered ``partition``, the leader's copy of each (the
    choices said in ``report``); filters matching nothing are :class:`MissingFile` (``require_match``)."""
    refuse_metadata_topic(topic)
    require_match(dirs, topic, partition)
    return [c for c in choose_replicas(dirs, topic=topic, notices=report.notices)
            if partition is None or c.partition.partition == partition]
