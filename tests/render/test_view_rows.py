"""The views read typed rows (kafkatx/rows.py's Structs); a path that hands cli.md's dicts of them is converted
once, on entry (``views.typed_rows``), and renders as the rows themselves do."""

from __future__ import annotations

import io

from kafkatx.render import views
from kafkatx.render.descriptions import invocation
from kafkatx.rows import TransactionRow


def test_list_txn_view_takes_rows_or_their_dicts_alike():
    """The view reads TransactionRow; cli.md's dicts of them (list-txn's JSON-shaped rows) are converted once."""
    rows = [TransactionRow(transactional_id="a", producer_id=1, producer_epoch=0, state="Ongoing", timeout_ms=60_000,
                           start_timestamp_ms=1_700_000_000_000, last_update_timestamp_ms=1_700_000_000_000,
                           partitions=["x-0"], coordinator_partition=3)]
    as_dicts = [{"transactional_id": "a", "producer_id": 1, "producer_epoch": 0, "state": "Ongoing",
                 "timeout_ms": 60_000, "start_timestamp_ms": 1_700_000_000_000,
                 "last_update_timestamp_ms": 1_700_000_000_000, "partitions": ["x-0"], "coordinator_partition": 3}]
    assert views.typed_rows(as_dicts, TransactionRow) == rows

    def render(given) -> str:
        out = io.StringIO()
        views.show_list(given, "text", invocation(["/d"]), 1_700_000_100_000, out=out, width=120)
        return out.getvalue()

    assert render(rows) == render(as_dicts)
    assert "Ongoing (late)" in render(rows)  # 100 s open, past its 60 s timeout
