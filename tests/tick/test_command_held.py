"""A command the configuration names that cannot start (not on the tick's
PATH, not executable) is the configuration's fault, not the task's: through
real `tick` processes, the task stays ready with no attempt spent, and the
tick stops claiming and ends 78 (as for a program the sandbox's walls hide).
Each tick does so again, a `host_error` row apiece, until the program starts:
the error says so rather than promise a hold that does not exist."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project, check_invariants

MISSING = "no-such-agent-xyz"


def test_a_worker_not_on_path_holds_the_task_and_spends_no_attempt(project: Project) -> None:
    project.write_config(stage("s", worker=[MISSING, "-p"], verifier=PASS, max_attempts=1))
    assert project.run("add", "t1", "--title", "x").returncode == 0
    for _ in range(3):  # cron's ticks, one a minute: none of them charges the task
        done = project.run("tick")
        assert done.returncode == 78, done.stdout + done.stderr
        said = done.stdout + done.stderr
        assert f"command not found: '{MISSING}'" in said and "no attempt spent" in said
        assert "the task stays ready" in said and "every tick stops at it" in said
    assert project.state("t1") == "s"  # ready, not halted max_attempts
    outcomes = [row[0] for row in project.query("SELECT outcome FROM attempts")]
    assert set(outcomes) <= {"host_error"}
    explained = json.loads(project.run("explain", "t1", "--json").stdout)
    assert explained["attempts"]["used"] == 0
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_verifier_that_is_not_executable_holds_the_task(project: Project, tmp_path: Path) -> None:
    judge = tmp_path / "judge.sh"
    judge.write_text("#!/bin/sh\necho '{\"pass\": true}'\n")  # no x bit
    project.write_config(stage("s", worker=["true"], verifier=[str(judge)], max_attempts=1))
    assert project.run("add", "t1", "--title", "x").returncode == 0
    done = project.run("tick")
    assert done.returncode == 78, done.stdout + done.stderr
    assert "permission denied" in done.stdout + done.stderr
    assert project.state("t1") == "s"


def test_a_relative_program_the_workspace_lacks_is_the_tasks_failure(project: Project) -> None:
    project.write_config(stage("s", worker=["./gen.sh"], verifier=PASS, max_attempts=1))
    assert project.run("add", "t1", "--title", "x").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stdout + done.stderr
    assert project.state("t1") == "s:halted"
    assert [row[0] for row in project.query("SELECT outcome FROM attempts")] == ["worker_error"]
