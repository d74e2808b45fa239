"""json/jsonl text through orjson is the text the stdlib gives (render.formats.json_line / json_indented)."""

from __future__ import annotations

import json

import pytest

from kafkatx.render import formats
from kafkatx.render.formats import emit, json_indented, json_line

VALUES = [
    {"a": [], "b": {}, "c": [{}], "d": None, "e": True, "f": -1, "g": 2**63 - 1, "h": "é", "i": [1, [2, [3, {}]]]},
    "a\x00b\x1f\x7f\u2028\u2029\U0001F600 \t\n\r\b\f\"\\/",
    [{"offset": 0, "key": None, "headers": [{"key": "k", "value": "v"}]}],
    {},
    [],
    2**64 + 1,  # beyond orjson: the stdlib writes it
    {"lone": "\ud800"},  # a lone surrogate: orjson refuses, the stdlib writes it
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_text_is_the_stdlib_text(value: object) -> None:
    assert json_line(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json_indented(value) == json.dumps(value, ensure_ascii=False, indent=2)


def test_orjson_writes_it() -> None:
    assert formats._orjson() is not None, "orjson is a dependency (pyproject.toml)"


class _Out:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> None:
        self.parts.append(s)

    def flush(self) -> None:
        pass


def test_plain_rows_skip_to_plain_but_print_the_same() -> None:
    rows = [{"base_offset": 0, "records": [{"offset": 0, "value": "x"}]}, {"file": "f", "trailing_bytes": 3}]
    for fmt in ("json", "jsonl", "yaml"):
        a, b = _Out(), _Out()
        emit(iter(rows), fmt, out=a)  # type: ignore[arg-type]
        emit(iter(rows), fmt, out=b, plain=True)  # type: ignore[arg-type]
        assert "".join(a.parts) == "".join(b.parts)
    out = _Out()
    emit(iter(rows), "jsonl", out=out, plain=True)  # type: ignore[arg-type]
    assert "".join(out.parts) == ('{"base_offset":0,"records":[{"offset":0,"value":"x"}]}\n'
                                  '{"file":"f","trailing_bytes":3}\n')
