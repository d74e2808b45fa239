"""Repairs and undo cannot be turned against the host.

Each test first stages the attack or fault as an attacker or a full disk would, then checks
that kafkatx fails closed: exit 3 (RepairError), nothing changed where it must not be.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repair_fixtures import SEG, make_plan, sha, subprocess_env, tree

from kafkatx.errors import EXIT_INPUT, KafkaTxError, ReadFailed, RepairError
from kafkatx.repair import apply, apply_plan, undo_journal
from kafkatx.repair import journal as journal_mod
from kafkatx.repair import undo as undo_mod
from kafkatx.repair.journal import Journal, JournalOp, StateRecord, read_journal, write_journal

NOW = 1_700_000_000_000


def _state(path: Path) -> StateRecord:
    st = path.stat()
    return StateRecord(size=st.st_size, sha256=sha(path.read_bytes()), uid=st.st_uid, gid=st.st_gid,
                       mode=st.st_mode & 0o7777)


def _forge(path: Path, log_dir: Path, ops: list[JournalOp]) -> Path:
    """A hand-written journal with a correct checksum (anyone can recompute a sha256)."""
    write_journal(path, Journal(created_ms=NOW, description="forged", log_dirs=(str(log_dir),),
                                backup_dir=path.name + ".d", operations=tuple(ops)))
    return path


def _cli_undo(journal: Path) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "undo", str(journal)], capture_output=True, text=True,
                          env=subprocess_env(), timeout=60)
    return proc.returncode, [ln for ln in proc.stderr.splitlines() if ln.strip()]


# -- 1. forged journals ---------------------------------------------------------------------------------------


def test_forged_journal_naming_a_plain_directory_deletes_nothing(tmp_path: Path) -> None:
    victim_dir = tmp_path / "home"
    victim_dir.mkdir()
    victim = victim_dir / "important.txt"
    victim.write_text("precious")
    journal = _forge(tmp_path / "j.journal", victim_dir, [
        JournalOp(index=0, op="create", log_dir=0, path="important.txt", before=None, after=_state(victim))])
    code, err = _cli_undo(journal)
    assert code == EXIT_INPUT and len(err) == 1 and "not a Kafka log dir" in err[0]
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("rel", ["meta.properties", "orders-0/notes.txt", "orders-0/leader-epoch-checkpoint",
                                 "orders-0/sub/00000000000000000000.log", ".lock"])
def test_forged_journal_naming_a_file_no_repair_writes(log_dir: Path, tmp_path: Path, rel: str) -> None:
    target = log_dir / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.write_text("x")
    journal = _forge(tmp_path / "j.journal", log_dir, [
        JournalOp(index=0, op="create", log_dir=0, path=rel, before=None, after=_state(target))])
    before = tree(log_dir)
    code, err = _cli_undo(journal)
    assert code == EXIT_INPUT and len(err) == 1 and ("never writes it" in err[0] or "lock" in err[0]), err
    assert tree(log_dir) == before


def test_forged_journal_whose_after_state_is_not_the_file(log_dir: Path, tmp_path: Path) -> None:
    """Content check: a create/append whose "after" is not what the file holds now is refused."""
    seg = log_dir / SEG
    real = _state(seg)
    wrong = StateRecord(size=real.size, sha256="0" * 64, uid=real.uid, gid=real.gid, mode=real.mode)
    prefix = StateRecord(size=100, sha256=sha(seg.read_bytes()[:100]), uid=real.uid, gid=real.gid, mode=real.mode)
    for op in (JournalOp(index=0, op="create", log_dir=0, path=SEG, before=None, after=wrong),
               JournalOp(index=0, op="append", log_dir=0, path=SEG, before=prefix, after=wrong,
                         append=journal_mod.AppendRange(offset=100, length=real.size - 100, sha256="1" * 64))):
        journal = _forge(tmp_path / f"{op.op}.journal", log_dir, [op])
        before = tree(log_dir)
        with pytest.raises(RepairError, match="refusing to undo"):
            undo_journal(journal)
        assert tree(log_dir) == before


def _accurate_forgery(log_dir: Path, tmp_path: Path) -> Path:
    """The strongest forgery: every hash true to the files now, so only who wrote the journal can refuse it."""
    seg = log_dir / SEG
    return _forge(tmp_path / "j.journal", log_dir, [
        JournalOp(index=0, op="create", log_dir=0, path=SEG, before=None, after=_state(seg))])


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@needs_root
def test_journal_written_by_another_user_is_not_trusted(log_dir: Path, tmp_path: Path) -> None:
    journal = _accurate_forgery(log_dir, tmp_path)
    os.chown(journal, 65534, 65534)
    before = tree(log_dir)
    code, err = _cli_undo(journal)
    assert code == EXIT_INPUT and len(err) == 1 and "owned by uid 65534" in err[0], err
    assert tree(log_dir) == before


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_journal_others_can_write_is_not_trusted(log_dir: Path, tmp_path: Path, mode: int) -> None:
    journal = _accurate_forgery(log_dir, tmp_path)
    os.chmod(journal, mode)
    before = tree(log_dir)
    with pytest.raises(RepairError, match="writable by"):
        undo_journal(journal)
    assert tree(log_dir) == before


def test_journal_in_a_world_writable_dir_is_not_trusted(log_dir: Path, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(drop, 0o777)  # no sticky bit: anyone may have replaced the journal
    journal = _forge(drop / "j.journal", log_dir, [
        JournalOp(index=0, op="create", log_dir=0, path=SEG, before=None, after=_state(log_dir / SEG))])
    before = tree(log_dir)
    with pytest.raises(RepairError, match="writable by others"):
        undo_journal(journal)
    assert tree(log_dir) == before
    os.chmod(drop, 0o1777)  # sticky, like /tmp: only the journal's owner may replace it
    assert [r.action for r in undo_journal(journal, dry_run=True).rows] == ["delete"]  # trusted: ours
    assert tree(log_dir) == before


@needs_root
def test_backup_dir_of_another_user_is_not_trusted(log_dir: Path, tmp_path: Path) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    os.chown(result.backup_dir, 65534, 65534)
    after = tree(log_dir)
    with pytest.raises(RepairError, match="owned by uid 65534"):
        undo_journal(result.journal_path)
    assert tree(log_dir) == after


def test_a_real_journal_still_undoes(log_dir: Path, tmp_path: Path) -> None:
    before = tree(log_dir)
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    code, err = _cli_undo(result.journal_path)
    assert code == 0, err
    assert tree(log_dir) == before


# -- 2. symlink swapped in after the checks --------------------------------------------------------------------


def _swap_after_checks(monkeypatch, log_dir: Path, outside: Path, folder: str = "orders-0") -> None:
    """Between the plan checks (and the journal) and the first write: the partition folder
    becomes a symlink to an outside copy of itself."""
    real_write = apply.write_journal

    def write_then_swap(path: Path, journal: Journal) -> None:
        real_write(path, journal)
        shutil.copytree(log_dir / folder, outside)
        os.rename(log_dir / folder, log_dir.parent / f"{folder}.moved")
        os.symlink(outside, log_dir / folder, target_is_directory=True)

    monkeypatch.setattr(apply, "write_journal", write_then_swap)


def test_partition_folder_swapped_for_a_symlink_fails_closed(log_dir: Path, tmp_path: Path, monkeypatch) -> None:
    outside = tmp_path / "elsewhere" / "orders-0"
    outside.parent.mkdir()
    _swap_after_checks(monkeypatch, log_dir, outside)
    with pytest.raises(RepairError) as exc:
        apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    assert exc.value.exit_code == EXIT_INPUT
    assert "symlink" in str(exc.value)
    original = tree(log_dir.parent / "orders-0.moved")
    assert tree(outside) == original  # not one byte appended or created outside the log dir


@pytest.mark.parametrize("folder", ["orders-0", "__transaction_state-3"])
def test_swap_at_every_operation(log_dir: Path, tmp_path: Path, monkeypatch, folder: str) -> None:
    """The swap lands after some operations already ran: whatever is left fails closed, outside untouched."""
    outside = tmp_path / "elsewhere" / folder
    outside.parent.mkdir()
    real_run = apply._run_op
    n = {"ops": 0}

    def run_then_swap(p, faults):  # type: ignore[no-untyped-def]
        row = real_run(p, faults)
        n["ops"] += 1
        if n["ops"] == 4:
            shutil.copytree(log_dir / folder, outside)
            os.rename(log_dir / folder, log_dir.parent / f"{folder}.moved")
            os.symlink(outside, log_dir / folder, target_is_directory=True)
        return row

    monkeypatch.setattr(apply, "_run_op", run_then_swap)
    with pytest.raises(RepairError, match="symlink"):
        apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    assert tree(outside) == tree(log_dir.parent / f"{folder}.moved")


def test_undo_through_a_swapped_folder_fails_closed(log_dir: Path, tmp_path: Path, monkeypatch) -> None:
    result = apply_plan(make_plan(log_dir), tmp_path / "r.journal", now=NOW)
    outside = tmp_path / "elsewhere" / "orders-0"
    outside.parent.mkdir()
    real_plan = undo_mod._plan_undo
    seen = {}

    def plan_then_swap(*args):  # type: ignore[no-untyped-def]
        actions = real_plan(*args)  # the checks passed on the real folder
        shutil.copytree(log_dir / "orders-0", outside)
        os.rename(log_dir / "orders-0", log_dir.parent / "orders-0.moved")
        os.symlink(outside, log_dir / "orders-0", target_is_directory=True)
        seen["outside"] = tree(outside)
        return actions

    monkeypatch.setattr(undo_mod, "_plan_undo", plan_then_swap)
    with pytest.raises(RepairError, match="symlink") as exc:
        undo_journal(result.journal_path)
    assert exc.value.exit_code == EXIT_INPUT
    assert tree(outside) == seen["outside"]  # nothing truncated, deleted or restored outside the log dir


# -- 3. full disk while writing the journal ------------------------------------------------------------------


def _enospc_on_journal(monkeypatch) -> None:
    real_write = os.write

    def write(fd: int, data) -> int:  # type: ignore[no-untyped-def]
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".partial"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(journal_mod.os, "write", write)


def test_injected_enospc_names_the_journal_leaves_nothing_and_retry_works(log_dir: Path, tmp_path: Path,
                                                                           monkeypatch) -> None:
    before = tree(log_dir)
    journal = tmp_path / "r.journal"
    with monkeypatch.context() as m:
        _enospc_on_journal(m)
        with pytest.raises(RepairError) as exc:
            apply_plan(make_plan(log_dir), journal, now=NOW)
    assert str(exc.value).startswith(f"{journal}: ") and "No space left on device" in str(exc.value)
    assert exc.value.exit_code == EXIT_INPUT
    assert tree(log_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kafka-logs"]  # no partial journal, no backup dir
    apply_plan(make_plan(log_dir), journal, now=NOW)  # the same --journal works once there is room
    read_journal(journal)


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    if shutil.which("mount") is None:
        return False
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    return proc.returncode == 0


def test_real_full_tmpfs(log_dir: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "64k"):
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN); the injected-ENOSPC test covers the path")
    try:
        filler = small / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # fill the disk, then leave less room than a journal needs
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
        finally:
            os.close(fd)
        os.truncate(filler, max(0, filler.stat().st_size - 1024))
        before = tree(log_dir)
        journal = small / "r.journal"
        code = subprocess.run([sys.executable, "-c", (
            "import sys\nfrom pathlib import Path\nfrom repair_fixtures import make_plan\n"
            "from kafkatx.repair import apply_plan\nfrom kafkatx.errors import KafkaTxError\n"
            "try:\n    apply_plan(make_plan(Path(sys.argv[1])), Path(sys.argv[2]), now=1)\n"
            "except KafkaTxError as e:\n    print(e, file=sys.stderr); sys.exit(e.exit_code)\n"),
            str(log_dir), str(journal)], capture_output=True, text=True, env=subprocess_env(), timeout=60)
        assert code.returncode == EXIT_INPUT, code.stderr
        assert str(journal) in code.stderr and "No space left" in code.stderr
        assert tree(log_dir) == before
        assert sorted(p.name for p in small.iterdir()) == ["filler"]
        filler.unlink()
        apply_plan(make_plan(log_dir), journal, now=NOW)
        assert json.loads(journal.read_text().splitlines()[0])["description"] == "test repair"
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_apply_refuses_a_journal_folder_others_can_write(log_dir: Path, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(drop, 0o777)
    before = tree(log_dir)
    with pytest.raises(RepairError, match="writable by others"):
        apply_plan(make_plan(log_dir), drop / "r.journal", now=NOW)
    assert tree(log_dir) == before and not list(drop.iterdir())


def test_enospc_on_the_applied_status_names_the_journal_and_undo_works(log_dir: Path, tmp_path: Path,
                                                                        monkeypatch) -> None:
    before = tree(log_dir)
    journal = tmp_path / "r.journal"
    real_write = os.write

    def write(fd: int, data) -> int:  # type: ignore[no-untyped-def]
        if os.readlink(f"/proc/self/fd/{fd}") == str(journal):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    with monkeypatch.context() as m:
        m.setattr(journal_mod.os, "write", write)
        with pytest.raises(RepairError) as exc:
            apply_plan(make_plan(log_dir), journal, now=NOW)
    assert str(exc.value).startswith(f"{journal}: ") and "No space left" in str(exc.value)
    undo_journal(journal)
    assert tree(log_dir) == before


@needs_root
def test_journal_below_a_folder_of_another_user_is_not_trusted(log_dir: Path, tmp_path: Path) -> None:
    """bob owns /home/bob: he can rename the root-owned folder inside it and put his own journal there."""
    home = tmp_path / "bob"
    inner = home / "repairs"
    inner.mkdir(parents=True)
    journal = _accurate_forgery(log_dir, inner)
    os.chown(home, 65534, 65534)
    before = tree(log_dir)
    with pytest.raises(RepairError, match="folder above the journal is owned by uid 65534"):
        undo_journal(journal)
    assert tree(log_dir) == before


def _swapper(stop, folder: Path, real_dir: Path, outside: Path) -> None:  # type: ignore[no-untyped-def]
    while not stop.is_set():
        os.rename(folder, real_dir)
        os.symlink(outside, folder, target_is_directory=True)
        os.unlink(folder)
        os.rename(real_dir, folder)


RACE_RUNS = 25  # the old path-based writes wrote outside in about one run in ten


def test_racing_thread_swapping_the_folder_never_writes_outside(tmp_path: Path, capsys) -> None:
    """A real race: a thread keeps swapping orders-0 for a symlink to an outside copy and back
    while repairs run. Each run either completes inside the log dir or fails closed (exit 3): a
    RepairError (a symlink or a changed file refused), or a ReadFailed when the folder is away
    at the instant a file is opened (no such file: the read failed, never "the file is empty");
    the outside copy never changes."""
    import threading

    from repair_fixtures import build_log_dir

    outcomes = {"applied": 0, "refused": 0}
    for i in range(RACE_RUNS):
        base = tmp_path / f"run{i}"
        base.mkdir()
        ld = build_log_dir(base)
        outside = base / "elsewhere"
        shutil.copytree(ld / "orders-0", outside)
        frozen = tree(outside)
        plan = make_plan(ld)
        real_dir = base / "orders-0.real"
        stop = threading.Event()
        t = threading.Thread(target=_swapper, args=(stop, ld / "orders-0", real_dir, outside), daemon=True)
        t.start()
        try:
            apply_plan(plan, base / "r.journal", now=NOW)
            outcomes["applied"] += 1
        except (RepairError, ReadFailed) as err:
            assert isinstance(err, KafkaTxError) and err.exit_code == EXIT_INPUT
            outcomes["refused"] += 1
        finally:
            stop.set()
            t.join(timeout=10)
        assert tree(outside) == frozen, i
    assert sum(outcomes.values()) == RACE_RUNS
    with capsys.disabled():
        print(f"\nsymlink race: {outcomes}")
