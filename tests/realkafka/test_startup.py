"""What a real Kafka 3.8.0 broker built when it restarted on damaged and idle log dirs (``startup/``).

Each scenario of ``3.8.0/startup/`` is a log dir the broker wrote (some then damaged by hand) and
what the restarted broker answered at once (``answers/<name>/broker/*.json``, ``tools/``), the
``server.properties`` of that restart and its ``server-startup.log``; ``-r2`` is a second restart
of the same files later. kafkatx, run on the files as they were before the restart with
``--broker-config`` (that restart's ``server.properties``) and ``--now`` (``now_ms.txt``), must give
the same answers field for field:

* ``lag``: per partition the broker's ListOffsets (log start, high watermark, read_committed LSO);
* ``describe-producers``: per partition the broker's DescribeProducers (the Java client's empty
  coordinator epoch is the wire's -1, the one documented mapping);
* ``list-txn``, ``describe-txn``: ListTransactions / DescribeTransactions;
* ``find-hanging``: ``kafka-transactions.sh find-hanging`` lists what kafkatx calls ``orphaned``
  and ``ghost`` (rules.py), with the tool's ``--max-transaction-timeout`` (15 minutes, or 0 for the
  ``maxto0`` files);
* ``verify``: its ``startup-*`` rows are the segments ``server-startup.log`` says the broker
  recovered (``Recovering unflushed segment``) and truncated (``Corruption found in segment``), and
  the snapshot files on disk it deleted (``Deleted producer state snapshot``; the broker also deletes
  snapshots it wrote itself while loading, which were never on disk before).

``prepare`` is compared with the state *as loaded*: the broker's answers were recorded after it had
completed the PrepareCommit/PrepareAbort transactions it loaded, which kafkatx does not predict. What
it loaded is in ``server-startup.log`` (``Sending txn markers for ... TransactionMetadata(...)``, the
coordinator's state; ``Log loaded for partition P with initial high watermark N``) and in
``broker-load-snapshots/`` (the producer snapshots it wrote while loading, dumped by
``kafka-dump-log.sh``); every other answer of ``prepare`` is the broker's own.

Every compared field is counted; each test prints its count (``pytest -s``) and fails on any difference.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatx.cli.main import app

# answers name -> data (tarball) name
SCENARIOS = {
    "powercut": "powercut", "powercut-r2": "powercut",
    "retention": "retention", "retention-r2": "retention",
    "idle": "idle", "idle-r2": "idle",
    "compacted": "compacted", "compacted-r2": "compacted",
    "stale-clean": "stale-clean", "prepare": "prepare", "crc-clean": "crc-clean", "logstart": "logstart",
}
HANGING_KINDS = {"orphaned", "ghost"}  # what kafka-transactions.sh find-hanging calls hanging (rules.py)


class Scenario:
    def __init__(self, real_kafka, name: str) -> None:
        self.name = name
        self.dir = real_kafka.extract(f"3.8.0/startup/{SCENARIOS[name]}")
        self.answers = real_kafka.root / "3.8.0" / "startup" / "answers" / name
        if not self.answers.is_dir():
            pytest.skip(f"answers absent: {self.answers}")
        self.now = int((self.answers / "now_ms.txt").read_text().strip())
        self.config = self.answers / "server.properties"
        self.log = (self.answers / "server-startup.log").read_text()
        self.compared = 0
        self.diffs: list[str] = []

    def broker(self, what: str):
        return json.loads((self.answers / "broker" / f"{what}.json").read_text())

    def run(self, *args: str, code: tuple[int, ...] = (0,)) -> list[dict]:
        result = CliRunner().invoke(app, [*args, "--log-dir", str(self.dir), "--broker-config", str(self.config),
                                          "--format", "json"])
        assert result.exit_code in code, (args, result.exit_code, result.stdout, result.stderr)
        out = json.loads(result.stdout) if result.stdout.strip() else []
        return out if isinstance(out, list) else [out]

    def check(self, what: str, expected, got) -> None:
        self.compared += 1
        if expected != got:
            self.diffs.append(f"{what}: broker {expected!r}, kafkatx {got!r}")

    def done(self, command: str) -> None:
        print(f"\n{self.name} {command}: {self.compared} fields compared, {len(self.diffs)} differences")
        assert not self.diffs, "\n".join(self.diffs)


@pytest.fixture(params=list(SCENARIOS))
def scenario(request, real_kafka) -> Scenario:
    return Scenario(real_kafka, request.param)


# ----------------------------------------------------------------------------- prepare: the state as loaded

_MARKERS = re.compile(r"Sending txn markers for TransactionalIdCoordinatorEpochAndTransitMetadata\((?P<tid>[^,]+),"
                      r".*?TransactionMetadata\((?P<meta>.*?)\),TxnTransitMetadata")
_INITIAL_HW = re.compile(r"Log loaded for partition (?P<tp>\S+) with initial high watermark (?P<hw>\d+)")
_SNAPSHOT_ENTRY = re.compile(r"producerId: (?P<pid>\d+) producerEpoch: (?P<epoch>-?\d+) coordinatorEpoch: "
                             r"(?P<coord>-?\d+) currentTxnFirstOffset: (?P<first>OptionalLong(?:\.empty|\[\d+\])) "
                             r"lastTimestamp: (?P<ts>-?\d+) firstSequence: -?\d+ lastSequence: (?P<seq>-?\d+)")


def loaded_transactions(log: str) -> dict[str, dict]:
    """The coordinator state ``loadTransactionsForTxnTopicPartition`` found for the ids it completed."""
    out = {}
    for m in _MARKERS.finditer(log):
        meta = m.group("meta")

        def field(name: str, text: str = meta) -> str:
            found = re.search(rf"\b{name}=([^,)]*)", text)
            assert found, (name, text)
            return found.group(1)

        parts = re.search(r"topicPartitions=\w*\(([^)]*)\)", meta)
        out[m.group("tid")] = {
            "state": field("state"), "producer_id": int(field("producerId")),
            "producer_epoch": int(field("producerEpoch")), "transaction_timeout_ms": int(field("txnTimeoutMs")),
            "transaction_start_time_ms": int(field("txnStartTimestamp")),
            "topic_partitions": sorted(p.strip() for p in parts.group(1).split(",") if p.strip()) if parts else [],
        }
    return out


def load_snapshots(answers: Path) -> dict[str, list[dict]]:
    """``broker-load-snapshots/<partition>-<offset>.txt``: the producer state each partition loaded."""
    out: dict[str, list[dict]] = {}
    for txt in sorted((answers / "broker-load-snapshots").glob("*-[0-9]*.txt")):
        partition = txt.name.rsplit("-", 1)[0]
        rows = []
        for m in _SNAPSHOT_ENTRY.finditer(txt.read_text()):
            first = m.group("first")
            rows.append({"producer_id": int(m.group("pid")), "producer_epoch": int(m.group("epoch")),
                         "coordinator_epoch": int(m.group("coord")), "last_sequence": int(m.group("seq")),
                         "last_timestamp": int(m.group("ts")),
                         "current_transaction_start_offset": None if first.endswith(".empty")
                         else int(first[len("OptionalLong["):-1])})
        out[partition] = rows
    return out


def expected_answers(sc: Scenario) -> tuple[dict, dict, list, dict]:
    """(list_offsets partitions, describe_producers, list_transactions, describe_transactions) to match."""
    offsets = sc.broker("list_offsets")["partitions"]
    producers = sc.broker("describe_producers")
    listed = sc.broker("list_transactions")
    described = sc.broker("describe_transactions")
    if sc.name != "prepare":
        return offsets, producers, listed, described
    loaded = loaded_transactions(sc.log)
    assert set(loaded) == {"tx-P", "tx-R"}, loaded  # the README: PrepareCommit and PrepareAbort, completed at startup
    snaps = load_snapshots(sc.answers)
    assert set(snaps) == {"pq-0", "pq-1"}
    for tid, meta in loaded.items():
        described[tid] = {**described[tid], **meta}
    listed = [{**row, "state": loaded[row["transactional_id"]]["state"]} if row["transactional_id"] in loaded
              else row for row in listed]
    for tp, rows in snaps.items():
        producers[tp] = [{**r, "coordinator_epoch": None if r["coordinator_epoch"] == -1 else r["coordinator_epoch"]}
                         for r in rows]
    initial = {m.group("tp"): int(m.group("hw")) for m in _INITIAL_HW.finditer(sc.log)}
    for tp, row in offsets.items():
        hw = initial[tp]
        opened = [r["current_transaction_start_offset"] for r in producers.get(tp, [])
                  if r["current_transaction_start_offset"] is not None]
        offsets[tp] = {**row, "high_watermark": hw, "last_stable_offset": min(opened) if opened else hw}
    return offsets, producers, listed, described


# ----------------------------------------------------------------------------- the answers


def test_lag(scenario):
    offsets, _producers, _listed, _described = expected_answers(scenario)
    rows = {f"{r['topic']}-{r['partition']}": r for r in scenario.run("lag")}
    scenario.check("partitions", sorted(offsets), sorted(rows))
    for tp, want in sorted(offsets.items()):
        got = rows.get(tp, {})
        scenario.check(f"{tp} log start", want["earliest"], got.get("log_start_offset"))
        scenario.check(f"{tp} high watermark", want["high_watermark"], got.get("high_watermark"))
        scenario.check(f"{tp} LSO", want["last_stable_offset"], got.get("lso"))
    scenario.done("lag")


def test_describe_producers(scenario):
    _offsets, producers, _listed, _described = expected_answers(scenario)
    for tp, want_rows in sorted(producers.items()):
        topic, _, number = tp.rpartition("-")
        got = {r["producer_id"]: r for r in scenario.run("describe-producers", "--topic", topic, "--partition", number,
                                                         "--now", str(scenario.now))}
        want = {r["producer_id"]: r for r in want_rows}
        scenario.check(f"{tp} producer ids", sorted(want), sorted(got))
        for pid in sorted(set(want) & set(got)):
            w, g = want[pid], got[pid]
            scenario.check(f"{tp} {pid} epoch", w["producer_epoch"], g["producer_epoch"])
            scenario.check(f"{tp} {pid} last sequence", w["last_sequence"], g["last_sequence"])
            scenario.check(f"{tp} {pid} last timestamp", w["last_timestamp"], g["last_timestamp_ms"])
            # the one documented mapping: the Java Admin client's empty coordinator epoch is the wire's -1
            scenario.check(f"{tp} {pid} coordinator epoch", w["coordinator_epoch"],
                           None if g["coordinator_epoch"] == -1 else g["coordinator_epoch"])
            scenario.check(f"{tp} {pid} txn start offset", w["current_transaction_start_offset"],
                           g["current_txn_first_offset"])
    scenario.done("describe-producers")


def test_list_and_describe_transactions(scenario):
    _offsets, _producers, listed, described = expected_answers(scenario)
    got = {r["transactional_id"]: r for r in scenario.run("list-txn")}
    want = {r["transactional_id"]: r for r in listed}
    scenario.check("transactional ids", sorted(want), sorted(got))
    for tid in sorted(set(want) & set(got)):
        scenario.check(f"list {tid} producer id", want[tid]["producer_id"], got[tid]["producer_id"])
        scenario.check(f"list {tid} state", want[tid]["state"], got[tid]["state"])
    for tid, w in sorted(described.items()):
        rows = scenario.run("describe-txn", tid, code=(0, 1))
        scenario.check(f"describe {tid} found", True, len(rows) == 1)
        if len(rows) != 1:
            continue
        g = rows[0]
        scenario.check(f"describe {tid} state", w["state"], g["state"])
        scenario.check(f"describe {tid} producer id", w["producer_id"], g["producer_id"])
        scenario.check(f"describe {tid} producer epoch", w["producer_epoch"], g["producer_epoch"])
        scenario.check(f"describe {tid} timeout", w["transaction_timeout_ms"], g["timeout_ms"])
        start = g["start_timestamp_ms"] if g["start_timestamp_ms"] is not None else -1
        scenario.check(f"describe {tid} start", w["transaction_start_time_ms"], start)
        scenario.check(f"describe {tid} partitions", sorted(w["topic_partitions"]), sorted(g["partitions"]))
    scenario.done("list-txn/describe-txn")


def test_find_hanging(scenario):
    files = sorted((scenario.answers / "tools").glob("find-hanging-broker1*.txt"))
    assert files
    for f in files:
        max_timeout = ["--max-transaction-timeout", "0"] if "maxto0" in f.name else []
        want = sorted((r[0], int(r[1]), int(r[2]), int(r[3]), int(r[5]))
                      for r in (line.split() for line in f.read_text().splitlines()[1:]) if r)
        got = sorted((r["topic"], r["partition"], r["producer_id"], r["producer_epoch"], r["first_offset"])
                     for r in scenario.run("find-hanging", "--now", str(scenario.now), *max_timeout, code=(0, 1))
                     if r["kind"] in HANGING_KINDS)
        scenario.check(f"{f.name} rows", len(want), len(got))
        for i, (w, g) in enumerate(zip(want, got, strict=False)):
            for name, a, b in zip(("topic", "partition", "producer id", "epoch", "start offset"), w, g, strict=True):
                scenario.check(f"{f.name} row {i} {name}", a, b)
    scenario.done("find-hanging")


# ----------------------------------------------------------------------------- verify's startup rows

_RECOVERED = re.compile(r"\[LogLoader partition=(?P<tp>\S+), dir=[^\]]*\] Recovering unflushed segment (?P<base>\d+)\.")
_TRUNCATED = re.compile(r"\[LogLoader partition=(?P<tp>\S+), dir=[^\]]*\] Corruption found in segment (?P<base>\d+), "
                        r"truncating to offset (?P<to>\d+)")
_DELETED_SNAPSHOT = re.compile(r"Deleted producer state snapshot \S*/(?P<tp>[^/\s]+)/(?P<file>\d{20}\.snapshot)")
_NEXT_OFFSET = re.compile(r"\(next offset (\d+)\)")


def test_verify_startup_rows(scenario):
    recovered = {(m["tp"], int(m["base"])) for m in _RECOVERED.finditer(scenario.log)}
    truncated = {(m["tp"], int(m["base"]), int(m["to"])) for m in _TRUNCATED.finditer(scenario.log)}
    # Only snapshots that were on disk before the restart (the broker deletes its own load-time ones too).
    deleted = {(m["tp"], m["file"]) for m in _DELETED_SNAPSHOT.finditer(scenario.log)
               if (scenario.dir / m["tp"] / m["file"]).is_file()}
    rows = [r for r in scenario.run("verify", code=(0, 1)) if r["check"].startswith("startup-")]

    def where(row: dict) -> tuple[str, str]:
        path = Path(row["file"])
        return (path.parent.name, path.name) if path.suffix else (path.name, "")

    got_recovered = {(where(r)[0], int(where(r)[1][:20])) for r in rows if r["check"] == "startup-recover-segment"}
    got_truncated = {(where(r)[0], int(where(r)[1][:20]), int(_NEXT_OFFSET.search(r["message"]).group(1)))
                     for r in rows if r["check"] == "startup-truncate-segment"}
    got_deleted = {where(r) for r in rows if r["check"] == "startup-delete-snapshot"}
    got_deleted_segments = [r["file"] for r in rows if r["check"] == "startup-delete-segment"]
    for what, want, got in (("recovered segment", recovered, got_recovered),
                            ("truncated segment", truncated, got_truncated),
                            ("deleted snapshot", deleted, got_deleted)):
        for item in sorted(want | got):
            scenario.check(f"{what} {item}", item in want, item in got)
    scenario.check("deleted segments", [], got_deleted_segments)  # no log line deletes a segment in these dirs
    scenario.done(f"verify ({len(recovered)} recovered, {len(truncated)} truncated, {len(deleted)} snapshots deleted)")


# ----------------------------------------------------------------------------- the rules these rest on


def test_idle_needs_the_broker_config(real_kafka):
    """Without --broker-config (or --producer-id-expiration-ms) the idle producers are Kafka's default
    24 hours from expiring; with the restart's server.properties they are gone, as the broker has them."""
    sc = Scenario(real_kafka, "idle")
    want = sorted(r["producer_id"] for r in sc.broker("describe_producers")["ip-0"])
    base = ["describe-producers", "--topic", "ip", "--partition", "0", "--now", str(sc.now), "--log-dir", str(sc.dir),
            "--format", "json"]
    plain = CliRunner().invoke(app, base)
    assert plain.exit_code == 0, plain.stderr
    assert sorted(r["producer_id"] for r in json.loads(plain.stdout)) != want
    configured = CliRunner().invoke(app, [*base, "--broker-config", str(sc.config)])
    assert configured.exit_code == 0, configured.stderr
    assert sorted(r["producer_id"] for r in json.loads(configured.stdout)) == want
    assert f"producer.id.expiration.ms=60000 ({sc.config})" in configured.stderr
    flag = CliRunner().invoke(app, [*base, "--broker-config", str(sc.config), "--producer-id-expiration-ms",
                                    "86400000"])
    assert sorted(r["producer_id"] for r in json.loads(flag.stdout)) == sorted(r["producer_id"] for r in
                                                                                json.loads(plain.stdout))
    assert "producer.id.expiration.ms=86400000 (flag --producer-id-expiration-ms)" in flag.stderr


def test_crc_clean_batch_is_loaded_and_said(real_kafka):
    """A clean shutdown recovers nothing and TransactionStateManager.loadTransactionMetadata checks no
    CRC: the flipped batch's record counts, and a warning names it."""
    sc = Scenario(real_kafka, "crc-clean")
    result = CliRunner().invoke(app, ["describe-txn", "tx-open-O", "--log-dir", str(sc.dir), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["partitions"] == ["cx-0", "cx-1"]
    assert "has a bad CRC" in result.stderr and "loadTransactionMetadata" in result.stderr


@pytest.mark.parametrize("name", ["prepare", "crc-clean", "powercut"])
def test_scan_dataflow_loads_the_coordinator_as_the_offline_replay(real_kafka, name):
    """``kafkatx scan``'s executors read ``__transaction_state`` through the same window (TxnLoadWindow):
    its coordinator, folded as the driver folds it (without Spark), is the offline one."""
    import pickle

    import msgspec
    import pyarrow as pa

    from kafkatx.coordinator.state import TransactionMetadata
    from kafkatx.coordinator.state_manager import replay_transaction_log, txn_state_partitions_count
    from kafkatx.spark import tasks as X
    from kafkatx.spark.job import plan_scan

    sc = Scenario(real_kafka, name)
    plan = plan_scan([sc.dir])
    numbers = tuple(n for n, _p in plan.txn_state_partitions)
    n = txn_state_partitions_count(numbers, None, [])
    infos = {i.partition_path: i for i in plan.infos}
    rows = [r for _num, path in plan.txn_state_partitions
            for b in X.fold_coordinator([pa.record_batch({"work": [msgspec.msgpack.encode(
                X.TxnPartitionWork(infos[path], n))]})], now=0) for r in b.to_pylist()]
    transactions = {r["tid"]: TransactionMetadata.from_fields(r["tid"], pickle.loads(r["fields"]), offset=r["offset"],
                                                              coordinator_partition=r["fold"])
                    for r in rows if r["kind"] == X.ID and not r["tomb"] and r["home"]}
    offline_coord = replay_transaction_log([sc.dir])
    assert [r for r in rows if r["kind"] == X.CSKIP] == offline_coord.skipped == []
    assert transactions == dict(offline_coord.transactions.items())
    assert [r["text"] for r in rows if r["kind"] == X.FINDING] == \
        [f"{f.severity}: {f.message}" for f in offline_coord.findings]
    if name == "prepare":
        assert {t: m.state.kafka_name for t, m in transactions.items()} == {
            "tx-P": "PrepareCommit", "tx-R": "PrepareAbort", "tx-S": "CompleteCommit"}
