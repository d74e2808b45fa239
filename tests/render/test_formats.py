from __future__ import annotations

import enum
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kafkatx.format.txn_log import TxnState
from kafkatx.render import emit, text_line, to_plain
from kafkatx.rows import PartitionStatus, TransactionDescription, TransactionRow


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    zeta: int
    alpha: str | None
    tags: tuple[str, ...] = ()


class Color(enum.Enum):
    RED = 1


def _txn_row(**kw):
    base = dict(transactional_id="tx-1", producer_id=5, producer_epoch=2, state="Ongoing", timeout_ms=60000,
                start_timestamp_ms=100, last_update_timestamp_ms=None, partitions=["a-0", "b-1"])
    base.update(kw)
    return TransactionRow(**base)


def render(rows, fmt, **kw):
    out = io.StringIO()
    emit(rows, fmt, out=out, **kw)
    return out.getvalue()


def test_to_plain_keeps_field_order_and_converts_nested():
    desc = TransactionDescription(transaction=_txn_row(),
                                  partition_status=[PartitionStatus(partition="a-0", open=True, first_offset=3)])
    plain = to_plain(desc)
    assert list(plain) == ["transaction", "history", "partition_status", "open_partitions"]
    assert list(plain["transaction"])[:3] == ["transactional_id", "producer_id", "producer_epoch"]
    assert plain["partition_status"] == [{"partition": "a-0", "open": True, "first_offset": 3}]
    assert to_plain(Row(zeta=1, alpha=None, tags=("x",))) == {"zeta": 1, "alpha": None, "tags": ["x"]}
    assert to_plain(TxnState.PREPARE_COMMIT) == "PrepareCommit"
    assert to_plain(Color.RED) == "RED"
    assert to_plain(Path("/a/b")) == "/a/b"
    assert to_plain(b"\x01\xff") == "01ff"
    assert to_plain(b"\x01", encode_bytes=lambda b: "enc") == "enc"


def test_json_list_and_single_object():
    rows = [Row(zeta=2, alpha="a"), Row(zeta=1, alpha=None)]
    doc = json.loads(render(rows, "json"))
    assert doc == [{"zeta": 2, "alpha": "a", "tags": []}, {"zeta": 1, "alpha": None, "tags": []}]
    assert list(doc[0]) == ["zeta", "alpha", "tags"]  # declaration order, not sorted
    assert json.loads(render(Row(zeta=1, alpha="x"), "json")) == {"zeta": 1, "alpha": "x", "tags": []}
    assert json.loads(render([], "json")) == []
    assert json.loads(render(iter(rows), "json")) == doc


def test_jsonl_streams_an_iterator():
    out = io.StringIO()

    def rows():
        yield {"a": 1}
        # Everything before the failure must already be written: jsonl does not materialise.
        assert out.getvalue() == '{"a":1}\n'
        yield {"a": 2, "b": None}

    emit(rows(), "jsonl", out=out)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [{"a": 1}, {"a": 2, "b": None}]


def test_json_list_streams_too():
    out = io.StringIO()

    def rows():
        yield {"a": 1}
        assert '"a": 1' in out.getvalue()
        yield {"a": 2}

    emit(rows(), "json", out=out)
    assert json.loads(out.getvalue()) == [{"a": 1}, {"a": 2}]


def test_yaml_keeps_order_and_nulls():
    text = render([_txn_row()], "yaml")
    data = yaml.safe_load(text)
    assert data[0]["partitions"] == ["a-0", "b-1"]
    assert data[0]["last_update_timestamp_ms"] is None
    assert text.index("transactional_id") < text.index("producer_id") < text.index("partitions")
    assert yaml.safe_load(render({"k": "ü"}, "yaml")) == {"k": "ü"}


def test_table_has_headers_and_values_without_markup():
    text = render([_txn_row(), _txn_row(transactional_id="tx-2")], "table", title="Transactions")
    assert "Transactions" in text
    header = next(line for line in text.splitlines() if "transactional_id" in line)
    assert "producer_id" in header and "partitions" in header
    assert "[a-0,b-1]" in text  # rich markup must not eat square brackets
    assert "tx-2" in text
    limited = render([_txn_row()], "table", columns=["transactional_id", "state"])
    assert "Ongoing" in limited and "producer_epoch" not in limited


def test_text_lines():
    assert text_line({"offset": 3, "position": None, "ok": True, "l": [1, 2]}) == \
        "offset: 3 position: null ok: true l: [1,2]"
    assert text_line("as is") == "as is"
    assert render([{"a": 1}, "plain"], "text", title="T") == "T\na: 1\nplain\n"
    assert render([{"a": 1, "b": 2}], "text", columns=["b"]) == "b: 2\n"


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown output format"):
        render([], "xml")


def test_json_list_in_chunks_is_json_dumps_text():
    # A list of rows is encoded a chunk at a time (list-txn's 1,000,000); the text stays json.dumps's,
    # also across chunk borders and for a chunk orjson refuses (an integer beyond 64 bits).
    rows = [{"i": i, "p": [f"t-{i}"], "n": None, "s": "ü"} for i in range(2500)]
    rows[1500]["i"] = 1 << 70
    for data in (rows, rows[:1024], rows[:1], []):
        out = io.StringIO()
        emit(data, "json", out=out)
        assert out.getvalue() == json.dumps(data, ensure_ascii=False, indent=2) + "\n"


@pytest.mark.parametrize("count", [0, 1, 3, 1024, 1025, 2500])
def test_json_values_are_the_dicts_json_text(count):
    # list-txn's offline rows as tuples (emit_json_values): the text emit gives the dicts of them, every
    # value kind a row holds (odd strings, None, big and negative ints, empty and long lists), the values
    # past the names left out; a chunk msgspec refuses (a lone surrogate) goes the dict way
    from kafkatx.render.formats import emit_json_values

    names = ("transactional_id", "producer_id", "start", "partitions", "coordinator_partition")
    odd = ["txn-1", 'q"uote', "back\\slash", "é\u2028\x01\t", "\U0001f600", "", "a'b"]
    rows = [(odd[i % len(odd)], (-1) ** i * i * 10**15, None if i % 3 else 2**63 + i,
             [f"t-{j}" for j in range(i % 4)], i % 50, 7) for i in range(count)]
    if count > 1024:
        rows[-1] = ("\udc80", 1, None, [], 0, 7)  # orjson and msgspec both refuse it: the stdlib's text
    want, got = io.StringIO(), io.StringIO()
    emit([dict(zip(names, r[:5], strict=True)) for r in rows], "json", out=want, plain=True)
    emit_json_values(rows, names, out=got)
    assert got.getvalue() == want.getvalue()
    # the rows taken a chunk at a time (a RowCursor: list-txn's 1,000,000 rows), the same text
    from kafkatx.coordinator.state_manager import RowCursor

    got = io.StringIO()
    emit_json_values(RowCursor(list(rows)), names, out=got)
    assert got.getvalue() == want.getvalue()
    # a UTF-8 text stream over bytes (stdout): msgspec's bytes go to its buffer, in their place
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
    emit_json_values(rows, names, out=stream)
    stream.flush()
    assert raw.getvalue() == want.getvalue().encode("utf-8", "surrogateescape")
