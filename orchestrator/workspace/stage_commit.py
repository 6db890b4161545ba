"""A passed stage's commit on a task's branch, made once.

The commit carries an `Orchestrator-Attempt:` trailer naming the attempt,
so a tick killed between `git commit` and recording it finds the commit on
the branch (`find`) and records it instead of committing twice (`commit`).
Apart from `Worktree` (where the branch is checked out) because making a
commit is its own sequence of seven git steps with its own crash rules.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.workspace.gitrun import GitError, GitSteps
from orchestrator.workspace.worktree import TRAILER, checked_out_ref

if TYPE_CHECKING:
    from orchestrator.workspace.worktree import Identity, Worktree

_COMMIT_STEPS = 7  # of a stage commit: scan, HEAD, the trailer's look, add, diff, commit, tip


def find(tree: Worktree, attempt_key: str, git: GitSteps | None = None) -> str | None:
    """The commit on HEAD, and on no other branch, whose trailer line is
    this attempt's: the repository may outlive the database, so a landed
    task of an earlier one may carry the same slug and attempt id (and
    `--grep` alone matches `.../1` in `.../10`)."""
    trailer = f"{TRAILER}: {attempt_key}"
    out = (git or tree.steps())(
        "log",
        "--format=%H%x00%B%x00",
        "--fixed-strings",
        f"--grep={trailer}",
        "HEAD",
        "--not",
        f"--exclude={tree.branch}",
        "--branches",
    )
    fields = out.split("\0")
    for sha, body in zip(fields[0::2], fields[1::2], strict=False):
        if trailer in body.splitlines():
            return sha.strip()
    return None


def commit(
    tree: Worktree,
    message: str,
    attempt_key: str,
    identity: Identity,
    *,
    allow_empty: bool = True,
    stale: Callable[[Path], None] | None = None,
) -> str | None:
    """Commit everything the worker changed (tracked, untracked,
    deletions; ignored files stay out) with the attempt's trailer, and
    return the commit: the new one, or the one a killed tick already
    made. A stage that changed nothing (a reviewer) still gets its
    commit, empty, so the branch holds one commit per passed stage; a
    worker's own commits stay beneath it. Without `allow_empty`, nothing
    to commit is None (an approval that changed nothing adds no commit).
    An `index.lock` whose owner is gone is removed first, and `stale`
    told its path; one a live process may own makes the commit fail."""
    started = time.time()
    git = tree.steps(identity.environment(), steps=_COMMIT_STEPS)
    branch_ref = f"refs/heads/{tree.branch}"
    on = (
        checked_out_ref(git.git.git_dir, branch_ref)
        or git("rev-parse", "--symbolic-full-name", "HEAD").strip()
    )
    if on != branch_ref:
        # Detached, git names HEAD itself.
        on_branch = on.startswith("refs/heads/")
        raise GitError(tree.off_branch(on.removeprefix("refs/heads/") if on_branch else ""))
    done = find(tree, attempt_key, git)
    if done is not None:
        return done
    removed = tree.clear_stale_lock(started, git.git.git_dir)
    if removed is not None and stale is not None:
        stale(removed)
    git("add", "--all", "--", ".")
    if not allow_empty and not git("diff", "--cached", "--name-only", "-z").strip("\0"):
        return None
    body = f"{message}\n\n{TRAILER}: {attempt_key}\n"
    git(
        "commit",
        "--quiet",
        "--allow-empty",
        "--no-verify",
        "--no-gpg-sign",
        "--cleanup=verbatim",
        "-m",
        body,
    )
    return git("rev-parse", "--verify", "HEAD").strip()
