"""abort-hanging offline: plan changes nothing; execute repairs what find-hanging reports; undo restores.

Every expectation comes from the fixture scenario (fixtures/README.md) and from Kafka's rules,
checked with independent readers: kafka-python's ``MemoryRecords`` for the appended batches,
kafkatx's own find-hanging/lag/verify for the broker-visible result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from typer.testing import CliRunner

from kafkatx.checks.ghost import apply_ghost_rule
from kafkatx.cli.main import app
from kafkatx.format.txn_log import decode_txn_log_value
from kafkatx.repair import apply_plan, undo_journal
from kafkatx.repair.plan import plan_abort_hanging, post_check_for
from kafkatx.session import offline
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.replay import replay_partition

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
NOW = 1_700_007_200_000  # fixtures/README.md: T0 + 2 h


def copy(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest, symlinks=True)
    return dest


def digest_tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f == ".lock":  # created by the repair's lock, as Kafka's LogManager does; never removed
                continue
            p = Path(dirpath) / f
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def hanging_rows(ld: Path) -> list:
    """find-hanging plus the ghost rule (what the CLI prints once offline.find_hanging applies it)."""
    answer = offline.find_hanging([ld], now=NOW)
    states = {}
    for d in LogDir(ld).partitions():
        states[d.key] = replay_partition(d)
    return apply_ghost_rule(answer.rows, states)


def appended_batches(result, suffix=".log"):
    """(path, bytes appended) for every .log append of an ApplyResult."""
    out = []
    for row in result.operations:
        if row.op == "append" and row.path.endswith(suffix):
            with open(row.path, "rb") as fh:
                fh.seek(row.offset)
                out.append((row.path, fh.read(row.length)))
    return out


def kafka_python_batches(data: bytes) -> list:
    records = MemoryRecords(data)
    batches = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "kafka-python says the CRC of an appended batch is wrong"
        batches.append(batch)
    return batches


def expected_marker_epochs(fixture: str) -> dict[tuple[str, int, int], int]:
    """(topic, partition, producer id) -> the producer epoch of the marker Kafka writes, from the fixture's
    simulator-written expected files: a timed-out transaction is aborted with the coordinator's epoch
    bumped once (prepareFenceProducerEpoch); a Prepare* one is finished with the Prepare record's epoch;
    an orphan gets an admin abort with the partition's current producer epoch."""
    exp = FIXTURES / "expected" / fixture
    out = {}
    for row in json.loads((exp / "find-hanging.json").read_text()):
        if row["kind"] == "orphaned":
            out[(row["topic"], row["partition"], row["producer_id"])] = row["producer_epoch"]
            continue
        txn = json.loads((exp / f"describe-txn-{row['transactional_id']}.json").read_text())
        bump = 1 if row["kind"] == "timed-out" else 0
        for name in txn["partitions"] if row["kind"] == "timed-out" else [f"{row['topic']}-{row['partition']}"]:
            topic, _, num = name.rpartition("-")
            out[(topic, int(num), txn["producer_id"])] = txn["producer_epoch"] + bump
    return out


def execute(ld: Path, tmp_path: Path, **kw):
    planned = plan_abort_hanging([ld], now=NOW, **kw)
    assert not planned.refused
    result = apply_plan(planned.plan, tmp_path / "repair.journal", now=NOW, post_check=post_check_for(planned))
    assert result.problems == ()
    return planned, result


def test_plan_changes_nothing_and_lists_every_hanging_row(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    before = digest_tree(ld)
    planned = plan_abort_hanging([ld], all_=True, now=NOW)
    assert digest_tree(ld) == before
    got = {(r.topic, r.partition, r.producer_id): r.action for r in planned.rows}
    # fixtures/README.md, hanging: the eight rows find-hanging reports, each with Kafka's remedy. The
    # orphans follow the coordinator's decision in the __transaction_state history:
    # offsets-writer (1010) is CompleteCommit after a PrepareCommit listing __consumer_offsets-2, and
    # audit-trail's (1006) first transaction was committed with orders-1 listed ("its first transaction
    # committed but orders-1's marker was lost"): COMMIT. inventory-sync (1005) is CompleteAbort after a
    # PrepareAbort with orders-1; expired-job (1007, tombstoned) was aborted with payments-1: ABORT.
    assert got == {
        ("__consumer_offsets", 2, 1010): "write-commit-marker",
        ("orders", 0, 1004): "abort-timed-out",
        ("orders", 0, 1008): "complete-commit",
        ("orders", 0, 1009): "complete-abort",
        ("orders", 1, 1005): "write-abort-marker",
        ("orders", 1, 1006): "write-commit-marker",
        ("payments", 1, 1004): "abort-timed-out",
        ("payments", 1, 1007): "write-abort-marker",
    }


@pytest.mark.parametrize("fixture", ["hanging", "two-brokers"])
def test_plan_writes_the_coordinators_decision(tmp_path: Path, fixture: str) -> None:
    root = copy(tmp_path, fixture)
    dirs = [root / "broker-1", root / "broker-2"] if fixture == "two-brokers" else [root]
    planned = plan_abort_hanging(dirs, all_=True, now=NOW)
    expected = json.loads((REPO / "fixtures" / "expected" / fixture / "abort-hanging.json").read_text())
    assert {(r.topic, r.partition, r.producer_id): r.control_type for r in planned.rows} == \
        {(e["topic"], e["partition"], e["producer_id"]): e["control_type"] for e in expected}


def test_offsets_writer_gets_commit_and_its_offsets_stay_committed(tmp_path: Path) -> None:
    # fixtures/README: offsets-writer (1010) is CompleteCommit; its payments-1 data got COMMIT @ 47 and
    # its __consumer_offsets-2 record (offset 0) never got a marker. Aborting it would make the group
    # re-read input whose output was committed. The repair writes COMMIT at the log end (1), no
    # txnindex entry, so a read_committed fetch (aborted ranges come only from .txnindex) returns
    # offset 0, and the LSO reaches the high watermark (2).
    ld = copy(tmp_path, "hanging")
    planned, result = execute(ld, tmp_path, transactional_ids=["offsets-writer"])
    [row] = planned.rows
    assert (row.topic, row.partition, row.action, row.control_type, row.marker_offset) == \
        ("__consumer_offsets", 2, "write-commit-marker", "COMMIT", 1)
    assert "PrepareCommit" in (row.why or "")
    controls = [next(iter(b)).key for _p, data in appended_batches(result) for b in kafka_python_batches(data)
                if b.is_control_batch]
    assert controls == [b"\x00\x00\x00\x01"]  # ControlRecordType COMMIT, version 0
    part = LogDir(ld).partition("__consumer_offsets", 2)
    assert not any(s.txnindex_path is not None and s.txnindex_path.is_file() for s in part.segments)
    [lag_row] = offline.lag([ld], topic="__consumer_offsets", now=NOW).rows[2:3]
    assert (lag_row.partition, lag_row.lso, lag_row.high_watermark, lag_row.open_transactions) == (2, 2, 2, 0)


def test_orphan_without_history_needs_decision(tmp_path: Path) -> None:
    # The history compacted away: only offsets-writer's latest record (CompleteCommit, no partitions)
    # would survive. Simulate it by dropping the earlier history entries: the plan refuses to choose and
    # asks for --decision; with it, that outcome is written and the row says so.
    from kafkatx.coordinator.decision import coordinator_decision
    from kafkatx.rows import HistoryEntry

    last = HistoryEntry(offset=19, state="CompleteCommit", producer_id=1010, producer_epoch=0, partitions=[],
                        last_update_timestamp_ms=1700002404000)
    got = coordinator_decision([last], transactional_id="offsets-writer", producer_id=1010, producer_epoch=0,
                               partition="__consumer_offsets-2", start_ms=1700002402000)
    assert got.control is None and "compacted" in got.why
    # fixtures/loading/expired-producer has no __transaction_state: its orphan's history cannot tell.
    ld = tmp_path / "expired-producer"
    shutil.copytree(FIXTURES / "loading" / "expired-producer", ld)
    LOAD_NOW = 1_700_090_000_000  # its scenario.json now_ms
    # one rule with prepared-2pc: the row is left untouched (the rest of a plan runs), exit 3, and one line
    # names the exact command that decides it
    [left] = plan_abort_hanging([ld], all_=True, now=LOAD_NOW).rows
    assert left.untouched and not left.refused and left.action == "untouched: undecided"
    cli = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--all", "--now", str(LOAD_NOW)])
    assert cli.exit_code == 3
    [line] = [x for x in cli.stderr.splitlines() if x.startswith("kafkatx: left untouched")]
    assert f"kafkatx abort-hanging --log-dir {ld} --topic events --partition 0 --producer-id 5 --decision abort" \
        in line and "--decision commit if it was committed" in line
    [row] = plan_abort_hanging([ld], all_=True, now=LOAD_NOW, decision="abort").rows
    assert (row.action, row.control_type) == ("write-abort-marker", "ABORT") and "--decision abort" in row.why


def test_no_selection_is_a_usage_error(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    result = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--now", str(NOW)])
    assert result.exit_code == 2
    assert "--all" in result.stderr


@pytest.mark.parametrize("fixture", ["hanging", "two-brokers"])
def test_execute_then_nothing_hangs_and_undo_restores(tmp_path: Path, fixture: str) -> None:
    root = copy(tmp_path, fixture)
    dirs = [root / "broker-1", root / "broker-2"] if fixture == "two-brokers" else [root]
    before = digest_tree(root)
    planned = plan_abort_hanging(dirs, all_=True, now=NOW)
    assert planned.rows and not planned.refused
    result = apply_plan(planned.plan, tmp_path / "repair.journal", now=NOW, post_check=post_check_for(planned))
    assert result.problems == ()
    assert offline.find_hanging(dirs, now=NOW).rows == []
    assert [r for r in offline.verify(dirs).rows if r.severity != "info"] == []  # info: startup rows
    for row in offline.lag(dirs).rows:
        if row.lag:
            # only hanging's legitimate report-builder (1011, within its timeout) may hold an LSO back
            assert (fixture, row.topic, row.partition, row.oldest_open_producer_id) == ("hanging", "orders", 2, 1011)
    # Every appended batch passes kafka-python's CRC check; markers carry the planned epochs.
    expected = {(r.topic, r.partition, r.marker_offset): (r.control_type, r.marker_epoch, r.producer_id)
                for r in planned.rows}
    seen = {}
    by_producer = {}
    for path, data in appended_batches(result):
        part = Path(path).parent.name
        for batch in kafka_python_batches(data):
            if batch.is_control_batch:
                topic, _, num = part.rpartition("-")
                seen[(topic, int(num), batch.base_offset)] = batch.producer_epoch
                by_producer[(topic, int(num), batch.producer_id)] = batch.producer_epoch
                assert batch.is_transactional
            else:
                assert part.startswith("__transaction_state") and batch.producer_id == -1
    assert {k: v[1] for k, v in expected.items()} == seen
    # ...and the epochs Kafka would use, from the simulator-written expected files (not from the planner).
    assert by_producer == expected_marker_epochs(fixture)
    undo_journal(result.journal_path)
    assert digest_tree(root) == before


def test_timed_out_is_aborted_with_a_bumped_epoch(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    planned, result = execute(ld, tmp_path, transactional_ids=["stale-loader"])
    assert {(r.topic, r.partition) for r in planned.rows} == {("orders", 0), ("payments", 1)}
    assert all(r.marker_epoch == 1 and r.control_type == "ABORT" for r in planned.rows)
    # __transaction_state-3 holds stale-loader (README): PrepareAbort then CompleteAbort, epoch 1.
    txn = [data for path, data in appended_batches(result) if "__transaction_state-3" in path]
    states = []
    for data in txn:
        for batch in kafka_python_batches(data):
            for rec in batch:
                value = decode_txn_log_value(rec.value)
                states.append((value.state.kafka_name, value.producer_epoch, value.partitions))
    assert states == [("PrepareAbort", 1, (("orders", (0,)), ("payments", (1,)))), ("CompleteAbort", 1, ())]
    # The aborted data is in the txnindex of both partitions (read_committed consumers skip it).
    for part, first in (("orders-0", 137), ("payments-1", 27)):
        seg = LogDir(ld).partition(*part.rsplit("-", 1)[0:1], int(part[-1])).segments[-1]
        from kafkatx.format.txn_index import read_txn_index

        entries = read_txn_index(seg.txnindex_path.read_bytes())
        assert any(e.producer_id == 1004 and e.first_offset == first for e in entries)


def test_prepare_commit_is_completed_with_commit_never_abort(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    planned, result = execute(ld, tmp_path, transactional_ids=["incomplete-commit"])
    [row] = planned.rows
    assert (row.topic, row.partition, row.control_type, row.marker_epoch) == ("orders", 0, "COMMIT", 0)
    controls = []
    for _path, data in appended_batches(result):
        for batch in kafka_python_batches(data):
            if batch.is_control_batch:
                controls.append(next(iter(batch)).key)
    assert controls == [b"\x00\x00\x00\x01"]  # ControlRecordType COMMIT, version 0
    # a COMMIT writes no txnindex entry
    assert not any(r.path.endswith(".txnindex") for r in result.operations)
    assert offline.describe_transaction([ld], "incomplete-commit").rows[0].transaction.state == "CompleteCommit"


def test_epoch_at_short_max_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from msgspec.structs import replace

    import kafkatx.session.session as session_mod  # the analysis asks the offline session for the coordinator

    real = session_mod.replay_transaction_log

    def exhausted(*a, **kw):
        coord = real(*a, **kw)
        txns = dict(coord.transactions)  # the replay's mapping builds metadata when asked: a dict to edit
        txns["stale-loader"] = replace(txns["stale-loader"], producer_epoch=32767)
        return dataclasses.replace(coord, transactions=txns)  # CoordinatorState: a dataclass

    monkeypatch.setattr(session_mod, "replay_transaction_log", exhausted)
    ld = copy(tmp_path, "hanging")
    planned = plan_abort_hanging([ld], transactional_ids=["stale-loader"], now=NOW)
    assert planned.rows and all(r.action.startswith("refused:") and "Short.MaxValue" in r.action
                                for r in planned.rows)
    assert planned.plan.operations == ()


def test_held_lock_refuses_with_exit_3_and_touches_nothing(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    lock = ld / ".lock"
    lock.touch()
    before = digest_tree(ld)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR); "
                               "fcntl.lockf(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
                               str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--now", str(NOW), "--all",
                                          "--execute", "--journal", str(tmp_path / "j.journal")])
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert result.exit_code == 3, result.output
    assert digest_tree(ld) == before
    assert not (tmp_path / "j.journal").exists()


def test_cli_plan_exit_1_and_subprocess_execute(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    before = digest_tree(ld)
    plan = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--now", str(NOW),
                                    "--transactional-id", "inventory-sync", "--format", "json"])
    assert plan.exit_code == 1
    assert [r["action"] for r in json.loads(plan.stdout)] == ["write-abort-marker"]
    assert digest_tree(ld) == before
    journal = tmp_path / "cli.journal"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-m", "kafkatx", "abort-hanging", "--log-dir", str(ld), "--now", str(NOW),
                          "--all", "--execute", "--journal", str(journal), "--format", "jsonl"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert str(journal) in run.stderr and "Traceback" not in run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(rows) == 8 and {r["result"] for r in rows} == {"ok"}
    after = subprocess.run([sys.executable, "-m", "kafkatx", "find-hanging", "--log-dir", str(ld), "--now", str(NOW)],
                           env=env, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0
    nothing = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--now", str(NOW), "--all"])
    assert nothing.exit_code == 0
    undo = CliRunner().invoke(app, ["undo", str(journal)])
    assert undo.exit_code == 0, undo.output
    assert digest_tree(ld) == before
    # a second undo of the same journal says so and counts nothing as undone
    again = CliRunner().invoke(app, ["undo", str(journal)])
    assert again.exit_code == 0, again.output
    assert "Already undone" in again.stdout and "Undone:" not in again.stdout
    assert digest_tree(ld) == before


def test_every_marker_carries_the_coordinator_epoch_kafka_would(tmp_path: Path) -> None:
    # The coordinator moved: every __transaction_state partition is now led at leader epoch 7, which
    # is the coordinator epoch (TransactionCoordinator.onElection gets the partition leader epoch).
    ld = copy(tmp_path, "hanging")
    for n in range(4):
        (ld / f"__transaction_state-{n}" / "leader-epoch-checkpoint").write_text("0\n1\n7 0\n")
    planned, result = execute(ld, tmp_path, all_=True)
    seen = {}
    for path, data in appended_batches(result):
        topic, _, num = Path(path).parent.name.rpartition("-")
        for batch in kafka_python_batches(data):
            if batch.is_control_batch:
                (rec,) = list(batch)
                version, coordinator_epoch = struct.unpack(">hi", rec.value)  # EndTransactionMarker v0
                assert version == 0
                seen[(topic, int(num), batch.producer_id)] = coordinator_epoch
    # fixtures/README.md: every marker the simulator wrote carries coordinator epoch 0, so no producer's
    # last coordinator epoch is above 7. The coordinator's own markers (timed-out stale-loader 1004,
    # incomplete-commit 1008, incomplete-abort 1009) carry 7; an admin abort of an orphan carries the
    # producer's last coordinator epoch in that partition (0; -1 "none" becomes 0, as in
    # TransactionsCommand's AbortTransactionCommand).
    assert seen == {
        ("orders", 0, 1004): 7, ("payments", 1, 1004): 7, ("orders", 0, 1008): 7, ("orders", 0, 1009): 7,
        ("orders", 1, 1005): 0, ("orders", 1, 1006): 0, ("payments", 1, 1007): 0, ("__consumer_offsets", 2, 1010): 0,
    }
    assert {(r.topic, r.partition, r.producer_id): r.coordinator_epoch for r in planned.rows} == seen


# ----------------------------------------------------------------------------- the post-check

def _sealed_index_with_a_wrong_entry(ld: Path, topic: str, partition: int) -> tuple[Path, int]:
    """Point the first entry of the partition's first (sealed) segment's index 3 bytes past the batch
    it names: an index-position error the repair neither causes nor touches. Returns (file, byte)."""
    part = LogDir(ld).partition(topic, partition)
    assert part is not None and len(part.segments) > 1, "needs a sealed segment"
    index = part.segments[0].index_path
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 8
    position = struct.unpack(">i", raw[4:8])[0]
    raw[4:8] = struct.pack(">i", position + 3)
    index.write_bytes(bytes(raw))
    return index, 0


def test_post_check_reports_pre_existing_conditions_once_and_passes(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    planned = plan_abort_hanging([ld], all_=True, now=NOW)
    touched = sorted({(t, p) for _d, t, p in planned.touched if not t.startswith("__")})
    damaged = None
    for topic, partition in touched:
        part = LogDir(ld).partition(topic, partition)
        if part is not None and len(part.segments) > 1:
            damaged = _sealed_index_with_a_wrong_entry(ld, topic, partition)
            break
    assert damaged is not None, "no touched partition with a sealed segment"
    planned = plan_abort_hanging([ld], all_=True, now=NOW)  # the plan of the files as they are now
    assert not planned.refused
    check = post_check_for(planned)  # before the repair
    result = apply_plan(planned.plan, tmp_path / "repair.journal", now=NOW, post_check=check)
    assert result.problems == ()
    assert len(check.pre_existing) == 1 and str(damaged[0]) in check.pre_existing[0]
    assert "index-position" in check.pre_existing[0]
    assert offline.find_hanging([ld], now=NOW).rows == []


def test_post_check_fails_on_a_condition_the_repair_brought(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    planned = plan_abort_hanging([ld], all_=True, now=NOW)
    check = post_check_for(planned)
    result = apply_plan(planned.plan, tmp_path / "repair.journal", now=NOW, post_check=None)
    # as if the repair had written a bad batch: flip a byte of the last marker appended to a data log
    path, _data = next((p, d) for p, d in appended_batches(result) if "__" not in Path(p).parent.name)
    raw = bytearray(Path(path).read_bytes())
    raw[-1] ^= 0xFF
    Path(path).write_bytes(bytes(raw))
    problems = check()  # the bad CRC, and what follows from it (its .txnindex entry names no marker now)
    assert any(path in p and "bad CRC" in p for p in problems), problems
    assert check.pre_existing == []


def test_cli_prints_pre_existing_once_and_exits_0(tmp_path: Path) -> None:
    ld = copy(tmp_path, "hanging")
    planned = plan_abort_hanging([ld], all_=True, now=NOW)
    topic, partition = next((t, p) for _d, t, p in planned.touched if not t.startswith("__")
                            and len(LogDir(ld).partition(t, p).segments) > 1)
    index, _ = _sealed_index_with_a_wrong_entry(ld, topic, partition)
    r = CliRunner().invoke(app, ["abort-hanging", "--log-dir", str(ld), "--all", "--execute", "--now", str(NOW),
                                 "--journal", str(tmp_path / "j.journal"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert all(row["result"] == "ok" for row in json.loads(r.stdout))
    notes = [line for line in r.stderr.splitlines() if "pre-existing" in line]
    assert len(notes) == 1 and str(index) in notes[0]


def test_the_same_transactions_marker_elsewhere_decides_an_orphan() -> None:
    """txn.decision.marker_decision: one producer runs one transaction at a time and writes no data of the next
    before the last one's markers (TransactionCoordinator.handleAddPartitionsToTransaction answers
    CONCURRENT_TRANSACTIONS while the id is PrepareCommit/PrepareAbort), so a span of the producer on another
    partition whose marker is not older than this partition's first batch and whose data does not begin after
    its last write is this very transaction."""
    from kafkatx.coordinator.decision import MarkerSeen, marker_decision

    def seen(partition: str, outcome: str, marker_ms: int, first_ms: int, epoch: int = 0, offset: int = 9):
        return MarkerSeen(partition=partition, producer_id=7, marker_epoch=epoch, outcome=outcome,
                          marker_offset=offset, first_data_ms=first_ms, marker_ms=marker_ms)

    ask = dict(producer_id=7, producer_epoch=0, partition="orders-0", start_ms=1000, last_write_ms=1500)
    earlier = seen("orders-1", "ABORT", marker_ms=900, first_ms=800)  # the transaction before: marker before
    later = seen("orders-1", "ABORT", marker_ms=3000, first_ms=2000)  # the next one: data after the last write
    same = seen("orders-2", "COMMIT", marker_ms=1800, first_ms=1200, offset=41)
    got = marker_decision([earlier, later, same], **ask)
    assert got.control == "COMMIT" and "COMMIT marker on orders-2 (offset 41" in got.why
    # a TV2 marker carries the bumped epoch (KIP-890): still this transaction
    assert marker_decision([seen("orders-2", "ABORT", 1800, 1200, epoch=1)], **ask).control == "ABORT"
    assert marker_decision([earlier, later], **ask).control is None  # nothing of this transaction elsewhere
    both = marker_decision([same, seen("orders-3", "ABORT", 1700, 1100)], **ask)
    assert both.control is None and "disagree" in both.why
    assert marker_decision([seen("orders-0", "COMMIT", 1800, 1200)], **ask).control is None  # its own partition
