"""Putting a recorded attempt's kept work back on its task's branch: the one
restore both `orchestrator restore` and a stage's `on_halt = "best"` run.

Three steps, each safe to run again: the git restore (a new commit on the
branch whose tree is the attempt's snapshot, checked out in the
worktree), then the mark on the attempt (`restored_at`) in one
transaction. A kill between the two leaves a branch that already holds the
snapshot's tree: the restore run again finds nothing to commit and only
writes the mark, so the branch gets the commit once.

The task's row is held (a write transaction) from the checks through the
git step to the mark, so a person's resume or approve and the tick's
claim, advance or landing wait for it, and never meet a branch being
rewritten.

Refused (exit 1, one line): a task that is not a branch, one that is
running, ready, approved or landing (a tick could start on it while its
files change), an
attempt that is not there or not finished, and one whose ref is gone or
is not this attempt's (a ref left by an earlier database).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from orchestrator.config import PipelineConfig, Settings
from orchestrator.domain.pipeline import Status
from orchestrator.errors import RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, write_tx
from orchestrator.storage.repo import restores
from orchestrator.testing import fault_point
from orchestrator.workspace.attempt_refs import RESTORE_TRAILER, attempt_ref, read_snapshot
from orchestrator.workspace.attempt_refs import restore as git_restore
from orchestrator.workspace.task_branch import author, sealed_key, task_worktree


@dataclass(frozen=True)
class Restored:
    task: str
    stage: str
    attempt: int
    ref: str
    commit: str | None  # the new commit on the branch; None: it held that work already

    def as_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "stage": self.stage,
            "attempt": self.attempt,
            "ref": self.ref,
            "commit": self.commit,
        }


def _pipeline(settings: Settings, task: repo.TaskSnapshot) -> PipelineConfig:
    pipeline = settings.pipeline(task.pipeline)
    if pipeline is None or pipeline.repository is None or task.branch is None:
        raise RefusedError(
            f"task {task.slug!r} is not a branch (its pipeline has no `repository`): "
            "it has no kept attempts"
        )
    return pipeline


def restore_attempt(
    engine: Engine, settings: Settings, task: repo.TaskSnapshot, stage: str, number: int
) -> Restored:
    pipeline = _pipeline(settings, task)
    _refuse_busy(task)  # the caller's read: a clear answer without a transaction
    fault_point("restore_before_git")
    # The task's row is held from the checks through the git step to the
    # mark: every change of its state (a person's resume or approve, the
    # tick's advance, claim and landing) takes that row first, so none can
    # start an attempt or a landing on the branch while it is rewritten.
    with write_tx(engine) as conn:
        current = repo.get_task(conn, task.slug, for_update=True)
        if current is None or current.id != task.id:
            raise RefusedError(f"task {task.slug!r} is gone")
        _refuse_busy(current)
        kept = restores.stage_attempts(conn, task.id, stage)
        if restores.open_attempts(conn, task.id):
            raise RefusedError(
                f"task {task.slug!r} has an attempt still running; wait for its tick"
            )
        found = [a for a in kept if a.number == number]
        if not found:
            numbers = f"1..{kept[-1].number}" if kept else "none"
            raise RefusedError(
                f"task {task.slug!r} has no attempt {number} at stage {stage!r} "
                f"(attempts: {numbers})"
            )
        attempt = found[0]
        ref = attempt_ref(task.slug, stage, number)
        if current.base_commit is None:
            raise RefusedError(f"attempt {number}'s work was never kept (no worktree was made)")
        tree = task_worktree(
            pipeline, current, settings.workspace_root / task.slug, current.base_commit
        )
        tree.ensure()
        key = sealed_key(task.slug, stage, attempt.id, attempt.lease_token)
        sha = read_snapshot(tree, ref, key)
        if sha is None:
            raise RefusedError(
                f"attempt {number}'s kept work is gone ({ref} is missing or not its)"
            )
        message = (
            f"{task.slug}: {stage} restored to attempt {number}\n\n"
            f"{RESTORE_TRAILER}: {task.slug}/{stage}/{number}\n"
        )
        commit = git_restore(tree, task.slug, sha, message, author(pipeline))
        fault_point("after_restore_commit")
        restores.mark_restored(conn, attempt.id, db_now(conn))
    return Restored(task.slug, stage, number, ref, commit)


def _refuse_busy(task: repo.TaskSnapshot) -> None:
    """A task a tick may be working on, or is about to, is not restored:
    running, ready (a claim), approved (the gate's commit, then its next
    stage) or landing (the branch is being moved to its base)."""
    if task.status in (Status.RUNNING, Status.READY):
        why = "is running" if task.status is Status.RUNNING else "is ready (a tick may claim it)"
        raise RefusedError(f"task {task.slug!r} {why}; halt it first")
    if task.status is Status.APPROVED:
        raise RefusedError(f"task {task.slug!r} is approved (a tick moves it on); wait for it")
    if task.status is Status.LANDING:  # the next tick lands the branch as it is then
        raise RefusedError(f"task {task.slug!r} is landing; wait for its tick")
