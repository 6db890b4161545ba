"""A project whose pipeline lands by pull request and follows it: a real
repository with a real bare `origin`, real `tick` processes, the real `gh`
against the local look-alike of GitHub's REST and GraphQL APIs (GitHub
cannot run here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from e2e.e2e_support import PASS, stage
from features.landing.github_api import FakeGitHub
from support import Project, git, make_repo

WORKER = (
    'printf "%s\\n--\\n" "$ORCHESTRATOR_NEXT_HINT" >> ../hints.log; date +%s%N >> work.txt; '
    'if [ -n "$ORCHESTRATOR_FEEDBACK" ]; then cp "$ORCHESTRATOR_FEEDBACK" ../feedback.json; fi'
)


def follow_project(project: Project, fake: FakeGitHub, **keys: object) -> Path:
    """`t1` added to a `land = "pr"` pipeline with `follow_pr`; the bare
    origin's path returned."""
    repo = make_repo(project.dir)
    origin = project.dir / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    follow = keys.pop("follow_pr", True)
    lines = ["[pipelines.default]", 'repository = "repo"', 'land = "pr"']
    lines += ["follow_pr = true"] if follow else []
    lines += [f"{key} = {value!r}".replace("'", '"') for key, value in keys.items()]
    project.write_config(
        "\n".join(lines) + "\n\n" + stage("implement", worker=["sh", "-c", WORKER], verifier=PASS)
    )
    project.env.update(fake.env())
    assert project.run("add", "t1", "--title", "Add work").returncode == 0
    return origin


def tick(project: Project, rc: int = 0, **extra_env: str) -> str:
    done = project.run("tick", extra_env=extra_env)
    assert done.returncode == rc, (done.stdout, done.stderr)
    return done.stdout


def hints(project: Project) -> list[str]:
    log = project.dir / "tasks" / "hints.log"
    return log.read_text().split("\n--\n")[:-1] if log.exists() else []


def origin_tip(origin: Path, branch: str = "task/t1") -> str:
    return git(origin, "rev-parse", f"refs/heads/{branch}").strip()
