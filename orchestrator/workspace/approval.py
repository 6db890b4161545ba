"""What a gate's approval moves on, in git: fixed when the person approves,
put in place by the next tick, and nothing else with it.

`pin` runs at `approve`, from the very look the approval hash was computed
from (`views/branch.py`): the commit that moves on is the commit the
worktree was on, or, when the worktree held more (a reviewer's edit the
hash covered), a new commit of exactly the tree that look wrote, on top of
it. Its id is recorded on the approve transition (`approval_reason`) and a
ref keeps it from `git gc` until the branch holds it.

`settle` runs at the next tick, before the task moves on: the branch is put
at that commit and the worktree's files at its tree. Whatever the worktree
or the branch held beyond it (an edit made after the approval, by a person,
an editor or a process a worker left) is not approved: it is kept as a
commit on `refs/orchestrator/<slug>/_after-approval` (its parents: where the
branch was, and what that ref held before) and taken out of the worktree,
so it reaches neither the next stage's commit nor the landing.

Run again after a kill between its steps, `settle` finishes the same way:
the files are put back before the branch moves, so a second run finds
either the late work still there (kept again, with the first keep as a
parent) or the approved tree with the branch behind it (moved).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.workspace.attempt_refs import REF_PREFIX
from orchestrator.workspace.gitrun import GitError, GitSteps
from orchestrator.workspace.worktree import Identity, Worktree

APPROVED = "approved"  # the approve transition's reason, alone or with its commit
_REASON = re.compile(rf"{APPROVED} ([0-9a-f]{{40}}|[0-9a-f]{{64}})")


def approval_reason(commit: str | None) -> str:
    """The approve transition's reason: it names the commit that moves on
    (no schema change: `reason` is free text, as `rejected to STAGE`)."""
    return APPROVED if commit is None else f"{APPROVED} {commit}"


def approved_commit(reason: str | None) -> str | None:
    """The commit an approve transition's reason names; None for one
    recorded before approvals named it."""
    found = _REASON.fullmatch(reason or "")
    return found.group(1) if found else None


def approved_ref(slug: str, commit: str) -> str:
    """`_` first: no stage is named so (a stage starts with a letter or digit)."""
    return f"{REF_PREFIX}{slug}/_approved/{commit}"


def after_approval_ref(slug: str) -> str:
    return f"{REF_PREFIX}{slug}/_after-approval"


def pin(repository: Path, slug: str, head: str, tree: str, message: str, identity: Identity) -> str:
    """The commit an approval moves on: `head` when `tree` is its own, else
    a commit of `tree` above it, made now; kept by a ref of its own."""
    git = GitSteps(repository, env=identity.environment())
    head_tree = git("rev-parse", "--verify", f"{head}^{{tree}}").strip()
    commit = head
    if tree != head_tree:
        commit = git("commit-tree", tree, "-p", head, "-m", message).strip()
    git("update-ref", "--no-deref", approved_ref(slug, commit), commit)
    return commit


@dataclass(frozen=True)
class Settled:
    moved: bool  # the branch was moved to the approved commit
    kept: str | None  # the commit holding what was set aside, on `after_approval_ref`


class ApprovedCommitGone(GitError):
    """The commit an approval fixed is no longer in the repository (its
    hidden ref deleted, then collected): nothing can move on without a look
    at a tree again, and no later tick will find it."""


def settle(tree: Worktree, slug: str, approved: str, identity: Identity) -> Settled:
    """Put the task's branch, and its worktree if there is one, at exactly
    the approved commit; keep aside anything beyond it."""
    present = GitSteps(tree.repository).git.run("cat-file", "-e", approved)
    if present.status == 1:  # git said so; anything else is git failing, for a retry
        raise ApprovedCommitGone(f"the approved commit {approved[:12]} is gone from the repository")
    if not tree.exists():
        return _settle_branch(tree, slug, approved, identity)
    with tempfile.TemporaryDirectory(prefix="orchestrator-approved-") as scratch:
        if tree.workspace.is_symlink():
            raise GitError(f"{tree.workspace} is a link; refusing to follow it")
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git = GitSteps(
            tree.workspace, git_dir=tree.admin_dir(), env={**index, **identity.environment()}
        )
        branch_ref = f"refs/heads/{tree.branch}"
        on = git("rev-parse", "--symbolic-full-name", "HEAD").strip()
        if on != branch_ref:
            raise GitError(f"{tree.workspace} is not on {tree.branch}; check it out there to go on")
        tip = git("rev-parse", "--verify", "HEAD^{commit}").strip()
        wanted = git("rev-parse", "--verify", f"{approved}^{{tree}}").strip()
        # What a commit of the worktree would hold now (as the gate's look
        # and the stage commit see it: tracked, untracked, deletions).
        git("read-tree", "HEAD")
        git("add", "--all", "--", ".")
        now = git("write-tree").strip()
        kept = None
        if now != wanted or not _behind(git, tip, approved):
            kept = _keep(git, slug, now, tip)
        if now != wanted:
            # The throwaway index holds the worktree's state: `-u` removes
            # what the approved tree lacks and writes what it holds;
            # ignored files are in neither, and stay.
            git("read-tree", "--reset", "-u", wanted)
        if tip != approved:
            git("update-ref", "-m", "orchestrator: approved", branch_ref, approved, tip)
    tree.git(["read-tree", "--reset", "HEAD"])  # the worktree's own index, at HEAD
    return Settled(tip != approved, kept)


def _settle_branch(tree: Worktree, slug: str, approved: str, identity: Identity) -> Settled:
    """No worktree (removed meanwhile): only the branch moves."""
    git = GitSteps(tree.repository, env=identity.environment())
    branch_ref = f"refs/heads/{tree.branch}"
    tip = git("rev-parse", "--verify", f"{branch_ref}^{{commit}}").strip()
    if tip == approved:
        return Settled(False, None)
    kept = None
    if not _behind(git, tip, approved):
        kept = _keep(git, slug, git("rev-parse", f"{tip}^{{tree}}").strip(), tip)
    git("update-ref", "-m", "orchestrator: approved", branch_ref, approved, tip)
    return Settled(True, kept)


def _behind(git: GitSteps, tip: str, approved: str) -> bool:
    """Whether the branch's tip is in the approved commit's history (the
    approval was made on it): moving there loses no commit of the branch."""
    return tip == approved or git.git.run("merge-base", "--is-ancestor", tip, approved).ok


def _keep(git: GitSteps, slug: str, state: str, tip: str) -> str:
    ref = after_approval_ref(slug)
    parents = ["-p", tip]
    before = git.git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if before.ok:
        earlier = before.stdout.decode().strip()
        if earlier and earlier != tip:
            parents += ["-p", earlier]
    message = f"{slug}: work in the worktree after an approval, not approved\n"
    kept = git("commit-tree", state, *parents, "-m", message).strip()
    git("update-ref", "--no-deref", ref, kept)
    return kept
