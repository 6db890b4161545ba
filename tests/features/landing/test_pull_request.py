"""`open_pull_request` against real git (a bare `origin`), the real `gh`
(Debian's 2.23) and the local look-alike of GitHub's API (GitHub itself
cannot run here: `landing/github_api.py`)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
from features.landing.github_api import FakeGitHub, github  # noqa: F401 - the fixture
from features.landing.pr_support import (
    crash_and_retry,
    land_env,
    landing_repo,
    pushes,
    request,
)
from support import git

from orchestrator.features.landing.model import Landed, Refused
from orchestrator.features.landing.pull_request import (
    github_repository,
    open_pull_request,
    pull_request_body,
)

pytestmark = pytest.mark.skipif(
    shutil.which("gh") is None and not os.environ.get("CI"), reason="gh is not installed"
)


def test_one_push_and_one_pull_request_with_the_tasks_text(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    repo, origin = landing_repo(tmp_path)
    tip = git(repo, "rev-parse", "task/t1").strip()
    req = request(repo, land_env(github, tmp_path), draft=True)
    outcome = open_pull_request(req)
    assert outcome == Landed(commit=tip, url="http://github.localhost/octo/widget/pull/1")
    assert git(origin, "rev-parse", "task/t1").strip() == tip
    assert pushes(tmp_path) == 1
    created = github.created()
    assert len(created) == 1
    sent = created[0]["variables"]["input"]
    assert sent["title"] == "Add the feature" and sent["draft"] is True
    assert (sent["headRefName"], sent["baseRefName"]) == ("task/t1", "main")
    assert "Users asked for a feature file." in sent["body"]
    assert "- **implement** (score 0.90)\n  - tests pass\n  - lint clean" in sent["body"]
    # Called again (a retry after the record was lost): nothing pushed, no new PR.
    assert open_pull_request(req) == outcome
    assert pushes(tmp_path) == 1 and len(github.created()) == 1


def test_a_new_commit_is_pushed_to_the_same_pull_request(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    repo, origin = landing_repo(tmp_path)
    req = request(repo, land_env(github, tmp_path))
    first = open_pull_request(req)
    git(repo, "checkout", "-q", "task/t1")
    (repo / "more.txt").write_text("more\n")
    git(repo, "add", "more.txt")
    git(repo, "commit", "-qm", "t1: fix CI (attempt 2)")
    tip = git(repo, "rev-parse", "HEAD").strip()
    second = open_pull_request(req)
    assert isinstance(first, Landed) and isinstance(second, Landed)
    assert second == Landed(commit=tip, url=first.url)
    assert git(origin, "rev-parse", "task/t1").strip() == tip
    assert pushes(tmp_path) == 2 and len(github.created()) == 1


@pytest.mark.parametrize("point", ["pr_after_push", "pr_after_create"])
def test_a_crash_and_a_retry_push_once_and_open_one_pull_request(
    point: str,
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    outcome = crash_and_retry(point, tmp_path, github)
    assert outcome["kind"] == "Landed"
    assert outcome["url"] == "http://github.localhost/octo/widget/pull/1"
    assert pushes(tmp_path) == 1
    assert len(github.created()) == 1


def test_a_bad_token_is_refused_in_one_line_after_the_push(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    repo, _origin = landing_repo(tmp_path)
    req = request(repo, {**land_env(github, tmp_path), "GH_TOKEN": "wrong"})
    outcome = open_pull_request(req)
    assert isinstance(outcome, Refused)
    assert outcome.reason == (
        "gh pr list failed: HTTP 401: Bad credentials (http://api.github.localhost/graphql)"
    )
    assert github.created() == []
    # The token fixed, the retry opens the pull request and pushes nothing again.
    fixed = open_pull_request(dataclasses.replace(req, env=land_env(github, tmp_path)))
    assert isinstance(fixed, Landed) and pushes(tmp_path) == 1


def test_gh_missing_is_refused_in_one_line(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    repo, _origin = landing_repo(tmp_path)
    only_git = tmp_path / "bin"
    only_git.mkdir()
    for tool in ("git", "sh"):  # SafeGit runs git through sh
        found = shutil.which(tool)
        assert found is not None
        (only_git / tool).symlink_to(found)
    env = {**land_env(github, tmp_path), "PATH": str(only_git)}
    outcome = open_pull_request(request(repo, env))
    assert outcome == Refused('gh is not installed (land = "pr" needs the GitHub CLI on PATH)')


def test_a_refused_push_is_one_line_and_opens_nothing(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    repo, origin = landing_repo(tmp_path)
    # The remote's branch has moved on to a commit the task's branch lacks.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(origin), str(other))
    git(other, "checkout", "-q", "-b", "task/t1")
    (other / "theirs.txt").write_text("theirs\n")
    git(other, "add", "theirs.txt")
    git(other, "commit", "-qm", "someone else's")
    git(other, "push", "-q", "origin", "task/t1")
    outcome = open_pull_request(request(repo, land_env(github, tmp_path)))
    assert isinstance(outcome, Refused)
    assert outcome.reason.startswith("git push to origin refused: ")
    assert "\n" not in outcome.reason
    assert github.created() == []


def test_a_remote_helper_or_a_receivepack_in_the_config_runs_nothing(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    repo, _origin = landing_repo(tmp_path)
    marker = tmp_path / "ran"
    # A worker's config: its own receive-pack and ssh command.
    git(repo, "config", "remote.origin.receivepack", f"touch {marker}; git-receive-pack")
    git(repo, "config", "core.sshCommand", f"touch {marker}; ssh")
    outcome = open_pull_request(request(repo, land_env(github, tmp_path)))
    assert isinstance(outcome, Landed) and not marker.exists()
    git(repo, "config", "remote.origin.vcs", "evil")
    refused = open_pull_request(request(repo, land_env(github, tmp_path)))
    assert refused == Refused("remote origin uses a remote helper; refusing to push through it")


def test_the_repository_comes_from_the_remote_url() -> None:
    assert github_repository("git@github.com:octo/widget.git") == "github.com/octo/widget"
    assert github_repository("https://github.com/octo/widget") == "github.com/octo/widget"
    assert github_repository("ssh://git@ghe.example:22/a/b.git") == "ghe.example/a/b"
    assert github_repository("https://x/a/b.git", host="github.localhost") == (
        "github.localhost/a/b"
    )
    assert github_repository("/srv/git/origin.git") is None


def test_the_body_without_text_or_stages_still_names_the_task(tmp_path: Path) -> None:
    req = request(tmp_path, {}, body="  ", stages=())
    assert pull_request_body(req) == "Opened by orchestrator for task `t1`."


def test_a_push_url_the_worker_wrote_runs_no_hook_of_its_repository(
    tmp_path: Path,
    github: FakeGitHub,  # noqa: F811
) -> None:
    """A local push runs the receiving repository's hooks; a worker that can
    write the shared config points the push at a repository of its own
    with a `pre-receive` hook. That hook must not run (with the landing's
    environment: GH_TOKEN)."""
    repo, _origin = landing_repo(tmp_path)
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.git"
    git(tmp_path, "init", "-q", "--bare", str(evil))
    hook = evil / "hooks" / "pre-receive"
    hook.write_text(f'#!/bin/sh\nenv > "{marker}"\n')
    hook.chmod(0o755)
    git(repo, "config", "remote.origin.pushurl", str(evil))
    open_pull_request(request(repo, land_env(github, tmp_path)))
    assert not marker.exists(), marker.read_text()
