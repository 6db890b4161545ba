"""`add --after`: real `orchestrator` processes, real ticks, both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import PASS, agent, attempts, reap, stage, wait_for
from support import Project, check_invariants

pytestmark = pytest.mark.e2e


def _started(project: Project, slug: str) -> list[tuple[object, ...]]:
    return project.query(
        "SELECT a.started_at FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.slug = :s",
        s=slug,
    )


def test_b_waits_while_a_runs_and_starts_after_a_completes(
    project: Project, tmp_path: Path
) -> None:
    release, pidfile = tmp_path / "release", tmp_path / "a.pid"
    project.write_config(
        stage(
            "work",
            worker=agent("--pidfile", str(pidfile), "--wait-file", str(release)),
            verifier=PASS,
            pipeline="slow",
        )
        + stage("work", worker=["true"], verifier=PASS)
    )
    assert project.run("add", "a", "--title", "First", "--pipeline", "slow").returncode == 0
    # B outranks A: without the wait, the tick would take B first.
    added = project.run("add", "b", "--title", "Second", "--after", "a", "--priority", "9")
    assert added.returncode == 0, added.stderr
    tick = project.popen("tick", "--jobs", "2")
    done = None
    try:
        wait_for(pidfile.exists, what="A's worker to start")
        # A runs, a slot is free, and B is not claimed.
        explained = project.run("explain", "b", "--json")
        assert explained.returncode == 0, explained.stderr
        data = json.loads(explained.stdout)
        assert data["waits_on"] == [
            {"slug": "a", "state": "work:running", "status": "running", "halt_reason": None}
        ]
        assert "waits until a (work:running) is complete" in data["next_tick"]
        assert _started(project, "b") == []
        assert project.state("b") == "work"
        release.write_text("go")
    finally:
        release.write_text("go")
        done = reap(tick, timeout=60)
    assert done.rc == 0, done.stderr
    assert project.state("a") == "complete"
    assert project.state("b") == "complete"
    completed = project.query(
        "SELECT r.at FROM transitions r JOIN tasks t ON t.id = r.task_id "
        "WHERE t.slug = 'a' AND r.to_state = 'complete'"
    )
    [(b_start,)] = _started(project, "b")
    assert str(b_start) >= str(completed[0][0])
    assert check_invariants(project.db_url) == []


def test_one_task_a_tick_runs_b_on_the_tick_after_a(project: Project) -> None:
    project.write_config(stage("work", worker=["true"], verifier=PASS))
    assert project.run("add", "a", "--title", "First").returncode == 0
    assert (
        project.run("add", "b", "--title", "Second", "--after", "a", "--priority", "9").returncode
        == 0
    )
    first = project.run("tick", "--max-tasks", "1")
    assert first.returncode == 0, first.stderr
    assert (project.state("a"), project.state("b")) == ("complete", "work")
    assert attempts(project, "b") == []
    second = project.run("tick", "--max-tasks", "1")
    assert second.returncode == 0, second.stderr
    assert project.state("b") == "complete"


def test_a_cycle_is_refused_with_65_and_nothing_added(project: Project, tmp_path: Path) -> None:
    project.write_config(stage("work", worker=["true"], verifier=PASS))
    lines = tmp_path / "tasks.jsonl"
    lines.write_text(
        json.dumps({"slug": "x", "title": "X", "after": ["y"]})
        + "\n"
        + json.dumps({"slug": "y", "title": "Y", "after": "x"})
        + "\n"
    )
    refused = project.run("add", "--from", str(lines))
    assert refused.returncode == 65
    assert refused.stderr.strip().splitlines() == [
        "Error: tasks would wait on each other in a cycle: x -> y -> x"
    ]
    assert project.query("SELECT count(*) FROM tasks") == [(0,)]
    itself = project.run("add", "z", "--title", "Z", "--after", "z")
    assert itself.returncode == 65
    unknown = project.run("add", "z", "--title", "Z", "--after", "ghost")
    assert unknown.returncode == 65
    assert "'ghost', which does not exist" in unknown.stderr
    assert project.query("SELECT count(*) FROM tasks") == [(0,)]


def test_a_halted_a_is_named_in_b_explain_show_and_the_board(project: Project) -> None:
    project.write_config(stage("work", worker=["true"], verifier=PASS))
    assert project.run("add", "a", "--title", "First").returncode == 0
    assert project.run("add", "b", "--title", "Second", "--after", "a").returncode == 0
    assert project.run("halt", "a", "--note", "not now").returncode == 0
    explained = project.run("explain", "b")
    assert explained.returncode == 0, explained.stderr
    assert "waits on a (halted: manual)" in explained.stdout
    assert "  after     a (work:halted)" in explained.stdout
    ticked = project.run("tick")
    assert ticked.returncode == 0
    assert attempts(project, "b") == []  # nothing claimable: B waits on a halted A
    shown = json.loads(project.run("show", "b", "--json").stdout)
    assert shown["after"] == [{"slug": "a", "state": "work:halted"}]
    from orchestrator.storage.db import make_engine
    from orchestrator.web.data import board

    engine = make_engine(project.db_url)
    try:
        [ready] = [s for s in board(engine, 50).sections if s.status == "ready"]
        assert "waits on a (halted: manual)" in ready.rows[0]["waiting"]
    finally:
        engine.dispose()
    assert project.run("cancel", "a").returncode == 0
    assert "a, cancelled: it never runs" in project.run("explain", "b").stdout
    assert check_invariants(project.db_url) == []
