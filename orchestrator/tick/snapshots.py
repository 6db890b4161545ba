"""The tick's part of best-attempt restore: keep each attempt's work on its
hidden ref (`workspace.attempt_refs`) once its commands ran, passed or
not, before the verdict is recorded. Only branch tasks (a pipeline with
`repository`) have a ref; a folder task's work is its folder."""

from __future__ import annotations

from pathlib import Path

from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.testing import fault_point
from orchestrator.tick.branches import attempt_key
from orchestrator.workspace.attempt_refs import attempt_ref, snapshot
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.task_branch import author, task_worktree


def keep(claim: Claim, workspace: Path, run: AttemptRun) -> None:
    """A snapshot that fails (a broken worktree) never changes the attempt's
    outcome: the attempt is judged on its verdict; the error says why it
    cannot be restored."""
    if claim.pipeline.repository is None or claim.task.branch is None:
        return
    tree = task_worktree(claim.pipeline, claim.task, workspace, claim.task.base_commit or "")
    ref = attempt_ref(claim.task.slug, claim.stage.name, claim.number)
    title = f"{claim.task.slug}: {claim.stage.name} attempt {claim.number} (kept)"
    try:
        if not tree.exists():
            return
        snapshot(tree, ref, attempt_key(claim), title, author(claim.pipeline))
        fault_point("after_snapshot_ref")
    except GitError as exc:
        note = f"attempt snapshot: {exc}"
        run.error = note if run.error is None else f"{run.error}; {note}"
