"""`orchestrator migrate`, through the real CLI and real ticks: a task at a
gate whose stage was renamed is planned (dry run: nothing changes), moved
with `--map` (a `migrate` transition naming actor, both versions and the
map; a `migrated` event), refused without one (the stage and the `--map`
spelling named), refused while running; bad input refused clearly."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.e2e_support import wait_for
from support import Project

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']


def _config(project: Project, names: list[str], *, gate: str = "b", on_change: str = "pin") -> None:
    text = f'[pipelines.default]\non_change = "{on_change}"\n\n'
    for name in names:
        text += (
            f'[[pipelines.default.stages]]\nname = "{name}"\nworker = ["true"]\n'
            f"verifier = {json.dumps(PASS)}\n" + ("gate = true\n" if name == gate else "") + "\n"
        )
    project.write_config(text)


def _run(project: Project, *args: str) -> str:
    done = project.run(*args, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _at_gate(project: Project, *slugs: str) -> None:
    _config(project, ["a", "b", "c"])
    for slug in slugs:
        _run(project, "add", slug, "--title", slug)
    _run(project, "tick")
    for slug in slugs:
        assert project.state(slug) == "b:awaiting_approval"


def _snapshot(project: Project) -> list[tuple[object, ...]]:
    return project.query("SELECT slug, stage, status, version, pipeline_version FROM tasks")


def test_dry_run_prints_the_plan_and_changes_nothing(project: Project) -> None:
    _at_gate(project, "t1")
    _config(project, ["a", "review", "c"], gate="review")  # b renamed
    before, counts = _snapshot(project), project.counts()
    out = _run(project, "migrate", "t1", "--to", "current", "--map", "b=review", "--dry-run")
    assert "would move t1: b:awaiting_approval on " in out
    assert "-> review on " in out and "scores comparable" in out
    assert _snapshot(project) == before and project.counts() == counts


def test_migrate_with_a_map_moves_the_task_and_records_it(project: Project) -> None:
    _at_gate(project, "t1")
    [(old,)] = project.query("SELECT pipeline_version FROM tasks")
    _config(project, ["a", "review", "c"], gate="review")
    out = _run(project, "migrate", "t1", "--to", "current", "--map", "b=review", "--by", "ann")
    assert "moved t1" in out
    [(stage, status, now)] = project.query("SELECT stage, status, pipeline_version FROM tasks")
    assert (stage, status) == ("review", "awaiting_approval") and now != old
    [(_event, actor, reason)] = project.query(
        "SELECT event, actor, reason FROM transitions WHERE event = 'migrate'"
    )
    assert actor == "ann"
    assert reason == f"pipeline version {old[:12]} -> {now[:12]}; map: b=review"
    [(payload,)] = project.query("SELECT payload FROM events WHERE kind = 'migrated'")
    facts = json.loads(payload)
    assert (facts["from_version"], facts["to_version"], facts["map"]) == (old, now, {"b": "review"})
    # It finishes on the current version.
    _run(project, "approve", "t1")
    _run(project, "tick")
    assert project.state("t1") == "complete"
    ran = project.query("SELECT stage, pipeline_version FROM attempts ORDER BY id")
    assert ran[-1] == ("c", now)


def test_without_a_map_a_vanished_stage_is_refused_naming_it(project: Project) -> None:
    _at_gate(project, "t1")
    _config(project, ["a", "review", "c"], gate="review")
    before = _snapshot(project)
    done = project.run("migrate", "t1", "--to", "current", timeout=120)
    assert done.returncode == 1
    assert "t1: refused: stage 'b' has no place in version" in done.stderr
    assert "use --map b=STAGE (its stages: a, review, c)" in done.stderr
    assert _snapshot(project) == before


def test_bad_input_is_refused_in_one_line(project: Project) -> None:
    _at_gate(project, "t1")
    _config(project, ["a", "review", "c"], gate="review")
    before = _snapshot(project)
    cases = {
        ("--map", "zz=review"): "neither version has a stage 'zz'",
        ("--map", "b=nowhere"): "has no stage 'nowhere'",
        ("--map", "b"): "expected OLD=NEW",
    }
    for extra, said in cases.items():
        done = project.run("migrate", "t1", "--to", "current", *extra, timeout=120)
        assert done.returncode in (1, 2), done.stderr
        assert said in done.stderr
    done = project.run("migrate", "t1", "--to", "0123456789abcdef", timeout=120)
    assert done.returncode == 1 and "no version of pipeline 'default'" in done.stderr
    assert _snapshot(project) == before


def test_all_with_nothing_to_move_says_so_and_exits_0(project: Project) -> None:
    _at_gate(project, "t1")
    out = _run(project, "migrate", "--all", "--to", "current")
    assert "nothing to migrate" in out


def test_all_with_a_limit_moves_at_most_n(project: Project) -> None:
    _at_gate(project, "t1", "t2", "t3")
    _config(project, ["a", "review", "c"], gate="review")
    out = _run(project, "migrate", "--all", "--to", "current", "--map", "b=review", "--limit", "2")
    assert out.count("moved ") == 2
    stages = dict(project.query("SELECT slug, stage FROM tasks"))
    assert stages == {"t1": "review", "t2": "review", "t3": "b"}


def test_a_running_task_is_refused_until_its_attempt_ends(project: Project, tmp_path: Path) -> None:
    started, release = tmp_path / "started", tmp_path / "release"
    held = f'touch "{started}"; while [ ! -e "{release}" ]; do sleep 0.01; done'
    project.write_config(
        f'[[pipelines.default.stages]]\nname = "a"\nworker = {json.dumps(["sh", "-c", held])}\n'
        f"verifier = {json.dumps(PASS)}\n"
    )
    _run(project, "add", "t1", "--title", "t1")
    ticking = project.popen("tick")
    try:
        wait_for(started.exists, timeout=60, what="the claimed attempt's worker")
        _config(project, ["a"])
        done = project.run("migrate", "t1", "--to", "current", timeout=120)
        assert done.returncode == 1
        assert "t1: refused: running; migrate it once its attempt ends" in done.stderr
        assert project.query("SELECT count(*) FROM transitions WHERE event = 'migrate'") == [(0,)]
    finally:
        release.touch()
        ticking.communicate(timeout=120)
    assert project.state("t1") == "complete"


def test_a_migrate_killed_between_tasks_moved_each_task_once_or_not_at_all(
    project: Project,
) -> None:
    """`migrate --all` dies (as by kill -9) right after one task's
    transaction commits: that task moved, the others did not; run again,
    it moves the rest and none twice."""
    _at_gate(project, "t1", "t2", "t3")
    _config(project, ["a", "review", "c"], gate="review")
    args = ("migrate", "--all", "--to", "current", "--map", "b=review")
    fault = {"ORCHESTRATOR_TEST_FAULT": "migrate_between_tasks:exit"}
    killed = project.run(*args, timeout=120, extra_env=fault)
    assert killed.returncode == 137, killed.stdout + killed.stderr
    moved = project.query("SELECT task_id FROM transitions WHERE event = 'migrate'")
    assert len(moved) == 1
    assert sorted(s for (s,) in project.query("SELECT stage FROM tasks")) == ["b", "b", "review"]
    out = _run(project, *args)
    assert out.count("moved ") == 2
    per_task = project.query(
        "SELECT task_id, count(*) FROM transitions WHERE event = 'migrate' GROUP BY task_id"
    )
    assert sorted(n for _, n in per_task) == [1, 1, 1]
    assert {s for (s,) in project.query("SELECT stage FROM tasks")} == {"review"}
    assert "nothing to migrate" in _run(project, *args)


def _judging(project: Project, score: float, mark: str) -> None:
    judge = ["sh", "-c", f'echo \'{{"pass": false, "score": {score}}}\' # {mark}']
    project.write_config(
        f'[[pipelines.default.stages]]\nname = "a"\nworker = ["true"]\n'
        f"verifier = {json.dumps(judge)}\nmax_attempts = 10\n"
    )


def test_a_migrate_that_changes_the_verifier_restarts_the_score_window(project: Project) -> None:
    """Scores of two verifiers never share a plateau window: the move is a
    new run, and `explain` says at which attempt the window restarted."""
    _judging(project, 0.5, "old")
    _run(project, "add", "t1", "--title", "t1")
    for _ in range(2):
        _run(project, "tick", "--max-tasks", "1")
    assert project.query("SELECT number, run FROM attempts ORDER BY number") == [(1, 1), (2, 1)]
    _judging(project, 0.7, "new")
    plan = _run(project, "migrate", "t1", "--to", "current", "--dry-run")
    assert "scores not comparable (its verifier changed)" in plan
    _run(project, "migrate", "t1", "--to", "current")
    said = project.cli("explain", "t1").output
    assert "verifier changed at attempt 3: window restarted" in said
    _run(project, "tick", "--max-tasks", "1")
    runs = project.query("SELECT number, run, score FROM attempts ORDER BY number")
    assert runs == [(1, 1, 0.5), (2, 1, 0.5), (3, 2, 0.7)]
