"""Best of N, where candidates work: candidate *i* of a task works in a
worktree of its own, `<workspace_root>/.candidates/<slug>/<i>`, on the
branch `cand/<slug>/<i>`; one git step at a time per task on this host
(`task_lock`); what an earlier round left in a slot is cleared
(`clear_slots`). A slug never starts with a dot, so no task's workspace
can be under `.candidates`."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.config import Settings
from orchestrator.ext.model import Claim
from orchestrator.testing import fault_point
from orchestrator.workspace.gitrun import GitError, run_git
from orchestrator.workspace.worktree import branch_tip

CANDIDATES_FOLDER = ".candidates"
CANDIDATE_PREFIX = "cand/"


def candidate_branch(slug: str, slot: int) -> str:
    # Not `task/<slug>/<slot>`: git cannot hold a branch `task/<slug>` and
    # one beneath it at once (a ref is a file, and so would its folder be).
    return f"{CANDIDATE_PREFIX}{slug}/{slot}"


def candidate_workspace(settings: Settings, slug: str, slot: int) -> Path:
    return settings.workspace_root / CANDIDATES_FOLDER / slug / str(slot)


def workspace_of(settings: Settings, claim: Claim) -> Path | None:
    """Where the claim's commands run: a candidate's own worktree; None
    for an attempt on its own (the task's, the engine's)."""
    if claim.candidate:
        return candidate_workspace(settings, claim.task.slug, claim.candidate)
    return None


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


def resolve(repository: Path, ref: str) -> str | None:
    try:
        return run_git(repository, ["rev-parse", "--verify", "--quiet", ref]).strip() or None
    except GitError:
        return None


def clear_slots(repository: Path, slots: list[tuple[Path, str]]) -> None:
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
