"""`orchestrator run` wakes on approval: a real `run --interval 60` process,
real `approve` and `add` processes (and the Python API), on SQLite and
PostgreSQL. The stage must start long before the interval would have
started it; how soon (<= 1 s) is the bench's to show (bench/wake.py)."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from typing import Any

from e2e_support import wait_for
from support import Project

from orchestrator.api.project import Project as Library

BOUND = 30.0  # generous for a loaded CI machine; the interval is 60 s


def _at(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _started(project: Project, slug: str, stage: str) -> Any:
    rows = project.query(
        "SELECT a.started_at FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "WHERE t.slug = :s AND a.stage = :stage",
        s=slug,
        stage=stage,
    )
    return rows[0][0] if rows else None


def _quiet(project: Project) -> bool:
    """Nothing to run or running: every task at a gate or finished."""
    busy = project.query(
        "SELECT (SELECT count(*) FROM attempts WHERE finished_at IS NULL)"
        " + (SELECT count(*) FROM tasks WHERE status IN ('ready', 'running'))"
    )
    return busy[0][0] == 0


def _approved_at(project: Project, slug: str) -> datetime:
    rows = project.query(
        "SELECT max(r.at) FROM transitions r JOIN tasks t ON t.id = r.task_id "
        "WHERE t.slug = :s AND r.event = 'approve'",
        s=slug,
    )
    return _at(rows[0][0])


def test_run_starts_the_next_stage_on_approval_not_at_its_interval(project: Project) -> None:
    for slug in ("t1", "t2"):
        assert project.run("add", slug, "--title", slug).returncode == 0
    first = project.run("tick")
    assert first.returncode == 0, first.stderr
    assert project.state("t1") == "research:awaiting_approval"
    proc = project.popen("run", "--interval", "60")
    try:
        # Its first tick has run (the idle row is its own): it now waits 60 s.
        wait_for(
            lambda: project.query("SELECT count(*) FROM ticks WHERE pid = :p", p=proc.pid)[0][0],
            timeout=BOUND,
            what="run's first tick",
        )
        approve = project.run("approve", "t1")
        assert approve.returncode == 0, approve.stderr
        started = wait_for(
            lambda: _started(project, "t1", "implement"), timeout=BOUND, what="implement of t1"
        )
        assert (_at(started) - _approved_at(project, "t1")).total_seconds() < BOUND

        # The library's approval wakes it the same way.
        with Library.open(project.config, db=project.db_url) as library:
            library.approve("t2")
        started = wait_for(
            lambda: _started(project, "t2", "implement"), timeout=BOUND, what="implement of t2"
        )
        assert (_at(started) - _approved_at(project, "t2")).total_seconds() < BOUND

        # So does new work: `add` makes a task claimable.
        assert project.run("add", "t3", "--title", "t3").returncode == 0
        wait_for(lambda: _started(project, "t3", "research"), timeout=BOUND, what="t3's attempt")
        # Stopped with nothing running, its exit is clean (0): a signal
        # that interrupts an attempt is 143 by design.
        wait_for(lambda: _quiet(project), timeout=BOUND * 4, what="no attempt running")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
