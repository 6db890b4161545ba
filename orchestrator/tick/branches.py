"""A task is a branch: the tick's two git steps, making the task's worktree
before its first command and committing a passed attempt's work after its
verdict. Each is a function of what it is handed (the claim, the
workspace, a way to write to the database), so it can be run and tested
without a tick around it, and each is safe to run again after a kill."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.storage import repo
from orchestrator.storage.db import write_tx
from orchestrator.testing import fault_point
from orchestrator.workspace import approval, stage_commit
from orchestrator.workspace.gitfaults import host_fault
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.task_branch import author, sealed_key, task_worktree
from orchestrator.workspace.worktree import branch_tip

_T = TypeVar("_T")
Retrying = Callable[[Callable[[bool], _T]], _T]


def prepare(
    engine: Engine, retrying: Retrying[str], claim: Claim, workspace: Path
) -> AttemptRun | None:
    """Make the task's worktree (None when it is ready), recording the base
    commit first: a tick killed after the record and before `worktree add`
    leaves a next tick that adds it from the same commit."""
    task = claim.task
    if claim.pipeline.repository is None or task.branch is None or task.base_branch is None:
        return None
    base_commit = task.base_commit
    try:
        if base_commit is None:
            tip = branch_tip(claim.pipeline.repository, task.base_branch)
            if tip is None:
                return AttemptRun(
                    Outcome.WORKER_ERROR,
                    error=f"base branch {task.base_branch!r} is gone from "
                    f"{claim.pipeline.repository}",
                )

            def record(_again: bool) -> str:
                with write_tx(engine) as conn:
                    return repo.record_base_commit(conn, task.id, tip)

            base_commit = retrying(record)
            fault_point("after_base_recorded")
        task_worktree(claim.pipeline, task, workspace, base_commit).ensure()
    except GitError as exc:
        host_fault(claim.pipeline.repository, exc, ("workspace_root", workspace.parent))
        return AttemptRun(Outcome.WORKER_ERROR, error=f"worktree: {exc}")
    fault_point("after_worktree_add")
    return None


def attempt_key(claim: Claim) -> str:
    """The claim's attempt's sealed key (`workspace/task_branch.sealed_key`)."""
    return sealed_key(claim.task.slug, claim.stage.name, claim.attempt_id, claim.token)


def commit_passed(claim: Claim, workspace: Path, run: AttemptRun) -> None:
    """After a passing verdict: the worker's changes become the stage's one
    commit on the task's branch (above any the worker made itself), recorded
    as `run.commit_sha`. A lock whose owner is gone is removed (noted on
    the attempt); a repository the host cannot write is the host's fault;
    any other failure (a lock a worker's process still holds, a broken
    index) fails the attempt, with git's reason."""
    if (
        run.outcome is not Outcome.PASSED
        or claim.pipeline.repository is None
        or claim.task.branch is None
    ):
        return
    tree = task_worktree(claim.pipeline, claim.task, workspace, claim.task.base_commit or "")
    message = (
        f"{claim.task.slug}: {claim.stage.name} (attempt {claim.number})\n\n{claim.task.title}"
    )
    removed: list[Path] = []
    try:
        run.commit_sha = stage_commit.commit(
            tree, message, attempt_key(claim), author(claim.pipeline), stale=removed.append
        )
        fault_point("after_stage_commit")
    except GitError as exc:
        host_fault(claim.pipeline.repository, exc)
        run.outcome = Outcome.WORKER_ERROR
        run.error = f"stage commit: {exc}"
    for lock in removed:
        note = f"removed {lock}: no process held it (a git that died left it)"
        run.error = note if run.error is None else f"{run.error}; {note}"


def commit_approved(
    settings: Settings, task: repo.TaskSnapshot, reason: str | None, warn: Callable[[str], None]
) -> bool:
    """An approved gate of a branch task: the branch and its worktree are put
    at exactly the commit the approval fixed (`reason`, the approve
    transition's: the stage commit, or the tree with the reviewer's edits
    the approval hash covered), so what moves on is what a verifier judged
    or the approver saw. Anything beyond it (an edit made after the
    approval) is set aside on a hidden ref, with a warning, out of the next
    stage's commit and the landing. An approval recorded before it named a
    commit moves on the branch as it is. False (with a warning) when git
    failed: the task stays approved and the next tick tries again."""
    pipeline = settings.pipeline(task.pipeline)
    if pipeline is None or pipeline.repository is None or task.branch is None:
        return True
    tree = task_worktree(
        pipeline, task, settings.workspace_root / task.slug, task.base_commit or ""
    )
    try:
        commit = approval.approved_commit(reason) or branch_tip(pipeline.repository, task.branch)
        if commit is None:
            return True
        settled = approval.settle(tree, task.slug, commit, author(pipeline))
        fault_point("after_approval_commit")
    except approval.ApprovedCommitGone as exc:
        warn(
            f"{task.slug}: the approved {task.stage} gate cannot move on: {exc}; "
            f"`orchestrator halt {task.slug}` then `orchestrator resume {task.slug}` "
            "runs the stage again for a new look"
        )
        return False
    except GitError as exc:
        warn(f"{task.slug}: the approved {task.stage} gate waits to move on: {exc}")
        return False
    if settled.kept is not None:
        warn(
            f"{task.slug}: what changed in the worktree after the {task.stage} approval "
            f"was not approved: kept as {approval.after_approval_ref(task.slug)} "
            f"({settled.kept[:12]}), and the worktree put back to the approved tree"
        )
    return True
