"""Fixtures shared by every test folder."""

from __future__ import annotations

import os

import pytest


class Forked(list[int]):
    """The pids ``os.fork`` gave while a test ran (``forked``): the processes that test made, not other
    tests' children still running."""

    def all_reaped(self) -> bool:
        """Every one of them waited for already: no zombie, no child still running."""
        for pid in self:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            return False
        return True


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> Forked:
    """``os.fork`` watched for the test's duration: the pids it returned to the forking process."""
    pids = Forked()
    fork = os.fork

    def watched() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", watched)
    return pids
