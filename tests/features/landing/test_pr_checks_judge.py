"""The judge `init` ships for CI on a pull request, against the real `gh`
(Debian's 2.23) and the local look-alike of GitHub's API (GitHub cannot run
here): its verdicts alone, then through real ticks, where a pending CI
holds the task without spending attempts and a failing check's name
reaches the next attempt's hint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e.e2e_support import attempts, execute, outcomes, stage
from features.landing.github_api import FakeGitHub, github  # noqa: F401 - the fixture
from features.landing.pr_support import land_env, landing_repo, request
from support import Project, check_invariants

import orchestrator
from orchestrator.domain.verdict import parse_verdict
from orchestrator.features.landing.model import Landed
from orchestrator.features.landing.pull_request import open_pull_request

JUDGE = Path(orchestrator.__file__).parent / "templates" / "init" / "judges" / "pr_checks_judge.py"

pytestmark = pytest.mark.skipif(
    shutil.which("gh") is None and not os.environ.get("CI"), reason="gh is not installed"
)


def judge(fake: FakeGitHub, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **fake.env(), **env}
    full.pop("ORCHESTRATOR_TASK", None)
    return subprocess.run(
        [sys.executable, str(JUDGE), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
        check=False,
    )


def verdict(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    found = parse_verdict(done.stdout)
    assert found is not None, (done.stdout, done.stderr)
    return found.to_dict()


def opened(tmp_path: Path, fake: FakeGitHub) -> None:
    repo, _origin = landing_repo(tmp_path)
    assert isinstance(open_pull_request(request(repo, land_env(fake, tmp_path))), Landed)


def test_the_judge_waits_fails_with_names_and_passes(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    opened(tmp_path, github)
    none_yet = verdict(judge(github, "--branch", "task/t1", "--recheck", "30"))
    assert none_yet["pending"] is True and none_yet["recheck_seconds"] == 30
    github.set_checks("task/t1", {"build": "pending", "unit": "success"})
    waiting = verdict(judge(github, "--branch", "task/t1"))
    assert waiting["pending"] is True and waiting["reasons"] == ["check build: pending"]
    assert waiting["recheck_seconds"] == 60
    github.set_checks("task/t1", {"build": "pending", "lint": "failure", "unit": "success"})
    failing = verdict(judge(github, "--branch", "task/t1"))
    assert failing["pass"] is False and "pending" not in failing
    assert failing["reasons"] == ["check lint: fail", "still running: build"]
    assert failing["next_hint"] == "these checks fail on the pull request: lint"
    github.set_checks("task/t1", {"build": "success", "unit": "success"})
    assert verdict(judge(github, "--branch", "task/t1"))["pass"] is True


def test_the_judge_gives_no_verdict_when_gh_cannot_answer(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    no_pr = judge(github, "--branch", "task/none")
    assert no_pr.returncode == 2 and no_pr.stdout == ""
    assert no_pr.stderr.strip() == (
        "pr_checks_judge: gh pr checks task/none failed: "
        'no pull requests found for branch "task/none"'
    )
    bad = judge(github, "--branch", "task/t1", GH_TOKEN="wrong")
    assert bad.returncode == 2 and "HTTP 401: Bad credentials" in bad.stderr
    no_gh = judge(github, "--branch", "task/t1", PATH=str(tmp_path))
    assert no_gh.returncode == 2 and "gh is not installed" in no_gh.stderr
    assert judge(github).returncode == 2  # no branch, no task


def _ci_project(project: Project, fake: FakeGitHub) -> None:
    """A stage `ci` whose worker logs its hint and whose verifier is the judge
    (the task `t1`, whose branch already has its pull request)."""
    env = {**fake.env(), "PATH": os.environ["PATH"]}
    stages = stage(
        "ci",
        worker=["sh", "-c", 'echo "$ORCHESTRATOR_NEXT_HINT" >> ../worker.log'],
        verifier=[sys.executable, str(JUDGE), "--recheck", "300"],
        max_attempts=2,
        env=env,
    )
    project.write_config(stages)
    assert project.run("add", "t1", "--title", "T").returncode == 0


def _tick(project: Project) -> None:
    done = project.run("tick", "--max-tasks", "1")
    assert done.returncode == 0, done.stderr


def test_pending_ci_holds_the_task_without_spending_attempts_until_it_passes(
    tmp_path: Path,
    project: Project,
    github: FakeGitHub,  # noqa: F811
) -> None:
    opened(tmp_path, github)
    _ci_project(project, github)
    github.set_checks("task/t1", {"build": "pending"})
    for _ in range(3):  # more rechecks than max_attempts allows attempts
        _tick(project)
        assert project.state("t1") == "ci"
        (due,) = project.query("SELECT backoff_until FROM tasks")[0]
        assert due is not None  # the recheck waits out recheck_seconds
        execute(project, "UPDATE tasks SET backoff_until = NULL")  # time passing
    assert outcomes(project, "t1") == ["pending"] * 3
    github.set_checks("task/t1", {"build": "success"})
    _tick(project)
    assert project.state("t1") == "complete"
    assert outcomes(project, "t1") == ["pending", "pending", "pending", "passed"]
    log = (project.dir / "tasks" / "worker.log").read_text().splitlines()
    assert len(log) == 1  # the worker ran once; the rechecks asked CI only
    assert check_invariants(project.db_url) == []


def test_a_failing_checks_name_reaches_the_next_attempts_hint(
    tmp_path: Path,
    project: Project,
    github: FakeGitHub,  # noqa: F811
) -> None:
    opened(tmp_path, github)
    _ci_project(project, github)
    github.set_checks("task/t1", {"build": "success", "e2e": "failure"})
    _tick(project)
    assert outcomes(project, "t1") == ["failed"]
    github.set_checks("task/t1", {"build": "success", "e2e": "success"})
    _tick(project)
    rows = attempts(project, "t1")
    assert rows[1]["hint"] == "these checks fail on the pull request: e2e"
    log = (project.dir / "tasks" / "worker.log").read_text().splitlines()
    assert log[-1] == "these checks fail on the pull request: e2e"
    assert project.state("t1") == "complete"
    reasons = project.query("SELECT reasons FROM attempts ORDER BY id")[0][0]
    assert json.loads(reasons) == ["check e2e: fail"]
