"""A person's command against a landing (`land = "merge"`), through real
`tick` processes on a real repository, on both backends: a halt or cancel
before the ref move wins (the base never moves), one after the move's
intent is refused "already landing" and the change lands once."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e.e2e_support import wait_for
from e2e.test_landing import OWN_FILE, assert_linear, events_of, land_config, landed, tip
from support import Project, check_invariants, git, make_repo


def held_check(folder: Path) -> list[str]:
    """A land_check that says it started, then waits for `release`."""
    started, release = folder / "check-started", folder / "release"
    script = f'touch "{started}"; while [ ! -e "{release}" ]; do sleep 0.01; done'
    return ["sh", "-c", script]


def moves(repo: Path) -> int:
    """How many times a landing moved main."""
    return git(repo, "reflog", "--format=%gs", "main").count("orchestrator: land")


def finish(project: Project, slug: str) -> str:
    """Tick (approving nothing: the pipeline has no gate) until the task ends."""
    for _ in range(6):
        state = project.state(slug)
        if state in ("complete", "cancelled") or state.endswith(":cancelled"):
            return state
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
    return project.state(slug)


@pytest.mark.parametrize("command", ["halt", "cancel"])
def test_a_stop_during_the_landing_check_keeps_the_base_where_it_was(
    project: Project, tmp_path: Path, command: str
) -> None:
    repo = make_repo(project.dir)
    base = tip(repo)
    land_config(project, OWN_FILE, check=held_check(tmp_path))
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    ticking = project.popen("tick")
    try:
        wait_for((tmp_path / "check-started").exists, timeout=60, what="the land_check")
        assert project.state("a") == "review:landing"
        stopped = project.run(command, "a")
        assert stopped.returncode == 0, stopped.stderr
    finally:
        (tmp_path / "release").touch()
        _, err = ticking.communicate(timeout=120)
    assert ticking.returncode == 0, err
    word = "halted" if command == "halt" else "cancelled"
    assert project.state("a") == f"review:{word}"
    # The person won: main never moved, nothing recorded as landed.
    assert tip(repo) == base and moves(repo) == 0
    assert "landed" not in events_of(project, "a")
    assert project.query("SELECT count(*) FROM land_locks WHERE owner IS NOT NULL") == [(0,)]
    if command == "halt":
        assert project.run("resume", "a").returncode == 0
        assert finish(project, "a") == "complete"
        assert tip(repo) == landed(project, "a") and moves(repo) == 1
        assert events_of(project, "a").count("landed") == 1
        assert git(repo, "show", "main:a.txt") == "a\n"
        assert len(git(repo, "log", "--format=%H", "main", "--", "a.txt").split()) == 1
    else:
        assert finish(project, "a") == "review:cancelled"
        assert tip(repo) == base and moves(repo) == 0
    assert_linear(repo)
    assert check_invariants(project.db_url, allow_running=False) == []


@pytest.mark.parametrize("point", ["land_before_ref_move", "land_after_ref_move"])
@pytest.mark.parametrize("command", ["halt", "cancel"])
def test_a_stop_after_the_moves_intent_is_refused_and_it_lands_once(
    project: Project, point: str, command: str
) -> None:
    """The tick dies at its commit point (the intent to move recorded, the
    ref moved or not): the person's command is refused, exit 1, and the
    next tick records the landing once."""
    repo = make_repo(project.dir)
    land_config(project, OWN_FILE)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": point})
    assert killed.returncode == 137, killed.stderr
    assert project.state("a") == "review:landing"
    refused = project.run(command, "a")
    assert refused.returncode == 1, refused.stderr
    assert "already landing" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert project.state("a") == "review:landing"
    assert finish(project, "a") == "complete"
    assert tip(repo) == landed(project, "a") and moves(repo) == 1
    assert events_of(project, "a").count("landed") == 1
    # Once recorded, the command says so.
    again = project.run(command, "a")
    assert again.returncode == 1 and "already landed" in again.stderr
    assert check_invariants(project.db_url, allow_running=False) == []


def test_an_intent_a_killed_landing_left_is_dropped_when_landing_is_turned_off(
    project: Project,
) -> None:
    """kill -9 past the commit point, before the ref moved; then the config
    stops landing: the task finishes as without it, and no `landed_commit`
    claims a commit the base never held (a halt would say "already landed")."""
    from e2e.e2e_support import PASS, stage
    from support import write_config

    repo = make_repo(project.dir)
    land_config(project, OWN_FILE)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "land_before_ref_move"})
    assert killed.returncode == 137, killed.stderr
    base = tip(repo)
    stages = stage("implement", worker=["sh", "-c", OWN_FILE], verifier=PASS)
    stages += stage("review", worker=["true"], verifier=PASS)
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("a") == "complete"
    assert tip(repo) == base and moves(repo) == 0
    assert project.query("SELECT landed_commit FROM tasks WHERE slug = 'a'") == [(None,)]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_an_intent_whose_move_happened_is_recorded_when_landing_is_turned_off(
    project: Project,
) -> None:
    """kill -9 just after the ref moved; then the config stops landing: the
    move that happened is recorded as landed, at the commit the base holds."""
    from e2e.e2e_support import PASS, stage
    from support import write_config

    repo = make_repo(project.dir)
    land_config(project, OWN_FILE)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "land_after_ref_move"})
    assert killed.returncode == 137, killed.stderr
    moved = tip(repo)
    stages = stage("implement", worker=["sh", "-c", OWN_FILE], verifier=PASS)
    stages += stage("review", worker=["true"], verifier=PASS)
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("a") == "complete"
    assert project.query("SELECT landed_commit FROM tasks WHERE slug = 'a'") == [(moved,)]
    assert check_invariants(project.db_url, allow_running=False) == []
