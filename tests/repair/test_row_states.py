"""abort-hanging's row states as enums with a reason (``RowAction``, ``RowResult``): what each row does and what
became of it are read as an enum and a reason, never by a prefix of the text; the text (cli.md's ``action`` and
``result`` keys) is the enum's value, then ``: reason``. Expected texts are cli.md's and the row model's."""

from __future__ import annotations

import io

import pytest

from kafkatx.render import repair_views
from kafkatx.render.descriptions import invocation
from kafkatx.rows import AbortPlanRow, RowAction, RowResult


def _row(action: str, result: str | None = None) -> AbortPlanRow:
    return AbortPlanRow(kind="orphaned", topic="orders", partition=0, producer_id=7, producer_epoch=1,
                        transactional_id="t", coordinator_state=None, first_offset=5, start_ms=None,
                        duration_ms=None, action=action, result=result)


# cli.md's (and AbortPlanRow's) action texts, each with its state and reason
ACTIONS = [
    ("abort-timed-out", RowAction.ABORT_TIMED_OUT, ""),
    ("complete-commit", RowAction.COMPLETE_COMMIT, ""),
    ("complete-abort", RowAction.COMPLETE_ABORT, ""),
    ("write-abort-marker", RowAction.WRITE_ABORT_MARKER, ""),
    ("write-commit-marker", RowAction.WRITE_COMMIT_MARKER, ""),
    ("drop-snapshots", RowAction.DROP_SNAPSHOTS, ""),
    ("force-terminate", RowAction.FORCE_TERMINATE, ""),
    ("fence-epoch", RowAction.FENCE_EPOCH, ""),
    ("untouched: prepared-2pc", RowAction.UNTOUCHED, "prepared-2pc"),
    ("untouched: undecided", RowAction.UNTOUCHED, "undecided"),
    ("not planned: a partition of the selection could not be read", RowAction.NOT_PLANNED,
     "a partition of the selection could not be read"),
    # a reason may hold ": " itself (a file and byte): only the first one ends the state
    ("refused: /d/orders-0/00000000000000000000.log: byte 1234: torn batch", RowAction.REFUSED,
     "/d/orders-0/00000000000000000000.log: byte 1234: torn batch"),
]


@pytest.mark.parametrize(("text", "state", "reason"), ACTIONS)
def test_an_action_is_a_state_and_a_reason_and_its_text_is_unchanged(text, state, reason):
    row = _row(text)
    assert (row.state, row.reason) == (state, reason)
    assert state.text(reason) == text and type(state.text(reason)) is str  # JSON/YAML see a plain string
    assert row.refused is (state is RowAction.REFUSED)
    assert row.untouched is (state is RowAction.UNTOUCHED)


@pytest.mark.parametrize(("text", "outcome", "failure"), [
    (None, None, None),
    ("ok", RowResult.OK, None),
    ("untouched", RowResult.UNTOUCHED, None),
    ("failed: NOT_LEADER_OR_FOLLOWER: leader moved", RowResult.FAILED, "NOT_LEADER_OR_FOLLOWER: leader moved"),
])
def test_a_result_is_an_outcome_and_a_reason(text, outcome, failure):
    row = _row("write-abort-marker", text)
    assert (row.outcome, row.failure) == (outcome, failure)
    if outcome is not None:
        assert outcome.text(failure or "") == text


def test_an_unknown_action_text_is_an_error_not_a_quiet_repair():
    with pytest.raises(ValueError):
        assert _row("rewrite-everything").state is None


def test_the_plan_view_reads_the_enum_not_the_text_prefix():
    """A failed row's first failure is said in full; a refused row's reason in full; an untouched 2PC row is
    counted as left alone (cli.md: the rest of the plan runs)."""
    def render(rows, **kw) -> str:
        out = io.StringIO()
        repair_views.show_abort(rows, "text", invocation(["/data"]), out=out, width=200, **kw)
        return out.getvalue()

    failed = render([_row(RowAction.WRITE_ABORT_MARKER.text(), RowResult.FAILED.text("timed out"))], applied=True)
    assert "1 row of 1 failed" in failed and "First: failed: timed out" in failed
    refused = render([_row(RowAction.REFUSED.text("producer epoch 32767 is Short.MaxValue"))])
    assert "1 row refused: nothing will be changed." in refused
    assert "First: refused: producer epoch 32767 is Short.MaxValue" in refused
    left = render([_row(RowAction.UNTOUCHED.text("prepared-2pc"))])
    assert "Left untouched (1 row(s)): prepared two-phase-commit transaction(s) t" in left
