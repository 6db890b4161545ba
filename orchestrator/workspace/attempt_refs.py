"""Every attempt's work, kept: a commit on a hidden ref per attempt, and
putting one back on the task's branch.

`snapshot` runs after an attempt's commands and before its verdict is
recorded. It builds the commit through a throwaway index (`read-tree
HEAD`, `add --all`, `write-tree`, `commit-tree`, `update-ref`), so the
worker's index, HEAD and branch are never touched and the worker's own
commits stay its own. Its ref is `refs/orchestrator/<slug>/<stage>/<n>`
(n: the attempt's number, unique per task and stage); its message carries
the attempt's sealed key (`Orchestrator-Snapshot:`), so a ref left by an
earlier database with the same slug, or one a worker wrote, is not taken
for this attempt's.

What is kept is what a stage commit would hold: tracked and untracked
files, deletions; ignored files stay out. A link is kept as a link (git
stores its target's name, never what it points at), and a file over
`FILE_LIMIT` bytes is left out (named in the message): one worker's
1 GB log must not go into the repository's objects at every attempt.

A kill between the steps leaves at worst a loose commit nobody names
(`git gc` takes it) or a ref whose attempt is then closed `crashed`: the
ref is still that attempt's work (its key says so), and restoring it is
allowed. Attempt numbers are never reused, so no later attempt writes
over it.

`restore` makes a new commit on the branch whose tree is the snapshot's
(parent: the branch tip), and checks it out in the worktree. The state the
worktree held just before is itself kept first, as
`refs/orchestrator/<slug>/_before-restore`, so a restore loses nothing.
Restoring what the worktree already holds makes no commit, so doing it
again after a kill (between the commit and its record) changes nothing.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.testing import fault_point
from orchestrator.workspace.gitrun import GitError, GitSteps, run_git
from orchestrator.workspace.worktree import TRAILER, Identity, Worktree

REF_PREFIX = "refs/orchestrator/"
SNAPSHOT_TRAILER = "Orchestrator-Snapshot"
STAGE_TRAILER = TRAILER
RESTORE_TRAILER = "Orchestrator-Restore"
FILE_LIMIT = 64 << 20  # bytes: a bigger file is left out of a snapshot
_MESSAGE_BYTES = 1 << 20  # of a snapshot's message read back


def attempt_ref(slug: str, stage: str, number: int) -> str:
    return f"{REF_PREFIX}{slug}/{stage}/{number}"


def before_restore_ref(slug: str) -> str:
    """No stage can be named so (a stage name starts with a letter or digit)."""
    return f"{REF_PREFIX}{slug}/_before-restore"


@dataclass(frozen=True)
class Snapshot:
    sha: str
    tree: str
    left_out: tuple[str, ...]  # files over FILE_LIMIT, not kept


def _steps(tree: Worktree, index: Path, identity: Identity | None = None) -> GitSteps:
    if tree.workspace.is_symlink():
        raise GitError(f"{tree.workspace} is a link; refusing to follow it")
    env = {"GIT_INDEX_FILE": str(index), **(identity.environment() if identity else {})}
    return GitSteps(tree.workspace, git_dir=tree.admin_dir(), env=env)


def _too_big(workspace: Path, git: GitSteps) -> list[str]:
    """Changed and untracked files over FILE_LIMIT, by `lstat` (a link is
    its own small record, never what it names)."""
    listing = git("ls-files", "-z", "--others", "--modified", "--exclude-standard")
    found: list[str] = []
    for name in sorted(set(n for n in listing.split("\0") if n)):
        try:
            info = os.lstat(workspace / name)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size > FILE_LIMIT:
            found.append(name)
    return found


def _state_tree(tree: Worktree, git: GitSteps) -> tuple[str, list[str]]:
    """The tree a commit of the worktree would hold now, through `git`'s
    throwaway index, and the files left out of it."""
    git("read-tree", "HEAD")
    big = _too_big(tree.workspace, git)
    excludes = [f":(exclude,literal){name}" for name in big]
    git("add", "--all", "--", ".", *excludes)
    return git("write-tree").strip(), big


def _commit(git: GitSteps, tree_sha: str, parent: str, message: str) -> str:
    return git("commit-tree", tree_sha, "-p", parent, "-m", message).strip()


def snapshot(tree: Worktree, ref: str, key: str, title: str, identity: Identity) -> Snapshot:
    """Keep the worktree's state as a commit on `ref` (over what it named)."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-snapshot-") as scratch:
        git = _steps(tree, Path(scratch) / "index", identity)
        head = git("rev-parse", "--verify", "HEAD^{commit}").strip()
        tree_sha, big = _state_tree(tree, git)
        lines = [title, ""]
        if big:
            lines += [f"left out (over {FILE_LIMIT} bytes): {name}" for name in big] + [""]
        lines.append(f"{SNAPSHOT_TRAILER}: {key}")
        sha = _commit(git, tree_sha, head, "\n".join(lines) + "\n")
        fault_point("before_snapshot_ref")
        git("update-ref", "--no-deref", ref, sha)
    return Snapshot(sha, tree_sha, tuple(big))


def read_snapshot(tree: Worktree, ref: str, key: str) -> str | None:
    """The commit `ref` names when its message carries `key`; None when the
    ref is gone or belongs to another attempt."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-snapshot-") as scratch:
        git = _steps(tree, Path(scratch) / "index")
        try:
            sha = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
        except GitError:
            return None
        body, _cut = git.head("cat-file", "commit", sha, limit=_MESSAGE_BYTES)
    # A candidate's kept work is its stage commit (the candidates feature),
    # sealed with the same key under the stage commit's trailer.
    sealed = {f"{SNAPSHOT_TRAILER}: {key}", f"{STAGE_TRAILER}: {key}"}
    return sha if sealed & set(body.splitlines()) else None


def restore(tree: Worktree, slug: str, sha: str, message: str, identity: Identity) -> str | None:
    """Put snapshot `sha`'s tree on the branch as a new commit and check it
    out; None when the branch's tip holds that tree already (then only the
    worktree's files are put back, if they differ)."""
    on = tree.git(["rev-parse", "--symbolic-full-name", "HEAD"]).strip()
    if on != f"refs/heads/{tree.branch}":
        raise GitError(f"{tree.workspace} is not on {tree.branch}; check it out there first")
    with tempfile.TemporaryDirectory(prefix="orchestrator-restore-") as scratch:
        git = _steps(tree, Path(scratch) / "index", identity)
        head = git("rev-parse", "--verify", "HEAD^{commit}").strip()
        wanted = git("rev-parse", "--verify", f"{sha}^{{tree}}").strip()
        now, _big = _state_tree(tree, git)
        head_tree = git("rev-parse", "--verify", "HEAD^{tree}").strip()
        if now == wanted and head_tree == wanted:
            return None
        if now != head_tree:  # work no commit holds: kept before it is replaced
            kept = _commit(git, now, head, f"{tree.branch}: the worktree before a restore\n")
            git("update-ref", "--no-deref", before_restore_ref(slug), kept)
        # The throwaway index holds the worktree's state: `-u` removes what
        # the snapshot lacks and writes what it holds.
        git("read-tree", "--reset", "-u", wanted)
        fault_point("after_restore_checkout")
        new = None
        if head_tree != wanted:  # else the branch holds it: only the files come back
            new = _commit(git, wanted, head, message)
            git("update-ref", f"refs/heads/{tree.branch}", new, head)
    # The worktree's own index now matches its HEAD.
    tree.git(["read-tree", "--reset", "HEAD"])
    return new


def drop_attempt_refs(repository: Path, slug: str) -> int:
    """Delete the task's kept attempt refs (`prune --finished`): every
    attempt's snapshot and every candidate's commit; how many."""
    prefix = f"{REF_PREFIX}{slug}/"
    out = run_git(repository, ["for-each-ref", "--format=%(refname)", prefix])
    refs = [line for line in out.splitlines() if line.startswith(prefix)]
    for ref in refs:
        run_git(repository, ["update-ref", "-d", ref])
    return len(refs)
