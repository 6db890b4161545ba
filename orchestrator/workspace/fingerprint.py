"""A fingerprint of a task's workspace, to tell whether an attempt changed it.

In a repository of the workspace's own (`listing.own_git_dir`; a `.git`
file or link is walked as a plain tree), read through `gitrun.SafeGit` so
no command the worker configured runs in the tick: HEAD, plus a hash of
`git status --porcelain -z` and of the diff against HEAD (staged and not)
and of each untracked file's content, so a commit, an edit and a new
untracked file all change it while rewriting a file with the same content
does not. Names are read NUL-separated (`-z`):
git C-quotes a name with non-ASCII bytes or a tab otherwise, and the quoted
form is not a path that could be opened.

Elsewhere: a content hash of the tree, bounded (files, bytes) so a huge
workspace costs a bounded time; past the bound, sizes and modification
times stand in for the content.

Either way one fingerprint reads at most `MAX_BYTES` in all (a
`safefs.Budget`), opens nothing but regular files and follows no link: a
link is hashed as the name it points to. A FIFO the worker left among its
untracked files would otherwise hang the tick while it holds the host lock.

A fingerprint that cannot be made (git missing, a broken repository) is
None: "not looked at", which neither extends nor breaks the no-change streak.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from orchestrator import safefs
from orchestrator.workspace.gitrun import SafeGit
from orchestrator.workspace.listing import own_git_dir

MAX_FILES = 20_000
MAX_BYTES = 64 * 1024 * 1024
_GIT_TIMEOUT = 60.0


def fingerprint(workspace: Path, budget: safefs.Budget | None = None) -> str | None:
    """`budget` (a fresh `MAX_BYTES` one by default) is what it may read."""
    budget = safefs.Budget(MAX_BYTES) if budget is None else budget
    if not workspace.is_dir() or workspace.is_symlink():
        return None
    if own_git_dir(workspace):
        return _git(workspace, budget)
    return _tree(workspace, budget)


def _git(workspace: Path, budget: safefs.Budget) -> str | None:
    git = SafeGit(workspace, timeout=_GIT_TIMEOUT)
    status = git.out("status", "--porcelain", "-z", "--untracked-files=all")
    if status is None:
        return None
    head = git.out("rev-parse", "--verify", "-q", "HEAD") or b"(no commit)"
    digest = hashlib.sha256(b"git\0" + head.strip() + b"\0" + status)
    diff = git.out("diff", "HEAD", "--binary")
    if diff is None:  # no commit yet: the index and the tree
        diff = git.out("diff", "--binary") or b""
    digest.update(b"\0" + diff)
    # Untracked files show in the status by name only: hash their content too.
    untracked = git.out("ls-files", "-o", "-z", "--exclude-standard")
    if untracked is None:
        return None
    for name in untracked.split(b"\0"):
        if name:
            path = workspace / os.fsdecode(name)
            digest.update(b"\0" + name + b"\0" + _file_digest(path, budget))
    return "git:" + digest.hexdigest()


def _file_digest(path: Path, budget: safefs.Budget) -> bytes:
    """Content (or past the budget, metadata; a link, its target's name)."""
    try:
        sha, _size = safefs.digest(path, MAX_BYTES, budget)
    except OSError:
        return b"?"
    return sha.encode()


def _tree(workspace: Path, budget: safefs.Budget) -> str | None:
    digest = hashlib.sha256(b"tree")
    files = 0
    for root, dirs, names in os.walk(workspace):
        dirs.sort()
        for name in sorted(names):
            path = Path(root, name)
            try:
                st = path.lstat()
            except OSError:
                continue
            rel = os.fsencode(path.relative_to(workspace))
            files += 1
            if files > MAX_FILES:
                return "tree:" + digest.hexdigest() + ":partial"
            if stat.S_ISREG(st.st_mode) and budget.allows(st.st_size):
                digest.update(rel + b"\0" + _file_digest(path, budget))
            else:
                digest.update(rel + f"\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}".encode())
    return "tree:" + digest.hexdigest()
