"""Repeated notes said once per kind."""

from __future__ import annotations

from kafkatx.render.notes import aggregate_notes


def _timeout_note(i: int) -> str:
    return (f"transaction 'txn-{i:07d}' (producer {1_000_000 + i}) is Ongoing past its timeout "
            f"(60000 ms from {1_700_000_000_000 + i}) but no partition in these log dirs holds it open")


def test_many_notes_of_one_kind_are_one_line():
    notes = [_timeout_note(i) for i in range(200_000)]
    out = aggregate_notes(notes)
    assert out == [f"200,000 notes like this one ('txn-0000000', 'txn-0000001', 'txn-0000002' and 199,997 more): "
                   f"{notes[0]}"]


def test_kinds_keep_their_order_and_few_repeats_stay_as_they_are():
    other = "only 3 of at least 50 __transaction_state partitions are in these log dirs"
    parts = [f"orders-{p}: no high watermark checkpointed" for p in range(10_000)]
    notes = [other, _timeout_note(1), _timeout_note(2), *parts]
    out = aggregate_notes(notes)
    assert out[:3] == notes[:3]  # one note, then a kind seen twice: printed as they are
    assert out[3] == ("10,000 notes like this one (orders-0, orders-1, orders-2 and 9,997 more): "
                      "orders-0: no high watermark checkpointed")
    assert len(out) == 4


def test_identical_notes_without_names():
    assert aggregate_notes(["the same words"] * 5) == ["5 times: the same words"]
    assert aggregate_notes(["the same words"] * 3) == ["the same words"] * 3


def test_owed_abort_kinds_are_the_scans_kinds():
    # find-hanging's owed-abort notes take their kind from hanging.OWED_ABORT_NOTE's shape (no scan per
    # note, a million at scale): the very kind the scan gives, on every shape of id, numbers and names,
    # including those the shape leaves to the scan (quotes, dashes at odd places, non-ASCII)
    import random

    from kafkatx.checks.hanging import OWED_ABORT_NOTE
    from kafkatx.render import notes

    rng = random.Random(25)
    topics = ["orders", "a.b", "x-1", "_t", "t_", "a--b", ".x", "x.", "-x", "x-", "é", "a.-b", "1", "a-.-0",
              "o'k", 'q"x', "a b", "9-9-9", "t,1", "x_-_y"]
    tids = ["txn-1", "a'b", 'a"b', "x\\y", "é", "\n", "", "it's \"x\"", "a b-1", "1,000", "t-0000001", "-"]
    fast = 0
    for _ in range(5000):
        names = [f"{rng.choice(topics)}-{rng.randint(0, 120)}" for _ in range(rng.choice([0, 1, 2, 3]))]
        note = OWED_ABORT_NOTE % (rng.choice(tids), rng.choice([-1, 0, 5, 1_000_000]), rng.choice([-5, 0, 60_000]),
                                  rng.choice([-1, 0, 1_700_000_000_000]), ", ".join(names) or "none")
        assert notes._kind(note) == notes._VARYING.sub("#", note), note
        fast += notes._owed_abort_shape()[0].fullmatch(note) is not None
    assert 0 < fast < 5000  # both ways taken


def test_a_million_owed_aborts_are_one_line_as_before():
    from kafkatx.checks.hanging import OWED_ABORT_NOTE

    many = [OWED_ABORT_NOTE % (f"txn-{i:07d}", 1_000_000 + i, 60_000, 1_700_000_000_001, "orders-000-0")
            for i in range(2000)]
    assert aggregate_notes(many) == [f"2,000 notes like this one ('txn-0000000', 'txn-0000001', 'txn-0000002' and "
                                     f"1,997 more): {many[0]}"]
