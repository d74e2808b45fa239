"""The CLI keeps the promises of cli.md: every documented command, flag and JSON key exists.

cli.md lives in the repository (``docs/cli.md``). A documented command, flag or key that the CLI
lacks is a failure, never an xfail: the contract is what users script against.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from kafkatx.cli.main import app

REPO = Path(__file__).resolve().parents[1]
CLI_MD = REPO / "docs" / "cli.md"
SOURCE_FLAGS = ["--log-dir", "--bootstrap-server", "--command-config", "--profile"]
ROOT_FLAGS = {"--install-completion", "--show-completion", "--help", "--version", "--traceback"}

GROUP = typer.main.get_command(app)
COMMANDS = GROUP.commands  # type: ignore[attr-defined]


def _sections() -> list[tuple[list[str], str, str]]:
    """(commands, heading, body) for each ``### `kafkatx ...``` section of cli.md."""
    if not CLI_MD.exists():
        return []
    text = CLI_MD.read_text()
    out = []
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        names = re.findall(r"`(?:kafkatx )?([a-z][a-z-]+)", heading)
        if heading.startswith("`kafkatx "):
            out.append((names, heading, body))
    return out


SECTIONS = _sections()
DOCUMENTED = sorted({name for names, _, _ in SECTIONS for name in names})

# "`lag` and `find-hanging` also take `--watch [SECONDS]`": flags a section gives to other commands.
_ALSO_TAKE = re.compile(r"((?:`[a-z][a-z-]*`(?:,\s*|\s+and\s+))*`[a-z][a-z-]*`)\s+also\s+takes?\s+`(--[a-z][a-z0-9-]*)")


def _also_take() -> list[tuple[str, str]]:
    """(command, flag) for every "X and Y also take `--flag`" sentence in cli.md."""
    pairs = []
    for _names, _heading, body in SECTIONS:
        for commands, flag in _ALSO_TAKE.findall(" ".join(body.split())):
            pairs += [(name, flag) for name in re.findall(r"`([a-z][a-z-]*)`", commands)]
    return sorted(set(pairs))


ALSO_TAKE = _also_take()


def _flags(command) -> set[str]:
    flags: set[str] = set()
    for param in command.params:
        flags.update(getattr(param, "opts", []))
        flags.update(getattr(param, "secondary_opts", []))
    return flags


def _require(name: str):
    assert name in COMMANDS, f"cli.md documents `kafkatx {name}`, the CLI has no such command"
    return COMMANDS[name]


needs_cli_md = pytest.mark.skipif(not CLI_MD.exists(), reason=f"{CLI_MD} not present")


@needs_cli_md
def test_cli_md_parsed():
    assert {"dump-segment", "dump-index", "dump-snapshot", "dump-txnindex", "list-txn", "find-hanging",
            "abort-hanging", "lag", "verify", "scan"} <= set(DOCUMENTED)


@needs_cli_md
@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_command_exists(name):
    _require(name)


@needs_cli_md
@pytest.mark.parametrize(("names", "heading", "body"), SECTIONS, ids=[" ".join(s[0]) for s in SECTIONS])
def test_documented_flags_exist(names, heading, body):
    commands = [_require(name) for name in names]
    available = set().union(*(_flags(c) for c in commands))
    # flags of Kafka's own tools quoted for comparison ("like `kafka-dump-log.sh --files`") are not ours,
    # nor flags the section gives to other commands ("`lag` and `find-hanging` also take `--watch`")
    prose = re.sub(r"kafka-[\w-]+\.sh[^`]*", "", heading + "\n" + " ".join(body.split()))
    prose = _ALSO_TAKE.sub("", prose)
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", prose))
    missing = sorted(mentioned - available - ROOT_FLAGS)
    assert not missing, f"{', '.join(names)}: cli.md names {missing}, the command lacks them"
    for command in commands:
        assert "--format" in _flags(command), f"{command.name}: every command takes --format"
        if "SOURCE" in heading:
            absent = [f for f in SOURCE_FLAGS if f not in _flags(command)]
            assert not absent, f"{command.name} takes SOURCE but lacks {absent}"


@needs_cli_md
def test_also_take_sentences_parsed():
    assert ("lag", "--watch") in ALSO_TAKE and ("find-hanging", "--watch") in ALSO_TAKE


@needs_cli_md
@pytest.mark.parametrize(("name", "flag"), ALSO_TAKE, ids=[f"{n} {f}" for n, f in ALSO_TAKE])
def test_flags_given_to_other_commands_exist(name, flag):
    assert flag in _flags(_require(name)), f"cli.md says `{name}` takes {flag}; it does not"


# ---------------------------------------------------------------------------------- JSON keys
#
# Every snake_case key cli.md lists for a command (comma-separated lists in backticks, plus the
# single keys it names with "plus `action`", "carries `decoded`", "with `expired: true`") must
# appear in that command's --format json output on the bundled fixtures.

FIXTURES = REPO / "fixtures"
NOW = "1700007200000"
HANGING = FIXTURES / "hanging"
SRC = ["--log-dir", str(HANGING)]
ONLINE = ["--bootstrap-server", "fake:9092"]  # answered by FakeCluster (tests/cluster/fakes.py)


def _fake_cluster(**_kw):
    """A small live cluster for the online runs: one timed-out transaction holding orders-0."""
    from tests.cluster.fakes import FakeCluster

    now = int(NOW)
    c = FakeCluster()
    c.add_topic("orders", 1)
    c.append(("orders", 0), 2, producer_id=7, transactional=True, timestamp=now - 120_000)
    c.set_txn("loader", producer_id=7, state="Ongoing", partitions=[("orders", 0)], start=now - 120_000,
              timeout_ms=60_000)
    return c

# The runs that exercise each section's documented keys (cli.md section id -> argument lists).
KEY_RUNS: dict[str, list[list[str]]] = {
    "dump-segment": [["dump-segment", str(HANGING / "__transaction_state-3" / f"{0:020d}.log"), "--deep-iteration",
                      "--decoder", "transaction-log"],
                     ["dump-segment", str(FIXTURES / "kraft" / "__cluster_metadata-0" / f"{0:020d}.log"),
                      "--deep-iteration", "--decoder", "cluster-metadata"],
                     ["dump-segment", str(FIXTURES / "tiered" / "__remote_log_metadata-0" / f"{0:020d}.log"),
                      "--decoder", "remote-log-metadata"]],
    "dump-index dump-snapshot dump-txnindex": [
        ["dump-index", str(HANGING / "orders-0" / f"{0:020d}.index")],
        ["dump-index", str(HANGING / "orders-0" / f"{0:020d}.timeindex")],
        ["dump-snapshot", str(HANGING / "orders-0" / f"{55:020d}.snapshot")],
        ["dump-txnindex", str(next(iter(sorted((HANGING / "orders-2").glob("*.txnindex"))), HANGING))],
    ],
    "list-txn": [["list-txn", *SRC], ["list-txn", *ONLINE]],
    "describe-txn": [["describe-txn", "incomplete-commit", *SRC]],
    "describe-producers": [["describe-producers", *SRC, "--topic", "orders", "--partition", "0", "--now", NOW,
                            "--include-expired"]],
    "find-hanging": [["find-hanging", *SRC, "--now", NOW], ["find-hanging", *ONLINE, "--now", NOW]],
    "lag": [["lag", *SRC], ["lag", *ONLINE], ["lag", "--log-dir", str(FIXTURES / "tiered")]],
    "abort-hanging": [["abort-hanging", *SRC, "--all", "--now", NOW]],
    "timeline": [["timeline", *SRC]],
    "describe-cluster": [["describe-cluster", "--log-dir", str(FIXTURES / "kraft")]],
}

_SINGLE_KEY = re.compile(r"(?:plus|carries|and)\s+(?:offline\s+)?`([a-z][a-z0-9_]*)`|with\s+`([a-z][a-z0-9_]*):[^`]*`")


# exporter metric names (kafkatx_...) are not JSON keys
_LIST_CONTINUATION = re.compile(r"(?:,|\bor)\s+`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`")


def _documented_keys(body: str) -> set[str]:
    text = " ".join(body.split())
    keys: set[str] = set()
    for span in text.split("`")[1::2]:  # the text inside each pair of backticks
        span = re.sub(r"\([^)]*\)", "", span)  # "(COMMIT|ABORT|null|other name)", "(null when ...)"
        words = [w.strip() for w in span.split(",")]
        if len(words) > 1 and all(re.fullmatch(r"[a-z][a-z0-9_]*", w) for w in words if w):
            keys.update(w for w in words if w)
    # a lone key continuing a list: "..., `open_transactions`, `oldest_open_producer_id`", "or `coordinator_id`"
    keys.update(k for k in _LIST_CONTINUATION.findall(text) if not k.startswith("kafkatx_"))
    for plain, with_value in _SINGLE_KEY.findall(text):
        keys.add(plain or with_value)
    return keys


KEY_SECTIONS = [(" ".join(names), _documented_keys(body)) for names, _h, body in SECTIONS]
KEY_SECTIONS = [(sid, keys) for sid, keys in KEY_SECTIONS if keys]


def _all_keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | set().union(*(_all_keys(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_all_keys(v) for v in obj))
    return set()


@needs_cli_md
def test_documented_keys_parsed():
    keys = dict(KEY_SECTIONS)
    assert {"kind", "first_offset", "duration_ms"} <= keys["find-hanging"]
    assert "action" in keys["abort-hanging"] and "expired" in keys["describe-producers"]
    assert {"records", "decoded", "coordinator_epoch"} <= keys["dump-segment"]
    assert {"history", "partition_status", "last_update_timestamp_ms"} <= keys["describe-txn"]


@needs_cli_md
@pytest.mark.parametrize(("section", "keys"), KEY_SECTIONS, ids=[s for s, _ in KEY_SECTIONS])
def test_documented_json_keys_exist(section, keys, monkeypatch):
    assert section in KEY_RUNS, f"cli.md documents keys for `{section}`; add a run for it to KEY_RUNS"
    from kafkatx.cluster import service

    monkeypatch.setattr(service, "connect", _fake_cluster)
    seen: set[str] = set()
    for args in KEY_RUNS[section]:
        _require(args[0])
        result = CliRunner().invoke(app, [*args, "--format", "json"])
        assert result.exit_code in (0, 1), f"{args}: exit {result.exit_code}: {result.output}"
        seen |= _all_keys(json.loads(result.stdout))
    missing = sorted(keys - seen)
    assert not missing, f"{section}: cli.md documents keys {missing}, --format json has none of them"


@needs_cli_md
def test_root_flags_exist():
    assert {"--install-completion", "--show-completion", "--version", "--traceback"} <= _flags(GROUP)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    command = COMMANDS[name]
    assert (command.help or "").strip(), f"{name} has no help text"
    for param in command.params:
        if getattr(param, "opts", None) and param.opts[0].startswith("--") and param.opts[0] != "--help":
            assert getattr(param, "help", None), f"{name} {param.opts[0]} has no help text"


# ----------------------------------------------------------------------------- examples in --help

def _examples(command) -> list[str]:
    """The ``kafkatx ...`` lines of a command's help text or epilog (cli/examples.py fills the epilog)."""
    return [line for line in _joined((command.help or "") + "\n" + (command.epilog or "")).splitlines()
            if line.startswith("kafkatx ")]


def _joined(text: str) -> str:
    """Help text with each example on one line: shell continuations (`` \\`` + newline) joined."""
    return "\n".join(line.strip() for line in re.sub(r" \\\n\s*", " ", text).splitlines())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_help_has_an_example(name):
    examples = _examples(COMMANDS[name])
    assert examples, f"{name}: --help has no example (add one to kafkatx/cli/examples.py or epilog=)"
    assert all(e.split()[1] == name for e in examples), f"{name}: an example runs another command: {examples}"
    from typer.testing import CliRunner

    shown = _joined(CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout)
    assert examples[0] in shown, f"{name}: the example is not printed by --help"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_examples_use_flags_the_command_has(name):
    import shlex

    flags = _flags(COMMANDS[name])
    for example in _examples(COMMANDS[name]):
        words = shlex.split(example.split("|")[0].split("#")[0])
        used = {w for w in words if w.startswith("--")}
        assert used <= flags, f"{name}: example {example!r} uses {sorted(used - flags)}"


OFFLINE_EXAMPLES = [(name, e) for name in sorted(COMMANDS) for e in _examples(COMMANDS[name])
                    if "fixtures/" in e and "--execute" not in e and name != "scan"]


@pytest.mark.parametrize(("name", "example"), OFFLINE_EXAMPLES, ids=[e for _, e in OFFLINE_EXAMPLES])
def test_offline_examples_run_on_the_fixtures(name, example, monkeypatch):
    """An example on the bundled fixtures runs as printed (from the repo root): exit 0 or 1, never 2 or 3."""
    import shlex

    from typer.testing import CliRunner

    monkeypatch.chdir(REPO)
    argv = shlex.split(example.split("#")[0])[1:]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code in (0, 1), (example, result.stderr)
    assert result.stdout.strip()


# ----------------------------------------------------------------------------- links

def _relative_links(path: Path) -> list[tuple[str, Path]]:
    """(link, file it points at) for every relative Markdown link in ``path`` (anchors dropped)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold no links
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # https:, mailto:, an anchor in the same page
        out.append((target, (path.parent / target.split("#", 1)[0]).resolve()))
    return out


DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "CHANGELOG.md",
             REPO / "fixtures" / "README.md", REPO / "SECURITY.md"]


@pytest.mark.parametrize("doc", [d for d in DOC_FILES if d.exists()], ids=lambda d: str(d.relative_to(REPO)))
def test_relative_links_resolve(doc):
    broken = [link for link, target in _relative_links(doc) if not target.exists()]
    assert not broken, f"{doc.relative_to(REPO)}: links to nothing: {broken}"
    outside = [link for link, target in _relative_links(doc) if not target.is_relative_to(REPO)]
    assert not outside, f"{doc.relative_to(REPO)}: links outside the repository: {outside}"


def test_readme_links_every_doc():
    linked = {target for _link, target in _relative_links(REPO / "README.md")}
    missing = [d.name for d in sorted((REPO / "docs").glob("*.md")) if d.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def test_nothing_outside_tests_points_at_shared():
    import subprocess

    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    found = subprocess.run(["git", "grep", "-n", r"\.\./shared", "--", ".", ":!tests", ":!.ci"], cwd=REPO,
                           capture_output=True, text=True)
    assert found.stdout == "", found.stdout
