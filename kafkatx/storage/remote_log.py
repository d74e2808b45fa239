"""What tiered storage (KIP-405) changes in a partition's answers: its two log starts, its remote
segments, and the local bytes an open transaction keeps from the remote tier.

* ``UnifiedLog`` keeps ``logStartOffset`` (consumers' earliest offset, ListOffsets ``EARLIEST``: the
  remote tier's start) and ``localLogStartOffset`` (the first local segment, ``EARLIEST_LOCAL``);
  ``storage/loading.py`` computes both, ``kafkatx.storage.tiered`` says what decided the tiered question.
* ``RemoteLogManager.RLMCopyTask.candidateLogSegments`` copies a segment only when it is not the active
  one and the next segment's base offset is at or below the last stable offset: a transaction that holds
  the LSO stops every upload of the partition from the segment holding the LSO on. Local retention of a
  remote-enabled log deletes only segments already copied (``UnifiedLog.deleteOldSegments`` bounds them by
  ``highestOffsetInRemoteStorage``), so those bytes stay on the broker's disk, and the disk grows, until
  the transaction ends.
* ``__remote_log_metadata`` (``kafkatx.storage.remote_log_metadata``) says which segments were copied and the
  last offset copied.
"""

from __future__ import annotations

from msgspec import Struct

from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import PartitionProducerState
from kafkatx.storage.remote_log_metadata import IN_REMOTE_TIER, RemotePartition, remote_metadata_of
from kafkatx.storage.tiered import RemoteLogRule, decided_rule


class TieredFacts(Struct, frozen=True, kw_only=True):
    """One tiered partition's facts for ``lag``, ``find-hanging``, ``describe-producers`` and the exporter."""

    rule: RemoteLogRule
    log_start_offset: int
    local_log_start_offset: int
    # None: no __remote_log_metadata in the log dirs, it names none of this partition, or a file of it did not
    # read (``unreadable``: then no remote fact is given rather than a partial one)
    remote: RemotePartition | None
    unreadable: tuple[str, ...]
    blocked_bytes: int | None  # local bytes from the segment holding the LSO on (an open transaction holds it)
    blocked_from: int | None  # that segment's base offset

    @property
    def copied_offset(self) -> int | None:
        return self.remote.copied_offset if self.remote is not None else None


def tiered_facts(state: PartitionProducerState, part: Partition | None, lso: int, held: bool) -> TieredFacts | None:
    """The partition's :class:`TieredFacts`, or None when it is not tiered (or not known to be).

    ``held``: an open transaction holds the LSO below the high watermark. Where the log-start checkpoint
    is below the first local segment the loader asked already (``LoadPlan.remote``); a held partition
    whose checkpoint says nothing is asked only what the metadata log or ``--broker-config`` decide.
    """
    load = state.load
    rule = load.remote if load is not None else None
    if rule is None and held and part is not None:
        rule = decided_rule(part.topic, part.log_dir)
    if rule is None or not rule.enabled:
        return None
    local_start = load.local_start if load is not None else state.log_start_offset
    remote: RemotePartition | None = None
    unreadable: tuple[str, ...] = ()
    if part is not None and part.log_dir is not None:
        meta = remote_metadata_of(part.log_dir)
        if meta is not None:
            unreadable = tuple(meta.unreadable)
            remote = None if unreadable else meta.partitions.get((part.topic, part.partition))
    blocked = blocked_from = None
    if held and part is not None:
        segs = [s for s in part.segments if load is None or str(s.log_path) not in load.deleted_segments]
        blocked = 0
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
            if nxt is None or nxt > lso:  # RemoteLogManager copies it only once nxt <= LSO (and not active)
                if blocked_from is None:
                    blocked_from = seg.base_offset
                cut = load.cuts.get(str(seg.log_path)) if load is not None else None
                blocked += cut if cut is not None else seg.size
    return TieredFacts(rule=rule, log_start_offset=state.log_start_offset, local_log_start_offset=local_start,
                       remote=remote, unreadable=unreadable, blocked_bytes=blocked, blocked_from=blocked_from)


def tiered_notices(name: str, facts: TieredFacts, lso: int) -> list[str]:
    """The lines that say what decided, and what the transaction costs on disk."""
    lines = [f"{name}: tiered (KIP-405): log start {facts.log_start_offset}, local log start "
             f"{facts.local_log_start_offset} (UnifiedLog.localLogStartOffset); {facts.rule.why}"]
    if facts.remote is not None and facts.remote.segments:
        segs = facts.remote.segments
        copied = facts.copied_offset
        held = [s for s in segs if s.state == IN_REMOTE_TIER]
        where = (f"offsets {held[0].start_offset}-{held[-1].end_offset} in {len(held)} segment(s) "
                 f"({IN_REMOTE_TIER})" if held else "no segment whose copy finished")
        states: dict[str, int] = {}
        for seg in segs:
            if seg.state != IN_REMOTE_TIER:
                states[seg.state] = states.get(seg.state, 0) + 1
        others = "".join(f", {n} {state}" for state, n in sorted(states.items()))
        lines.append(f"{name}: __remote_log_metadata: remote tier {where}{others}; last offset copied "
                     f"{copied if copied is not None else 'none'}")
    if facts.unreadable:
        lines.append(f"{name}: __remote_log_metadata could not be read whole ({'; '.join(facts.unreadable[:3])}): "
                     f"its remote segments and last offset copied are not given")
    if facts.blocked_bytes is not None:
        copied = facts.copied_offset
        after = f"; last offset copied {copied}" if copied is not None else ""
        lines.append(f"{name}: an open transaction holds the LSO at {lso}: {facts.blocked_bytes} bytes of local "
                     f"segments from offset {facts.blocked_from} can be neither uploaded to the remote tier "
                     f"(RemoteLogManager copies only below the LSO) nor deleted by local retention{after}. "
                     f"The disk grows until the transaction ends.")
    return lines


__all__ = ["TieredFacts", "tiered_facts", "tiered_notices"]
