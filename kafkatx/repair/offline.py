"""``abort-hanging --execute`` offline: one lock from the first read to the last write.

Kafka's ``LogManager.lockLogDirs`` takes ``<logdir>/.lock`` before it reads anything and keeps it
while the broker runs. A repair does the same: :func:`execute_abort_hanging` takes every log dir's
lock (both kinds, creating ``.lock`` when absent) *before* the analysis reads the first byte, plans
from what that analysis read, applies, runs the post-check and only then releases. Another repair
(or undo) of the same dirs waits for the lock (``lock_timeout``) and then analyses from scratch, so
it sees the first repair's result - nothing left hanging - and two concurrent runs end with the
bytes one run leaves. A broker started meanwhile fails to lock the dir instead of racing us.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from kafkatx.repair.apply import ApplyResult, apply_plan
from kafkatx.repair.fsutil import LogDirLocks, resolve_log_dir
from kafkatx.repair.plan import OfflinePlan, plan_abort_hanging, post_check_for
from kafkatx.rows import AbortPlanRow
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.segment import read_window as segment_read_window


class OfflineRepair(Struct, frozen=True, kw_only=True):
    planned: OfflinePlan
    applied: ApplyResult | None  # None: refused or nothing to do (nothing was written)
    # conditions the post-check found before the repair and still after it, untouched: said once, no failure
    pre_existing: tuple[str, ...] = ()

    def applied_rows(self) -> list[AbortPlanRow]:
        """The plan's rows after the apply, each with its ``result``: ``ok``, ``failed: <the post-check's first
        problem>``, or ``untouched`` for a row the repair left alone."""
        problems = self.applied.problems if self.applied is not None else ()
        outcome = "ok" if not problems else f"failed: {problems[0]}"
        return [replace(r, result=outcome if not r.untouched else "untouched") for r in self.planned.rows]


def execute_abort_hanging(log_dirs: Iterable[str | Path | LogDir], *, now: int, journal: Path | None = None,
                          lock_timeout: float = 0.0, after_analysis: Callable[[], None] | None = None,
                          free_space: Callable[[Path], int] | None = None, transactional_ids: Sequence[str] = (),
                          read_window: int | None = None, **selection: object) -> OfflineRepair:
    """Lock, analyse, plan, apply, post-check, release (module docstring).

    ``selection``: :func:`~kafkatx.repair.plan.plan_abort_hanging`'s keyword arguments.
    ``after_analysis`` (a test seam) runs with the locks held, between the analysis and the plan.
    ``read_window``: bytes of a segment the analysis and the post-check hold at most on the pread path
    (``--read-window``; None: 64 MiB).
    Raises :class:`~kafkatx.errors.LogDirLocked` when a lock is still held after ``lock_timeout``.
    """
    # Paths only: a LogDir opened before the lock would hold a listing read before it. Each is opened again
    # under the lock with the broker config it was given (--broker-config).
    given = list(log_dirs)
    paths = [d.path if isinstance(d, LogDir) else Path(d) for d in given]
    configs = [d.broker_config if isinstance(d, LogDir) else None for d in given]
    reals = [resolve_log_dir(p).real for p in paths]
    with LogDirLocks(reals, create=True, timeout=lock_timeout) as locks, segment_read_window(read_window):
        # until a journal records it (apply_plan), a .lock this repair created goes when it ends: refused,
        # nothing to do, or failed before writing, the dir is left as it was
        locks.remove_on_release(locks.created)
        dirs = [LogDir(p, broker_config=c) for p, c in zip(paths, configs, strict=True)]
        planned = plan_abort_hanging(dirs, transactional_ids=transactional_ids, now=now,
                                     after_analysis=after_analysis, **selection)  # type: ignore[arg-type]
        if planned.refused or planned.empty:
            return OfflineRepair(planned=planned, applied=None)
        check = post_check_for(planned)  # records the touched partitions before the repair (locks held)
        result = apply_plan(planned.plan, journal, now=now, post_check=check, locks=locks, free_space=free_space)
    return OfflineRepair(planned=planned, applied=result, pre_existing=tuple(check.pre_existing))


def abort_hanging_offline(log_dirs: Iterable[str | Path | LogDir], *, execute: bool, now: int,
                          journal: Path | None = None, lock_timeout: float = 0.0,
                          transactional_ids: Sequence[str] = (), **selection: object) -> OfflineRepair:
    """``abort-hanging`` offline: the plan alone (``execute`` false: nothing locked, nothing written), or
    :func:`execute_abort_hanging` (lock, analyse, plan, apply, post-check, release). ``selection``:
    :func:`~kafkatx.repair.plan.plan_abort_hanging`'s keyword arguments."""
    if execute:
        return execute_abort_hanging(log_dirs, now=now, journal=journal, lock_timeout=lock_timeout,
                                     transactional_ids=transactional_ids, **selection)  # type: ignore[arg-type]
    planned = plan_abort_hanging(log_dirs, transactional_ids=transactional_ids, now=now,
                                 **selection)  # type: ignore[arg-type]
    return OfflineRepair(planned=planned, applied=None)


__all__ = ["OfflineRepair", "abort_hanging_offline", "execute_abort_hanging"]
