"""read_small_file: the size comes from the read itself (one pread of SMALL_FILE_BYTES + 1), not a
stat before it; the answers are those of map_file for every size around the limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import kafkatx.storage.segment as segment_mod
from kafkatx.errors import MissingFile, ReadFailed
from kafkatx.storage.segment import SMALL_FILE_BYTES, FileShrank, map_file, read_small_file


@pytest.fixture(autouse=True)
def _no_read_mode(monkeypatch) -> None:
    monkeypatch.delenv("KAFKATX_READ", raising=False)


@pytest.mark.parametrize("size", [0, 1, SMALL_FILE_BYTES - 1, SMALL_FILE_BYTES, SMALL_FILE_BYTES + 1,
                                  3 * SMALL_FILE_BYTES])
def test_small_read_matches_map_file(tmp_path: Path, size: int) -> None:
    if segment_mod._mapguard is None:
        pytest.skip("no compiled guard: nothing is read small")
    f = tmp_path / "f.bin"
    f.write_bytes(bytes(i % 251 for i in range(size)))
    got = read_small_file(f, allowed=True)
    with map_file(f) as buf:
        whole = bytes(buf)
    if size > SMALL_FILE_BYTES:
        assert got is None  # the caller maps it
    else:
        assert got == whole
    assert read_small_file(f, allowed=False) is None
    assert read_small_file(str(f), allowed=True) == got  # a str path reads the same


def test_small_read_of_a_directory_is_missing_file(tmp_path: Path) -> None:
    d = tmp_path / "00000000000000000000.log"
    d.mkdir()
    with pytest.raises(MissingFile) as exc:
        read_small_file(d, allowed=True)
    assert str(exc.value) == f"{d}: is a directory, not a file"
    with pytest.raises(MissingFile) as exc2:
        with map_file(d):
            pass
    assert str(exc2.value) == str(exc.value)  # what the map path says


def test_small_read_of_an_absent_file(tmp_path: Path) -> None:
    with pytest.raises(ReadFailed) as exc:
        read_small_file(tmp_path / "nope.snapshot", allowed=True)
    assert str(exc.value) == f"could not read {tmp_path / 'nope.snapshot'}: no such file (deleted while being read?)"


def test_small_file_cut_after_the_read_is_file_shrank(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * 1000)
    real = os.pread

    def cutting(fd: int, n: int, pos: int) -> bytes:
        data = real(fd, n, pos)
        os.truncate(f, 10)  # right after the one read: the size check after it sees the cut
        return data

    monkeypatch.setattr(segment_mod.os, "pread", cutting)
    monkeypatch.setattr(segment_mod, "broker_holds_lock", lambda _p: False)
    with pytest.raises(FileShrank) as exc:
        read_small_file(f, allowed=True)
    assert exc.value.position == 10


@pytest.mark.parametrize("broker_holds_lock", [False, True], ids=["map path", "pread path"])
def test_large_file_cut_after_the_size_probe_is_file_shrank(tmp_path: Path, monkeypatch,
                                                            broker_holds_lock: bool) -> None:
    """The read that finds a file is not small keeps no bytes: a cut right after it is the shrink the
    map and pread paths would have met had they taken the size first (no fstat before the read now),
    never a shorter file read as if whole (which verify would report as damage)."""
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * (3 * SMALL_FILE_BYTES))
    real = os.pread

    def cutting(fd: int, n: int, pos: int) -> bytes:
        data = real(fd, n, pos)
        os.truncate(f, 1000)
        return data

    monkeypatch.setattr(segment_mod.os, "pread", cutting)
    monkeypatch.setattr(segment_mod, "broker_holds_lock", lambda _p: broker_holds_lock)
    with pytest.raises(FileShrank) as exc:
        read_small_file(f, allowed=True)
    assert exc.value.position == 1000 and "shrank while being read" in str(exc.value)


@pytest.mark.parametrize("base", ["/", "/a", "/a/b", ".", "a", "a/b", "//", "//x", "../x", "/a/b/"])
def test_child_path_is_folder_slash_name(base: str) -> None:
    """child_path sets the child's string itself (Python 3.11 would join its parts on first use): the
    same string, parts, equality and hash as ``folder / name``."""
    from kafkatx.storage.segment import child_path

    got, want = child_path(Path(base), "00000000000000000000.log"), Path(base) / "00000000000000000000.log"
    assert (str(got), got.parts, os.fspath(got)) == (str(want), want.parts, os.fspath(want))
    assert got == want and hash(got) == hash(want) and got.name == want.name and got.parent == want.parent
