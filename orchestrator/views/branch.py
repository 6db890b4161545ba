"""Where a task's change is, and what it is: the branch, its newest commit,
the worktree, and the whole change against the base commit (or one
stage's part of it), committed, uncommitted and untracked alike.

The untracked files are seen through a throwaway index: `read-tree HEAD`,
then `add --all` into it, then `diff --cached`. The worker's own index is
never touched, `.gitignore` is obeyed as a commit would obey it, and a
deleted file shows as deleted.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from orchestrator.config import Settings
from orchestrator.errors import RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.views.suggest import unknown_task
from orchestrator.workspace.gitcmd import GitError, run_git
from orchestrator.workspace.worktree import Worktree, branch_tip


@dataclass(frozen=True)
class BranchState:
    """A branch task's change as `show`, `explain` and the pages name it."""

    branch: str
    base_branch: str
    base_commit: str | None
    last_commit: str | None  # the branch's tip
    workspace: Path
    worktree: bool  # whether the worktree is still there

    def as_dict(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "base_branch": self.base_branch,
            "base_commit": self.base_commit,
            "last_commit": self.last_commit,
            "workspace": str(self.workspace),
            "worktree": self.worktree,
        }

    def lines(self) -> list[str]:
        """What `show` prints: where the change is and how to look at it."""
        tip = (self.last_commit or "none yet")[:12]
        where = str(self.workspace) if self.worktree else f"{self.workspace} (removed)"
        return [
            f"branch    {self.branch} (from {self.base_branch}), last commit {tip}",
            f"worktree  {where}",
        ]


def branch_state(settings: Settings, task: repo.TaskSnapshot) -> BranchState | None:
    """None for a task that is not a branch (its pipeline has no repository)."""
    pipeline = settings.pipeline(task.pipeline)
    if task.branch is None or task.base_branch is None:
        return None
    workspace = settings.workspace_root / task.slug
    repository = None if pipeline is None else pipeline.repository
    tip = None
    present = False
    if repository is not None:
        try:
            tip = branch_tip(repository, task.branch)
            present = Worktree(repository, workspace, task.branch, task.base_commit or "").exists()
        except GitError:
            pass
    return BranchState(task.branch, task.base_branch, task.base_commit, tip, workspace, present)


def _stage_range(conn: Any, task: repo.TaskSnapshot, stage: str) -> tuple[str | None, str | None]:
    """(from, to) for one stage's part: from the newest commit a stage passed
    before the stage's latest run began (else the base), to the commit its
    run passed with (None: still in the worktree)."""
    a = repo.attempts
    rows = conn.execute(
        select(a.c.id, a.c.stage, a.c.run, a.c.commit_sha)
        .where(a.c.task_id == task.id)
        .order_by(a.c.id)
    ).all()
    runs = [r for r in rows if r.stage == stage]
    if not runs:
        raise RefusedError(f"task {task.slug!r} has no attempt at stage {stage!r}")
    latest = runs[-1].run
    first_id = min(r.id for r in runs if r.run == latest)
    before = [r.commit_sha for r in rows if r.id < first_id and r.commit_sha]
    passed = [r.commit_sha for r in runs if r.run == latest and r.commit_sha]
    return (before[-1] if before else task.base_commit), (passed[-1] if passed else None)


def task_diff(
    engine: Engine, settings: Settings, slug: str, stage: str | None = None, stat: bool = False
) -> str:
    """The task's change as `git diff` prints it (`--stat`: its summary)."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        start, end = _stage_range(conn, task, stage) if stage else (task.base_commit, None)
    pipeline = settings.pipeline(task.pipeline)
    if task.branch is None or pipeline is None or pipeline.repository is None:
        raise RefusedError(f"task {slug!r} is not a branch (its pipeline has no `repository`)")
    if start is None:
        return ""  # no worktree made yet: no change
    tree = Worktree(pipeline.repository, settings.workspace_root / slug, task.branch, start)
    flags = ["--no-color", "--no-ext-diff", "--no-textconv", "--find-renames"]
    flags += ["--stat"] if stat else []
    if end is not None or not tree.exists():
        tip = end or branch_tip(pipeline.repository, task.branch) or start
        return run_git(pipeline.repository, ["diff", *flags, start, tip])
    return _worktree_diff(tree, start, flags)


def _worktree_diff(tree: Worktree, start: str, flags: list[str]) -> str:
    admin = tree.admin_dir()
    with tempfile.TemporaryDirectory(prefix="orchestrator-diff-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}

        def git(*args: str) -> str:
            return run_git(tree.workspace, args, git_dir=admin, work_tree=tree.workspace, env=index)

        git("read-tree", "HEAD")
        git("add", "--all", "--", ".")
        return git("diff", "--cached", *flags, start)
