"""kafkatx's offline answers against the answers a real Kafka broker gave on the same log dirs.

For each dir a genuine broker wrote (``3.8.0/clean``, ``3.8.0/crashed`` after ``kill -9``, and the
4.0 TV2 ``tv2-clean``) the broker's own answers were recorded live just before it stopped
(``answers/<dir>/broker/*.json`` through the Java ``Admin`` client, ``answers/<dir>/tools/*.txt``
through ``kafka-transactions.sh`` and ``GetOffsetShell``). kafkatx, reading only the files, must
give the same values field for field:

* ``lag``: ListOffsets earliest / latest read_uncommitted / latest read_committed of every
  partition the broker has (the same set: ``__cluster_metadata`` is none of them);
* ``list-txn`` and ``describe-txn`` of every transactional id (ListTransactions,
  DescribeTransactions, ``kafka-transactions.sh list`` / ``describe``);
* ``describe-producers`` of every partition (DescribeProducers, and the tool's table);
* ``find-hanging`` at the recorded clock with ``--max-transaction-timeout`` 15 minutes (the tool's
  default) and 0, as ``kafka-transactions.sh find-hanging --broker-id 1`` answered.

The one mapping (docs/semantics.md, "Real-broker answers"): the Java ``Admin`` client turns the wire's
coordinator epoch -1 into an empty value (``null`` in the JSON); kafkatx, like the wire and the
tool, says -1. Not compared: the tool's ``TransactionDurationMs`` (its own wall clock when it ran,
which was not recorded). Each test names every differing field; the fields compared per dir are
counted and printed at the end of the run (``real-broker fields compared``).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kafkatx.session import offline
from kafkatx.storage.log_dir import LogDir

DIRS = ["3.8.0/clean", "3.8.0/crashed", "4.0-tv2/tv2-clean"]
FIFTEEN_MINUTES = 900_000  # kafka-transactions.sh find-hanging's default --max-transaction-timeout

# dir -> [fields compared, differences]; printed by conftest's terminal summary
FIELD_COUNTS: dict[str, list[int]] = defaultdict(lambda: [0, 0])


class Fields:
    """Compares broker values with kafkatx's, one field at a time, keeping every difference."""

    def __init__(self, name: str, source: str) -> None:
        self.name, self.source = name, source
        self.compared = 0
        self.diffs: list[str] = []

    def eq(self, where: str, field: str, broker: Any, ours: Any) -> None:
        self.compared += 1
        if broker != ours:
            self.diffs.append(f"{self.source}: {where}: {field}: broker {broker!r}, kafkatx {ours!r}")

    def check(self) -> None:
        counts = FIELD_COUNTS[self.name]
        counts[0] += self.compared
        counts[1] += len(self.diffs)
        assert self.compared > 0, f"{self.source}: nothing compared"
        assert not self.diffs, f"{len(self.diffs)} difference(s) of {self.compared} fields:\n" + "\n".join(self.diffs)


@pytest.fixture(scope="module", params=DIRS)
def real(request, real_kafka):
    name = request.param
    path = real_kafka.extract(name)
    answers = real_kafka.answers(name)
    if not (answers / "broker").is_dir():
        pytest.skip(f"no recorded broker answers for {name}: {answers}")
    clock = real_kafka.answer_json(name, "list_offsets")["recorded_at_ms"]
    return name, LogDir(path), answers, clock


def _broker(answers: Path, what: str) -> Any:
    return json.loads((answers / "broker" / f"{what}.json").read_text())


def _tool_table(text: str) -> list[dict[str, str]]:
    """One ``kafka-transactions.sh`` table (tab-separated, padded; header first) as rows of cells."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [c.strip() for c in lines[0].split("\t")]
    return [dict(zip(header, (c.strip() for c in line.split("\t")), strict=False)) for line in lines[1:]]


def _tool_sections(text: str) -> dict[str, list[dict[str, str]]]:
    """A tool output made of ``== <name>`` sections, each one table."""
    out: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"^== ", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        out[head.strip()] = _tool_table(body)
    return out


def _opt(cell: str) -> int | None:
    """The tool prints an absent value as ``None``."""
    return None if cell == "None" else int(cell)


def _wire_coordinator_epoch(value: int | None) -> int:
    """The documented mapping: the Java Admin client's empty coordinator epoch is the wire's -1."""
    return -1 if value is None else value


# ----------------------------------------------------------------------------- lag / ListOffsets

def test_lag_equals_list_offsets(real):
    name, log_dir, answers, _clock = real
    f = Fields(name, "list_offsets.json")
    broker = _broker(answers, "list_offsets")["partitions"]
    rows = {f"{r.topic}-{r.partition}": r for r in offline.lag([log_dir]).rows}
    f.eq("lag", "partitions", sorted(broker), sorted(rows))
    for tp, b in sorted(broker.items()):
        r = rows.get(tp)
        if r is None:
            continue
        f.eq(tp, "topic", b["topic"], r.topic)
        f.eq(tp, "partition", b["partition"], r.partition)
        f.eq(tp, "earliest -> log_start_offset", b["earliest"], r.log_start_offset)
        f.eq(tp, "high_watermark", b["high_watermark"], r.high_watermark)
        f.eq(tp, "last_stable_offset -> lso", b["last_stable_offset"], r.lso)
        f.eq(tp, "lso_lag -> lag", b["lso_lag"], r.lag)
    f.check()


def test_lag_equals_get_offset_shell(real):
    name, log_dir, answers, _clock = real
    f = Fields(name, "tools/get-offsets-latest.txt")
    rows = {(r.topic, r.partition): r for r in offline.lag([log_dir]).rows}
    lines = (answers / "tools" / "get-offsets-latest.txt").read_text().split()
    assert lines, "GetOffsetShell printed nothing"
    for line in lines:
        topic, partition, offset = line.rsplit(":", 2)
        r = rows.get((topic, int(partition)))
        f.eq(f"{topic}-{partition}", "latest -> high_watermark", int(offset), r.high_watermark if r else None)
    f.check()


# ----------------------------------------------------------------------------- transactions

def test_list_txn_equals_list_transactions(real):
    name, log_dir, answers, _clock = real
    ours = {r.transactional_id: r for r in offline.list_transactions([log_dir]).rows}
    f = Fields(name, "list_transactions.json")
    broker = _broker(answers, "list_transactions")
    f.eq("list-txn", "transactional ids", sorted(b["transactional_id"] for b in broker), sorted(ours))
    for b in broker:
        r = ours.get(b["transactional_id"])
        if r is not None:
            f.eq(b["transactional_id"], "producer_id", b["producer_id"], r.producer_id)
            f.eq(b["transactional_id"], "state", b["state"], r.state)
    f.check()

    t = Fields(name, "tools/list.txt")
    table = _tool_table((answers / "tools" / "list.txt").read_text())
    t.eq("list-txn", "transactional ids", sorted(row["TransactionalId"] for row in table), sorted(ours))
    for row in table:
        r = ours.get(row["TransactionalId"])
        if r is not None:
            t.eq(row["TransactionalId"], "Coordinator -> coordinator_id", int(row["Coordinator"]), r.coordinator_id)
            t.eq(row["TransactionalId"], "ProducerId", int(row["ProducerId"]), r.producer_id)
            t.eq(row["TransactionalId"], "TransactionState", row["TransactionState"], r.state)
    t.check()


def test_describe_txn_equals_describe_transactions(real):
    name, log_dir, answers, _clock = real
    broker = _broker(answers, "describe_transactions")
    tool = _tool_sections((answers / "tools" / "describe.txt").read_text())
    f = Fields(name, "describe_transactions.json")
    t = Fields(name, "tools/describe.txt")
    assert broker, "no transactional id described"
    f.eq("describe-txn", "transactional ids", sorted(broker),
         sorted(r.transactional_id for r in offline.list_transactions([log_dir]).rows))
    t.eq("describe-txn", "transactional ids", sorted(tool), sorted(broker))
    for tid, b in sorted(broker.items()):
        rows = offline.describe_transaction([log_dir], tid).rows
        f.eq(tid, "described", True, bool(rows))
        if not rows:
            continue
        r = rows[0].transaction
        f.eq(tid, "coordinator_id", b["coordinator_id"], r.coordinator_id)
        f.eq(tid, "state", b["state"], r.state)
        f.eq(tid, "producer_id", b["producer_id"], r.producer_id)
        f.eq(tid, "producer_epoch", b["producer_epoch"], r.producer_epoch)
        f.eq(tid, "transaction_timeout_ms -> timeout_ms", b["transaction_timeout_ms"], r.timeout_ms)
        f.eq(tid, "transaction_start_time_ms -> start_timestamp_ms", b["transaction_start_time_ms"],
             r.start_timestamp_ms)
        # DescribeTransactions' partitions are a set (the coordinator's HashSet order); ours are sorted
        f.eq(tid, "topic_partitions -> partitions", sorted(b["topic_partitions"]), r.partitions)
        (row,) = tool.get(tid, [{}])
        if not row:
            t.eq(tid, "described", True, False)
            continue
        t.eq(tid, "CoordinatorId", int(row["CoordinatorId"]), r.coordinator_id)
        t.eq(tid, "TransactionalId", row["TransactionalId"], r.transactional_id)
        t.eq(tid, "ProducerId", int(row["ProducerId"]), r.producer_id)
        t.eq(tid, "ProducerEpoch", int(row["ProducerEpoch"]), r.producer_epoch)
        t.eq(tid, "TransactionState", row["TransactionState"], r.state)
        t.eq(tid, "TransactionTimeoutMs", int(row["TransactionTimeoutMs"]), r.timeout_ms)
        t.eq(tid, "CurrentTransactionStartTimeMs", int(row["CurrentTransactionStartTimeMs"]), r.start_timestamp_ms)
        cell = row.get("TopicPartitions", "")
        t.eq(tid, "TopicPartitions", sorted(p for p in cell.split(",") if p), r.partitions)
    f.check()
    t.check()


# ----------------------------------------------------------------------------- producers

def _producers(log_dir: LogDir, tp: str, clock: int) -> dict[int, Any]:
    topic, _, number = tp.rpartition("-")
    rows = offline.describe_producers([log_dir], topic=topic, partition=int(number), now=clock).rows
    return {r.producer_id: r for r in rows}


def test_describe_producers_equals_describe_producers(real):
    name, log_dir, answers, clock = real
    broker = _broker(answers, "describe_producers")
    f = Fields(name, "describe_producers.json")
    f.eq("describe-producers", "partitions",
         sorted(broker), sorted(f"{r.topic}-{r.partition}" for r in offline.lag([log_dir]).rows))
    for tp, producers in sorted(broker.items()):
        ours = _producers(log_dir, tp, clock)
        f.eq(tp, "producer ids", sorted(b["producer_id"] for b in producers), sorted(ours))
        for b in producers:
            r = ours.get(b["producer_id"])
            if r is None:
                continue
            where = f"{tp} producer {b['producer_id']}"
            f.eq(where, "producer_epoch", b["producer_epoch"], r.producer_epoch)
            f.eq(where, "last_sequence", b["last_sequence"], r.last_sequence)
            f.eq(where, "last_timestamp -> last_timestamp_ms", b["last_timestamp"], r.last_timestamp_ms)
            f.eq(where, "coordinator_epoch (null = -1)", _wire_coordinator_epoch(b["coordinator_epoch"]),
                 r.coordinator_epoch)
            f.eq(where, "current_transaction_start_offset -> current_txn_first_offset",
                 b["current_transaction_start_offset"], r.current_txn_first_offset)
    f.check()

    t = Fields(name, "tools/describe-producers.txt")
    sections = _tool_sections((answers / "tools" / "describe-producers.txt").read_text())
    assert sections, "kafka-transactions.sh describe-producers printed nothing"
    for head, table in sorted(sections.items()):
        topic, number = head.rsplit(":", 1)
        tp = f"{topic}-{number}"
        ours = _producers(log_dir, tp, clock)
        t.eq(tp, "producer ids", sorted(int(row["ProducerId"]) for row in table), sorted(ours))
        for row in table:
            r = ours.get(int(row["ProducerId"]))
            if r is None:
                continue
            where = f"{tp} producer {row['ProducerId']}"
            t.eq(where, "ProducerEpoch", int(row["ProducerEpoch"]), r.producer_epoch)
            t.eq(where, "LatestCoordinatorEpoch", int(row["LatestCoordinatorEpoch"]), r.coordinator_epoch)
            t.eq(where, "LastSequence", int(row["LastSequence"]), r.last_sequence)
            t.eq(where, "LastTimestamp", int(row["LastTimestamp"]), r.last_timestamp_ms)
            t.eq(where, "CurrentTransactionStartOffset", _opt(row["CurrentTransactionStartOffset"]),
                 r.current_txn_first_offset)
    t.check()


# ----------------------------------------------------------------------------- find-hanging

@pytest.mark.parametrize(("tool_file", "max_timeout_ms"), [
    ("find-hanging-broker1.txt", FIFTEEN_MINUTES),
    ("find-hanging-broker1-maxtimeout0.txt", 0),
])
def test_find_hanging_equals_the_tool(real, tool_file, max_timeout_ms):
    name, log_dir, answers, clock = real
    f = Fields(name, f"tools/{tool_file}")
    table = _tool_table((answers / "tools" / tool_file).read_text())
    rows = offline.find_hanging([log_dir], now=clock, max_timeout_ms=max_timeout_ms).rows

    def key(topic: str, partition: int, producer_id: int) -> str:
        return f"{topic}-{partition} producer {producer_id}"

    theirs = {key(r["Topic"], int(r["Partition"]), int(r["ProducerId"])): r for r in table}
    ours = {key(r.topic, r.partition, r.producer_id): r for r in rows}
    f.eq(f"find-hanging --max-transaction-timeout {max_timeout_ms} --now {clock}", "rows", sorted(theirs),
         sorted(ours))
    for k, b in sorted(theirs.items()):
        r = ours.get(k)
        if r is not None:
            f.eq(k, "ProducerEpoch", int(b["ProducerEpoch"]), r.producer_epoch)
            f.eq(k, "StartOffset", int(b["StartOffset"]), r.first_offset)
    f.check()


def test_describe_producers_table_prints_the_tools_cells(real):
    """``kafkatx describe-producers``' table prints the two cells Kafka has sentinels for as
    ``kafka-transactions.sh describe-producers`` printed them on the real broker: the
    CurrentTransactionStartOffset of a producer with no open transaction is ``None`` (-1 on the
    wire), an unknown LatestCoordinatorEpoch is ``-1``. (JSON keeps null and -1: cli.md.)"""
    from typer.testing import CliRunner

    from kafkatx.cli.main import app

    name, log_dir, answers, clock = real
    t = Fields(name, "tools/describe-producers.txt")
    sections = _tool_sections((answers / "tools" / "describe-producers.txt").read_text())
    for head, table in sorted(sections.items()):
        topic, number = head.rsplit(":", 1)
        out = CliRunner().invoke(app, ["describe-producers", "--log-dir", str(log_dir.path), "--topic", topic,
                                       "--partition", number, "--now", str(clock), "--format", "text"],
                                 env={"COLUMNS": "120"})
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        header = re.split(r"\s{2,}", lines[1].strip())
        assert header[2] == "coord epoch" and header[-1] == "open txn from", header
        ours = {}
        for line in lines[2:]:
            if not line.strip():
                break
            cells = re.split(r"\s{2,}", line.strip())
            ours[int(cells[0])] = (cells[2], cells[-1])
        for row in table:
            t.eq(f"{topic}-{number} producer {row['ProducerId']}", "LatestCoordinatorEpoch, "
                 "CurrentTransactionStartOffset cells", (row["LatestCoordinatorEpoch"],
                                                        row["CurrentTransactionStartOffset"]),
                 ours.get(int(row["ProducerId"])))
    t.check()


# ----------------------------------------------------------------------------- list-txn's filters (Kafka 4.1)

def test_list_txn_filters_as_the_broker_would(real):
    """ListTransactions' filters over the real broker's transactions
    (TransactionStateManager.listTransactionStates), the expectations from its recorded answers:

    - ``--transactional-id-pattern`` must match the whole id (KIP-1152): ``tx`` lists nothing,
      ``tx.*`` every recorded id, ``tx-hang-.`` only tx-hang-F;
    - ``--producer-id`` (ProducerIdFilters): the ids ListTransactions recorded with that producer id;
    - ``--duration-filter`` (KIP-994) at the recording clock: the ids whose recorded
      transaction_start_time_ms is more than the duration before it (the boundary one excluded).
    """
    name, log_dir, answers, clock = real
    listed = _broker(answers, "list_transactions")
    described = _broker(answers, "describe_transactions")
    every = sorted(t["transactional_id"] for t in listed)

    def ids(**kw: Any) -> list[str]:
        return sorted(r.transactional_id for r in offline.list_transactions([log_dir], now=clock, **kw).rows)

    assert ids(pattern="tx") == []
    assert ids(pattern="tx.*") == every
    assert ids(pattern="tx-hang-.") == [t for t in every if t.startswith("tx-hang-")] and ids(pattern="tx-hang-.")
    for t in listed:
        assert ids(producer_ids=[t["producer_id"]]) == sorted(
            u["transactional_id"] for u in listed if u["producer_id"] == t["producer_id"])
    ages = sorted(clock - d["transaction_start_time_ms"] for d in described.values())
    for duration in (-1, 0, ages[0], ages[len(ages) // 2], ages[-1]):
        expected = sorted(tid for tid, d in described.items()
                          if duration < 0 or clock - d["transaction_start_time_ms"] > duration)
        assert ids(duration_ms=duration) == expected, duration
