"""storage/segment.py's Segment: a frozen record of five fields, whether made from paths or from a folder's
listing (whose paths are made on first use, and are then the same objects)."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from kafkatx.storage.partition import classify_listing
from kafkatx.storage.segment import Segment

FOLDER = Path("/logs/orders-0")
STEM = "00000000000000000042"


def _from_listing(files: set[str]) -> Segment:
    """The segment of ``files`` as ``Partition`` makes it: its folder's listing classified, then listed."""
    (segment,), _snapshots = classify_listing(sorted(files))
    return Segment.listed(FOLDER, *segment)


def _from_paths(index: bool = True, timeindex: bool = False, txnindex: bool = True) -> Segment:
    return Segment(base_offset=42, log_path=FOLDER / f"{STEM}.log",
                   index_path=FOLDER / f"{STEM}.index" if index else None,
                   timeindex_path=FOLDER / f"{STEM}.timeindex" if timeindex else None,
                   txnindex_path=FOLDER / f"{STEM}.txnindex" if txnindex else None)


@pytest.mark.parametrize("index,timeindex,txnindex", [(True, False, True), (False, True, False), (True, True, True),
                                                      (False, False, False)])
def test_listing_and_paths_make_the_same_record(index: bool, timeindex: bool, txnindex: bool) -> None:
    files = {f"{STEM}.log", "leader-epoch-checkpoint"}
    files |= {f"{STEM}{s}" for s, on in ((".index", index), (".timeindex", timeindex), (".txnindex", txnindex)) if on}
    listed = _from_listing(files)
    made = _from_paths(index, timeindex, txnindex)
    assert listed == made and hash(listed) == hash(made) and repr(listed) == repr(made)
    assert listed == Segment.from_log_path(FOLDER / f"{STEM}.log", files=files)
    assert listed.base_offset == 42
    assert listed.log_path == FOLDER / f"{STEM}.log" and str(listed.log_path) == f"{FOLDER}/{STEM}.log"
    assert (listed.index_path is None) is not index and (listed.timeindex_path is None) is not timeindex
    assert (listed.txnindex_path is None) is not txnindex
    assert listed.log_path is listed.log_path  # made once: the loader hands its reads out by identity
    assert listed != _from_paths(not index, timeindex, txnindex)
    assert listed != object() and (listed == 3) is False


def test_repr_names_the_five_fields() -> None:
    seg = _from_paths()
    assert repr(seg) == (f"Segment(base_offset=42, log_path={FOLDER / (STEM + '.log')!r}, "
                         f"index_path={FOLDER / (STEM + '.index')!r}, timeindex_path=None, "
                         f"txnindex_path={FOLDER / (STEM + '.txnindex')!r})")


def test_frozen() -> None:
    seg = _from_listing({f"{STEM}.log"})
    with pytest.raises(AttributeError, match="immutable type: 'Segment'"):
        seg.base_offset = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        seg.log_path = FOLDER  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable type: 'Segment'"):
        del seg.base_offset


def test_pickles_and_copies_as_its_fields() -> None:
    for seg in (_from_paths(), _from_listing({f"{STEM}.log", f"{STEM}.index"})):
        for again in (pickle.loads(pickle.dumps(seg)), copy.copy(seg), copy.deepcopy(seg)):
            assert again == seg and repr(again) == repr(seg)
    assert {_from_paths(), _from_paths()} == {_from_paths()}
