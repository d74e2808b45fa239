"""The Source protocol (kafkatx.cluster.source) and the Source panel's flags declared once
(kafkatx.cli.options.source_options).

Offline answers are compared with the library the source stands for (kafkatx.session.offline on the
same dirs, whose own answers the txn and real-broker tests hold to Kafka); online, the cluster
service is replaced by a recorder, so what is checked is the routing: which service call, with
which arguments, over one connection closed after the question.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kafkatx.cli import options as opt
from kafkatx.cluster import service
from kafkatx.cluster.source import OfflineSource, OnlineSource, Source, resolve_source
from kafkatx.errors import UsageError
from kafkatx.rows import Report
from kafkatx.session import offline

REPO = Path(__file__).resolve().parents[2]
HANGING = REPO / "fixtures" / "hanging"
NOW = 1_700_007_200_000
QUESTIONS = ("list_transactions", "describe_transaction", "describe_producers", "hanging_transactions", "lag", "verify",
             "timeline", "offline_only", "for_broker", "broker_partitions")


@pytest.mark.parametrize("question", QUESTIONS)
def test_both_sources_answer_every_question_with_the_protocols_parameters(question):
    wanted = inspect.signature(getattr(Source, question))
    for cls in (OfflineSource, OnlineSource):
        got = inspect.signature(getattr(cls, question))
        assert list(got.parameters) == list(wanted.parameters), (cls.__name__, question)


def test_offline_answers_are_the_librarys():
    source = resolve_source([HANGING], None)
    assert isinstance(source, OfflineSource)
    assert source.hanging_transactions(now=NOW).rows == offline.find_hanging((HANGING,), now=NOW).rows
    assert source.lag(now=NOW).rows == offline.lag((HANGING,), now=NOW).rows
    assert source.list_transactions().rows == offline.list_transactions((HANGING,)).rows
    got = source.describe_producers(topic="orders", partition=0, now=NOW).rows
    assert got and got == offline.describe_producers((HANGING,), topic="orders", partition=0, now=NOW).rows
    assert source.offline_only("unused") is source
    assert source.broker_partitions(None) is None


class _Backend:
    closed = 0

    def close(self):
        _Backend.closed += 1


def test_online_questions_go_to_the_service_over_one_connection_each(monkeypatch):
    backend = _Backend()
    calls = []
    monkeypatch.setattr(service, "connect", lambda **kw: calls.append(("connect", kw)) or backend)
    monkeypatch.setattr(service, "lag", lambda b, **kw: calls.append(("lag", kw)) or ["row"])
    monkeypatch.setattr(service, "list_transactions", lambda b, **kw: calls.append(("list", kw)) or [])
    monkeypatch.setattr(service, "find_hanging", lambda b, **kw: calls.append(("hanging", kw)) or [])
    monkeypatch.setattr(service, "describe_transaction", lambda b, tid, report=None: calls.append(("describe", tid)))
    source = resolve_source(None, "broker:9092", timeout=7.0)
    assert isinstance(source, OnlineSource)
    _Backend.closed = 0
    assert source.lag(topic="t", now=NOW).rows == ["row"]
    # Kafka's state spelling for the broker's filter (ListTransactionsRequest), sorted
    source.list_transactions(states=["ongoing", "PrepareAbort"], pattern="a.*")
    source.hanging_transactions(now=NOW)  # no timeout flag: Kafka's default transaction.max.timeout.ms (15 min)
    assert source.describe_transaction("tx").rows == []  # unknown id: no row
    assert calls == [
        ("connect", {"bootstrap_server": "broker:9092", "command_config": None, "profile": None, "timeout_s": 7.0}),
        ("lag", {"topic": "t", "report": Report()}),  # each question's report goes down with it
        ("connect", {"bootstrap_server": "broker:9092", "command_config": None, "profile": None, "timeout_s": 7.0}),
        ("list", {"states": ["Ongoing", "PrepareAbort"], "pattern": "a.*", "producer_ids": None,
                  "duration_ms": None, "now_ms": None, "report": Report()}),
        ("connect", {"bootstrap_server": "broker:9092", "command_config": None, "profile": None, "timeout_s": 7.0}),
        ("hanging", {"max_timeout_ms": 900_000, "now_ms": NOW, "topic": None, "report": Report()}),
        ("connect", {"bootstrap_server": "broker:9092", "command_config": None, "profile": None, "timeout_s": 7.0}),
        ("describe", "tx"),
    ]
    assert _Backend.closed == 4


def test_online_refuses_what_only_files_can_answer():
    source = OnlineSource(bootstrap_server="b:9092")
    for ask in (lambda: source.verify(), lambda: source.timeline(now=NOW),
                lambda: source.for_broker(1), lambda: source.broker_partitions(1)):
        with pytest.raises(UsageError):
            ask()
    with pytest.raises(UsageError, match="^timeline reads"):
        source.offline_only("timeline reads the partitions' log files")
    assert source.for_broker(None) is source and source.broker_partitions(None) is None


def test_neither_or_both_sources_is_a_usage_error():
    with pytest.raises(UsageError, match="no source"):
        resolve_source(None, None)
    with pytest.raises(UsageError, match="not both"):
        resolve_source([HANGING], "b:9092")


def _probe_app(offline_only: bool):
    app = typer.Typer()
    seen = []

    @app.command()
    @opt.source_options(offline_only=offline_only)
    def probe(before: str = "x", flags: opt.SourceOptions = opt.SOURCE, after: int = 0) -> None:
        """A command with the source flags between two of its own."""
        seen.append((before, flags, after))

    return app, seen


def test_source_options_declares_the_flags_once_in_place_of_the_parameter():
    app, seen = _probe_app(False)
    params = list(inspect.signature(typer.main.get_command(app).callback).parameters)
    assert params == ["before", "log_dir", "bootstrap_server", "command_config", "profile", "timeout",
                      "broker_config", "allow_mixed_clusters", "after"]
    r = CliRunner().invoke(app, ["--log-dir", "a", "--log-dir", "b", "--after", "3", "--broker-config", "s.properties"])
    assert r.exit_code == 0, r.output
    assert seen == [("x", opt.SourceOptions(log_dir=[Path("a"), Path("b")], broker_config=[Path("s.properties")]),
                     3)]
    help_text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    assert all(f in help_text for f in ("--log-dir", "--bootstrap-server", "--command-config", "--profile",
                                        "--timeout", "--broker-config", "--allow-mixed-clusters"))


def test_offline_only_hides_the_online_flags_and_takes_them_to_refuse():
    app, seen = _probe_app(True)
    help_text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    assert "--log-dir" in help_text and "--bootstrap-server" not in help_text and "--profile" not in help_text
    r = CliRunner().invoke(app, ["--bootstrap-server", "b:9092"])
    assert r.exit_code == 0
    (_, flags, _), = seen
    with pytest.raises(UsageError, match="^no online form here$"):
        flags.resolve().offline_only("no online form here")


def test_the_flags_as_given_come_back_in_suggested_commands():
    inv = opt.SourceOptions(log_dir=[Path("/data/kafka")]).invocation(now=NOW)
    assert inv.source == ("--log-dir", "/data/kafka") and inv.rules == ("--now", str(NOW)) and inv.offline
    online = opt.SourceOptions(bootstrap_server="b:9092", profile="prod").invocation()
    assert online.source == ("--bootstrap-server", "b:9092", "--profile", "prod") and not online.offline
