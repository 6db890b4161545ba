"""What the pull-request tests share: a real repository with a task branch
and a real bare `origin`, a `LandRequest` for it, the landing run in a real
process, and the count of pushes that process made (git's trace2 log)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from features.landing.github_api import FakeGitHub
from support import git, make_repo

from orchestrator.features.landing.model import LandRequest, StageReasons

RUNNER = Path(__file__).with_name("run_pull_request.py")


def landing_repo(folder: Path) -> tuple[Path, Path]:
    """`folder/repo` with `task/t1` one commit ahead of main, and a bare
    `folder/origin.git` holding main, the repository's `origin`."""
    repo = make_repo(folder)
    origin = folder / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    git(repo, "checkout", "-q", "-b", "task/t1")
    (repo / "feature.txt").write_text("the change\n")
    git(repo, "add", "feature.txt")
    git(repo, "commit", "-qm", "t1: implement (attempt 1)")
    git(repo, "checkout", "-q", "main")
    return repo, origin


def request(repo: Path, env: Mapping[str, str], **changes: Any) -> LandRequest:
    base = LandRequest(
        slug="t1",
        title="Add the feature",
        body="Users asked for a feature file.",
        repository=repo,
        worktree=repo,
        branch="task/t1",
        base_branch="main",
        stages=(
            StageReasons("implement", 0.9, ("tests pass", "lint clean")),
            StageReasons("review", None, ()),
        ),
        env=dict(env),
        timeout=60.0,
    )
    return dataclasses.replace(base, **changes)


def trace_file(folder: Path) -> Path:
    return folder / "git-trace2.jsonl"


def land_env(fake: FakeGitHub, folder: Path, **extra: str) -> dict[str, str]:
    """The landing's environment: the look-alike's, and git's trace2 log
    (every git the push starts appends to it, so pushes can be counted)."""
    return {**fake.env(), "GIT_TRACE2_EVENT": str(trace_file(folder)), **extra}


def pushes(folder: Path) -> int:
    """`git push` commands run with this folder's trace log."""
    path = trace_file(folder)
    if not path.exists():
        return 0
    count = 0
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "start" and "push" in event.get("argv", []):
            count += 1
    return count


def land_in_process(req: LandRequest, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    data = dataclasses.asdict(req)
    data["repository"], data["worktree"] = str(req.repository), str(req.worktree)
    data["env"] = dict(req.env)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    if fault is not None:
        env["ORCHESTRATOR_TEST_FAULT"] = f"{fault}:exit"
    return subprocess.run(  # noqa: PLW1510 - callers assert on returncode
        [sys.executable, str(RUNNER), json.dumps(data)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def crash_and_retry(point: str, folder: Path, fake: FakeGitHub) -> dict[str, Any]:
    """Kill the landing at `point` (a real process, `os._exit(137)`), run it
    again; the second run's outcome. The caller counts pushes and PRs."""
    repo, _origin = landing_repo(folder)
    req = request(repo, land_env(fake, folder))
    died = land_in_process(req, fault=point)
    assert died.returncode == 137, (point, died.returncode, died.stdout, died.stderr)
    again = land_in_process(req)
    assert again.returncode == 0, again.stderr
    outcome: dict[str, Any] = json.loads(again.stdout)
    return outcome
