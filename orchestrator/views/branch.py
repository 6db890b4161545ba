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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.errors import RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.storage.reads.attempts import stage_commits
from orchestrator.views.suggest import unknown_task
from orchestrator.workspace.gitrun import (
    GIT_TIMEOUT,
    STEP_TIMEOUT,
    GitError,
    GitSteps,
    run_git,
)
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
    landed_commit: str | None = None  # where its landing moved the base (`land`)
    pr_url: str | None = None  # the pull request its landing opened

    def as_dict(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "base_branch": self.base_branch,
            "base_commit": self.base_commit,
            "last_commit": self.last_commit,
            "workspace": str(self.workspace),
            "worktree": self.worktree,
            "landed_commit": self.landed_commit,
            "pr_url": self.pr_url,
        }

    def lines(self) -> list[str]:
        """What `show` prints: where the change is and how to look at it."""
        tip = (self.last_commit or "none yet")[:12]
        where = str(self.workspace) if self.worktree else f"{self.workspace} (removed)"
        shown = [
            f"branch    {self.branch} (from {self.base_branch}), last commit {tip}",
            f"worktree  {where}",
        ]
        if self.landed_commit:
            shown.append(f"landed    {self.base_branch} at {self.landed_commit[:12]}")
        if self.pr_url:
            shown.append(f"pull req  {self.pr_url}")
        return shown


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
    return BranchState(
        task.branch,
        task.base_branch,
        task.base_commit,
        tip,
        workspace,
        present,
        task.landed_commit,
        task.pr_url,
    )


def _stage_range(conn: Any, task: repo.TaskSnapshot, stage: str) -> tuple[str | None, str | None]:
    """(from, to) for one stage's part: from the newest commit a stage passed
    before the stage's latest run began (else the base), to the commit its
    run passed with (None: still in the worktree)."""
    rows = stage_commits(conn, task.id)
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
    with _worktree_index(tree) as git:
        return git("diff", "--cached", *flags, start)


@contextmanager
def _worktree_index(tree: Worktree, timeout: float = STEP_TIMEOUT) -> Iterator[GitSteps]:
    """git on the worktree with a throwaway index holding what a commit would
    hold now (`read-tree HEAD`, then `add --all`): the worker's index is never
    touched, and untracked files count as added."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-index-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git = GitSteps(tree.workspace, git_dir=tree.admin_dir(), env=index, timeout=timeout)
        git("read-tree", "HEAD")
        git("add", "--all", "--", ".")
        yield git


SHOWN_DIFF_BYTES = 200_000  # of each part's diff on the page


@dataclass(frozen=True)
class ChangePart:
    """One view of a branch task's change: the whole of it, or one stage's."""

    base: str  # the commit it is measured from
    files: tuple[tuple[str, str], ...]  # (git's status letter, path), every file
    diff: str  # the shown head of the diff
    truncated: bool


@dataclass(frozen=True)
class BranchChanges:
    """What a reviewer of a branch task sees at a gate: the whole change
    against the base commit first, then this stage's part of it. The
    approval hash covers the tree the worktree would commit now (its
    `write-tree` through a throwaway index), so any edit, new file or
    deletion changes it, however much of the diff is shown."""

    whole: ChangePart
    stage: ChangePart | None
    digest_parts: tuple[str, ...]
    # What an approval of this look binds (`api/approving.py`): the commit
    # the worktree is on and the tree it would commit now, the very tree
    # the hash covers (None: the change could not be read). Without a
    # worktree, the branch's tip and its tree.
    head: str | None = None
    tree: str | None = None
    head_tree: str | None = None


def branch_changes(engine: Engine, settings: Settings, slug: str) -> BranchChanges | None:
    """None for a task that is not a branch, or whose worktree was never made."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        try:
            start, _end = _stage_range(conn, task, task.stage)
        except RefusedError:
            start = task.base_commit
    pipeline = settings.pipeline(task.pipeline)
    if task.branch is None or task.base_commit is None or pipeline is None:
        return None
    if pipeline.repository is None:
        return None
    tree = Worktree(pipeline.repository, settings.workspace_root / slug, task.branch, "")
    try:
        if tree.exists():
            return _look(tree, task.base_commit, start)
        tip = branch_tip(pipeline.repository, task.branch)
        if tip is None:
            return None
        return _look_at_commit(pipeline.repository, task.base_commit, start, tip)
    except GitError as exc:
        missing = ChangePart(task.base_commit, (), f"(cannot read the change: {exc})", False)
        return BranchChanges(missing, None, ("branch-error:" + str(exc),))


def _part(git: GitSteps, base: str, tip: str | None) -> ChangePart:
    """From `base` to `tip`, or (None) to the throwaway index of the worktree."""
    span = ["--cached", base] if tip is None else [base, tip]
    names = git("diff", "--name-status", "-z", "--no-renames", *span)
    fields = [f for f in names.split("\0") if f]
    files = tuple(zip(fields[0::2], fields[1::2], strict=False))
    shown, truncated = git.head("diff", "--no-renames", *span, limit=SHOWN_DIFF_BYTES)
    if tip is None and not truncated:  # the index was made from the work tree
        from orchestrator.workspace.git import with_text_shown
        from orchestrator.workspace.gitprocess import GitResult

        done = GitResult(0, shown.encode("utf-8", "replace"))
        done = with_text_shown(git.git, git.git.workspace, span, done, SHOWN_DIFF_BYTES)
        shown, truncated = done.stdout.decode("utf-8", "replace"), done.truncated
    return ChangePart(base, files, shown, truncated)


def _look(tree: Worktree, base: str, start: str | None) -> BranchChanges:
    # A gate look answers within the page's deadline, not a step's.
    with _worktree_index(tree, timeout=GIT_TIMEOUT) as git:
        written = git("write-tree").strip()
        head, head_tree = git("rev-parse", "HEAD^{commit}", "HEAD^{tree}").split()
        whole = _part(git, base, None)
        stage = _part(git, start, None) if start and start != base else None
    parts = (f"branch-tree:{written}", f"head:{head}", f"base:{base}", f"stage-from:{start}")
    return BranchChanges(whole, stage, parts, head, written, head_tree)


def _look_at_commit(repository: Path, base: str, start: str | None, tip: str) -> BranchChanges:
    git = GitSteps(repository, timeout=GIT_TIMEOUT)
    whole = _part(git, base, tip)
    stage = _part(git, start, tip) if start and start != base else None
    tree = git("rev-parse", "--verify", f"{tip}^{{tree}}").strip()
    parts = (f"branch-tip:{tip}", f"base:{base}", f"stage-from:{start}")
    return BranchChanges(whole, stage, parts, tip, tree, tree)
