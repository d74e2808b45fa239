"""Forward-compatible metadata: a ``__cluster_metadata`` record of a newer version than kafkatx knows.

The metadata log is written by ``fixtures/build_kraft.py write_newer_metadata_log`` (hand-encoded from
Kafka's schemas): a RegisterBrokerRecord version 4 (Kafka 4.3, version 3's fields plus a tagged
``CordonedLogDirs``). Every metadata record is flexible; a reader skips the tags it does not know
(the generated ``read`` keeps them as unknown tagged fields), so version 3's fields read it whole. A
version whose bytes do not frame that way (a non-tagged field added) cannot be read: it is named, the
answer is incomplete (exit 3), and the rest of the log still reads.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fixtures.build_kraft import write_newer_metadata_log
from kafkatx.cli.main import app
from kafkatx.format.cluster_metadata import SCHEMAS
from kafkatx.storage.cluster_metadata import read_cluster_image


def test_register_broker_record_newer_than_known_is_read_with_a_note(tmp_path: Path) -> None:
    assert SCHEMAS[0][1] == 3  # the newest RegisterBrokerRecord version kafkatx knows: the record is one higher
    folder = tmp_path / "__cluster_metadata-0"
    write_newer_metadata_log(folder)
    image = read_cluster_image(folder)
    assert image.unreadable == []
    b = image.brokers[1]
    assert (b.endpoints, b.fenced, b.features["metadata.version"]) == (["PLAINTEXT://node1.example:9092"], False,
                                                                       (1, 25))
    assert set(image.topics) == {"orders"} and image.features["transaction.version"] == 2
    notes = [n for n in image.notices if "REGISTER_BROKER_RECORD" in n]
    assert len(notes) == 1 and "version 4, newer than kafkatx knows (3)" in notes[0]

    res = CliRunner().invoke(app, ["describe-cluster", "--metadata-log-dir", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "REGISTER_BROKER_RECORD record(s) of version 4" in res.stderr
    assert [x["broker_id"] for x in json.loads(res.stdout)["brokers"]] == [1]


def test_a_truly_unreadable_record_makes_an_incomplete_answer(tmp_path: Path) -> None:
    folder = tmp_path / "__cluster_metadata-0"
    write_newer_metadata_log(folder, unreadable=True)
    image = read_cluster_image(folder)
    assert len(image.unreadable) == 1 and "offset 4" in image.unreadable[0] and "version 5" in image.unreadable[0]
    assert 1 in image.brokers and "orders" in image.topics  # the rest of the log still read
    res = CliRunner().invoke(app, ["describe-cluster", "--metadata-log-dir", str(tmp_path), "--format", "json"])
    assert res.exit_code == 3, res.output
    assert "incomplete: 1 metadata record(s) could not be read" in res.stderr and "offset 4" in res.stderr
    assert "Traceback" not in res.output
    assert len(json.loads(res.stdout)["unreadable"]) == 1


def test_an_unreadable_metadata_record_makes_every_offline_answer_incomplete(tmp_path: Path) -> None:
    """list-txn over a log dir whose metadata log holds an unreadable record: the rows are printed, the
    answer says it is incomplete (exit 3, naming __cluster_metadata-0 and the record)."""
    import shutil

    ld = tmp_path / "ld"
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "kafka41", ld)
    shutil.rmtree(ld / "__cluster_metadata-0")
    write_newer_metadata_log(ld / "__cluster_metadata-0", unreadable=True)
    res = CliRunner().invoke(app, ["list-txn", "--log-dir", str(ld), "--format", "json"])
    assert res.exit_code == 3, res.output
    assert "__cluster_metadata-0: 1 metadata record(s) could not be read" in res.stderr
    got = json.loads(res.stdout)  # a partial answer: the rows beside what could not be read (cli.md)
    assert {r["transactional_id"] for r in got["rows"]} == {"tx-hang", "tx-rotate", "tx-timeout-E"}
    assert [u["partition"] for u in got["incomplete"]] == ["__cluster_metadata-0"]
