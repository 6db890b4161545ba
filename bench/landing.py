"""Landing one task (`land = "merge"`, no check): the lock, the rebase, the
compare-and-set ref move and the record, against a hand-written `git rebase
&& git update-ref` of the same branch on an identical repository.

Each round builds two identical repositories (main, a task branch of one
commit in a worktree, then one more commit on main, so there is a rebase to
do): the orchestrator lands one through its landing step (in process, the
tick's own `Lander`, on a SQLite project whose task is `landing`), the
reference rebases and moves the ref in the other with plain git.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}

CONFIG = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"

[pipelines.default]
repository = "repo"
land = "merge"

[[pipelines.default.stages]]
name = "implement"
worker = ["/bin/true"]
verifier = ["/bin/echo", "{\\"pass\\": true, \\"score\\": 1.0}"]
"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_repo(folder: Path, files: int = 200) -> tuple[Path, Path]:
    """`folder/repo` on main, the worktree `folder/tasks/t` on task/t one
    commit ahead, and main one commit ahead of where task/t began."""
    repo = folder / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for index in range(files):  # a small project's worth of files
        (repo / f"file{index}.txt").write_text(f"line {index}\n" * 20)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    worktree = folder / "tasks" / "t"
    git(repo, "worktree", "add", "-q", "-b", "task/t", str(worktree), "main")
    (worktree / "feature.txt").write_text("the task's change\n")
    git(worktree, "add", ".")
    git(worktree, "commit", "-qm", "t: implement")
    (repo / "other.txt").write_text("landed meanwhile\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-qm", "meanwhile")
    return repo, worktree


def hand_written(folder: Path) -> float:
    repo, worktree = make_repo(folder)
    old = git(repo, "rev-parse", "main")
    started = time.perf_counter()
    subprocess.run(["git", "-C", str(worktree), "rebase", "-q", "main"], env=GIT_ENV, check=True)
    new = subprocess.run(
        ["git", "-C", str(worktree), "rev-parse", "HEAD"],
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        ["git", "-C", str(repo), "update-ref", "refs/heads/main", new, old],
        env=GIT_ENV,
        check=True,
    )
    elapsed = time.perf_counter() - started
    if git(repo, "rev-parse", "main") != new:
        raise SystemExit("landing bench: the hand-written landing did not move main")
    return elapsed


def orchestrator_landing(folder: Path, count_in: Path | None = None) -> float:
    """One landing's time; with `count_in`, its git calls are noted there
    (`gitcount`), and only the landing's: not the setup's."""
    from contextlib import nullcontext

    from sqlalchemy import text

    from bench.gitcount import counting_git
    from orchestrator.config import load_settings
    from orchestrator.features.landing.landing import Lander
    from orchestrator.storage.db import make_engine
    from orchestrator.tick.ticker import Ticker

    folder.mkdir(parents=True)
    config = folder / "orchestrator.toml"
    config.write_text(CONFIG)
    repo, _worktree = make_repo(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env["ORCHESTRATOR_CONFIG"] = str(config)
    subprocess.run(
        [sys.executable, "-m", "orchestrator", "db", "upgrade"],
        env=env,
        check=True,
        cwd=folder,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "-m", "orchestrator", "add", "t", "--title", "bench"],
        env=env,
        check=True,
        cwd=folder,
        capture_output=True,
    )
    settings = load_settings(config=config, db_url=None, environ=env)
    engine = make_engine(settings.database_url)
    try:
        with engine.begin() as conn:  # as its last stage's pass leaves it
            conn.execute(text("UPDATE tasks SET status = 'landing', host = NULL"))
        ticker = Ticker(settings, engine)
        counting = nullcontext() if count_in is None else counting_git(count_in)
        with counting:
            started = time.perf_counter()
            Lander(ticker.kernel).land_all()
            elapsed = time.perf_counter() - started
        with engine.connect() as conn:
            row = conn.execute(text("SELECT status, landed_commit FROM tasks")).one()
    finally:
        engine.dispose()
    if row[0] != "complete" or row[1] != git(repo, "rev-parse", "main"):
        raise SystemExit(f"landing bench: the task did not land ({row})")
    return elapsed


def git_calls(work: Path) -> list[str]:
    """The git calls of one landing, counted on an untimed landing of its
    own (`gitcount`); the lock, the rebase, the ref move and the checkout
    that follows it, as the timed ones do."""
    from bench.gitcount import GitCount

    orchestrator_landing(work / "counted", count_in=work / "gitcount")
    return GitCount(work / "gitcount" / "calls.log").calls()


def ratios(work: Path, rounds: int) -> list[float]:
    found = []
    orchestrator_landing(work / "warm")  # imports and first-use costs, not measured
    for index in range(rounds):
        reference = hand_written(work / f"ref-{index}")
        measured = orchestrator_landing(work / f"land-{index}")
        found.append(measured / reference)
    return found
