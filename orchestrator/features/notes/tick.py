"""The notes feature's tick hooks: the notes folder in every attempt's
environment, and a notes stage's files moved there before the engine
commits the stage (`keep_work` returns False: the engine's commit, now
empty, still records that the stage passed)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import Settings
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.ext.ports import Kernel
from orchestrator.features.notes.config import NOTES_SECTION
from orchestrator.features.notes.moving import move_notes
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.task_branch import task_worktree

NOTES_ENV = "ORCHESTRATOR_NOTES"


def notes_folder(settings: Settings, slug: str, branch: bool = True) -> Path:
    """A branch task's notes folder; a folder task keeps its notes where
    they were written (no branch to keep them out of), its workspace."""
    return settings.state_root / slug / "notes" if branch else settings.workspace_root / slug


def tick_hooks(kernel: Kernel) -> TickHooks:
    settings = kernel.settings
    with_notes = {
        p.name
        for p in settings.pipelines.values()
        if any(NOTES_SECTION.of(s) == "notes" for s in p.stages)
    }
    if not with_notes:
        return TickHooks()

    def attempt_env(claim: Claim) -> dict[str, str] | None:
        if claim.pipeline.name not in with_notes:
            return None
        branch = claim.pipeline.repository is not None
        return {NOTES_ENV: str(notes_folder(settings, claim.task.slug, branch))}

    def keep_work(claim: Claim, workspace: Path, run: AttemptRun) -> bool:
        if (
            NOTES_SECTION.of(claim.stage) != "notes"
            or claim.pipeline.repository is None
            or claim.task.branch is None
        ):
            return False
        tree = task_worktree(claim.pipeline, claim.task, workspace, claim.task.base_commit or "")
        try:
            moved = move_notes(tree.steps(), workspace, notes_folder(settings, claim.task.slug))
        except (GitError, OSError) as exc:
            _note(run, f"notes not moved: {exc}")
            return False
        for path, why in moved.left_out:
            _note(run, f"note {path!r} not kept ({why}); removed from the worktree")
        return False

    return TickHooks(attempt_env=attempt_env, keep_work=keep_work)


def _note(run: AttemptRun, line: str) -> None:
    run.error = line if run.error is None else f"{run.error}; {line}"
