"""storage/partition.py's ``list_folder``, ``classify_listing`` and ``read_small_files``: the compiled twins (kafkatx/storage/_partition.c)
against the pure-Python ones, on ordinary and damaged folders (symlinks, loops, dangling links, folders
where files belong, files past the limit, absent paths), and the loader's read-ahead against no read-ahead.

The compiled module is the only one of its kind without the wire header, so it is not in
``tests/format/test_speedups_guard.py``'s list: its guard is here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import msgspec
import pytest

import kafkatx.storage.partition as partition_mod
import kafkatx.storage.segment as segment_mod
from kafkatx.format import compiled
from kafkatx.storage.loading import plan_load
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.partition import Partition, classify_listing, list_folder, read_small_files
from kafkatx.storage.segment import SMALL_FILE_BYTES, FileShrank, read_small_file

ROOT = Path(__file__).resolve().parents[2]
NAME = "kafkatx.storage._partition"


def test_compiled_twin_is_built_and_used_when_a_compiler_is_available() -> None:
    if compiled.pure_python_requested():
        pytest.skip("KAFKATX_PURE_PYTHON is set: the pure-Python path was asked for")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on PATH: the pure-Python path is the supported fallback")
    assert importlib.util.find_spec(NAME) is not None, f"{NAME} not built although cc is on PATH"
    assert compiled.active(NAME)
    with compiled.pure_python():
        assert partition_mod._partition is None


c = pytest.importorskip(NAME)


def _both(fn, *args):  # type: ignore[no-untyped-def]
    """(compiled answer, pure answer), each an ("ok", value) or ("raised", type, errno, str)."""
    out = []
    for pure in (False, True):
        with compiled.pure_python(pure):
            if not pure:
                partition_mod._partition = c  # the twin under test even where the env asks for Python
            try:
                out.append(("ok", fn(*args)))
            except OSError as err:
                out.append(("raised", type(err), err.errno, str(err)))
    return out[0], out[1]


def _damaged_folder(root: Path) -> Path:
    d = root / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(b"x" * 100)
    (d / "00000000000000000000.index").write_bytes(b"")
    (d / "00000000000000000010.snapshot").write_bytes(b"s" * 30)
    (d / "sub").mkdir()
    (d / "00000000000000000020.snapshot").mkdir()  # a folder where a file belongs
    (root / "outside.log").write_bytes(b"o" * 7)
    os.symlink(root / "outside.log", d / "00000000000000000030.log")  # a link to a file
    os.symlink(root / "nowhere", d / "00000000000000000040.log")  # dangling
    os.symlink(d / "sub", d / "linked-dir")  # a link to a folder
    (d / "named\udcff.bin").write_bytes(b"")  # not UTF-8 (surrogateescape)
    os.mkfifo(d / "fifo")
    return d


@pytest.mark.parametrize("as_str", [False, True])
def test_list_folder_twins_agree(tmp_path: Path, as_str: bool) -> None:
    d = _damaged_folder(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file").write_bytes(b"")
    for path in (d, tmp_path / "empty", tmp_path / "absent", tmp_path / "a-file", tmp_path / "absent" / "x"):
        arg = str(path) if as_str else path
        got_c, got_py = _both(list_folder, arg)
        assert got_c == got_py, path
    ok, (names, any_entry) = _both(list_folder, d)[0]
    assert ok == "ok" and any_entry
    assert sorted(names) == sorted(["00000000000000000000.log", "00000000000000000000.index",
                                    "00000000000000000010.snapshot", "00000000000000000030.log",
                                    "named\udcff.bin"])
    assert _both(list_folder, tmp_path / "empty")[0] == ("ok", ([], False))
    assert _both(list_folder, tmp_path / "absent")[0][1] is FileNotFoundError
    assert _both(list_folder, tmp_path / "a-file")[0][1] is NotADirectoryError


def test_list_folder_symlink_loop_raises_as_is_file_does(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    os.symlink("loop", d / "loop")  # stat: ELOOP, which DirEntry.is_file raises (only ENOENT is "no file")
    got_c, got_py = _both(list_folder, d)
    assert got_c == got_py
    assert got_c[0] == "raised" and got_c[3].endswith(f"'{d / 'loop'}'")
    got_c, got_py = _both(list_folder, str(d) + "/")  # a trailing separator: the entry's path has one
    assert got_c == got_py


def test_read_small_files_twins_agree(tmp_path: Path) -> None:
    d = _damaged_folder(tmp_path)
    (tmp_path / "at-limit").write_bytes(b"a" * 64)
    (tmp_path / "past-limit").write_bytes(b"b" * 65)
    paths = [d / "00000000000000000000.log", d / "00000000000000000000.index", str(d / "00000000000000000010.snapshot"),
             d / "00000000000000000020.snapshot", d / "00000000000000000030.log", d / "00000000000000000040.log",
             d / "sub", tmp_path / "absent", tmp_path / "at-limit", tmp_path / "past-limit", d / "named\udcff.bin"]
    for limit in (64, 0, SMALL_FILE_BYTES):
        for first in ([False] * len(paths), [True] * len(paths), [i % 2 == 0 for i in range(len(paths))]):
            got_c, got_py = _both(read_small_files, paths, limit, first)
            assert got_c == got_py, (limit, first)
            # stat_first changes no answer for a file that stays as it is
            assert got_c == _both(read_small_files, paths, limit, [False] * len(paths))[0]
    assert _both(read_small_files, paths, 64, [False] * len(paths))[0] == ("ok", (
        None, (b"", 0), (b"s" * 30, 30), None, (b"o" * 7, 7), None, None,
        None, (b"a" * 64, 64), None, (b"", 0)))
    assert _both(read_small_files, [], 64, [])[0] == ("ok", ())
    assert _both(read_small_files, [tmp_path / "absent"], 64, [True])[0] == ("ok", (None,))  # no stat: None
    for bad in (-1, 1 << 27):
        with pytest.raises(ValueError):
            c.read_small_files(paths, bad, [False] * len(paths))
        with compiled.pure_python():
            with pytest.raises(ValueError):
                read_small_files(paths, bad, [False] * len(paths))
    with pytest.raises(ValueError):
        c.read_small_files(paths, 64, [True])
    with compiled.pure_python():
        with pytest.raises(ValueError):
            read_small_files(paths, 64, [True])


def test_a_read_ahead_judged_as_read_small_file_judges_its_own(tmp_path: Path, monkeypatch) -> None:
    if segment_mod._mapguard is None:
        pytest.skip("no compiled guard: nothing is read small")
    monkeypatch.delenv("KAFKATX_READ", raising=False)
    f = tmp_path / "00000000000000000000.snapshot"
    f.write_bytes(b"z" * 100)
    assert read_small_file(f, got=(b"z" * 100, 100)) == b"z" * 100
    assert read_small_file(f, got=(b"", 0)) == b""
    with pytest.raises(FileShrank) as exc:
        read_small_file(f, got=(b"z" * 100, 40))  # shorter after the read than it read: cut under it
    real_fstat = os.fstat

    class Shrunk:
        st_size = 40
        st_mode = real_fstat(0).st_mode

    monkeypatch.setattr(segment_mod.os, "fstat", lambda fd: Shrunk())
    with pytest.raises(FileShrank) as exc2:
        read_small_file(f)  # its own read, the same size afterwards: the same message
    assert str(exc.value) == str(exc2.value)


def _plans(log_dir: Path) -> list[object]:
    out = []
    for part in LogDir(log_dir).partitions():
        try:
            plan = plan_load(part)
            # a DecodeError is equal only to itself: its type and words are the answer
            out.append((msgspec.structs.replace(plan, tail_error=None), repr(plan.tail_error)))
        except Exception as err:  # noqa: BLE001 - the error is part of the answer compared
            out.append((type(err), str(err)))
    return out


@pytest.mark.parametrize("fixture", ["clean", "hanging", "ghost", "twopc", "kraft", "loading/torn-tail",
                                     "loading/stray-snapshots", "loading/snapshot-past-log-end"])
def test_read_ahead_plans_as_reading_each_file(tmp_path: Path, fixture: str, monkeypatch) -> None:
    """The loader with its read-ahead (compiled and pure) plans as it does with none (reads as asked)."""
    monkeypatch.delenv("KAFKATX_READ", raising=False)
    d = tmp_path / "d"
    shutil.copytree(ROOT / "fixtures" / fixture, d, symlinks=True)
    (d / ".kafka_cleanshutdown").write_text("")
    # damage: a snapshot cut short, an index with a stray entry, a folder where a snapshot belongs
    for part in sorted(p for p in d.iterdir() if p.is_dir()):
        snaps = sorted(part.glob("*.snapshot"))
        if snaps and part.name.endswith("-0"):
            snaps[-1].write_bytes(snaps[-1].read_bytes()[:20])
        idx = sorted(part.glob("*.index"))
        if idx and part.name.endswith("-1"):
            idx[-1].write_bytes(idx[-1].read_bytes() + b"\x00\x00\x00\x05\x00\x00\x10\x00")
    with_c = _plans(d)
    with compiled.pure_python():
        with_py = _plans(d)
    from kafkatx.storage import loading

    monkeypatch.setattr(loading._Loader, "_read_ahead", lambda self: None)
    without = _plans(d)
    assert with_c == with_py == without


_ODD_NAMES = [
    "00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
    "00000000000000000010.snapshot", "00000000000000000005.log\n", "00000000000000000005.index",
    "\u0660" * 19 + "\u0663.log", "\u0660" * 19 + "\u0663.txnindex",  # Arabic-Indic digits: re's \d
    "00000000000000000003.log", "0000000000000000003.log", "000000000000000000030.log",
    "00000000000000000007.log.deleted", "00000000000000000007.snapshot\n", "00000000000000000002.snapshot",
    "x.log", "leader-epoch-checkpoint", "00000000000000000009.lo", "", "0000000000000000000a.log",
    "00000000000000000008.log\n\n", "\U0001d7ce" * 19 + "\U0001d7d7.log", "\udcff0000000000000000000.log",
    "00000000000000000001.snapshot", "00000000000000000004.log.swap", "00000000000000000004.cleaned",
]


@pytest.mark.parametrize("seed", range(5))
def test_classify_listing_twins_agree(seed: int) -> None:
    import random

    names = list(_ODD_NAMES)
    random.Random(seed).shuffle(names)
    got_c, got_py = _both(classify_listing, names)
    assert got_c == got_py
    segments, snapshots = got_c[1]
    assert [s[0] for s in segments] == [0, 3, 3, 5, 9]
    assert segments[0] == (0, "00000000000000000000", True, True, False)
    assert segments[2] == (3, "\u0660" * 19 + "\u0663", False, False, True)
    assert snapshots == [(1, "00000000000000000001.snapshot"), (2, "00000000000000000002.snapshot"),
                         (7, "00000000000000000007.snapshot\n"), (10, "00000000000000000010.snapshot")]
    assert _both(classify_listing, [])[0] == ("ok", ([], []))
    with pytest.raises(TypeError):
        c.classify_listing([b"00000000000000000000.log"])


def test_a_partition_reads_its_folder_as_the_regular_expressions_do(tmp_path: Path) -> None:
    """Partition's segments and snapshots (classify_listing, compiled and pure) are those SEGMENT_NAME and
    SNAPSHOT_NAME match, sorted, each with the index files its listing holds."""
    d = _damaged_folder(tmp_path)
    (d / "00000000000000000000.timeindex").write_bytes(b"")
    (d / "00000000000000000005.log.deleted").write_bytes(b"")
    for pure in (False, True):
        with compiled.pure_python(pure):
            part = Partition(d, topic="t", partition=0)
        assert [(s.base_offset, s.log_path.name, s.index_path, s.timeindex_path, s.txnindex_path)
                for s in part.segments] == [
            (0, "00000000000000000000.log", d / "00000000000000000000.index", d / "00000000000000000000.timeindex",
             None),
            (30, "00000000000000000030.log", None, None, None)]
        assert part.snapshots == [(10, d / "00000000000000000010.snapshot")]
