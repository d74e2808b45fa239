"""scan's progress on a terminal: a spinner until the job says how much work there is, then a bar.

It used to draw ``starting Spark ━━━━━━━━ 0/? tasks`` (a full-looking bar while nothing was known) for the
~25 s Spark takes to start.
"""

from __future__ import annotations

import io

from kafkatx.cli import scan


def test_spinner_until_the_work_is_known(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(scan.sys, "stderr", stream)
    status = scan._SparkStatus()
    try:
        assert "SpinnerColumn" in status.columns and "BarColumn" not in status.columns
        status.update("planning", 0, 0, 0, 0)  # still nothing known
        assert "BarColumn" not in status.columns and "MofNCompleteColumn" not in status.columns
        status.update("decoding", 3, 12, 3 << 20, 12 << 20)
        assert "BarColumn" in status.columns and "SpinnerColumn" not in status.columns
        status.update("decoding", 12, 12, 12 << 20, 12 << 20)
    finally:
        status.close()
    assert "0/?" not in stream.getvalue()
