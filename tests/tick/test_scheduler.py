"""The scheduler alone, on a real database with real worker processes: it
runs every ready task, never more at once than `--jobs` slots, claims the
next task in the last record with `--jobs 1`, and stops at `--max-tasks`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, outcomes, stage, wait_for
from support import Project, check_invariants
from tick.tick_support import Bench

from orchestrator.ext.model import TickOptions
from orchestrator.tick.scheduler import Scheduler

SLUGS = ("t1", "t2", "t3", "t4")


def _scheduler(b: Bench) -> Scheduler:
    claimer = b.claimer()
    recorder = b.recorder(claimer)
    return Scheduler(b.settings, b.tx, b.tick, claimer, b.attempts(recorder), recorder)


def _held_worker(folder: Path) -> list[str]:
    """A worker that marks itself running and holds its slot until the test
    lets it go (`<folder>.go`; at most 30 s)."""
    script = (
        'mkdir "$0/$ORCHESTRATOR_TASK"; end=$(( $(date +%s) + 30 )); '
        'while [ ! -e "$0.go" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.02; done; '
        'rmdir "$0/$ORCHESTRATOR_TASK"'
    )
    return ["sh", "-c", script, str(folder)]


def test_n_attempts_run_within_the_slots(
    bench: Callable[..., Bench], project: Project, tmp_path: Path
) -> None:
    running = tmp_path / "running"
    running.mkdir()
    b = bench(stage("only", worker=_held_worker(running), verifier=PASS))
    b.add("t1", "t2", "t3")
    scheduler = _scheduler(b)
    loop = threading.Thread(target=scheduler.claim_and_run, args=(TickOptions(jobs=2),))
    loop.start()
    try:
        wait_for(lambda: len(list(running.iterdir())) == 2, what="two workers running")
        # Both slots taken: the claims of that round are all made, and the
        # third task waits, unclaimed, for a slot.
        open_attempts = project.query("SELECT count(*) FROM attempts WHERE finished_at IS NULL")
        assert open_attempts == [(2,)]
        assert project.state("t3") == "only"
    finally:
        (tmp_path / "running.go").touch()
        loop.join(60)
    assert not loop.is_alive()
    assert [project.state(slug) for slug in ("t1", "t2", "t3")] == ["complete"] * 3
    assert b.tick.report.claimed == 3
    assert b.tick.report.outcomes == {"passed": 3}
    assert check_invariants(project.db_url, allow_running=False) == []


@pytest.mark.parametrize(("max_tasks", "done"), [(None, 4), (2, 2)])
def test_jobs_1_runs_inline_until_nothing_is_left_or_the_bound(
    bench: Callable[..., Bench], project: Project, max_tasks: int | None, done: int
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS), retry_interval=60)
    b.add(*SLUGS)
    _scheduler(b).claim_and_run(TickOptions(jobs=1, max_tasks=max_tasks))
    states = [project.state(slug) for slug in SLUGS]
    assert states == ["complete"] * done + ["only"] * (4 - done)
    assert b.tick.report.claimed == done
    # Chained: every claim after the first was made by the record before it.
    [(ticks,)] = project.query("SELECT count(DISTINCT tick_id) FROM attempts")
    assert ticks == 1
    assert all(outcomes(project, slug) == ["passed"] for slug in SLUGS[:done])


def test_a_stopped_tick_claims_nothing(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add(*SLUGS)
    b.tick.stop.set()
    _scheduler(b).claim_and_run(TickOptions(jobs=2))
    assert project.query("SELECT count(*) FROM attempts") == [(0,)]
    assert b.tick.tick_id is None
