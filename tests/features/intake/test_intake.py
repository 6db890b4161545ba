"""Labelled issues become tasks, through real `tick` processes and the real
`gh` against the local look-alike of GitHub's API (GitHub cannot run here;
`features/landing/github_api.py`), with a real bare remote."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from e2e.e2e_support import PASS, stage
from features.landing.github_api import FakeGitHub
from support import Project, check_invariants, git, make_repo

pytestmark = pytest.mark.skipif(
    shutil.which("gh") is None and not os.environ.get("CI"), reason="gh is not installed"
)


def intake_project(project: Project, fake: FakeGitHub) -> None:
    repo = make_repo(project.dir)
    origin = project.dir / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    project.write_config(
        '[intake.github]\nrepo = "octo/widget"\nlabel = "agent"\npoll_seconds = 0\n\n'
        '[pipelines.default]\nrepository = "repo"\nland = "pr"\n\n'
        + stage("implement", worker=["sh", "-c", "echo done >> work.txt"], verifier=PASS)
    )
    project.env.update(fake.env())


def tick(project: Project, *args: str) -> str:
    done = project.run("tick", *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def test_a_labelled_issue_becomes_a_task_whose_pull_request_closes_it(
    project: Project, github: FakeGitHub
) -> None:
    intake_project(project, github)
    github.rest.issue(100, "Add work", "Please add work.", ("agent", "bug"))
    github.rest.issue(101, "Not for agents", "A person's.", ("bug",))
    dry = project.run("intake", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == "would add issue-100: Add work (#100, pipeline default)\n"
    assert project.query("SELECT count(*) FROM tasks") == [(0,)]

    said = tick(project)
    assert "issue-100: added from issue #100" in said
    assert project.state("issue-100") == "complete"
    (created,) = github.created()
    assert created["variables"]["input"]["body"].startswith("Please add work.\n\nCloses #100")
    comments = [c["body"] for c in github.rest.issues[100]["comments"]]
    assert comments == [
        "Started as task `issue-100`.",
        f"Pull request opened: {github.pulls[0].url}",
    ]
    assert github.rest.issues[101]["comments"] == []
    tick(project)  # idempotent on the issue's number: nothing added or said again
    assert project.query("SELECT count(*) FROM tasks") == [(1,)]
    assert len(github.rest.issues[100]["comments"]) == 2
    assert check_invariants(project.db_url) == []


def test_an_edit_before_the_start_updates_the_task_and_losing_the_label_cancels_it(
    project: Project, github: FakeGitHub
) -> None:
    intake_project(project, github)
    github.rest.issue(100, "Add work", "First words.", ("agent",))
    github.rest.issue(102, "Also", "More.", ("agent",))
    tick(project, "--max-seconds", "0")  # taken in, nothing claimed
    assert project.query("SELECT slug, status FROM tasks ORDER BY slug") == [
        ("issue-100", "ready"),
        ("issue-102", "ready"),
    ]
    github.rest.issues[100]["title"] = "Add more work"
    github.rest.issues[100]["body"] = "Second words."
    github.rest.issues[102]["labels"] = []
    tick(project, "--max-seconds", "0")
    assert project.query("SELECT title, body FROM tasks WHERE slug = 'issue-100'") == [
        ("Add more work", "Second words.\n\nCloses #100")
    ]
    assert project.state("issue-102") == "implement:cancelled"
    assert check_invariants(project.db_url) == []
