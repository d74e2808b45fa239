"""The producer-state fold's twins on int64 boundaries: ``ProducerStateFold.fold`` compiled and pure.

Transactional batches and markers with base offsets near 2^63-1 / -2^63 / 0 and last offset deltas near
2^31-1 / -2^31 / 0, built byte by byte (``tests/format/test_int64_boundaries._batch``). Kafka's rule
(``LogSegment.recover`` -> ``ensureOffsetInRange(batch.lastOffset())``, ``lastOffset = baseOffset +
lastOffsetDelta``): a batch whose last offset leaves int64 is never accepted, so the fold must not apply
it -- both twins stop there (``FOLD_STOP``, the batch left to the replay loop, whose header read raises the
DecodeError at byte 23) with the same state; every batch before it is applied with its last offset
``base + delta`` exactly (``ProducerStateEntry.lastDataOffset``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_replay_fold import _call, _part, _twins
from txn_builders import PartitionWriter, write_log_dir

from kafkatx.errors import DecodeError
from kafkatx.format.control import ControlType
from kafkatx.format.record_batch import build_control_batch, read_batch_header
from kafkatx.storage.producer_state import FOLD_END, FOLD_STOP, fold_compiled
from kafkatx.storage.replay import replay_partition
from tests.format.test_int64_boundaries import INT64_MAX, INT64_MIN, _batch, base_offsets, deltas32

pytestmark = pytest.mark.skipif(not fold_compiled(), reason="the C extension is not built "
                                "(or KAFKATX_PURE_PYTHON is set): nothing compiled to compare")


@pytest.fixture(scope="module")
def part(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A real partition (t-0) for the replay's topic and partition; the folds read the buffers below."""
    d = tmp_path_factory.mktemp("t0")
    w = PartitionWriter("t", 0)
    w.data(7, 0, 1)
    write_log_dir(d, [w])
    return _part(d)


def _marker(base: int, pid: int, commit: bool) -> bytes:
    return build_control_batch(offset=base, control_type=ControlType.COMMIT if commit else ControlType.ABORT,
                               producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=1_700_000_000_000)


batches = st.lists(st.one_of(
    st.tuples(st.just("data"), base_offsets, deltas32, st.sampled_from([3, 9])),
    st.tuples(st.just("marker"), base_offsets, st.booleans(), st.sampled_from([3, 9]))), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(batches)
def test_replay_fold_twins_agree_on_int64_boundaries(part, specs) -> None:  # type: ignore[no-untyped-def]
    raws = [(_batch(s[1], s[2], [(0, 0)], pid=s[3], txn=True) if s[0] == "data" else _marker(s[1], s[3], s[2]))
            for s in specs]
    buf = b"".join(raws)
    c, py = _twins([], keep_completed=True, span_floor=0)
    fast = _call(c, "fold", buf, 0, len(buf))
    assert fast == _call(py, "fold", buf, 0, len(buf))
    (_ok, (pos, applied, _seen, reason)), states = fast[0], {row[0]: row for row in fast[1][0]}
    # the rule, from the bytes written: the first batch whose last offset leaves int64 stops the fold
    bad = next((i for i, s in enumerate(specs) if s[0] == "data" and not INT64_MIN <= s[1] + s[2] <= INT64_MAX),
               None)
    if bad is not None:
        # never applied, never passed: the fold stops at it
        bad_pos = sum(len(r) for r in raws[:bad])
        assert reason == FOLD_STOP and pos == bad_pos
        event("stopped at a batch whose last offset leaves int64")
        with pytest.raises(DecodeError) as info:
            read_batch_header(buf, pos)
        assert info.value.position == pos + 23 and "overflows int64" in info.value.message
    elif reason == FOLD_END:
        # fold's end defaults to 2^63-1, exclusive: a batch based there is passed over
        event("folded to the end")
        folded = [s for s in specs if s[1] < INT64_MAX]
        assert pos == len(buf) and applied == len(folded)
        last_data = {s[3]: s[1] + s[2] for s in folded if s[0] == "data"}
        for pid, last in last_data.items():
            assert states[pid][3] == last  # ProducerStateEntry.lastDataOffset: base + delta


def test_replay_at_the_top_of_int64_is_the_same_in_both_twins(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """End to end: a partition whose last offset is exactly 2^63-1 replays (in range); one more and the
    batch is rejected: after an unclean shutdown recovery truncates it (LogSegment.recover, the load's
    truncate-segment action), after a clean one the replay (from the snapshot at the segment's base) meets
    it: a DecodeError at its byte 23. The same compiled and pure; the log's end, 2^63, is past int64 (the
    compiled fold takes such a bound as one past every int64 offset)."""
    from kafkatx.format import compiled

    base = INT64_MAX - 100
    cases = {"in range": (100, True), "past int64, clean": (101, True), "past int64, unclean": (101, False)}
    got = {}
    for name, (last_delta, clean) in cases.items():
        d = tmp_path / name.replace(" ", "_").replace(",", "")
        w = PartitionWriter("t", 0, base=base)
        w.snapshot([], offset=base)  # else a clean shutdown without a snapshot reads no producer state at all
        w._append(_batch(base, last_delta, [(0, 0)], pid=3, txn=True), INT64_MAX, 1_700_000_000_000, index=False)
        write_log_dir(d, [w], clean_shutdown=clean)
        outcomes = []
        for pure in (False, True):
            with compiled.pure_python(pure):
                try:
                    state = replay_partition(_part(d))
                    outcomes.append(("ok", {pid: e.last_offset for pid, e in state.producers.items()},
                                     [a.action for a in state.load.actions]))
                except DecodeError as e:
                    outcomes.append(("error", type(e), e.message, e.position))
        assert outcomes[0] == outcomes[1], name
        got[name] = outcomes[0]
    assert got["in range"][:2] == ("ok", {3: INT64_MAX})
    assert got["past int64, clean"][0] == "error" and got["past int64, clean"][3] == 23
    assert got["past int64, unclean"][:2] == ("ok", {}) and "truncate-segment" in got["past int64, unclean"][2]
