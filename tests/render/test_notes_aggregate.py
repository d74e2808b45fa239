"""Repeated notes said once per kind (issue 25)."""

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
