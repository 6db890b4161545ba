"""Best of N, after the decision: the winner of the task's decided round
becomes the task branch's tip (a fast-forward), and the candidates'
worktrees and branches go (their commits stay at their refs, pruned with
the task). Every step looks at what the database decided and at git
first, so it finishes whatever a killed tick left undone and is safe to
run again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from orchestrator.config import PipelineConfig, Settings
from orchestrator.domain.decide import Outcome
from orchestrator.domain.pipeline import Status
from orchestrator.errors import HostFault, HostIOError
from orchestrator.ext.model import Claim
from orchestrator.features.candidates import store as round_rows
from orchestrator.features.candidates.slots import (
    candidate_branch,
    candidate_workspace,
    clear_slots,
    task_lock,
)
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.testing import fault_point
from orchestrator.workspace.gitfaults import host_fault
from orchestrator.workspace.gitrun import GitError, run_git
from orchestrator.workspace.worktree import Worktree, branch_tip


def settle(engine: Engine, settings: Settings, slug: str, warn: Callable[[str], None]) -> None:
    """Make git match the task's decided round (see `_settle_locked`)."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
    pipeline = None if task is None else settings.pipeline(task.pipeline)
    if task is None or pipeline is None or pipeline.repository is None:
        return
    try:
        with task_lock(settings, slug):
            _settle_locked(engine, settings, pipeline, slug, warn)
    except GitError as exc:
        warn(f"{slug}: settling its round of candidates: {exc}")


def settle_before(
    engine: Engine, settings: Settings, claim: Claim, warn: Callable[[str], None]
) -> None:
    """Before any command of the claim runs: the task's decided round
    settled onto its branch (`settle_held`), under the task's lock."""
    with task_lock(settings, claim.task.slug):
        settle_held(engine, settings, claim, warn)


def settle_held(
    engine: Engine, settings: Settings, claim: Claim, warn: Callable[[str], None]
) -> None:
    """The invariant a stage starts on: the branch holds the winner of the
    task's last decided round. Settled again here whatever an earlier try
    left; a branch that still does not hold it is a `HostFault` (the stage
    waits, charged nothing, and the tick claims no more), never a stage run
    on the old tip. A settle that failed after the winner is held (a
    candidate's worktree not cleared) is a warning."""
    pipeline, task = claim.pipeline, claim.task
    assert pipeline.repository is not None and task.branch is not None
    must: list[str] = []
    failed: GitError | None = None
    try:
        _settle_locked(engine, settings, pipeline, task.slug, warn, must)
    except GitError as exc:
        host_fault(pipeline.repository, exc)  # a repository the host cannot write
        failed = exc
    if must and not _holds(pipeline.repository, task.branch, must[0]):
        why = f" ({failed})" if failed is not None else ""
        raise HostFault(
            HostIOError(
                f"{task.slug}: branch {task.branch} does not hold {must[0][:12]}, the winner "
                f"of its last round{why}; its {claim.stage.name} stage waits until it does"
            )
        )
    if failed is not None:
        warn(f"{task.slug}: settling its round of candidates: {failed}")


def _holds(repository: Path, branch: str, sha: str) -> bool:
    """Whether the branch holds `sha` (one git step; no branch holds nothing)."""
    try:
        run_git(repository, ["merge-base", "--is-ancestor", sha, f"refs/heads/{branch}"])
    except GitError:
        return False
    return True


def _settle_locked(
    engine: Engine,
    settings: Settings,
    pipeline: PipelineConfig,
    slug: str,
    warn: Callable[[str], None],
    must: list[str] | None = None,
) -> None:
    """The task's newest ended round: its winner's commit becomes the task
    branch's tip (a fast-forward, in the task's worktree when it has one;
    added to `must` first, for the caller to check); then, unless a round
    is running, every candidate worktree and branch of the task goes."""
    assert pipeline.repository is not None
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None or task.branch is None:
            return
        found = round_rows.rounds_newest_first(conn, task.id)
        running = False
        winner: round_rows.Member | None = None
        slots = 1
        for stage, round_no, _newest in found:
            members = round_rows.members(conn, task.id, stage, round_no)
            slots = max(slots, *(m.candidates for m in members))
            best = round_rows.decided(conn, [m.id for m in members])
            if best is None and (
                any(m.finished_at is None for m in members)
                or (task.status is Status.RUNNING and task.stage == stage)
            ):
                running = True  # candidates at work, or slots not all claimed yet
                continue
            winner = next((m for m in members if m.id == best), None)
            break
    if not found:
        return
    if winner is not None and winner.outcome == Outcome.PASSED.value and winner.commit_sha:
        if must is not None:
            must.append(winner.commit_sha)
        _fast_forward(pipeline, task, winner.commit_sha, warn)
        fault_point("after_round_branch_moved")
    if running:
        return
    clear_slots(
        pipeline.repository,
        [
            (candidate_workspace(settings, slug, slot), candidate_branch(slug, slot))
            for slot in range(1, slots + 1)
        ],
    )


def _fast_forward(
    pipeline: PipelineConfig, task: repo.TaskSnapshot, sha: str, warn: Callable[[str], None]
) -> None:
    assert pipeline.repository is not None and task.branch is not None
    started = time.time()  # a lock made since is never taken for a stale one
    tip = branch_tip(pipeline.repository, task.branch)
    if tip == sha or tip is None:
        return
    try:
        run_git(pipeline.repository, ["merge-base", "--is-ancestor", sha, tip])
        return  # moved already
    except GitError:
        pass
    # The worktree that has the branch checked out moves with it, wherever
    # it is (a host sharing the repository may hold it).
    listed = run_git(pipeline.repository, ["worktree", "list", "--porcelain", "-z"])
    checked_out: Path | None = None
    path: Path | None = None
    for field in listed.split("\0"):
        if field.startswith("worktree "):
            path = Path(field.removeprefix("worktree "))
        elif field == f"branch refs/heads/{task.branch}":
            checked_out = path
    if checked_out is not None and checked_out.is_dir():
        tree = Worktree(pipeline.repository, checked_out, task.branch, task.base_commit or "")
        removed = tree.clear_stale_lock(started)
        if removed is not None:
            warn(f"{task.slug}: removed {removed}: no process held it (a git that died left it)")
        tree.git(["merge", "--ff-only", "--quiet", "--no-edit", sha])
    else:
        run_git(pipeline.repository, ["update-ref", f"refs/heads/{task.branch}", sha, tip])
