"""docs/alerts.yml and the exporter's exposition, checked by Prometheus's own tools.

Debian's ``prometheus`` package provides ``promtool`` and the ``prometheus`` server (``.ci/run``
installs it when it can); without them these tests skip and say so.

- ``promtool check rules``: the rule file is valid;
- ``promtool test rules``: each alert fires on the series it is meant for, at the time its
  ``for:`` says, and not on the look-alikes (a steady lag is not a growing one);
- ``promtool check metrics``: a real scrape of the exporter's HTTP server passes the linter;
- a real ``prometheus`` server on loopback (own config, temporary storage, free port) scrapes
  the exporter and answers ``kafkatx_partition_lso_lag > 0`` through its HTTP API, with the
  rules loaded and the hanging-transaction alert pending.

The exporter here runs over FakeCluster with ``test_service_fake.scenario()`` at a fixed clock, so
the lag is deterministic (Tansu's T2 departure would make it depend on the broker's quirk);
expected numbers are the hand-worked ones of test_exporter.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkatx.cluster import exporter as lib
from tests.cluster.conftest import _stop, free_port
from tests.cluster.test_exporter import serving
from tests.cluster.test_service_fake import NOW, scenario

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "docs" / "alerts.yml"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package 'prometheus'; .ci/run installs it)")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus server not installed (Debian package 'prometheus'; .ci/run installs it)")


@pytest.fixture
def served() -> Iterator[str]:
    """The exporter's HTTP server on a free loopback port, over the fake scenario; yields host:port."""
    exp = lib.Exporter(lambda: scenario(), interval_s=0.5, clock=lambda: NOW / 1000, notify=lambda line: None)
    with serving(exp) as address:
        assert exp.last is not None and exp.last.success
        yield address


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=60, check=False)


# ----------------------------------------------------------------------------- promtool

@needs_promtool
def test_alert_rules_pass_promtool_check_rules():
    done = run(str(PROMTOOL), "check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


@needs_promtool
def test_check_rules_can_fail(tmp_path):
    """The check above is a real one: a rule with a broken expression is refused."""
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: kafkatx_partition_lso_lag >\n")
    assert run(str(PROMTOOL), "check", "rules", str(bad)).returncode != 0


HANGING_DESCRIPTION = (
    "kafkatx_hanging_transaction_info lists them (topic, partition, producer_id, transactional_id). Look with "
    "`kafkatx find-hanging --bootstrap-server ...`, repair with `kafkatx abort-hanging --bootstrap-server ... "
    "--all` (a plan first; `--execute` to act).")
E = {"job": "kafkatx", "instance": "e:9308"}


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    all_labels = {**E, **labels}
    inner = ",".join(f'{k}="{v}"' for k, v in all_labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _alert(name: str, at: str, *expected: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": list(expected)}


RULE_TESTS: dict[str, Any] = {
    "rule_files": [str(ALERTS)],
    "evaluation_interval": "1m",
    "tests": [
        {   # a hanging transaction appears at minute 2; "for: 1m" -> firing from minute 3
            "interval": "1m",
            "input_series": [
                _series("kafkatx_hanging_transactions", "0 0 1 1 1 1", kind="orphaned"),
                _series("kafkatx_hanging_transactions", "0x5", kind="ghost"),
                # held open by its transaction manager: its own alert, never the critical one
                _series("kafkatx_hanging_transactions", "1x30", kind="prepared-2pc"),
            ],
            "alert_rule_test": [
                _alert("KafkaHangingTransaction", "2m"),
                _alert("KafkaHangingTransaction", "4m", {
                    "exp_labels": {**E, "kind": "orphaned", "severity": "critical"},
                    "exp_annotations": {"summary": "1 hanging Kafka transaction(s) of kind orphaned",
                                        "description": HANGING_DESCRIPTION}}),
            ],
        },
        {   # a 2PC transaction past the max timeout from minute 0: a warning after 15 minutes, not critical
            "interval": "1m",
            "input_series": [_series("kafkatx_hanging_transactions", "1x30", kind="prepared-2pc")],
            "alert_rule_test": [
                _alert("KafkaHangingTransaction", "20m"),
                _alert("KafkaPrepared2pcTransactionOpen", "14m"),
                _alert("KafkaPrepared2pcTransactionOpen", "16m", {
                    "exp_labels": {**E, "severity": "warning"},
                    "exp_annotations": {
                        "summary": "1 two-phase-commit transaction(s) held open by an external transaction manager",
                        "description": "Ask the transaction manager that owns it (a database, Flink) to commit or "
                                       "abort. Do not abort it by hand unless that manager is gone for good: "
                                       "`kafkatx abort-hanging ... --force-terminate ID`."}}),
            ],
        },
        {   # two partitions unanswered from minute 1
            "interval": "1m",
            "input_series": [_series("kafkatx_partitions_unreadable", "0 2 2 2 2 2 2 2 2")],
            "alert_rule_test": [
                _alert("KafkatxPartitionsUnreadable", "5m"),
                _alert("KafkatxPartitionsUnreadable", "6m", {
                    "exp_labels": {**E, "severity": "warning"},
                    "exp_annotations": {
                        "summary": "kafkatx exporter e:9308 could not read 2 partition(s)",
                        "description": "The exporter's stderr names them; `kafkatx lag --bootstrap-server ...` "
                                       "lists them."}}),
            ],
        },
        {   # orders-0's lag grows by 10 a minute from minute 0; steady-0's stays at 5
            "interval": "1m",
            "input_series": [
                _series("kafkatx_partition_lso_lag", "0+10x30", topic="orders", partition="0"),
                _series("kafkatx_partition_lso_lag", "5x30", topic="steady", partition="0"),
            ],
            "alert_rule_test": [
                _alert("KafkaLsoLagGrowing", "10m"),  # active from minute 1, "for: 10m"
                _alert("KafkaLsoLagGrowing", "12m", {
                    "exp_labels": {**E, "topic": "orders", "partition": "0", "severity": "warning"},
                    "exp_annotations": {
                        "summary": "LSO lag of orders-0 is 120 and growing",
                        "description": "read_committed consumers of orders-0 cannot read past the last stable "
                                       "offset. Check `kafkatx lag --bootstrap-server ... --topic orders` and "
                                       "`kafkatx find-hanging --bootstrap-server ...`."}}),
            ],
        },
        {   # the oldest open transaction ages a minute a minute: > 900 s from minute 16, no "for:"
            "interval": "1m",
            "input_series": [
                _series("kafkatx_oldest_open_transaction_age_seconds", "0+60x30", topic="orders", partition="1"),
            ],
            "alert_rule_test": [
                _alert("KafkaOpenTransactionTooOld", "15m"),
                _alert("KafkaOpenTransactionTooOld", "16m", {
                    "exp_labels": {**E, "topic": "orders", "partition": "1", "severity": "warning"},
                    "exp_annotations": {"summary": "A transaction on orders-1 has been open for 16m 0s"}}),
            ],
        },
        {   # the exporter answers but cannot read the cluster from minute 2
            "interval": "1m",
            "input_series": [
                _series("kafkatx_scrape_success", "1 1 0 0 0 0 0 0 0"),
                _series("up", "1x8"),
            ],
            "alert_rule_test": [
                _alert("KafkatxScrapeFailing", "6m"),
                _alert("KafkatxScrapeFailing", "7m", {
                    "exp_labels": {**E, "severity": "warning"},
                    "exp_annotations": {"summary": "kafkatx exporter e:9308 cannot read the cluster",
                                        "description": "The exporter's stderr names the broker and the reason."}}),
                _alert("KafkatxExporterDown", "8m"),
            ],
        },
        {   # the exporter's target is down from minute 1
            "interval": "1m",
            "input_series": [_series("up", "1 0 0 0 0 0 0 0")],
            "alert_rule_test": [
                _alert("KafkatxExporterDown", "5m"),
                _alert("KafkatxExporterDown", "6m", {
                    "exp_labels": {**E, "severity": "warning"},
                    "exp_annotations": {
                        "summary": "kafkatx exporter e:9308 is down: hanging transactions go unnoticed"}}),
            ],
        },
    ],
}


def _age_series_across_a_restart() -> str:
    """The age series two real exporters produce over FakeCluster, one sample a minute: a transaction
    opened at minute 0 (coordinator-known, its start the coordinator's transactionStartTimeMs); the
    first exporter scrapes minutes 0-9, then is down (no samples, promtool's ``_``) until a fresh
    exporter, knowing nothing of the first, scrapes minutes 30-40."""
    from tests.cluster.fakes import FakeCluster
    from tests.cluster.test_exporter import Clock, scrape, tp

    opened = NOW - 10 * 60_000
    cluster = FakeCluster()
    cluster.add_topic("orders", 2)
    cluster.append(("orders", 1), 3, producer_id=1, timestamp=opened - 60_000)  # committed 0..2
    cluster.append(("orders", 1), 2, producer_id=42, transactional=True, timestamp=opened)  # open at 3
    cluster.set_txn("app-slow", producer_id=42, state="Ongoing", partitions=[("orders", 1)], start=opened,
                    timeout_ms=3_600_000)
    key = tp("kafkatx_oldest_open_transaction_age_seconds", "orders", 1)
    values: list[str] = []
    first = lib.Exporter(lambda: cluster, clock=Clock(), notify=lambda line: None)
    second = lib.Exporter(lambda: cluster, clock=Clock(), notify=lambda line: None)
    for minute in range(41):
        exp = first if minute < 10 else second if minute >= 30 else None
        if exp is None:
            values.append("_")
            continue
        exp._clock = Clock(opened / 1000 + minute * 60)
        exp.refresh()
        values.append(f"{scrape(exp)[key]:g}")
    return " ".join(values)


def test_the_restarted_exporters_series_carries_the_transactions_age():
    """What the promtool test below feeds Prometheus, checked first: the fresh exporter's first
    sample (minute 30) is the transaction's 1800 s, not 0."""
    values = _age_series_across_a_restart().split()
    assert values[:10] == [str(60 * m) for m in range(10)]
    assert values[10:30] == ["_"] * 20
    assert values[30:] == [str(60 * m) for m in range(30, 41)]


@needs_promtool
def test_the_age_alert_fires_at_the_first_scrape_of_an_exporter_restarted_late(tmp_path):
    """KafkaOpenTransactionTooOld against the series two real exporters wrote across a restart
    (:func:`_age_series_across_a_restart`): the transaction passed 15 minutes while no exporter
    ran; the alert fires at minute 30, the restarted exporter's first scrape, and not before (no
    series while it was down). An exporter whose age restarted from 0 (or an alert with a ``for:``)
    would have stayed silent until minute 45 or later."""
    tests = {
        "rule_files": [str(ALERTS)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [_series("kafkatx_oldest_open_transaction_age_seconds",
                                     _age_series_across_a_restart(), topic="orders", partition="1")],
            "alert_rule_test": [
                _alert("KafkaOpenTransactionTooOld", "9m"),
                _alert("KafkaOpenTransactionTooOld", "29m"),
                _alert("KafkaOpenTransactionTooOld", "30m", {
                    "exp_labels": {**E, "topic": "orders", "partition": "1", "severity": "warning"},
                    "exp_annotations": {"summary": "A transaction on orders-1 has been open for 30m 0s"}}),
            ],
        }],
    }
    path = tmp_path / "restart_test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    done = run(str(PROMTOOL), "test", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_alert_rules_fire_when_they_should(tmp_path):
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(yaml.safe_dump(RULE_TESTS, sort_keys=False))
    done = run(str(PROMTOOL), "test", "rules", str(tests))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_rule_tests_can_fail(tmp_path):
    """The unit tests above can fail: expecting the lag alert already at minute 5 is refused."""
    broken = json.loads(json.dumps(RULE_TESTS))
    lag_test = next(test for test in broken["tests"]
                    if test["alert_rule_test"][0]["alertname"] == "KafkaLsoLagGrowing")
    lag_test["alert_rule_test"][1]["eval_time"] = "5m"
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(yaml.safe_dump(broken, sort_keys=False))
    assert run(str(PROMTOOL), "test", "rules", str(tests)).returncode != 0


@needs_promtool
def test_a_real_scrape_passes_promtool_check_metrics(served):
    body = urllib.request.urlopen(f"http://{served}/metrics", timeout=5).read().decode()
    assert 'kafkatx_partition_lso_lag{partition="0",topic="orders"} 5.0' in body
    assert 'kafkatx_hanging_transactions{kind="orphaned"} 3.0' in body
    done = run(str(PROMTOOL), "check", "metrics", stdin=body)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


# ----------------------------------------------------------------------------- the server

def _api(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}" if params else f"{base}{path}"
    answer = json.loads(urllib.request.urlopen(url, timeout=5).read().decode())
    assert answer["status"] == "success", answer
    return answer["data"]


@needs_prometheus
def test_prometheus_scrapes_the_exporter_and_sees_the_lag(served, tmp_path):
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "kafkatx", "static_configs": [{"targets": [served]}]}],
    }))
    log = (tmp_path / "prometheus.log").open("wb")
    server = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        lagging: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not (lagging and pending):
            assert server.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            time.sleep(0.5)
            try:
                lagging = _api(base, "/api/v1/query", query="kafkatx_partition_lso_lag > 0")["result"]
                pending = [a for a in _api(base, "/api/v1/alerts")["alerts"]
                           if a["labels"]["alertname"] == "KafkaHangingTransaction"]
            except OSError:
                continue  # not listening yet
        got = {(r["metric"]["topic"], r["metric"]["partition"]): float(r["value"][1]) for r in lagging}
        assert got == {("orders", "0"): 5.0, ("orders", "1"): 7.0, ("__consumer_offsets", "0"): 2.0}
        assert all(r["metric"]["job"] == "kafkatx" and r["metric"]["instance"] == served for r in lagging)
        # "for: 1m" keeps it pending here; one per kind with a hanging transaction
        assert sorted(a["labels"]["kind"] for a in pending) == ["incomplete-markers", "orphaned", "timed-out"]
        assert {a["state"] for a in pending} <= {"pending", "firing"}
        rules = [r for g in _api(base, "/api/v1/rules")["groups"] for r in g["rules"]]
        assert sorted(r["name"] for r in rules) == ["KafkaHangingTransaction", "KafkaLsoLagGrowing",
                                                    "KafkaOpenTransactionTooOld",
                                                    "KafkaPrepared2pcTransactionOpen", "KafkatxExporterDown",
                                                    "KafkatxPartitionsUnreadable", "KafkatxScrapeFailing"]
        assert {r["health"] for r in rules} <= {"ok", "unknown"}
    finally:
        _stop(server)
        log.close()
