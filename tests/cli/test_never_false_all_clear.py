"""Never a false all-clear, refuse input that cannot be meant, one story across commands.

Every case here failed on the code before the never-a-false-answer rule: a partition that could not be read was skipped
and the answer still exited 0 ("no hanging transactions", "[]"); seconds for ``--now``, an unknown
topic or id read as "nothing hangs"; describe-txn said "No partition has this transaction open" for
inventory-sync, whose orders-1 data find-hanging calls orphaned.

Expected values come from fixtures/README.md (the hanging scenario), never from kafkatx's output.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
EXPECTED = FIXTURES / "expected"
NOW = "1700007200000"  # fixtures/README.md: T0 + 2 h
ACTIVE = "orders-2/00000000000000000148.log"  # orders-2's active segment (README: segments 0, 72, 148)

pytestmark = pytest.mark.skipif(not (FIXTURES / "hanging").is_dir(), reason="fixtures not built")


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def copy(tmp_path: Path, name: str = "hanging") -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURES / name, dst, symlinks=True)
    return dst


def truncated(ld: Path) -> None:
    # The reproduction: the file ends inside a batch, and .kafka_cleanshutdown says the broker
    # shut down cleanly, so LogLoader does not recover (truncate) it: the broker cannot load it either.
    os.truncate(ld / ACTIVE, 1000)


def random_bytes(ld: Path) -> None:
    path = ld / ACTIVE
    data = bytearray(path.read_bytes())
    rng = random.Random(23)
    for i in range(600, 700):
        data[i] = rng.randrange(256)
    path.write_bytes(bytes(data))


# Every command the issue lists, with the exit code it gives on the undamaged fixture (README:
# 8 hanging rows, so find-hanging/abort-hanging plans exit 1) and an argument list on orders-2's damage.
COMMANDS = {
    "find-hanging": (["find-hanging", "--now", NOW], 1),
    "lag": (["lag", "--now", NOW], 0),
    "describe-txn": (["describe-txn", "report-builder", "--now", NOW], 0),  # README: report-builder is in orders-2
    "describe-producers": (["describe-producers", "--topic", "orders", "--partition", "2", "--now", NOW], 0),
    "verify": (["verify"], 0),
    "timeline": (["timeline", "--topic", "orders", "--now", NOW], 0),
    "abort-hanging": (["abort-hanging", "--all", "--now", NOW], 1),
    "abort-hanging-id": (["abort-hanging", "--transactional-id", "report-builder", "--now", NOW], 0),
}


@pytest.mark.parametrize("damage", [truncated, random_bytes], ids=["truncated", "random-bytes"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unreadable_partition_exits_3_naming_it(tmp_path: Path, damage, command: str) -> None:
    ld = copy(tmp_path)
    args, _code = COMMANDS[command]
    damage(ld)
    result = run(*args, "--log-dir", str(ld))
    assert result.exit_code == 3, result.output
    last = result.stderr.rstrip().splitlines()[-1]
    assert "orders-2" in last and "could not be read" in last, result.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_undamaged_fixture_keeps_its_exit_code(command: str) -> None:
    args, code = COMMANDS[command]
    result = run(*args, "--log-dir", str(FIXTURES / "hanging"))
    assert result.exit_code == code, result.output
    assert "could not be read" not in result.stderr


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_partial_json_and_yaml_carry_incomplete_beside_the_rows(tmp_path: Path, fmt: str) -> None:
    import yaml

    ld = copy(tmp_path)
    truncated(ld)
    result = run("find-hanging", "--log-dir", str(ld), "--now", NOW, "--topic", "orders", "--format", fmt)
    assert result.exit_code == 3
    doc = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    # README: on orders-0/1 hang stale-loader, incomplete-commit, incomplete-abort (orders-0) and
    # inventory-sync, audit-trail (orders-1); orders-2 holds only report-builder (within its timeout).
    assert sorted((r["topic"], r["partition"], r["producer_id"]) for r in doc["rows"]) == [
        ("orders", 0, 1004), ("orders", 0, 1008), ("orders", 0, 1009), ("orders", 1, 1005), ("orders", 1, 1006)]
    [gap] = doc["incomplete"]
    assert (gap["partition"], gap["file"], gap["position"]) == ("orders-2", str(ld / ACTIVE), 902)
    assert "runs past the end" in gap["reason"]


def test_jsonl_ends_with_the_incomplete_line(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    truncated(ld)
    result = run("lag", "--log-dir", str(ld), "--now", NOW, "--topic", "orders", "--format", "jsonl")
    assert result.exit_code == 3
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["partition"] for r in lines[:-1]] == [0, 1]
    assert [u["partition"] for u in lines[-1]["incomplete"]] == ["orders-2"]


def test_timeline_html_page_says_what_it_could_not_read(tmp_path: Path) -> None:
    """The page is a report someone forwards: on a partial read it names the partition it left out
    and never says "Nothing is hanging" (only orders-2 is read-damaged; README: orders-2 holds
    report-builder, within its timeout, so no row hangs in --topic orders --partition 2)."""
    ld = copy(tmp_path)
    truncated(ld)
    page = tmp_path / "t.html"
    result = run("timeline", "--log-dir", str(ld), "--now", NOW, "--topic", "orders", "--html", str(page))
    assert result.exit_code == 3, result.output
    text = page.read_text()
    assert 'id="incomplete"' in text and "orders-2" in text[text.index('id="incomplete"'):]
    assert "1 partition could not be read" in text
    assert "Nothing is hanging: no repair to run." not in text
    undamaged = tmp_path / "u.html"
    assert run("timeline", "--log-dir", str(FIXTURES / "hanging"), "--now", NOW, "--html", str(undamaged)).exit_code == 0
    assert 'id="incomplete"' not in undamaged.read_text()


def test_allow_partial_accepts_and_says_so(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    truncated(ld)
    result = run("lag", "--log-dir", str(ld), "--now", NOW, "--topic", "orders", "--allow-partial")
    assert result.exit_code == 0
    assert "partial answer (--allow-partial): 1 partition could not be read" in result.stderr
    # abort-hanging plans the rest with --allow-partial, but never a transaction touching orders-2
    plan = run("abort-hanging", "--log-dir", str(ld), "--now", NOW, "--transactional-id", "stale-loader",
               "--allow-partial", "--format", "json")
    assert plan.exit_code == 1 and {r["transactional_id"] for r in json.loads(plan.stdout)} == {"stale-loader"}
    refused = run("abort-hanging", "--log-dir", str(ld), "--now", NOW, "--transactional-id", "report-builder",
                  "--allow-partial")
    assert refused.exit_code == 3 and "orders-2" in refused.stderr


def test_execute_over_an_unreadable_partition_changes_nothing(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    truncated(ld)
    before = {p: p.read_bytes() for p in ld.rglob("*") if p.is_file() and p.name != ".lock"}
    result = run("abort-hanging", "--log-dir", str(ld), "--all", "--now", NOW, "--execute",
                 "--journal", str(tmp_path / "j.journal"))
    assert result.exit_code == 3 and "orders-2" in result.stderr
    assert {p: p.read_bytes() for p in ld.rglob("*") if p.is_file() and p.name != ".lock"} == before
    assert not (tmp_path / "j.journal").exists()


def test_unreadable_transaction_state_makes_list_txn_incomplete(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    # README: __transaction_state-0 holds audit-trail, inventory-sync, offsets-writer, tv2-writer
    log = ld / "__transaction_state-0" / "00000000000000000000.log"
    os.truncate(log, log.stat().st_size - 10)
    result = run("list-txn", "--log-dir", str(ld), "--format", "json")
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert [u["partition"] for u in doc["incomplete"]] == ["__transaction_state-0"]
    assert "offsets-writer" not in {r["transactional_id"] for r in doc["rows"]}


def _nobody_can_run_python() -> str | None:
    if shutil.which("runuser") is None:
        return "runuser is not installed"
    try:
        import pwd

        pwd.getpwnam("nobody")
    except KeyError:
        return "there is no user 'nobody'"
    if os.geteuid() != 0:
        return "runuser needs root"
    probe = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c", "import typer"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"user nobody cannot run {sys.executable}: {probe.stderr.strip()[:120]}"
    return None


# Root without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH is bound by the mode bits like any user: the
# fallback where `nobody` cannot reach this Python (a pyenv under /root), the same "permission
# denied" on the same file.
_NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
           "--inh-caps", "-dac_override,-dac_read_search", "--"]


def _unprivileged_reader() -> tuple[list[str], int] | str:
    """(command prefix, mode for the unreadable file), or why neither way is available."""
    why = _nobody_can_run_python()
    if why is None:
        return ["runuser", "-u", "nobody", "--"], 0o600  # root's file: nobody may not read it
    if os.geteuid() == 0 and shutil.which("setpriv") is not None:
        probe = subprocess.run([*_NO_DAC, "cat", "/proc/self/status"], capture_output=True, text=True,
                               timeout=60)
        if probe.returncode == 0:
            return _NO_DAC, 0o000  # without DAC override even the owner is refused mode 000
    return f"{why}; and setpriv cannot drop root's DAC override here"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_segment_nobody_cannot_read_exits_3(tmp_path: Path, command: str) -> None:
    reader = _unprivileged_reader()
    if isinstance(reader, str):
        pytest.skip(reader)
    prefix, mode = reader
    tmp_path.chmod(0o755)
    ld = copy(tmp_path)
    for path in [ld, *ld.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (ld / ACTIVE).chmod(mode)
    args, _code = COMMANDS[command]
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(tmp_path))
    result = subprocess.run([*prefix, sys.executable, "-m", "kafkatx", *args,
                             "--log-dir", str(ld)], capture_output=True, text=True, env=env, timeout=300,
                            cwd=str(tmp_path))
    assert result.returncode == 3, result.stderr
    assert "orders-2" in result.stderr.rstrip().splitlines()[-1], result.stderr


# ----------------------------------------------------------------------------- input that cannot be meant

@pytest.mark.parametrize("command", [
    ["find-hanging"], ["lag"], ["list-txn"], ["timeline"], ["describe-txn", "inventory-sync"],
    ["describe-producers", "--topic", "orders", "--partition", "0"], ["abort-hanging", "--all"]])
def test_seconds_for_now_are_refused(command: list[str]) -> None:
    result = run(*command, "--log-dir", str(FIXTURES / "hanging"), "--now", "1700007200")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "kafkatx: --now 1700007200: not epoch milliseconds (seconds? try --now 1700007200000)"]


def test_far_future_now_is_refused() -> None:
    result = run("find-hanging", "--log-dir", str(FIXTURES / "hanging"), "--now", str(10**16))
    assert result.exit_code == 2 and "future" in result.stderr


@pytest.mark.parametrize("command", [
    ["find-hanging", "--now", NOW], ["lag"], ["timeline", "--now", NOW], ["abort-hanging", "--all", "--now", NOW],
    ["describe-producers", "--partition", "0"]])
def test_unknown_topic_is_refused_naming_the_topics_found(command: list[str]) -> None:
    result = run(*command, "--topic", "nosuchtopic", "--log-dir", str(FIXTURES / "hanging"))
    assert result.exit_code == 3
    [line] = result.stderr.strip().splitlines()
    # README: hanging holds __consumer_offsets, __transaction_state, legacy, orders and payments
    assert "nosuchtopic" in line and "orders" in line and "payments" in line


def test_unknown_partition_is_refused_naming_the_partitions() -> None:
    result = run("timeline", "--topic", "orders", "--partition", "7", "--now", NOW, "--log-dir",
                 str(FIXTURES / "hanging"))
    assert result.exit_code == 3 and "0, 1, 2" in result.stderr


def test_abort_hanging_unknown_id_is_refused() -> None:
    result = run("abort-hanging", "--transactional-id", "nosuch", "--now", NOW, "--log-dir",
                 str(FIXTURES / "hanging"))
    assert result.exit_code == 3
    [line] = result.stderr.strip().splitlines()
    assert "nosuch" in line and "inventory-sync" in line
    # expired-job was tombstoned (README): not known either, and the line says why
    expired = run("abort-hanging", "--transactional-id", "expired-job", "--now", NOW, "--log-dir",
                  str(FIXTURES / "hanging"))
    assert expired.exit_code == 3 and "tombstoned" in expired.stderr


# ----------------------------------------------------------------------------- one story

def test_describe_txn_shows_the_orders_1_orphan_of_inventory_sync() -> None:
    # README: inventory-sync (1005) is CompleteAbort; orders-1 never got its ABORT marker (data 147..149).
    result = run("describe-txn", "inventory-sync", "--log-dir", str(FIXTURES / "hanging"), "--now", NOW,
                 "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["open_partitions"] == [
        {"partition": "orders-1", "producer_id": 1005, "producer_epoch": 0, "first_offset": 147, "kind": "orphaned",
         "blocked_groups": None}]
    human = run("describe-txn", "inventory-sync", "--log-dir", str(FIXTURES / "hanging"), "--now", NOW)
    assert "No partition has this transaction open" not in human.stdout
    assert "orphaned since offset 147" in human.stdout
    assert ("kafkatx abort-hanging --log-dir " + str(FIXTURES / "hanging")) in " ".join(human.stdout.split()) \
        .replace(" \\ ", " ")
    assert "--transactional-id inventory-sync --now " + NOW in " ".join(human.stdout.split()).replace(" \\ ", " ")


def _log_dirs(fixture: Path) -> list[str]:
    brokers = sorted(p for p in fixture.iterdir() if p.is_dir() and p.name.startswith("broker"))
    return [a for d in (brokers or [fixture]) for a in ("--log-dir", str(d))]


def _fixtures() -> list[Path]:
    found = [FIXTURES / n for n in ("hanging", "clean", "two-brokers", "ghost")]
    found += sorted(p for p in (FIXTURES / "loading").iterdir() if p.is_dir()) if (FIXTURES / "loading").is_dir() \
        else []
    return [p for p in found if p.is_dir()]


def _now_of(fixture: Path) -> str:
    name = f"loading-{fixture.name}" if fixture.parent.name == "loading" else fixture.name
    return str(json.loads((EXPECTED / name / "scenario.json").read_text())["now_ms"])


@pytest.mark.parametrize("fixture", _fixtures(), ids=lambda p: p.name)
def test_every_command_tells_the_same_story(fixture: Path) -> None:
    """find-hanging, describe-txn, describe-producers, lag, timeline and the abort plan agree."""
    dirs, now = _log_dirs(fixture), _now_of(fixture)

    def js(*args: str):
        result = run(*args, *dirs, "--format", "json")
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)

    hanging = js("find-hanging", "--now", now)
    story = {(h["topic"], h["partition"], h["producer_id"]): h for h in hanging}
    # describe-txn: every hanging row of a known id is among its open partitions with the same kind
    for tid in sorted({h["transactional_id"] for h in hanging if h["transactional_id"]}):
        desc = js("describe-txn", tid, "--now", now)
        held = {(o["partition"], o["producer_id"]): o["kind"] for o in desc["open_partitions"]}
        for (topic, part, pid), h in story.items():
            if h["transactional_id"] == tid:
                assert held.get((f"{topic}-{part}", pid)) == h["kind"], (tid, topic, part, pid)
    # describe-producers: the producer holds that transaction open from that offset
    for (topic, part, pid), h in story.items():
        producers = {p["producer_id"]: p for p in js("describe-producers", "--topic", topic, "--partition", str(part),
                                                       "--now", now)}
        assert producers[pid]["current_txn_first_offset"] == h["first_offset"]
        assert producers[pid]["ghost"] == (h["kind"] == "ghost")
    # lag: a partition with a hanging transaction has it open and its LSO no later than its first offset
    lag = {(r["topic"], r["partition"]): r for r in js("lag", "--now", now)}
    for (topic, part, _pid), h in story.items():
        row = lag[(topic, part)]
        assert row["open_transactions"] >= 1 and row["lso"] <= max(h["first_offset"], row["log_start_offset"])
    # timeline: the OPEN spans include every hanging transaction
    spans = {(s["topic"], s["partition"], s["producer_id"]) for s in js("timeline", "--now", now)
             if s["outcome"] == "OPEN"}
    assert set(story) - {k for k, h in story.items() if h["kind"] == "ghost"} <= spans
    # the abort plan: one row per hanging row, nothing else (refusals included: they name the row)
    plan = run("abort-hanging", "--all", "--now", now, *dirs, "--format", "json")
    assert plan.exit_code in (0, 1, 3), plan.output
    rows = json.loads(plan.stdout) if plan.stdout.strip() else []
    assert {(r["topic"], r["partition"], r["producer_id"]) for r in rows} == set(story)
    _counts_tell_the_same_story(dirs, now, hanging)
    _in_flight_holders_are_named(dirs, now, story, lag)


IN_FLIGHT_SEEN: list = []  # the held-back partitions in flight the fixtures showed (test_in_flight_was_seen)


def test_in_flight_was_seen() -> None:
    """fixtures/hanging has one (README: report-builder, Ongoing within its timeout at T0 + 2 h)."""
    IN_FLIGHT_SEEN.clear()
    _in_flight_holders_are_named(_log_dirs(FIXTURES / "hanging"), NOW, {}, {
        (r["topic"], r["partition"]): r for r in json.loads(run("lag", "--log-dir", str(FIXTURES / "hanging"),
                                                                  "--now", NOW, "--format", "json").stdout)})
    assert IN_FLIGHT_SEEN


def _human(*args: str) -> str:
    """A command's human output at 80 columns, as one line (wrapping undone)."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    return " ".join(result.stdout.split()).replace(" \\ ", " ")


def _counts_tell_the_same_story(dirs: list[str], now: str, hanging: list[dict]) -> None:
    """Every count a command says is of transactions (one transactional id, producer id and epoch: Kafka's
    TransactionMetadata), the partitions they hold said apart."""
    if not hanging:
        return
    txns = len({(h["transactional_id"], h["producer_id"], h["producer_epoch"]) for h in hanging})
    parts = len({(h["topic"], h["partition"]) for h in hanging})
    said = f"{txns} hanging transaction{'s' if txns != 1 else ''}"
    assert f"{said} {'holds' if txns == 1 else 'hold'} back the LSO of {parts} partition" in \
        _human("find-hanging", *dirs, "--now", now)
    timeline = _human("timeline", *dirs, "--now", now)
    assert (f"{said} on {parts} partition" if parts != txns else f"{said};") in timeline
    plan = _human("abort-hanging", "--all", *dirs, "--now", now)
    if "Plan: " in plan:  # (a plan with refused rows says so instead)
        assert f"Plan: {said}" in plan


def _in_flight_holders_are_named(dirs: list[str], now: str, story: dict, lag: dict) -> None:
    """A partition held back by a transaction its coordinator still has Ongoing within its timeout (no
    find-hanging row) is no dead end: lag names the transaction and says it is in flight."""
    hanging_parts = {(t, p) for t, p, _pid in story}
    ongoing = {r["producer_id"]: r for r in json.loads(CliRunner().invoke(
        app, ["list-txn", *dirs, "--now", now, "--state", "Ongoing", "--format", "json"]).stdout)}
    def within(txn: dict) -> bool:  # TransactionStateManager.timedOutTransactions: start + timeout < now
        return txn["start_timestamp_ms"] + txn["timeout_ms"] >= int(now)

    in_flight = [(k, row) for k, row in lag.items() if row["lag"] and k not in hanging_parts
                 and row["oldest_open_producer_id"] in ongoing and within(ongoing[row["oldest_open_producer_id"]])
                 and f"{k[0]}-{k[1]}" in ongoing[row["oldest_open_producer_id"]]["partitions"]]
    text = _human("lag", *dirs, "--now", now)
    IN_FLIGHT_SEEN.extend(in_flight)
    for _k, row in in_flight:
        assert f"{ongoing[row['oldest_open_producer_id']]['transactional_id']} is open within its" in text


def test_lag_takes_now_and_its_hint_carries_it() -> None:
    result = run("lag", "--log-dir", str(FIXTURES / "hanging"), "--now", NOW)
    assert result.exit_code == 0
    text = " ".join(result.stdout.split()).replace(" \\ ", " ")
    assert f"kafkatx find-hanging --log-dir {FIXTURES / 'hanging'} --now {NOW}" in text


def test_verify_hint_names_a_file_that_exists(tmp_path: Path) -> None:
    ld = copy(tmp_path)
    # README: orders-0 has one txnindex entry (tv2-writer's abort, ABORT @ 120 in segment 109)
    missing = ld / "orders-0" / "00000000000000000109.txnindex"
    missing.unlink()
    result = run("verify", "--log-dir", str(ld))
    text = " ".join(result.stdout.split()).replace(" \\ ", " ")
    assert str(missing) not in text.split("Next:")[-1]
    assert f"kafkatx dump-segment {ld / 'orders-0' / '00000000000000000109.log'}" in text
