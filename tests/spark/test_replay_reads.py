"""How ``kafkatx scan``'s partition replay (``spark/tasks._replay``) reads a partition's files.

The plan's log end reads a small last segment whole (``plan_load(read=...)``) and both replays of
``timeline.replay_spans`` fold those bytes (``FileEvents(known=...)``) instead of opening the file again.
The reference is the two replays over the files as ``timeline`` runs them (``replay_spans`` with a plain
``FileEvents``, each replay reading the files itself), never scan's own rows: the LAG, SPAN, OPEN, NOTE and
SKIP rows must be the same where the start snapshot is at the log end, before it and absent (the broker
replays from the log start), and a file cut or deleted after the plan read it gives the rows of the bytes
the plan read (one read: the log end and the replay agree), never a shorter log.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kafkatx.session.timeline import replay_spans
from kafkatx.spark import tasks as X
from kafkatx.spark.job import plan_scan
from kafkatx.storage import events as E
from kafkatx.storage.events import FileEvents
from kafkatx.storage.loading import plan_load
from kafkatx.storage.partition import Partition
from kafkatx.storage.producer_state import CompletedTxn, PartitionProducerState

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
NOW = 1_700_007_200_000


def _dirs(root: Path) -> list[Path]:
    if not root.exists():
        pytest.skip(f"fixtures/{root.relative_to(FIXTURES)} not built")
    return sorted(root.glob("broker-*")) or [root]


def _roots() -> list[Path]:
    loading = FIXTURES / "loading"
    subs = sorted(p for p in loading.iterdir() if p.is_dir()) if loading.exists() else []
    return [FIXTURES / "hanging", FIXTURES / "ghost", FIXTURES / "twopc", *subs]


def _two_replays(part: Partition, now: int, completed: list[CompletedTxn]) -> PartitionProducerState:
    """The reference: ``timeline``'s two replays, each reading the files (no bytes shared, no single fold)."""
    return replay_spans(part, FileEvents(part), now=now, plan=plan_load(part), completed=completed)


def _rows(infos: list[Any]) -> list[tuple[Any, ...]]:
    return [row for info in infos for row in X._replay_one(info, NOW)]


def test_shared_reads_give_the_two_replays_rows_with_the_snapshot_at_the_log_end_before_it_and_absent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[tuple[str, bool]] = set()
    opened: list[str] = []
    read_by_plan: dict[str, bytes] = {}  # every last segment a plan read whole
    real_open = E.open_windowed

    def counting_open(path: Any, **kw: Any) -> Any:
        opened.append(str(path))
        return real_open(path, **kw)

    for root in _roots():
        infos = plan_scan(_dirs(root)).infos
        for info in infos:
            plan = plan_load(X._partition(info), read=read_by_plan)
            seen.add((plan.chain.kind, plan.chain.offset == plan.log_end_offset))
        want = []
        with monkeypatch.context() as m:
            m.setattr(X, "_replay", _two_replays)
            want = _rows(infos)
        with monkeypatch.context() as m:
            m.setattr(E, "open_windowed", counting_open)
            got = _rows(infos)
        assert got == want, root.name
        assert any(r[0] == X.LAG for r in got)
    # the cases the brief names: a snapshot at the log end, one before it, none (the log start)
    assert {("file", True), ("file", False), ("log-start", False)} <= seen
    # the replays opened no segment the plan had read whole: they folded the plan's bytes
    assert read_by_plan and not set(opened) & set(read_by_plan)


@pytest.mark.parametrize("how", ["cut", "deleted"])
def test_a_segment_cut_after_the_plan_read_it_gives_the_rows_of_the_bytes_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The plan read the last segment whole for the log end; a live broker (or an operator) cuts or
    deletes it before the replay would have read it again: the replay folds the bytes the plan read, so
    its spans agree with its log end (before, the fold read the shorter file: spans missing, or a skip)."""
    _dirs(FIXTURES / "hanging")  # skipped where not built
    root = tmp_path / "hanging"
    shutil.copytree(FIXTURES / "hanging", root, symlinks=True)
    infos = plan_scan(sorted(root.glob("broker-*")) or [root]).infos
    want = {(i.topic, i.partition): list(X._replay_one(i, NOW)) for i in infos}
    spans = {k: sum(r[0] == X.SPAN for r in rows) for k, rows in want.items()}
    key = max(spans, key=lambda k: spans[k])
    assert spans[key] > 0  # a partition whose log holds completed transactions
    info = next(i for i in infos if (i.topic, i.partition) == key)
    real_plan = X.plan_load

    def cutting(part: Partition, **kw: Any) -> Any:
        plan = real_plan(part, **kw)
        last = part.segments[-1].log_path
        if how == "cut":
            os.truncate(last, os.stat(last).st_size // 2)
        else:
            os.unlink(last)
        return plan

    monkeypatch.setattr(X, "plan_load", cutting)
    assert list(X._replay_one(info, NOW)) == want[key]


def test_a_segment_gone_before_the_plan_reads_it_is_a_skip_naming_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Listed, then deleted before any read: an error naming the file, never an empty partition."""
    _dirs(FIXTURES / "hanging")
    root = tmp_path / "hanging"
    shutil.copytree(FIXTURES / "hanging", root, symlinks=True)
    infos = plan_scan(sorted(root.glob("broker-*")) or [root]).infos
    info = next(i for i in infos if any(Path(i.partition_path).glob("*.log"))
                and any(p.stat().st_size for p in Path(i.partition_path).glob("*.log")))
    real_partition = X._partition
    gone: list[Path] = []

    def listing_then_deleting(i: Any) -> Partition:
        part = real_partition(i)
        gone.append(part.segments[-1].log_path)
        os.unlink(gone[-1])
        return part

    monkeypatch.setattr(X, "_partition", listing_then_deleting)
    rows = list(X._replay_one(info, NOW))
    assert [r[0] for r in rows] == [X.SKIP]
    assert str(gone[0]) in rows[0][X._TEXT_I]
