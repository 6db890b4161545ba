"""`end_escaped` ends what a command left outside its group, including what
an escaped process hands the tick as it dies (its own children, adopted by
the subreaper a moment later)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.runner import reaper
from orchestrator.runner.identity import _linux_stat_fields, pid_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux subreaper")


def _wait(predicate: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.005)


def _state(pid: int) -> str | None:
    fields = _linux_stat_fields(pid)
    return None if fields is None else fields[0]


@pytest.fixture
def strays() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def test_an_orphan_handed_over_after_the_children_were_listed_is_ended(
    tmp_path: Path, strays: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a loaded machine showed: a pass lists the tick's children,
    then finds an escaped shell (already SIGKILLed) a zombie and reaps it;
    the shell's own child came to the tick between the list and that look.
    A pass that reaped something looks again, so that child is ended too."""
    assert reaper.adopt_orphans()
    # The command: started first, ended, not reaped (as `end_escaped` is called).
    leader = subprocess.Popen(["true"])
    os.waitid(os.P_PID, leader.pid, os.WEXITED | os.WNOWAIT)
    # What escaped it: a shell in a session of its own, and the shell's child.
    leaf_file = tmp_path / "leaf"
    shell = subprocess.Popen(
        ["/bin/sh", "-c", f"sleep 1000 & echo $! > {leaf_file}; wait"], start_new_session=True
    )
    strays.append(shell.pid)
    _wait(lambda: leaf_file.exists() and leaf_file.read_text().strip(), "the shell's child")
    leaf = int(leaf_file.read_text())
    strays.append(leaf)
    # The shell dies (a kill of an earlier pass): its child comes to us.
    os.kill(shell.pid, signal.SIGKILL)
    _wait(lambda: _state(shell.pid) == "Z", "the shell a zombie")
    real = reaper._adopted
    lists = iter([[shell.pid]])  # the first pass's list, taken before the shell died
    monkeypatch.setattr(reaper, "_adopted", lambda: next(lists, None) or real())
    try:
        reaper.end_escaped(leader.pid, None, deadline=time.monotonic() + 10)
        assert not pid_alive(leaf), "the shell's child outlived the command"
    finally:
        leader.wait()
        shell.wait()  # reaped by end_escaped: Popen takes ECHILD as gone
