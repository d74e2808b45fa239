"""The post-check a repair runs under its locks: what the repair changed must check out.

Before the repair it records the error conditions of the partitions the plan writes to; after it, a
condition that is new is a failure (``apply.apply_plan`` says so and the journal undoes it). It reads
the touched partitions' active segments forward, in ``--read-window`` windows on the pread path
(``log.segment.open_windowed``), and runs ``verify``'s checks on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatx.errors import DecodeError
from kafkatx.format.record_batch import crc_valid
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.segment import current_read_window, iter_batches_windowed, open_windowed

if TYPE_CHECKING:
    from kafkatx.repair.plan import OfflinePlan

# A condition the post-check finds: (check, file, byte position) and the line that says it. The same
# key before and after the repair is the same condition: the repair only appends to the files it
# writes (and replaces checkpoints), so a byte position keeps naming the same bytes.
Condition = tuple[tuple[str, str, int | None], str]


def _conditions(touched: Sequence[tuple[Path, str, int]]) -> list[Condition]:
    """Every error the post-check looks for in the touched partitions: a batch of the active segment
    that does not decode or has a bad CRC, and ``verify``'s error rows."""
    from kafkatx.checks.verify import verify_partition

    found: list[Condition] = []
    dirs = {p: LogDir(p) for p in {t[0] for t in touched}}
    for d, topic, num in touched:
        part = dirs[d].partition(topic, num)
        if part is None:
            found.append((("missing-partition", str(d), None), f"{d}: partition {topic}-{num} disappeared"))
            continue
        seg = part.segments[-1]
        try:
            with open_windowed(seg.log_path) as (buf, win):  # forward only: windows on the pread path
                for h in iter_batches_windowed(buf, win):
                    if not crc_valid(buf, h):
                        found.append((("crc", str(seg.log_path), h.position),
                                      f"{seg.log_path}: byte {h.position}: batch at offset {h.base_offset} has a "
                                      f"bad CRC"))
        except DecodeError as err:
            found.append((("log-decode", str(seg.log_path), err.position), str(err.at(seg.log_path))))
        ld = dirs[d]
        for p in verify_partition(part, high_watermark=ld.high_watermarks.get(part.key),
                                  recovery_point=ld.recovery_points.get(part.key),
                                  log_start=ld.log_start_offsets.get(part.key), read_window=current_read_window()):
            if p.severity == "error":
                found.append(((p.check, p.file or str(part.path), p.position),
                              f"{p.file or part.path}: {p.check}: {p.message}"))
    return found


class PostCheck:
    """What ``apply_plan`` runs after the repair: it judges only what the repair changed.

    Built before the repair (it records the conditions of the touched partitions then); called
    after it, it returns the conditions that are new (the repair's own effects that do not check
    out: a failure) and keeps in :attr:`pre_existing` those that were there before and are still
    there, untouched (reported once, never a failure). A condition the repair removed is not
    mentioned. The CLI exits 0 when the call returns nothing.
    """

    def __init__(self, plan: OfflinePlan) -> None:
        self.touched = plan.touched
        self.before = {key for key, _line in _conditions(self.touched)}
        self.pre_existing: list[str] = []

    def __call__(self) -> list[str]:
        after = _conditions(self.touched)
        self.pre_existing = list(dict.fromkeys(line for key, line in after if key in self.before))
        return list(dict.fromkeys(line for key, line in after if key not in self.before))


def post_check_for(plan: OfflinePlan) -> PostCheck:
    """The post-check of ``plan`` (:class:`PostCheck`); make it before applying the plan: it records
    the touched partitions' conditions as they are before the repair."""
    return PostCheck(plan)


__all__ = ["Condition", "PostCheck", "post_check_for"]
