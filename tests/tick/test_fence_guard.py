"""The fence guard alone, on a real database: the runner's stop check for a
running attempt renews its lease, stops it once the task's version moves
(a halt) or its lease was taken, and at once when the tick stops."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from e2e.e2e_support import PASS, stage
from sqlalchemy import create_engine, text
from support import Project
from tick.tick_support import Bench

from orchestrator.tick.fence import FenceGuard


def _until_stopped(guard: FenceGuard, deadline: float = 10.0) -> bool:
    """Poll the guard as the runner does, until it says stop (or the deadline)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if guard():
            return True
        time.sleep(0.05)
    return False


def _lease(project: Project) -> datetime:
    [(expires,)] = project.query("SELECT lease_expires_at FROM attempts")
    return datetime.fromisoformat(str(expires))


def test_it_renews_the_lease_and_stops_on_a_halt(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS), lease_seconds=3)
    b.add("t1")
    claim = b.claim()
    guard = FenceGuard(b.tick, b.tx, claim)
    assert guard.interval == 1.0  # a third of the lease
    first = _lease(project)
    end = time.monotonic() + 10
    while _lease(project) == first and time.monotonic() < end:
        assert guard() is False
        time.sleep(0.05)
    assert _lease(project) > first  # renewed while the task is ours
    assert project.cli("halt", "t1").exit_code == 0
    assert _until_stopped(guard)
    assert guard.fence_lost


def test_a_lease_taken_by_another_tick_stops_it(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS), lease_seconds=3)
    b.add("t1")
    guard = FenceGuard(b.tick, b.tx, b.claim())
    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE attempts SET lease_token = 'another-tick'"))
    engine.dispose()
    assert _until_stopped(guard)
    assert guard.fence_lost


def test_a_stopping_tick_stops_it_at_once(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    guard = FenceGuard(b.tick, b.tx, b.claim())
    assert guard() is False
    b.tick.stop.set()
    assert guard() is True
    assert not guard.fence_lost  # interrupted by the tick, not by the task's change
    b.tick.stop.clear()
    b.tick.db_down.set()
    assert guard() is True
    assert guard.fence_lost  # recorded as the database's fault
