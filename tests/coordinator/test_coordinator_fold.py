"""The coordinator's ``__transaction_state`` load folded in C (``kafkatx/coordinator/_coordinator.c``
``txn_fold``) gives what the pure-Python :class:`~kafkatx.coordinator.txn_fold.TxnFold` gives, record for
record, also where the C loop hands single batches back to Python (a compressed batch, a batch whose
CRC fails, a value with a tag the compiled decoder leaves to Python, a control batch in between).

The expected values are reasoned from ``TransactionStateManager.loadTransactionMetadata`` (the latest
value per id wins, a tombstone removes the id, CRCs are not checked by the loader) and from
``TransactionState.validPreviousStates`` (Ongoing -> CompleteCommit is no move the coordinator makes).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatx.coordinator import state_manager as coordinator
from kafkatx.coordinator import txn_fold
from kafkatx.coordinator.state_manager import replay_transaction_log
from kafkatx.format import compiled
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import Compression, Record, build_batch, build_control_batch
from kafkatx.format.txn_log import (
    TxnLogValue,
    TxnState,
    coordinator_partition,
    encode_txn_log_key,
    encode_txn_log_value,
)
from kafkatx.storage.log_dir import collector_paused

N = 50
T0 = 1_700_000_000_000


def _ids_on(partition: int, count: int, *, other: bool = False) -> list[str]:
    """``count`` ids that hash to ``partition`` of N (or, ``other``, that do not)."""
    out, i = [], 0
    while len(out) < count:
        tid = f"id-{i}"
        if (coordinator_partition(tid, N) == partition) != other:
            out.append(tid)
        i += 1
    return out


def _value(pid: int, state: TxnState, parts: tuple[tuple[str, tuple[int, ...]], ...] | None = (), *,
           version: int = 0, tags: tuple[tuple[int, bytes], ...] = ()) -> bytes:
    return encode_txn_log_value(TxnLogValue(
        version=version, producer_id=pid, producer_epoch=0, transaction_timeout_ms=60_000, state=state,
        partitions=parts, last_update_timestamp=T0, start_timestamp=-1 if state == TxnState.EMPTY else T0,
        unknown_tags=tags))


def _rec(offset: int, tid: str, value: bytes | None) -> Record:
    return Record(offset=offset, timestamp=T0 + offset, key=encode_txn_log_key(tid), value=value)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    a, t, b, c, d = _ids_on(0, 5)
    (w,) = _ids_on(0, 1, other=True)
    names = {"a": a, "t": t, "b": b, "c": c, "d": d, "w": w}
    batches = [
        build_batch([_rec(0, a, _value(10, TxnState.EMPTY, None))]),
        build_batch([_rec(1, a, _value(10, TxnState.ONGOING, (("t", (0,)),)))]),
        build_batch([_rec(2, a, _value(10, TxnState.COMPLETE_COMMIT))]),  # Ongoing -> CompleteCommit: illegal
        build_batch([_rec(3, w, _value(50, TxnState.EMPTY, None))]),  # hashes elsewhere
        build_batch([_rec(4, t, _value(60, TxnState.EMPTY, None))]),
        build_batch([_rec(5, t, None)]),  # tombstone: the coordinator forgets t
        build_batch([_rec(6, b, _value(20, TxnState.EMPTY, None)),
                     _rec(7, b, _value(20, TxnState.ONGOING, (("u", (1, 2)),)))], compression=Compression.GZIP),
    ]
    bad = bytearray(build_batch([_rec(8, c, _value(30, TxnState.EMPTY, None))]))
    bad[17:21] = struct.pack(">I", (struct.unpack(">I", bad[17:21])[0] ^ 1))  # the stored CRC is off by a bit
    batches.append(bytes(bad))
    batches.append(build_batch([_rec(9, a, _value(11, TxnState.EMPTY, None))]))  # a new producer id for a
    batches.append(build_control_batch(offset=10, control_type=ControlType.COMMIT, producer_id=99,
                                       producer_epoch=0, coordinator_epoch=0, timestamp=T0))
    batches.append(build_batch([_rec(11, d, _value(40, TxnState.EMPTY, None, version=1, tags=((9, b"x"),)))]))
    root = tmp_path_factory.mktemp("txnfold")
    part = root / "__transaction_state-0"
    part.mkdir()
    (part / f"{0:020d}.log").write_bytes(b"".join(batches))
    (part / f"{0:020d}.index").write_bytes(b"")
    (root / ".kafka_cleanshutdown").write_text("")  # nothing recovered: the bad CRC reaches the loader
    (root / "meta.properties").write_text("node.id=1\nversion=1\n")
    return root, names


def _replay(root: Path, history_for: tuple[str, ...] | None):  # type: ignore[no-untyped-def]
    return replay_transaction_log([root], partitions_count=N, history_for=history_for)


@pytest.mark.parametrize("history_for", [None, ()], ids=["every-record", "first-per-producer"])
def test_compiled_fold_equals_the_python_fold(log_dir, history_for, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if txn_fold._coordinator is None:
        pytest.skip("kafkatx.txn_fold._coordinator is not built (python setup.py build_ext --inplace)")
    root, _names = log_dir
    calls: list[int] = []
    real = txn_fold._coordinator

    class Counting:
        TxnTable = real.TxnTable
        claim_producers = real.claim_producers

        def txn_fold(self, *args):  # type: ignore[no-untyped-def]
            calls.append(args[1])
            return real.txn_fold(*args)

    monkeypatch.setattr(txn_fold, "_coordinator", Counting())
    fast = _replay(root, history_for)
    assert len(calls) > 1  # the C loop ran, and took over again after batches it left to Python
    with compiled.pure_python():
        assert txn_fold._compiled() is None
        pure = _replay(root, history_for)
    assert fast.transactions == pure.transactions
    assert fast.history == pure.history
    # the very state the two folds keep: the latest record and the records kept per id (one as the
    # item itself, more as a list, none as an empty list), in first-seen order
    raw = [(ids.latest, ids.history, ids.misplaced) for ids in fast.transactions._index.folds]
    raw_pure = [(ids.latest, ids.history, ids.misplaced) for ids in pure.transactions._index.folds]
    assert raw == raw_pure
    assert [[list(d) for d in r] for r in raw] == [[list(d) for d in r] for r in raw_pure]  # the same order
    assert any(type(kept) is tuple for _l, h, _m in raw for kept in h.values())
    assert fast.tombstoned == pure.tombstoned
    assert fast.findings == pure.findings
    assert fast.skipped == pure.skipped == []
    assert {pid: fast.transactional_id_for(pid) for pid in (10, 11, 20, 30, 40, 50, 60)} == \
        {pid: pure.transactional_id_for(pid) for pid in (10, 11, 20, 30, 40, 50, 60)}


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_fold_answers(log_dir, pure) -> None:  # type: ignore[no-untyped-def]
    root, n = log_dir
    with compiled.pure_python(pure):
        state = _replay(root, ())
        full = _replay(root, (n["a"],))
    tx = state.transactions
    assert set(tx) == {n["a"], n["w"], n["b"], n["c"], n["d"]}  # t was tombstoned
    assert state.tombstoned == {n["t"]: 5}
    assert (tx[n["a"]].state, tx[n["a"]].producer_id, tx[n["a"]].offset) == (TxnState.EMPTY, 11, 9)
    assert (tx[n["b"]].state, sorted(tx[n["b"]].partitions)) == (TxnState.ONGOING, [("u", 1), ("u", 2)])
    assert tx[n["c"]].producer_id == 30  # loaded although its batch's CRC fails
    assert tx[n["d"]].producer_id == 40  # decoded by the Python decoder (an unknown tag)
    checks = [(f.check, f.offset) for f in state.findings]
    assert checks == [("illegal-transition", 2), ("wrong-coordinator-partition", 3), ("crc-unchecked", 8)]
    # first record per producer id (what maps producer ids to ids), every record for history_for
    assert [h.offset for h in state.history[n["a"]]] == [0, 9]
    assert [h.offset for h in full.history[n["a"]]] == [0, 1, 2, 9]
    assert state.transactional_id_for(10) == state.transactional_id_for(11) == n["a"]
    assert state.transactional_id_for(60) is None  # a tombstoned id maps no producer


def _fold(partition: int, n: int, records: list[tuple[int, str, int | None]]) -> coordinator.TxnPartitionFold:
    """One partition folded by the Python TxnFold from (offset, id, producer id or None for a tombstone)."""
    from kafkatx.format.txn_log import value_fields

    findings: list = []
    name = f"__transaction_state-{partition}"
    ids = txn_fold.fold_txn_fields(partition, name, n, [
        (offset, tid, None if pid is None else value_fields(TxnLogValue(
            version=0, producer_id=pid, producer_epoch=0, transaction_timeout_ms=60_000, state=TxnState.EMPTY,
            partitions=None, last_update_timestamp=T0, start_timestamp=-1)), "f.log", 0)
        for offset, tid, pid in records], findings)
    return coordinator.TxnPartitionFold(partition=partition, name=name, path=name, ids=ids, findings=findings)


def test_an_id_in_two_partitions_is_taken_from_the_one_it_hashes_to() -> None:
    # TransactionStateManager loads an id from the partition partitionFor names; kafkatx reports the copy
    # elsewhere (a changed transaction.state.log.num.partitions, copied files) and, when no partition
    # it read is the id's own, keeps the first copy it read.
    n = 3
    found: dict[int, list[str]] = {0: [], 1: [], 2: []}
    i = 0
    while min(len(v) for v in found.values()) < 3:
        tid = f"dup-{i}"
        found[coordinator_partition(tid, n)].append(tid)
        i += 1
    h, x = found[2][0], found[2][1]  # hash to 2
    e = found[0][0]  # hashes to 0
    t, plain = found[1][0], found[1][1]  # hash to 1
    folds = [
        _fold(0, n, [(0, h, 1), (1, e, 3), (2, x, 5), (3, t, 7)]),
        _fold(1, n, [(0, e, 4), (1, x, 6), (2, t, 8), (3, t, None), (4, plain, 9)]),
        _fold(2, n, [(0, h, 2)]),
    ]
    state = coordinator.coordinator_from_folds(folds, partitions_count=n, partitions_found=(0, 1, 2))
    tx = state.transactions
    assert sorted(tx) == sorted([h, e, x, plain])  # t: its own partition's latest record is a tombstone
    assert len(tx) == 4 and len(state.history) == 5
    assert {tid: (tx[tid].producer_id, tx[tid].coordinator_partition) for tid in tx} == {
        h: (2, 2), e: (3, 0), x: (5, 0), plain: (9, 1)}
    assert t not in tx and t in state.history and state.tombstoned == {t: 3}
    assert [entry.producer_id for entry in state.history[t]] == [8, None]  # partition 1's records, not 0's
    dups = [(f.partition, f.message) for f in state.findings if f.check == "duplicate-transactional-id"]
    assert dups == [
        ("__transaction_state-1", f"transactional id {e!r} has records in __transaction_state-0 and "
                                  f"__transaction_state-1; using the one in __transaction_state-0"),
        ("__transaction_state-1", f"transactional id {x!r} has records in __transaction_state-0 and "
                                  f"__transaction_state-1; using the one in __transaction_state-2"),
        ("__transaction_state-1", f"transactional id {t!r} has records in __transaction_state-0 and "
                                  f"__transaction_state-1; using the one in __transaction_state-1"),
        ("__transaction_state-2", f"transactional id {h!r} has records in __transaction_state-0 and "
                                  f"__transaction_state-2; using the one in __transaction_state-2"),
    ]
    # the producer ids of the copies not taken belong to no live id
    assert {pid: state.transactional_id_for(pid) for pid in range(1, 10)} == {
        1: None, 2: h, 3: e, 4: None, 5: x, 6: None, 7: None, 8: None, 9: plain}
    # the mappings agree with plain dicts of the same metadata (what index_producers reads either way)
    assert coordinator.index_producers(dict(tx), dict(state.history)) == dict(state.producer_index())
    assert "nobody" not in tx and tx.get("nobody") is None and "nobody" not in state.history


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_no_history_keeps_each_ids_latest_record_only(log_dir, pure) -> None:  # type: ignore[no-untyped-def]
    # list-txn's replay (history_for=NO_HISTORY): the same ids, latest records, tombstones and findings
    # as the replay that keeps the first record per producer id, and no history at all
    root, _n = log_dir
    with compiled.pure_python(pure):
        kept = _replay(root, ())
        bare = _replay(root, txn_fold.NO_HISTORY)  # type: ignore[arg-type]
    assert [ids.latest for ids in bare.transactions._index.folds] == \
        [ids.latest for ids in kept.transactions._index.folds]
    assert [ids.history for ids in bare.transactions._index.folds] == [{}]
    assert [ids.misplaced for ids in bare.transactions._index.folds] == \
        [ids.misplaced for ids in kept.transactions._index.folds]
    assert bare.tombstoned == kept.tombstoned and bare.findings == kept.findings
    assert [f.check for f in bare.findings] == ["illegal-transition", "wrong-coordinator-partition", "crc-unchecked"]


def test_no_history_is_one_object_after_pickling() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(txn_fold.NO_HISTORY)) is txn_fold.NO_HISTORY
    assert "any-id" not in txn_fold.NO_HISTORY


def _fields(state: int, parts: object, *, start: int = T0, last: int = T0) -> tuple[object, ...]:
    return (0, 7, 1, 60_000, state, parts, last, start, -1, -1, 0, -1)


def _latest() -> dict[str, tuple[int, object]]:
    """Every record shape fold_values meets: the fold's own (no partition, one) and the rest, which
    transaction_values answers for the compiled loop (several partitions, repeated, unsorted), negative
    and huge timestamps, a name beyond ASCII."""
    return {
        "empty": (0, _fields(0, None, start=-1)),
        "none-list": (1, _fields(0, ())),
        "one": (2, _fields(1, (("orders", (3,)),))),
        "several": (3, _fields(1, (("b", (2, 1, 2)), ("a", (9,))))),
        "one-topic-two": (4, _fields(2, (("t", (1, 0)),))),
        "gone": (5, None),  # a tombstone: left out
        "skipped": (6, _fields(1, (("x", (0,)),))),
        "negative": (8, _fields(4, None, start=-5, last=-(2**70))),
        "huge": (9, _fields(4, (("ü-topic", (2**40,)),), start=2**70, last=2**63 - 1)),
    }


@pytest.mark.parametrize("wanted", [None, {1}, {0, 4, 99}, set()], ids=["all", "ongoing", "some", "none"])
def test_fold_values_compiled_equals_python(wanted) -> None:  # type: ignore[no-untyped-def]
    # list-txn's rows of one fold: the C loop builds the fold's own shapes itself and hands every other
    # record to transaction_values; the rows are the Python twin's, in the fold's order
    if coordinator._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    from kafkatx.coordinator.state import STATE_NAMES_BY_NUMBER

    latest, skip = _latest(), frozenset({"skipped"})
    pure: list[tuple[object, ...]] = []
    fast: list[tuple[object, ...]] = []
    coordinator.fold_values(latest, skip, 3, 12, wanted, pure)
    coordinator._coordinator.fold_values(latest, skip, 3, 12, wanted, STATE_NAMES_BY_NUMBER,
                                         coordinator.transaction_values, fast)
    assert fast == pure
    expected = {None: ["empty", "none-list", "one", "several", "one-topic-two", "negative", "huge"],
                1: ["one", "several"], 3: ["empty", "none-list", "negative", "huge"], 0: []}
    assert [r[0] for r in fast] == expected[None if wanted is None else len(wanted)]
    if wanted is None:
        by_id = {r[0]: r for r in fast}
        assert by_id["several"][7] == ["a-9", "b-1", "b-2"] and by_id["one-topic-two"][7] == ["t-0", "t-1"]
        assert by_id["one"][1:] == (7, 1, "Ongoing", 60_000, T0, T0, ["orders-3"], 3, 12)
        assert by_id["empty"][5:8] == (None, T0, []) and by_id["negative"][5:7] == (None, None)
        assert by_id["huge"][5:8] == (2**70, 2**63 - 1, [f"ü-topic-{2**40}"])
        assert "gone" not in by_id and "skipped" not in by_id


def test_fold_values_passes_a_record_the_twin_refuses_on_alike() -> None:
    # a state number Kafka does not define: transaction_values raises (TxnState(99)); so does the C loop,
    # which hands that record to it
    if coordinator._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    from kafkatx.coordinator.state import STATE_NAMES_BY_NUMBER

    latest = {"odd": (0, _fields(99, None))}
    with pytest.raises(ValueError):
        coordinator.fold_values(latest, frozenset(), 0, None, None, [])
    with pytest.raises(ValueError):
        coordinator._coordinator.fold_values(latest, frozenset(), 0, None, None, STATE_NAMES_BY_NUMBER,
                                             coordinator.transaction_values, [])


def test_the_collector_comes_back_with_nothing_young() -> None:
    # collector_paused: on, after the block, with the block's objects in the oldest generation (no
    # collection over all of them at the first allocation after it) and nothing left frozen
    import gc

    was = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            assert not gc.isenabled()
            made = [[i] for i in range(150_000)]
        assert gc.isenabled() and gc.get_freeze_count() == 0
        assert gc.get_count()[0] < 1_000 and len(made) == 150_000
        gc.collect()
        with collector_paused():  # a few objects: left young, collected as before
            few = [[i] for i in range(500)]
        assert gc.get_count()[0] >= 500 and len(few) == 500
        gc.freeze()  # someone else's frozen objects stay frozen (unfrozen, the count would be 0)
        frozen = gc.get_freeze_count()
        with collector_paused():
            more = [[i] for i in range(150_000)]
        assert gc.get_freeze_count() > frozen // 2 and len(more) == 150_000
        gc.unfreeze()
    finally:
        if not was:
            gc.disable()


@pytest.mark.parametrize("now", [T0 + 59_999, T0 + 60_001, 2**70, -(2**70)], ids=["before", "after", "huge", "negative"])
def test_timed_out_of_compiled_equals_python(now) -> None:  # type: ignore[no-untyped-def]
    # find-hanging's ids past their timeout, one fold at a time: the C loop restates rules.is_timed_out
    # for 64-bit numbers and asks the rule itself for the others (huge start, timeout or now)
    if coordinator._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    from kafkatx.coordinator.rules import TWO_PHASE_COMMIT_TIMEOUT_MS, is_timed_out

    def fields(state: int, start: int, timeout: int = 60_000) -> tuple[object, ...]:
        return (0, 7, 1, timeout, state, None, start, start, -1, -1, 0, -1)

    latest = {
        "ongoing": (0, fields(1, T0)), "prepare": (1, fields(2, T0)), "empty": (2, fields(0, -1)),
        "no-start": (3, fields(1, -1)), "two-pc": (4, fields(1, T0, TWO_PHASE_COMMIT_TIMEOUT_MS)),
        "huge-start": (5, fields(1, 2**65)), "huge-timeout": (6, fields(1, T0, 2**64)),
        "overflow": (7, fields(1, 2**63 - 10, 100)), "gone": (8, None), "skipped": (9, fields(1, T0)),
    }
    skip, states = frozenset({"skipped"}), {1, 2}
    pure: list[tuple[object, ...]] = []
    fast: list[tuple[object, ...]] = []
    coordinator.timed_out_of(latest, skip, 4, states, now, pure)  # type: ignore[arg-type]
    coordinator._coordinator.timed_out_of(latest, skip, 4, states, now, TWO_PHASE_COMMIT_TIMEOUT_MS, is_timed_out,
                                          fast)
    assert fast == pure
    expected = {T0 + 59_999: [], T0 + 60_001: ["ongoing", "prepare"],
                2**70: ["ongoing", "prepare", "huge-start", "huge-timeout", "overflow"], -(2**70): []}[now]
    assert [r[0] for r in fast] == expected
    assert all(r[3] == 4 and r[2] is latest[r[0]][1] for r in fast)  # type: ignore[index]


def _answers(root: Path, history_for: tuple[str, ...] | None) -> tuple[object, ...]:
    state = _replay(root, history_for)
    return (dict(state.transactions.items()), dict(state.history.items()), state.tombstoned,
            [(f.check, f.offset, f.message) for f in state.findings], state.skipped,
            {pid: state.transactional_id_for(pid) for pid in range(0, 70)})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2_000), st.integers(0, 255)), min_size=1, max_size=4),
       st.sampled_from([None, ()]))
def test_damaged_bytes_give_the_same_answers_compiled_and_pure(log_dir, tmp_path_factory, flips,
                                                               history_for) -> None:  # type: ignore[no-untyped-def]
    # bytes changed anywhere in the segment (lengths, CRCs, keys, values, varints): the compiled fold and
    # the Python fold stop, skip and report alike (a record C does not take is Python's, with its errors)
    import shutil

    if coordinator._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    root, _names = log_dir
    copy = tmp_path_factory.mktemp("damaged") / "logs"
    shutil.copytree(root, copy)
    seg = copy / "__transaction_state-0" / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    for at, byte in flips:
        data[at % len(data)] = byte
    seg.write_bytes(bytes(data))
    fast = _answers(copy, history_for)
    with compiled.pure_python():
        pure = _answers(copy, history_for)
    assert fast == pure


# ---------------------------------------------------------------- kafkatx scan's ID rows (TxnTable.id_rows)

def _id_rows_both(records: list[tuple[int, str, tuple[object, ...] | None]], now: int, *,
                  history_for: object = (), named: frozenset[int] | None = None, tids: frozenset[str] | None = None,
                  ) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The ID rows of one partition (0 of N) folded from ``records``, those the filter (``named``, ``tids``)
    keeps: the C table's (``TxnTable.id_rows``) and the reference's (``tasks._id_rows``) over the Python fold
    of the same records."""
    import pickle

    from kafkatx.coordinator.rules import TIMEOUT_STATES, TWO_PHASE_COMMIT_TIMEOUT_MS, is_timed_out
    from kafkatx.spark import tasks as X

    folded = []
    for packed in (True, False):
        fold = txn_fold.TxnFold(0, "__transaction_state-0", N, [], history_for, packed=packed)  # type: ignore[arg-type]
        record = fold.record_of()
        for i, (offset, tid, value) in enumerate(records):
            record(offset, tid, value, "f.log", i)  # type: ignore[arg-type]
        folded.append(fold.finish())
    fast_ids, pure_ids = folded
    assert isinstance(fast_ids.latest, txn_fold.TxnLatest) and type(pure_ids.latest) is dict
    fast: list[tuple[object, ...]] = []
    fast_ids.latest.table.id_rows(X.ID, 0, now, fast_ids.misplaced, TIMEOUT_STATES, TWO_PHASE_COMMIT_TIMEOUT_MS,
                                  is_timed_out, pickle.dumps, pickle.HIGHEST_PROTOCOL, named, tids, fast)
    return fast, list(X._id_rows(pure_ids, 0, now, named=named, tids=tids))


def _random_records(seed: int) -> list[tuple[int, str, tuple[object, ...] | None]]:
    """A random __transaction_state partition's records: ids that hash here and some that do not, values in
    every state (Ongoing ones started long ago, none started, two-phase-commit timeouts), tombstones, ids
    coming back after them, producer ids changing (history), values with no producer id at all, previous and
    next producer ids, partitions lists (shared tuples and strings, names beyond ASCII, long ones), and
    numbers the packed record does not hold (kept as the Python object)."""
    import random

    from kafkatx.coordinator.rules import TWO_PHASE_COMMIT_TIMEOUT_MS

    rnd = random.Random(seed)
    ids = _ids_on(0, 25) + _ids_on(0, 4, other=True) + ["ü-" + t for t in _ids_on(0, 40) if t.endswith("1")][:3]
    shared = ("orders", (0, 1))
    topics = ["orders", "payments", "ünïcode-topic", "t" * 300]

    def parts() -> object:
        pick = rnd.random()
        if pick < 0.2:
            return None
        if pick < 0.3:
            return ()
        if pick < 0.4:
            return (shared, shared, ("x", shared[1]))  # the same objects twice
        if pick < 0.45:  # many: large partition lists (a pickle past 64 KiB, many shared objects)
            return tuple((f"topic-{i}", (i, i + 1)) for i in range(rnd.choice([200, 300, 3000])))
        return tuple((rnd.choice(topics), tuple(rnd.sample(range(-3, 70_000), rnd.randint(1, 3))))
                     for _ in range(rnd.randint(1, 4)))

    def value() -> tuple[object, ...]:
        state = rnd.randrange(8)
        pid = rnd.choice([-1, 0, 1, 255, 256, 65_535, 65_536, 2**31 - 1, 2**31, rnd.randrange(2**40), 2**63 - 1])
        start = rnd.choice([-1, T0 - 120_000, T0, T0 + 59_000, 0, 2**40, 2**63 - 1])
        timeout = rnd.choice([60_000, 1, 0, TWO_PHASE_COMMIT_TIMEOUT_MS, 900_000])
        prev, nxt = rnd.choice([-1, -1, 5, 2**33, -(2**31)]), rnd.choice([-1, -1, 6, -(2**40), -(2**31) - 1, -(2**63)])
        fields = [rnd.choice([0, 1]), pid, rnd.choice([0, 1, -1, 32_767]), timeout, state, parts(),
                  rnd.choice([T0, -5, 2**62]), start, prev, nxt, rnd.choice([0, 2]), rnd.choice([-1, 3])]
        odd = rnd.random()
        if odd < 0.05:
            fields[6] = 2**70  # past 64 bits: kept as the object
        elif odd < 0.08:
            fields[7] = -(2**65)
        elif odd < 0.1:
            fields[1] = 2**64  # a producer id past 64 bits (claims and history from the object)
        elif odd < 0.12:
            fields[3] = 2**40  # a timeout past an int32
        return tuple(fields)

    out: list[tuple[int, str, tuple[object, ...] | None]] = []
    for offset in range(400):
        out.append((offset, rnd.choice(ids), None if rnd.random() < 0.15 else value()))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("now", [T0 + 60_001, 2**70], ids=["now", "huge-now"])
def test_id_rows_compiled_equal_the_reference_on_random_partitions(seed, now) -> None:  # type: ignore[no-untyped-def]
    # kafkatx scan's ID rows (spark/tasks.py): made by the C table where it lies, the same rows as the
    # Python loop over the fold's mappings, pickled values byte for byte (pickle.dumps, protocol 5)
    if txn_fold._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    import pickle

    records = _random_records(seed)
    fast, pure = _id_rows_both(records, now)
    assert fast == pure
    assert [type(x) for r in fast for x in r] == [type(x) for r in pure for x in r]
    # the records reach every branch: tombstones, misplaced ids, ids past their timeout, history,
    # values that claim no producer id, and each value is the latest record's
    latest = {tid: (offset, value) for offset, tid, value in records}
    assert [r[3] for r in fast] == list(dict.fromkeys(tid for _o, tid, _v in records))
    assert {r[3]: (r[6], None if r[11] is None else pickle.loads(r[11])) for r in fast} == latest  # noqa: S301
    assert any(r[5] for r in fast) and any(not r[4] for r in fast) and any(r[9] for r in fast)
    assert all(r[10] == list(dict.fromkeys([*r[8], *r[9]])) for r in fast)  # no filter: every producer id named
    if seed < 4:
        assert any(r[7] for r in fast)
    _filtered_equal_the_reference(records, now, seed)  # random named sets (None, empty, some), wanted ids


def _every_shape() -> tuple[list[str], list[tuple[int, str, tuple[object, ...] | None]]]:
    """One of each shape by hand, ids (a, b, c, d, e, f, w) and records: a tombstone (a), an id that hashes
    elsewhere (w), an Ongoing value past its timeout (w, b) and one of a two-phase-commit transaction (c), a
    value with no producer id (d), one kept as the Python object (e: started past 64 bits, the rule itself
    says not yet), an id whose producer id changed (b: two in its history) and one seen only as a tombstone
    (f); T0 + 60,001 is past the timeouts."""
    from kafkatx.coordinator.rules import TWO_PHASE_COMMIT_TIMEOUT_MS

    a, b, c, d, e, f = _ids_on(0, 6)
    (w,) = _ids_on(0, 1, other=True)

    def fields(pid: int, state: int, start: int, timeout: int = 60_000, prev: int = -1) -> tuple[object, ...]:
        return (0, pid, 0, timeout, state, (("t", (0,)),), start, start, prev, -1, 0, -1)

    return [a, b, c, d, e, f, w], [
        (0, a, fields(10, 1, T0)), (1, a, fields(10, 3, T0)), (2, a, None),
        (3, w, fields(50, 1, T0)),
        (4, b, fields(20, 1, T0)), (5, c, fields(30, 1, T0, TWO_PHASE_COMMIT_TIMEOUT_MS)),
        (6, d, fields(-1, 0, -1)), (7, e, fields(40, 1, 2**70)), (8, b, None), (9, b, fields(21, 1, T0, prev=20)),
        (10, f, None),
    ]


def test_id_rows_compiled_equal_the_reference_on_every_shape() -> None:
    if txn_fold._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    (a, b, c, d, e, f, w), records = _every_shape()
    now = T0 + 60_001
    fast, pure = _id_rows_both(records, now)
    assert fast == pure
    by_id = {r[3]: r[4:10] for r in fast}  # home, tomb, offset, timed out, claims, hist
    assert by_id == {a: (True, True, 2, False, [], [10]), w: (False, False, 3, True, [50], [50]),
                     b: (True, False, 9, True, [21, 20], [20, 21]), c: (True, False, 5, False, [30], [30]),
                     d: (True, False, 6, False, [], []), e: (True, False, 7, False, [40], [40]),
                     f: (True, True, 10, False, [], [])}
    # every record kept (describe-txn's history): the same rows again
    fast, pure = _id_rows_both(records, now, history_for=None)
    assert fast == pure and dict((r[3], r[9]) for r in fast)[a] == [10, 10]


def _named_sets(records: list[tuple[int, str, tuple[object, ...] | None]], seed: int) -> list[frozenset[int] | None]:
    """Named sets for the filter: none (no filter), empty, a few of the producer ids the records use (and
    ids no record uses, one past 64 bits), most of them."""
    import random

    rnd = random.Random(seed)
    used = sorted({v[i] for _o, _t, v in records if v is not None for i in (1, 8, 9)}, key=repr)  # type: ignore[misc]
    few = frozenset(rnd.sample(used, min(3, len(used))) + [123_456_789, 2**64])  # type: ignore[arg-type]
    most = frozenset(rnd.sample(used, len(used) * 3 // 4))  # type: ignore[arg-type]
    return [None, frozenset(), few, most]


def _filtered_equal_the_reference(records: list[tuple[int, str, tuple[object, ...] | None]], now: int,
                                  seed: int) -> None:
    """kafkatx scan's fold tasks keep only the ids a named producer id could resolve to (one it claims or its
    history used: CoordinatorState.transactional_id_for, expired_transactional_id_for) and those past their
    timeout (the owed-abort check): the C table and the reference keep the same rows, each the unfiltered
    row with only the named producer ids in its pids; and with the second form (wanted ids) the same."""
    every, _pure = _id_rows_both(records, now)
    tids = frozenset(r[3] for r in every[::3])  # type: ignore[misc]
    kept_some = False
    for named in _named_sets(records, seed):
        for wanted in (None, tids):
            fast, pure = _id_rows_both(records, now, named=named, tids=wanted)
            assert fast == pure
            assert [type(x) for r in fast for x in r] == [type(x) for r in pure for x in r]
            if named is None and wanted is None:
                assert fast == every
                continue
            want = [(*r[:10], [p for p in r[10] if named is not None and p in named], *r[11:]) for r in every  # type: ignore[attr-defined]
                    if (named is not None and (r[7] or set(r[8]) & named or set(r[9]) & named))  # type: ignore[arg-type,operator]
                    or (wanted is not None and r[3] in wanted)]
            if named is None:  # the wanted ids' rows alone, every producer id in their pids
                want = [r for r in every if r[3] in wanted]  # type: ignore[operator]
            assert fast == want
            kept_some |= named is not None and len(named) > 0 and 0 < len(fast) < len(every)
    assert kept_some


def test_id_rows_filtered_on_every_shape() -> None:
    # the shapes of test_id_rows_compiled_equal_the_reference_on_every_shape, filtered: a named producer id
    # of an id's history keeps it (a tombstone's too: the expired id a notice names), an id past its timeout
    # is kept with no producer id named, the others skipped; the wanted ids' form keeps those ids only
    if txn_fold._coordinator is None:
        pytest.skip("kafkatx.coordinator._coordinator is not built (python setup.py build_ext --inplace)")
    (a, b, c, d, e, f, w), records = _every_shape()
    now = T0 + 60_001
    for named, tids, want in (
            (frozenset({10, 20}), None, {a: [10], w: [], b: [20]}),
            (frozenset({21, 30, -1}), None, {w: [], b: [21], c: [30]}),
            (frozenset(), None, {w: [], b: []}),
            (None, frozenset({c, f, "not-here"}), {c: [30], f: []}),
            (frozenset({40}), frozenset({d}), {w: [], b: [], d: [], e: [40]})):
        fast, pure = _id_rows_both(records, now, named=named, tids=tids)
        assert fast == pure
        assert {r[3]: r[10] for r in fast} == want, (named, tids)
    with pytest.raises(TypeError):
        _id_rows_both(records, now, named=[10])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _id_rows_both(records, now, named=frozenset({"10"}))  # type: ignore[arg-type]
