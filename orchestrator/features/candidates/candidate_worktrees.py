"""Best of N, a candidate's git: its worktree made fresh from the round's
base (the task branch's tip, or after a round without a winner that
round's best candidate's commit), its starting commit noted, and its work
made a commit kept at `refs/orchestrator/<slug>/<stage>/<attempt number>`
whether it passed or not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.features.candidates import store as round_rows
from orchestrator.features.candidates.settling import settle_held
from orchestrator.features.candidates.slots import (
    candidate_branch,
    candidate_workspace,
    clear_slots,
    resolve,
    task_lock,
)
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx, write_tx
from orchestrator.testing import fault_point
from orchestrator.workspace import stage_commit
from orchestrator.workspace.attempt_refs import attempt_ref
from orchestrator.workspace.gitfaults import host_fault
from orchestrator.workspace.gitrun import GitError, run_git
from orchestrator.workspace.task_branch import author, sealed_key
from orchestrator.workspace.worktree import Worktree, branch_tip


def prepare_candidate(
    engine: Engine, settings: Settings, claim: Claim, warn: Callable[[str], None]
) -> AttemptRun | None:
    """Make the candidate's worktree, fresh, from the round's base: the task
    branch's tip, or, after a round in which no candidate passed, that
    round's best candidate's commit. None when it is ready. An earlier
    round's winner the branch cannot be made to hold is a `HostFault`."""
    pipeline, task = claim.pipeline, claim.task
    assert pipeline.repository is not None and task.branch is not None
    workspace = candidate_workspace(settings, task.slug, claim.candidate)
    branch = candidate_branch(task.slug, claim.candidate)
    try:
        # One at a time: an earlier round is settled first, and git's own
        # worktree bookkeeping (`worktree add`, `prune`) is not made for
        # several writers at once.
        with task_lock(settings, task.slug):
            settle_held(engine, settings, claim, warn)
            base = _round_base(engine, claim) or branch_tip(pipeline.repository, task.branch)
            if base is None:
                return AttemptRun(Outcome.WORKER_ERROR, error=f"branch {task.branch} is gone")
            clear_slots(pipeline.repository, [(workspace, branch)])
            workspace.parent.mkdir(parents=True, exist_ok=True)
            run_git(
                pipeline.repository,
                ["worktree", "add", "--quiet", "-b", branch, str(workspace), base],
            )
    except GitError as exc:
        host_fault(pipeline.repository, exc, ("workspace_root", settings.workspace_root))
        return AttemptRun(Outcome.WORKER_ERROR, error=f"candidate worktree: {exc}")
    return None


def note_base(engine: Engine, settings: Settings, claim: Claim) -> None:
    """Record the candidate's starting commit (the round's base) on its
    attempt, before its worker runs: the gate diffs each candidate from it."""
    assert claim.pipeline.repository is not None
    workspace = candidate_workspace(settings, claim.task.slug, claim.candidate)
    branch = candidate_branch(claim.task.slug, claim.candidate)
    try:
        head = Worktree(claim.pipeline.repository, workspace, branch, "").head()
    except GitError:
        head = ""
    with write_tx(engine) as conn:
        repo.record_start_commit(conn, claim.attempt_id, claim.token, head)


def _round_base(engine: Engine, claim: Claim) -> str | None:
    """The best candidate's commit of the stage's previous round in this
    run, when that round was decided without a winner; else None."""
    assert claim.round is not None
    with read_tx(engine) as conn:
        for earlier in range(claim.round - 1, 0, -1):
            members = round_rows.members(conn, claim.task.id, claim.stage.name, earlier)
            if not members:
                continue
            run = repo.attempts_of(conn, claim.task.id, claim.stage.name)
            if not any(a.id == members[0].id and a.run == claim.task.run for a in run):
                return None  # a round of an earlier run: start from the branch
            best = round_rows.decided(conn, [m.id for m in members])
            chosen = next((m for m in members if m.id == best), None)
            if chosen is None or chosen.outcome == Outcome.PASSED.value:
                return None
            ref = attempt_ref(claim.task.slug, claim.stage.name, chosen.number)
            assert claim.pipeline.repository is not None
            return resolve(claim.pipeline.repository, ref)
    return None


def commit_candidate(settings: Settings, claim: Claim, run: AttemptRun) -> None:
    """The candidate's work becomes a commit on its branch, kept at its
    attempt's ref, passed or not (the best failure is where the next round
    starts). A repository the host cannot write is a `HostFault`; else a
    passing candidate whose commit fails fails, with git's reason; a
    failing one is left without a commit."""
    pipeline, task = claim.pipeline, claim.task
    if pipeline.repository is None or task.branch is None:
        return
    workspace = candidate_workspace(settings, task.slug, claim.candidate)
    branch = candidate_branch(task.slug, claim.candidate)
    tree = Worktree(pipeline.repository, workspace, branch, task.base_commit or "")
    message = (
        f"{task.slug}: {claim.stage.name} (attempt {claim.number}, "
        f"candidate {claim.candidate} of {claim.candidates})\n\n{task.title}"
    )

    def removed(lock: Path) -> None:
        note = f"removed {lock}: no process held it (a git that died left it)"
        run.error = note if run.error is None else f"{run.error}; {note}"

    try:
        if not tree.exists():
            raise GitError(f"{workspace} is not the candidate's worktree")
        sha = stage_commit.commit(
            tree,
            message,
            sealed_key(task.slug, claim.stage.name, claim.attempt_id, claim.token),
            author(pipeline),
            stale=removed,
        )
        assert sha is not None
        fault_point("after_candidate_commit")
        ref = attempt_ref(task.slug, claim.stage.name, claim.number)
        run_git(pipeline.repository, ["update-ref", ref, sha])
        run.commit_sha = sha
    except GitError as exc:
        host_fault(pipeline.repository, exc)  # its work cannot be kept: not its fault
        if run.outcome is Outcome.PASSED:
            run.outcome = Outcome.WORKER_ERROR
            run.error = f"candidate commit: {exc}"
