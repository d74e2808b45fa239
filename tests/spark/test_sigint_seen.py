"""``job._sigint_seen``: a Ctrl-C noted during the scan always ends it as interrupted.

pyspark's SIGINT handler (like Python's) raises KeyboardInterrupt where the signal is handled; when that is
inside a finalizer (py4j frees a JavaObject from a weakref callback whenever one is collected), Python
cannot propagate it: it prints "Exception ignored in ..." with a traceback and the job went on to exit 0.
No Spark here: the finalizer is a plain weakref callback, the handler Python's own.
"""

from __future__ import annotations

import signal
import weakref
from collections.abc import Iterator

import pytest

from kafkatx.spark import job


class _Held:
    pass


@pytest.fixture(autouse=True)
def _python_handler() -> Iterator[None]:
    """Python's own SIGINT handler for the test (a SparkContext of an earlier test may have put pyspark's in,
    which would cancel that session's jobs), the one in place before put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_interrupt_raised_in_a_finalizer_ends_the_body_as_interrupted(capsys: pytest.CaptureFixture[str]) -> None:
    ran_on: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with job._sigint_seen() as seen:
            held = _Held()
            ref = weakref.ref(held, lambda _r: signal.raise_signal(signal.SIGINT))  # handled inside the callback
            del held
            ran_on.append("after the finalizer")  # the interrupt did not propagate from it
            assert seen == [signal.SIGINT]
            assert ref() is None
    assert ran_on == ["after the finalizer"]
    err = capsys.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err


def test_a_body_without_an_interrupt_ends_as_it_ends() -> None:
    with job._sigint_seen() as seen:
        pass
    assert seen == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
