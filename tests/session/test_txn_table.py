"""The packed fold (``kafkatx/coordinator/_coordinator.c`` ``TxnTable``) keeps what the pure-Python
:class:`~kafkatx.coordinator.txn_fold.TxnFold` keeps, record for record: ``TxnTable.record`` is the twin of
``TxnFold.record`` (``TransactionStateManager.loadTransactionMetadata``: the latest value per id wins; the
first sight of an id checks ``partitionFor``; a value after a value checks
``TransactionState.validPreviousStates``; the history keeps every record of the ids asked about and the
first record of each producer id of the others).

Generated record runs (ids beyond ASCII and from the wrong partition, tombstones, values whose numbers do
not fit the widths Kafka writes, several producer ids per id) go through both; the mappings each gives
(``TxnIds``: latest and history in first-seen order, tombstones, misplaced ids, findings) must be equal.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatx.coordinator import state_manager as coordinator
from kafkatx.coordinator.txn_fold import NO_HISTORY, TxnFold, TxnHistory, TxnLatest

pytestmark = pytest.mark.skipif(coordinator._coordinator is None,
                                reason="kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")

N = 7
IDS = ["a", "b", "c-0", "ü-id", "日本", "x" * 40, "d", "e"]
T0 = 1_700_000_000_000


def _fields(pid: int, state: int, parts: object, epoch: int = 0, timeout: int = 60_000,
            start: int = T0) -> tuple[object, ...]:
    return (1, pid, epoch, timeout, state, parts, T0, start, -1, -1, 0, -1)


values = st.one_of(
    st.none(),  # a tombstone
    st.builds(_fields, st.sampled_from([5, 6, 2**63 - 1]), st.integers(0, 7),
              st.sampled_from([None, (), (("t", (0,)),), (("t", (1, 2)), ("u", (0,)))])),
    # numbers the packed form does not hold: kept as the object (a state number is one Kafka defines: the
    # decoders refuse any other, and TxnFold.record's findings name it)
    st.builds(_fields, st.sampled_from([5, 2**70]), st.sampled_from([1, 4]), st.just(None),
              st.sampled_from([0, 2**15]), st.sampled_from([60_000, 2**31]), st.sampled_from([T0, -(2**64)])),
)
records = st.lists(st.tuples(st.sampled_from(IDS), values), max_size=40)
history_fors = st.sampled_from([None, (), ("a",), frozenset({"ü-id", "b"}), NO_HISTORY,
                                frozenset(f"many-{i}" for i in range(20)) | {"c-0"}])


def _folded(recs: list[tuple[str, object]], history_for: object, packed: bool) -> tuple[object, ...]:
    findings: list[object] = []
    fold = TxnFold(3, "__transaction_state-3", N, findings, history_for, packed=packed)  # type: ignore[arg-type]
    assert (fold.table is not None) == packed
    record = fold.record_of()
    for offset, (tid, value) in enumerate(recs):
        record(offset, tid, value, "f.log", 10 * offset)  # type: ignore[arg-type]
    fold.settle_findings()
    ids = fold.finish()
    return ([*ids.latest.items()], [*ids.history.items()], ids.tombstones, ids.misplaced, findings,
            len(ids.latest), len(ids.history))


@settings(max_examples=300, deadline=None)
@given(records, history_fors)
def test_the_table_keeps_what_the_python_fold_keeps(recs, history_for) -> None:  # type: ignore[no-untyped-def]
    assert _folded(recs, history_for, True) == _folded(recs, history_for, False)


def test_the_views_read_as_the_dicts_do() -> None:
    findings: list[object] = []
    fold = TxnFold(0, "__transaction_state-0", 1, findings, (), packed=True)
    for i in range(5000):  # past every growth of the index and the arrays
        fold.table.record(i, f"id-{i % 3000}", _fields(i % 7, 1 if i < 3000 else 4, None), "f.log", i)
    fold.table.record(5000, "id-1", None, "f.log", 5000)
    latest, history = fold.latest, fold.history
    assert isinstance(latest, TxnLatest) and isinstance(history, TxnHistory)
    assert len(latest) == len(history) == 3000 and list(latest)[:3] == ["id-0", "id-1", "id-2"]
    assert latest["id-1"] == (5000, None) and latest.get("nope") is None and latest.get("nope", 1) == 1
    assert "id-2999" in latest and "id-3000" not in latest and 7 not in latest  # type: ignore[comparison-overlap]
    assert latest["id-5"] == (3005, _fields(3005 % 7, 4, None))
    assert history["id-5"] == [(5, _fields(5, 1, None)), (3005, _fields(3005 % 7, 4, None))]  # two producer ids
    assert history["id-2999"] == (2999, _fields(2999 % 7, 1, None))  # one record: the item itself
    with pytest.raises(KeyError):
        latest["nope"]
    with pytest.raises(KeyError):
        history["nope"]
    assert dict(pickle.loads(pickle.dumps(latest))) == dict(latest.items())  # scan's broadcast: a dict
    assert pickle.loads(pickle.dumps(history)) == dict(history.items())
    assert fold.finish().tombstones == {"id-1": 5000}
    latest.clear()
    assert len(latest) == 0 and list(latest) == [] and "id-5" not in latest


def test_an_id_that_is_not_a_str_is_refused() -> None:
    fold = TxnFold(0, "__transaction_state-0", 1, [], None, packed=True)
    with pytest.raises(TypeError):
        fold.table.record(0, b"id", None, "f.log", 0)
    with pytest.raises(TypeError):
        fold.table.record(0, "id", (1, 2), "f.log", 0)  # not a fields tuple
    assert len(fold.latest) == 0


def test_a_lone_surrogate_is_an_id_of_its_own() -> None:
    # no decoded id holds one (strict UTF-8), but a str handed in does: it is kept apart from every other id
    fold = TxnFold(0, "__transaction_state-0", 1, [], None, packed=True)
    fold.table.record(0, "a\ud800", None, "f.log", 0)
    fold.table.record(1, "a", None, "f.log", 0)
    assert list(fold.latest) == ["a\ud800", "a"] and fold.latest["a\ud800"] == (0, None)


def _tables(parts: list[list[tuple[str, object]]], packed: bool) -> list[object]:
    """One fold per list of (id, value) records, in order (the ids' partition is not checked here)."""
    out = []
    for p, recs in enumerate(parts):
        fold = TxnFold(p, f"__transaction_state-{p}", 1, [], NO_HISTORY, packed=packed)
        record = fold.record_of()
        for offset, (tid, value) in enumerate(recs):
            record(offset, tid, value, "f.log", offset)  # type: ignore[arg-type]
        out.append(fold.latest.table if packed else fold.latest)  # type: ignore[union-attr]
    return out


sorted_ids = st.sampled_from(IDS + ["txn-0000", "txn-0001", "txn-00010", "txn-0000\x00", "\ud7ff", "\ue000",
                                    "txn-000", "a" * 9 + "b", "a" * 9 + "a"])
value_or_tomb = st.one_of(st.none(), st.builds(
    _fields, st.integers(0, 9), st.integers(0, 7),
    st.sampled_from([None, (), (("t", (0,)),), (("t", (3,)),), (("b", (2, 1, 2)), ("a", (9,)))])))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(sorted_ids, value_or_tomb), max_size=12), max_size=4),
       st.sampled_from([None, {1}, {0, 4, 99}, set()]), st.sampled_from([frozenset(), frozenset({"a", "日本"})]))
def test_sorted_rows_compiled_equals_python(parts, wanted, skip) -> None:  # type: ignore[no-untyped-def]
    # list-txn's rows of every fold sorted by id: the C call sorts the ids' bytes (UTF-8: code point order)
    # before it makes a row; the Python twin sorts the rows; an id in two folds keeps the folds' order. The
    # rows are taken in chunks (a chunk's end anywhere), as tuples or each made by make (list-txn's JSON
    # structs: C hands make the partitions as a tuple, the same JSON)
    import msgspec

    from kafkatx.coordinator.state import STATE_NAMES_BY_NUMBER

    def taken(cursor, n, make=None, k=0):  # type: ignore[no-untyped-def]
        out = []
        while chunk := cursor.take(n, make, k):
            assert len(chunk) <= n
            out += chunk
        assert cursor.take(n, make, k) == []
        return out

    def fast():  # type: ignore[no-untyped-def]
        return coordinator._coordinator.sorted_rows(
            [(t, skip, p, 10 + p) for p, t in enumerate(_tables(parts, True))], wanted, STATE_NAMES_BY_NUMBER,
            coordinator.transaction_values)

    def pure():  # type: ignore[no-untyped-def]
        return coordinator.sorted_rows([(t, skip, p, 10 + p) for p, t in enumerate(_tables(parts, False))],
                                       wanted)

    rows = taken(pure(), 3)
    assert taken(fast(), 3) == rows == taken(fast(), 1000)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)  # type: ignore[type-var]
    made = msgspec.defstruct("Made", ["a", "b", "c", "d", "e", "f", "g", "h", "i"])
    enc = msgspec.json.encode
    assert enc(taken(fast(), 2, made, 9)) == enc(taken(pure(), 2, made, 9)) == \
        enc([dict(zip(made.__struct_fields__, r[:9], strict=True)) for r in rows])


@settings(max_examples=300, deadline=None)
@given(records, st.sampled_from([None, (), ("a",)]), st.sampled_from([frozenset(), frozenset({"a", "日本"})]))
def test_claim_producers_compiled_equals_python(recs, history_for, skip) -> None:  # type: ignore[no-untyped-def]
    # index_producers over one fold: each live id's producer ids and those its history kept, the greater
    # id winning a producer id claimed twice
    folds = []
    for packed in (True, False):
        fold = TxnFold(3, "__transaction_state-3", N, [], history_for, packed=packed)
        record = fold.record_of()
        for offset, (tid, value) in enumerate(recs):
            record(offset, tid, value, "f.log", offset)  # type: ignore[arg-type]
        folds.append(fold)
    fast: tuple[dict[int, str], dict[int, str]] = ({}, {})
    pure: tuple[dict[int, str], dict[int, str]] = ({}, {})
    coordinator._coordinator.claim_producers(folds[0].table, skip, *fast)
    coordinator.claim_producers(folds[1].latest, folds[1].history, skip, *pure)
    assert fast == pure


def test_claim_producers_without_history_raises_as_the_dict_does() -> None:
    fold = TxnFold(0, "__transaction_state-0", 1, [], NO_HISTORY, packed=True)
    fold.table.record(0, "a", _fields(5, 0, None), "f.log", 0)
    with pytest.raises(KeyError):
        coordinator._coordinator.claim_producers(fold.table, frozenset(), {}, {})
    with pytest.raises(KeyError):
        coordinator.claim_producers({"a": (0, _fields(5, 0, None))}, {}, frozenset(), {}, {})  # type: ignore[dict-item]


@settings(max_examples=200, deadline=None)
@given(records, st.sampled_from([frozenset(), frozenset({"a", "日本"})]))
def test_producer_ids_of_compiled_equals_python(recs, skip) -> None:  # type: ignore[no-untyped-def]
    # verify's live producer ids over one fold
    got = []
    for packed in (True, False):
        fold = TxnFold(3, "__transaction_state-3", N, [], (), packed=packed)
        record = fold.record_of()
        for offset, (tid, value) in enumerate(recs):
            record(offset, tid, value, "f.log", offset)  # type: ignore[arg-type]
        out: set[int] = set()
        if packed:
            coordinator._coordinator.producer_ids_of(fold.table, skip, out)
        else:
            coordinator.producer_ids_of(fold.latest, skip, out)
        got.append(out)
    assert got[0] == got[1]
