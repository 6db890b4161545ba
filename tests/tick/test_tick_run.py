"""One tick's shared state, as plain unit tests: the errors it survives and
the exit status they call for, a host fault (the first one stands), the
database declared down, and outcome counts from many threads."""

from __future__ import annotations

import threading

from orchestrator.domain.decide import Outcome
from orchestrator.errors import ConnectionLostError, OrchestratorError
from orchestrator.ext.model import TICK_ERROR_STATUS
from orchestrator.tick.tick_run import TickRun


class _Busy(OrchestratorError):
    exit_code = 75


def test_survived_errors_are_warned_and_set_the_exit_status() -> None:
    warned: list[str] = []
    tick = TickRun(warn=warned.append)
    assert tick.report.exit_code == 0
    tick.error("t1: reporting failed", RuntimeError())
    tick.error("t2", _Busy("locked"))
    assert warned == ["t1: reporting failed: RuntimeError", "t2: locked"]
    assert tick.report.exit_code == TICK_ERROR_STATUS  # the first one's


def test_a_closed_stderr_does_not_lose_the_error() -> None:
    def closed(_line: str) -> None:
        raise OSError("stderr closed")

    tick = TickRun(warn=closed)
    tick.error("where", _Busy("why"))
    assert tick.report.exit_code == 75


def test_the_first_host_fault_stands() -> None:
    tick = TickRun()
    run = tick.host_fault(_Busy("cannot write state_root /x"))
    assert (run.outcome, run.error) == (Outcome.HOST_ERROR, "cannot write state_root /x")
    tick.host_fault(_Busy("another"))
    assert str(tick.report.host_fault) == "cannot write state_root /x"
    assert tick.report.stopped_claiming == "cannot write state_root /x"


def test_the_database_down_stops_the_attempts() -> None:
    tick = TickRun()
    tick.database_down(TimeoutError("timed out"))
    assert tick.db_down.is_set()
    assert isinstance(tick.report.host_fault, ConnectionLostError)
    assert tick.report.stopped_claiming == "cannot reach the database: timed out"


def test_counts_from_many_threads_add_up() -> None:
    tick = TickRun()

    def count() -> None:
        for _ in range(1000):
            tick.count(Outcome.PASSED)
            tick.halted()

    threads = [threading.Thread(target=count) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tick.report.outcomes == {"passed": 4000}
    assert tick.report.halted == 4000
