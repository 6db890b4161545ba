"""Best of N, the git side: each candidate works in a worktree of its own,
on `cand/<slug>/<slot>` branched from the round's base; its work becomes a
commit kept at `refs/orchestrator/<slug>/<stage>/<attempt number>`
whether it passed or not; once the round is decided the winner's commit
becomes the task branch's tip and the candidates' worktrees and branches
go (their commits stay at their refs, pruned with the task).

Every step is safe to run again: `settle` looks at what the database
decided and at git, and finishes whatever a killed tick left undone.
Candidate worktrees live under `<workspace_root>/.candidates/<slug>/`: a
slug never starts with a dot, so no task's workspace can be there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, func, select

from orchestrator.config import PipelineConfig, Settings
from orchestrator.domain.decide import Outcome
from orchestrator.domain.pipeline import Status
from orchestrator.errors import HostIOError
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx, write_tx
from orchestrator.storage.repo import rounds as round_rows
from orchestrator.testing import fault_point
from orchestrator.tick.branches import attempt_key, host_fault
from orchestrator.tick.steps import HostFault
from orchestrator.workspace.attempt_refs import REF_PREFIX, attempt_ref
from orchestrator.workspace.gitrun import GitError, run_git
from orchestrator.workspace.task_branch import author
from orchestrator.workspace.worktree import Worktree, branch_tip

CANDIDATES_FOLDER = ".candidates"
CANDIDATE_PREFIX = "cand/"


def candidate_branch(slug: str, slot: int) -> str:
    # Not `task/<slug>/<slot>`: git cannot hold a branch `task/<slug>` and
    # one beneath it at once (a ref is a file, and so would its folder be).
    return f"{CANDIDATE_PREFIX}{slug}/{slot}"


def candidate_workspace(settings: Settings, slug: str, slot: int) -> Path:
    return settings.workspace_root / CANDIDATES_FOLDER / slug / str(slot)


def workspace_of(settings: Settings, claim: Claim) -> Path:
    """Where the claim's commands run: a candidate's own worktree, else the task's."""
    if claim.candidate:
        return candidate_workspace(settings, claim.task.slug, claim.candidate)
    return settings.workspace_root / claim.task.slug


@contextmanager
def task_lock(settings: Settings, slug: str) -> Iterator[None]:
    """One settle or candidate worktree at a time per task on this host:
    the candidates of a round are prepared in parallel threads."""
    folder = settings.state_root / slug
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / "round.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def branch_ready(claim: Claim) -> bool:
    """Whether the task's branch is there to branch candidates from (made,
    with the task's worktree, by whichever candidate came first)."""
    repository, task = claim.pipeline.repository, claim.task
    if repository is None or task.branch is None:
        return False
    return branch_tip(repository, task.branch) is not None


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
            _settle_held(engine, settings, claim, warn)
            base = _round_base(engine, claim) or branch_tip(pipeline.repository, task.branch)
            if base is None:
                return AttemptRun(Outcome.WORKER_ERROR, error=f"branch {task.branch} is gone")
            _clear_slots(pipeline.repository, [(workspace, branch)])
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
            return _resolve(claim.pipeline.repository, ref)
    return None


def _resolve(repository: Path, ref: str) -> str | None:
    try:
        return run_git(repository, ["rev-parse", "--verify", "--quiet", ref]).strip() or None
    except GitError:
        return None


def _clear_slots(repository: Path, slots: list[tuple[Path, str]]) -> None:
    """What an earlier round left in these slots (worktree, branch): its
    commits are at their refs already, so both are dropped, forced. Each
    git step runs only when there is something for it to do."""
    listed = set(run_git(repository, ["worktree", "list", "--porcelain", "-z"]).split("\0"))
    for workspace, _branch in slots:
        real = Path(os.path.realpath(workspace.parent)) / workspace.name
        if f"worktree {real}" in listed:
            run_git(repository, ["worktree", "remove", "--force", "--force", str(workspace)])
            fault_point("after_candidate_removed")
        if workspace.is_symlink():
            workspace.unlink()
        elif workspace.exists():
            shutil.rmtree(workspace)
    if any(
        not Path(line.removeprefix("worktree ")).exists()
        for line in listed
        if line.startswith("worktree ")
    ):
        run_git(repository, ["worktree", "prune"])
    wanted = [f"refs/heads/{branch}" for _workspace, branch in slots]
    found = run_git(repository, ["for-each-ref", "--format=%(refname)", *wanted]).split()
    if found:
        run_git(
            repository,
            ["branch", "--quiet", "-D", *(ref.removeprefix("refs/heads/") for ref in found)],
        )


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
        sha = tree.commit_stage(message, attempt_key(claim), author(pipeline), stale=removed)
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
    settled onto its branch (`_settle_held`), under the task's lock."""
    with task_lock(settings, claim.task.slug):
        _settle_held(engine, settings, claim, warn)


def _settle_held(
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
    a = repo.attempts
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None or task.branch is None:
            return
        found = conn.execute(
            select(a.c.stage, a.c.round, func.max(a.c.id))
            .where(a.c.task_id == task.id, a.c.round.is_not(None))
            .group_by(a.c.stage, a.c.round)
            .order_by(func.max(a.c.id).desc())
        ).all()
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
    _clear_slots(
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


def unsettled(settings: Settings) -> list[str]:
    """Slugs with candidate branches left in a pipeline's repository: a
    round decided by a tick that died before settling it, or one running."""
    slugs: set[str] = set()
    repositories = {p.repository for p in settings.pipelines.values() if p.repository}
    for repository in sorted(repositories):
        try:
            out = run_git(
                repository,
                ["for-each-ref", "--format=%(refname)", "refs/heads/" + CANDIDATE_PREFIX],
            )
        except GitError:
            continue
        for line in out.splitlines():
            parts = line.removeprefix("refs/heads/" + CANDIDATE_PREFIX).split("/")
            if len(parts) == 2:
                slugs.add(parts[0])
    return sorted(slugs)


def drop_attempt_refs(repository: Path, slug: str) -> int:
    """Delete the task's kept attempt refs (`prune --finished`); how many."""
    prefix = f"{REF_PREFIX}{slug}/"
    out = run_git(repository, ["for-each-ref", "--format=%(refname)", prefix])
    refs = [line for line in out.splitlines() if line.startswith(prefix)]
    for ref in refs:
        run_git(repository, ["update-ref", "-d", ref])
    return len(refs)
