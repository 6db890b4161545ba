"""The notes feature's tick hooks: the notes folder in every attempt's
environment, and a notes stage's files moved there before the engine
commits the stage (`keep_work` returns False: the engine's commit, now
empty, still records that the stage passed)."""

from __future__ import annotations

import threading
from pathlib import Path

from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome
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

    # Each notes attempt's HEAD as its worker starts: a worker that
    # committed is moved back to it, its commits' files taken as notes.
    starts: dict[int, str] = {}
    lock = threading.Lock()

    def is_notes(claim: Claim) -> bool:
        return (
            NOTES_SECTION.of(claim.stage) == "notes"
            and claim.pipeline.repository is not None
            and claim.task.branch is not None
        )

    def note_start(claim: Claim) -> bool:
        if is_notes(claim):
            workspace = settings.workspace_root / claim.task.slug
            tree = task_worktree(
                claim.pipeline, claim.task, workspace, claim.task.base_commit or ""
            )
            try:
                start = tree.steps()("rev-parse", "--verify", "-q", "HEAD^{commit}").strip()
            except GitError:
                start = ""
            with lock:
                starts[claim.attempt_id] = start
        return False  # the engine notes it too

    def keep_work(claim: Claim, workspace: Path, run: AttemptRun) -> bool:
        with lock:
            start = starts.pop(claim.attempt_id, "")
        if not is_notes(claim):
            return False
        tree = task_worktree(claim.pipeline, claim.task, workspace, claim.task.base_commit or "")
        folder = notes_folder(settings, claim.task.slug)
        try:
            moved = move_notes(tree.steps(), workspace, folder, start)
        except (GitError, OSError) as exc:
            # Left where they are, they would be committed: the attempt
            # fails instead, and nothing of it is committed.
            _note(run, f"notes not moved: {exc}")
            run.outcome = Outcome.WORKER_ERROR
            return True
        for path, why in moved.left_out:
            _note(run, f"note {path!r} not kept ({why}); removed from the worktree")
        return False

    return TickHooks(attempt_env=attempt_env, note_start=note_start, keep_work=keep_work)


def _note(run: AttemptRun, line: str) -> None:
    run.error = line if run.error is None else f"{run.error}; {line}"
