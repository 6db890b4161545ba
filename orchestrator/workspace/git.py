"""A git workspace's changes since the stage began, read through `SafeGit`.

The diff is against the commit the workspace was at when the stage's first
attempt started (`StageStart.commit`, recorded by the tick), so work the
worker committed shows whatever dates it gave its commits. Attempts from
before that record fall back to a guess: the newest commit older than the
stage. With no starting commit (the stage began without one, or it is gone
from the repository), every tracked file is listed as the stage's.

Untracked files are listed whatever `.git/info/exclude` or
`core.excludesFile` say: both are the worker's to write and never shown.
Only the `.gitignore` files may leave a file out, and only while every one
of them is as it was in the starting commit; one the stage added, changed
or removed (tracked or not) makes every untracked file listed. Names come
from `-z` listings (never from diff text, whose content lines can look like
headers). HEAD's sha is in the hash, so a commit after the look changes it.

The worker's index is not used once there is a commit: an assume-unchanged
or skip-worktree entry (or one whose stat data was forged) makes git take
a file for its indexed content, hiding an edit from the diff and the hash.
A throwaway index read from HEAD has no such entries and no stat data, so
every tracked file is compared by its content.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from orchestrator import safefs
from orchestrator.workspace.gitprocess import GitResult
from orchestrator.workspace.gitrun import SafeGit
from orchestrator.workspace.listing import (
    LOOK_BYTES,
    MARKDOWN_SUFFIXES,
    SHOWN_BYTES,
    StageStart,
    WorkspaceChanges,
    add_files,
    add_markdown,
    hash_file,
    inside,
)

_IGNORE_FILE = ".gitignore"
_TEXT_PROBE = 8000  # bytes git looks at to call a file binary
_MAX_RESHOWN = 100  # files diffed again as text (each one is an argument)


def git_changes(
    workspace: Path, start: StageStart, budget: safefs.Budget | None = None
) -> WorkspaceChanges | None:
    """None when this is not a usable repository (the caller lists files instead)."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-index-") as scratch:
        return _changes(workspace, start, budget, Path(scratch) / "index")


def _changes(
    workspace: Path, start: StageStart, budget: safefs.Budget | None, index: Path
) -> WorkspaceChanges | None:
    git = SafeGit(workspace)
    if not git.usable:
        return None
    head_sha = _commit(git, "HEAD")
    if head_sha:  # without a commit the index is all there is to diff
        git.extra_env["GIT_INDEX_FILE"] = str(index)
        if git.out("read-tree", head_sha) is None:
            return None
    base, label = _base(git, start, head_sha)
    if base:  # the stage's work: what changed since its starting commit
        against = [base]
    elif head_sha:  # every commit is the stage's: each tracked file is its work
        against = ["HEAD"]
    else:  # no commit yet: what is staged
        against = ["--cached"]
    shown = git.run("diff", *against, limit=SHOWN_BYTES)
    budget = budget or safefs.Budget(LOOK_BYTES)
    if shown.ok:
        shown = with_text_shown(git, workspace, against, shown, SHOWN_BYTES, budget)
    if base:
        names = git.out("diff", "--name-only", "--no-renames", "-z", *against)
    else:
        names = git.out("ls-files", "-z")
    if (shown.status != 0 and not shown.truncated) or names is None:
        return None
    tracked = _split(names)
    untracked = _untracked(git, tracked, keep_ignored=not base)
    if untracked is None:
        return None
    changes = WorkspaceChanges(kind="git", base=label, every_tracked=not base, budget=budget)
    changes.diff, changes.diff_truncated = shown.stdout.decode("utf-8", "replace"), shown.truncated
    changes.digest_parts += [f"git-head:{head_sha}", f"git-base:{base}"]
    changes.digest_parts.append("git-diff:" + hashlib.sha256(shown.stdout).hexdigest())
    if not base:
        add_files(changes, workspace, sorted({*tracked, *untracked}))
        return changes
    # Tracked changes hashed by content (the shown diff may be cut); the
    # page lists them through the diff itself.
    for name in tracked:
        digest, size = hash_file(workspace, name, changes.budget)
        changes.digest_parts.append(f"tracked:{name}:{size}:{digest}")
    add_files(changes, workspace, untracked)
    for name in tracked:
        if name.endswith(MARKDOWN_SUFFIXES):
            add_markdown(changes, workspace, name)
    return changes


def with_text_shown(
    git: SafeGit,
    workspace: Path,
    against: list[str],
    shown: GitResult,
    cap: int,
    budget: safefs.Budget | None = None,
) -> GitResult:
    """The diff, plus the text of files git called binary that are not.

    `.git/info/attributes` is the worker's, never shown, and git reads it
    whatever we set: `-diff` there makes every change "Binary files
    differ". A file whose head holds no NUL (git's own test, without the
    attributes) is diffed again as text, after the rest: the diff is
    against the work tree (or an index made from it), whose file is read."""
    numstat = git.out("diff", "--numstat", "-z", "--no-renames", *against)
    binary = [
        record.split(b"\t", 2)[2].decode("utf-8", "surrogateescape")
        for record in (numstat or b"").split(b"\0")
        if record.startswith(b"-\t-\t")
    ]
    budget = budget or safefs.Budget(LOOK_BYTES)
    texts: list[str] = []
    for name in binary:  # each probe draws on the look's budget
        if len(texts) >= _MAX_RESHOWN or budget.left < _TEXT_PROBE:
            break
        if _looks_text(workspace, name, budget):
            texts.append(name)
    left = cap - len(shown.stdout)
    if not texts or left <= 0:
        return shown
    pathspecs = [f":(literal){name}" for name in texts]
    again = git.run("diff", "--text", *against, "--", *pathspecs, limit=left)
    if again.status != 0 and not again.truncated:
        return shown
    return GitResult(0, shown.stdout + again.stdout, truncated=again.truncated)


def _looks_text(workspace: Path, name: str, budget: safefs.Budget) -> bool:
    path = inside(workspace, name)
    if path is None:
        return False
    try:
        head = safefs.read_bytes(path, _TEXT_PROBE, budget)
    except OSError:
        return False
    return b"\0" not in head


def _base(git: SafeGit, start: StageStart, head_sha: str) -> tuple[str, str]:
    """(the commit to diff against or "", how the page names it)."""
    if start.commit is None:  # not recorded: guessed from commit dates
        base = _dated_base(git, start) if head_sha else ""
        if base:
            return base, f"{base[:12]} (the newest commit older than the stage)"
    elif start.commit:
        if _commit(git, start.commit) == start.commit:
            return start.commit, start.commit[:12]
        return "", f"nothing (the stage's starting commit {start.commit[:12]} is gone)"
    if head_sha:
        return "", "HEAD (every commit is the stage's)"
    return "", "nothing (no commit yet)"


def _commit(git: SafeGit, name: str) -> str:
    """The sha of commit `name`, "" when there is none."""
    found = git.out("rev-parse", "--verify", "-q", "--end-of-options", f"{name}^{{commit}}")
    return (found or b"").decode("ascii", "replace").strip()


def _dated_base(git: SafeGit, start: StageStart) -> str:
    """The newest commit before the stage began (HEAD without a start time)."""
    if start.since is None:
        return _commit(git, "HEAD")
    # Commit times are whole seconds and --before includes its second: a
    # commit in the stage's first second counts as the stage's.
    before = int(start.since.timestamp()) - 1
    found = git.out("rev-list", "-1", f"--before={before}", "HEAD")
    return (found or b"").decode("ascii", "replace").strip()


def _untracked(git: SafeGit, tracked: list[str], *, keep_ignored: bool) -> list[str] | None:
    """Every untracked file, but those a starting `.gitignore` ignores; with
    `keep_ignored` (no starting commit: every `.gitignore` is the stage's)
    none is left out."""
    everything = ("ls-files", "--others", "-z")
    if not keep_ignored:
        changed = any(name.rpartition("/")[2] == _IGNORE_FILE for name in tracked)
        new = git.out(*everything, "--", f":(glob)**/{_IGNORE_FILE}")
        if new is None:
            return None
        keep_ignored = changed or bool(_split(new))
    if keep_ignored:
        listing = git.out(*everything)
    else:  # only the per-directory files: not info/exclude, not core.excludesFile
        listing = git.out(*everything, f"--exclude-per-directory={_IGNORE_FILE}")
    return None if listing is None else _split(listing)


def _split(listing: bytes) -> list[str]:
    return sorted(n for n in listing.decode("utf-8", "surrogateescape").split("\0") if n)
