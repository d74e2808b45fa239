"""The benchmark's shapes at a reduced size; the compiled and pure-Python paths give the same
answers on each, the coordinator replay keeps per id what the commands report, and the benchmark runs.

Expected values are reasoned from how the shapes are written (benchmarks/bench_scale.py): in the ids shape
every id has Empty -> Ongoing -> PrepareCommit -> CompleteCommit except one in 100 left Ongoing
(``TransactionStateManager`` appends one record per change; the broker keeps the latest value per id).
No timed assertions.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import kafkatx.format.txn_log as txn_log_mod
from kafkatx.coordinator.state_manager import replay_transaction_log
from kafkatx.format import compiled
from kafkatx.format.txn_log import (
    TxnLogValue,
    TxnState,
    decode_txn_log_fields,
    encode_txn_log_key,
    encode_txn_log_value,
    value_fields,
)
from kafkatx.session import offline

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_000_600_000
IDS = 300


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_scale", mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):  # type: ignore[no-untyped-def]
    bench = _bench()
    root = tmp_path_factory.mktemp("scale")
    bench.gen_partitions(root / "partitions", 3, 4)
    bench.gen_ids(root / "ids", IDS)
    batches = bench.gen_segment(root / "segment", 0.25)
    return {"partitions": root / "partitions", "ids": root / "ids", "segment": root / "segment",
            "batches": batches, "open_id": bench.open_id(IDS), "bench": bench}


def _answers(shapes, shape: str):  # type: ignore[no-untyped-def]
    d = [shapes[shape]]
    tid = {"partitions": "app-topic-000", "ids": shapes["open_id"], "segment": "small-batches-app"}[shape]
    return {
        "lag": offline.lag(d),
        "find-hanging": offline.find_hanging(d, now=NOW),
        "verify": offline.verify(d),
        "list-txn": offline.list_transactions(d),
        "describe-txn": offline.describe_transaction(d, tid),
    }


@pytest.mark.parametrize("shape", ["partitions", "ids", "segment"])
def test_compiled_and_pure_python_answers_are_equal(shapes, shape, monkeypatch):  # type: ignore[no-untyped-def]
    if not compiled.modules():
        pytest.skip("the C extension is not built (python setup.py build_ext --inplace)")
    fast = _answers(shapes, shape)
    with compiled.pure_python():
        pure = _answers(shapes, shape)
    assert fast == pure
    assert fast["list-txn"].rows or shape != "ids"


def test_ids_shape_answers(shapes):  # type: ignore[no-untyped-def]
    d = [shapes["ids"]]
    rows = offline.list_transactions(d).rows
    assert len(rows) == IDS
    by_state: dict[str, int] = {}
    for r in rows:
        by_state[r.state] = by_state.get(r.state, 0) + 1
    # ids 0, 100, 200 stop at Ongoing; the other 297 complete
    assert by_state == {"Ongoing": 3, "CompleteCommit": IDS - 3}
    desc = offline.describe_transaction(d, shapes["open_id"]).rows[0]
    assert [h.state for h in desc.history] == ["Empty", "Ongoing"]
    done = offline.describe_transaction(d, "txn-0000001").rows[0]
    assert [h.state for h in done.history] == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert done.history[1].partitions == ["orders-001-1"]
    assert offline.verify(d).rows == []


def test_history_kept_only_where_reported(shapes):  # type: ignore[no-untyped-def]
    d = [shapes["ids"]]
    full = replay_transaction_log(d)
    compact = replay_transaction_log(d, history_for={"txn-0000001"})
    assert len(full.history["txn-0000002"]) == 4
    # the first record of each producer id the id used: what index_producers reads
    assert [h.producer_id for h in compact.history["txn-0000002"]] == [1_000_002]
    assert compact.history["txn-0000001"] == full.history["txn-0000001"]
    assert compact.transactions == full.transactions
    assert compact.producer_index() == full.producer_index()
    assert compact.findings == full.findings


def test_partitions_and_segment_shapes(shapes):  # type: ignore[no-untyped-def]
    lag = offline.lag([shapes["partitions"]])
    # 3 topics x 4 partitions + 50 __consumer_offsets + 50 __transaction_state
    assert len(lag.rows) == 12 + 50 + 50
    hanging = offline.find_hanging([shapes["partitions"]], now=NOW)
    # the last topic's second transaction is open in its 4 partitions, Ongoing past its 60 s timeout
    assert sorted((r.topic, r.partition) for r in hanging.rows) == [("topic-002", p) for p in range(4)]
    seg = {(r.topic, r.partition): r for r in offline.lag([shapes["segment"]]).rows}
    # one record per batch; the block ends with a commit marker, so nothing is open at the end
    assert seg[("small", 0)].log_end_offset == shapes["batches"]
    assert seg[("small", 0)].lso == shapes["batches"]


def test_txn_log_decode_twin_falls_back_to_python():
    v = TxnLogValue(version=1, producer_id=5, producer_epoch=3, transaction_timeout_ms=100, state=TxnState.ONGOING,
                    partitions=(("a", (1, 2)), ("b\u00e9", ())), last_update_timestamp=9, start_timestamp=8,
                    previous_producer_id=7, client_transaction_version=2, unknown_tags=((9, b"x"),))
    key, raw = encode_txn_log_key("t\u00e9"), encode_txn_log_value(v)
    # an unknown tag: the compiled decoder leaves it to Python, which gives the same fields
    assert decode_txn_log_fields(key, raw) == ("t\u00e9", value_fields(v))
    c = txn_log_mod._txn_log
    if c is not None:
        assert c.txn_log_decode(key, raw) is None
        plain = TxnLogValue(version=0, producer_id=-1, producer_epoch=-1, transaction_timeout_ms=1,
                            state=TxnState.EMPTY, partitions=None, last_update_timestamp=1, start_timestamp=-1)
        assert c.txn_log_decode(key, encode_txn_log_value(plain)) == ("t\u00e9", value_fields(plain))
        assert c.txn_log_decode(key, encode_txn_log_value(plain)[:-1]) is None  # truncated


def test_benchmark_quick_run(tmp_path, capsys):  # type: ignore[no-untyped-def]
    bench = _bench()
    assert bench.main(["--quick", "--topics", "2", "--partitions-per-topic", "2", "--ids", "200",
                       "--segment-mb", "0.25", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for floor in ("read every file", "aiokafka iteration", "crc32c pass"):
        assert f"| {floor} |" in out
    for command in ("lag", "find-hanging", "verify", "list-txn", "describe-txn"):
        assert f"| {command} |" in out
    assert "batches/s" in out and "x |" in out


def test_list_txn_rows_from_the_records_are_the_metadata_rows(shapes):  # type: ignore[no-untyped-def]
    # list-txn builds its rows from the replay's records (transaction_row_fields), describe-txn from the
    # metadata (transaction_row): one row either way.
    d = [shapes["ids"]]
    coord = replay_transaction_log(d)
    coordinators = offline.coordinator_ids(offline.as_log_dirs(d))
    expected = [offline.transaction_row(meta, coordinators) for _tid, meta in sorted(dict(coord.transactions).items())]
    assert offline.list_transactions(d).rows == expected
    assert len(expected) == IDS and any(r.partitions for r in expected)
    open_rows = offline.list_transactions(d, states=["Ongoing"], pattern=".*00").rows
    assert [r.transactional_id for r in open_rows] == ["txn-0000000", "txn-0000100", "txn-0000200"]


def test_drain_gives_the_fields_and_leaves_an_empty_state(shapes):  # type: ignore[no-untyped-def]
    coord = replay_transaction_log([shapes["ids"]])
    fields = sorted(coord.transactions.fields())  # type: ignore[attr-defined]
    assert len(fields) == IDS
    assert sorted(coord.drain()) == fields
    assert len(coord.transactions) == len(coord.history) == 0 and coord.tombstoned == {}
    assert list(coord.transactions) == [] and coord.transactional_id_for(1_000_001) is None


def test_the_replayed_state_pickles(shapes):  # type: ignore[no-untyped-def]
    # kafkatx scan broadcasts the CoordinatorState to its executors: its mappings over the folds travel too
    import pickle

    coord = replay_transaction_log([shapes["ids"]])
    back = pickle.loads(pickle.dumps(coord))
    assert back.transactions == coord.transactions and back.history == coord.history
    assert back.producer_index() == coord.producer_index() and len(back.transactions) == IDS


def _all(rows):  # type: ignore[no-untyped-def]
    # a RowCursor's rows, taken in chunks of 7 (a chunk's end falls anywhere), then nothing more
    out = []
    while chunk := rows.take(7):
        out += chunk
    assert rows.take(7) == []
    return out


def _values_answers(d):  # type: ignore[no-untyped-def]
    coord = replay_transaction_log(d)
    return (_all(offline.list_transactions(d, values=True).rows),
            _all(offline.list_transactions(d, values=True, states=["Ongoing"], pattern=".*00").rows),
            coord.timed_out_fields({int(TxnState.ONGOING)}, 1_800_000_000_000))


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_list_txn_values_are_the_rows_values(shapes, pure):  # type: ignore[no-untyped-def]
    # list-txn's offline rows as tuples (no TransactionRow per id): the rows' very values, in order, on
    # the compiled and the pure-Python paths alike
    from operator import attrgetter

    import msgspec

    from kafkatx.rows import TransactionRow

    assert offline.TRANSACTION_ROW_FIELDS == tuple(f.name for f in msgspec.structs.fields(TransactionRow))
    d = [shapes["ids"]]
    with compiled.pure_python() if pure else _nothing():
        values, ongoing, timed_out = _values_answers(d)
        rows = offline.list_transactions(d).rows
    assert values == [attrgetter(*offline.TRANSACTION_ROW_FIELDS)(r) for r in rows]
    assert [v[0] for v in ongoing] == ["txn-0000000", "txn-0000100", "txn-0000200"]
    # timed_out_fields: timed_out's ids and records, without the metadata
    coord = replay_transaction_log(d)
    metas = coord.timed_out({int(TxnState.ONGOING)}, 1_800_000_000_000)
    assert [(t, f[1], f[7], p) for t, _o, f, p in timed_out] == \
        [(m.transactional_id, m.producer_id, m.start_timestamp, m.coordinator_partition) for m in metas]
    assert len(metas) == 3


def test_list_txn_values_compiled_equal_pure(shapes):  # type: ignore[no-untyped-def]
    if not compiled.modules():
        pytest.skip("the C extension is not built (python setup.py build_ext --inplace)")
    d = [shapes["ids"]]
    fast = _values_answers(d)
    with compiled.pure_python():
        pure = _values_answers(d)
    assert fast == pure


def test_owed_abort_notices_from_the_records_are_the_metadata_notices(shapes):  # type: ignore[no-untyped-def]
    # find-hanging's owed-abort notices straight from each id's record equal those made from its metadata
    # (a CoordinatorState over plain dicts takes the metadata path)
    import dataclasses

    from kafkatx.checks.hanging import owed_abort_notices

    coord = replay_transaction_log([shapes["ids"]])
    plain = dataclasses.replace(coord, transactions=dict(coord.transactions), history=dict(coord.history))
    now = 1_800_000_000_000
    notes = owed_abort_notices(coord, set(), now=now)
    assert len(notes) == 3 and notes == owed_abort_notices(plain, set(), now=now)
    held = {("txn-0000100", ("orders-100", 0))}
    assert owed_abort_notices(coord, held, now=now) == owed_abort_notices(plain, held, now=now)
    assert len(owed_abort_notices(coord, held, now=now)) == 2
    scope = (lambda tp: tp[0] != "orders-000")  # noqa: E731
    assert owed_abort_notices(coord, set(), now=now, in_scope=scope) == \
        owed_abort_notices(plain, set(), now=now, in_scope=scope)


class _nothing:  # noqa: N801 - a no-op context manager
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
