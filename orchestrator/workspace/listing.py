"""What a stage changed in a task's workspace: the types, and reading its files.

`orchestrator.workspace.changes` chooses how to look (git or the files);
`orchestrator.workspace.git` and the plain listing here both build a
`WorkspaceChanges` with these helpers. The workspace is the
worker's: nothing here follows a link out of it, opens anything but a
regular file, or reads more than a cap, so a FIFO, a sparse terabyte or a
crafted name cannot hang or leak through the gate (every read goes
through `safefs`, drawing on the look's one budget). The approval hash
(`orchestrator.views.gate`) covers every changed file by digest, or by its
metadata (`safefs.stand_in`) past `HASH_BYTES` or past the look's budget.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from orchestrator import safefs

SHOWN_BYTES = 200_000  # of a diff or one Markdown file
HASH_BYTES = 16 << 20  # a bigger file is hashed by its metadata, not read
LOOK_BYTES = 64 << 20  # read by one look in all; past it, files by their metadata
MAX_FILES = 500  # listed; more are counted, and still hashed
MAX_MARKDOWN = 20
MARKDOWN_SUFFIXES = (".md", ".markdown")


@dataclass(frozen=True)
class ChangedFile:
    path: str  # relative to the workspace, '/'-separated
    size: int
    sha256: str


@dataclass
class WorkspaceChanges:
    kind: str  # "git", "files" or "none" (no workspace yet)
    diff: str = ""  # shown part of the git diff
    diff_truncated: bool = False
    base: str = ""  # git: what the diff is against
    every_tracked: bool = False  # git: no starting commit, every tracked file listed
    files: list[ChangedFile] = field(default_factory=list)  # untracked (git) or modified
    more_files: int = 0  # changed files past MAX_FILES, not listed
    markdown: dict[str, str] = field(default_factory=dict)  # path -> shown text
    digest_parts: list[str] = field(default_factory=list)  # what the approval hash covers
    error: str = ""
    # What the look may still read, shared by every file it hashes or shows.
    budget: safefs.Budget = field(
        default_factory=lambda: safefs.Budget(LOOK_BYTES), repr=False, compare=False
    )


@dataclass(frozen=True)
class StageStart:
    """Where the stage began: when its first attempt started, and the commit
    its workspace was at then (`attempts.start_commit`): a sha, "" when it
    had no commit (or was no repository), None when not recorded (attempts
    from before the record): then the commit is guessed from `since`."""

    since: datetime | None
    commit: str | None = None


def own_git_dir(workspace: Path) -> bool:
    """A `.git` folder of the workspace's own: a `.git` file or link, or a
    `commondir`, would point git at another repository (the reviewer's,
    say), whose committed files would then show as the diff."""
    dot_git = workspace / ".git"
    if dot_git.is_symlink() or not dot_git.is_dir():
        return False
    return not (dot_git / "commondir").exists() and not (dot_git / "commondir").is_symlink()


def files_changes(
    workspace: Path, since: datetime | None, budget: safefs.Budget | None = None
) -> WorkspaceChanges:
    """Files modified since `since`; the hash also covers a listing of every
    file (name, size, mtime), so a deletion changes it too."""
    changes = WorkspaceChanges(kind="files", budget=budget or safefs.Budget(LOOK_BYTES))
    # One second of slack: some file systems keep mtimes to the second.
    cutoff = since.timestamp() - 1.0 if since is not None else float("-inf")
    names: list[str] = []
    listing = hashlib.sha256()
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        # A `.git` file (a worktree's, a submodule's) is git's, not the work's.
        for name in sorted(f for f in files if f != ".git"):
            path = Path(root) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            relative = path.relative_to(workspace).as_posix()
            entry = f"{relative}\0{info.st_mode:o}\0{info.st_size}\0{info.st_mtime_ns}\n"
            listing.update(entry.encode("utf-8", "surrogateescape"))
            if info.st_mtime >= cutoff:
                names.append(relative)
    changes.digest_parts.append("listing:" + listing.hexdigest())
    add_files(changes, workspace, sorted(names))
    return changes


def add_files(changes: WorkspaceChanges, workspace: Path, names: list[str]) -> None:
    for index, name in enumerate(names):
        digest, size = hash_file(workspace, name, changes.budget)
        changes.digest_parts.append(f"file:{name}:{size}:{digest}")
        if index < MAX_FILES:
            changes.files.append(ChangedFile(name, size, digest))
            if name.endswith(MARKDOWN_SUFFIXES):
                add_markdown(changes, workspace, name)
        else:
            changes.more_files += 1


def inside(workspace: Path, name: str) -> Path | None:
    """`workspace / name` when it stays inside the workspace: a relative name
    without `..`, and no symlinked folder on the way out."""
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or ".." in pure.parts:
        return None
    path = workspace / pure
    try:
        parent = path.parent.resolve(strict=True)
        root = workspace.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if parent != root and root not in parent.parents:
        return None
    return path


def hash_file(workspace: Path, name: str, budget: safefs.Budget | None = None) -> tuple[str, int]:
    """A link is hashed as its target's name (following it could read
    anything), a special file by its type, a big file (or one past what
    the look may still read) by its metadata."""
    path = inside(workspace, name)
    if path is None:
        return "outside", -1
    try:
        return safefs.digest(
            path, HASH_BYTES, safefs.Budget(LOOK_BYTES) if budget is None else budget
        )
    except OSError as exc:
        return f"unreadable:{exc.strerror}", -1


def add_markdown(changes: WorkspaceChanges, workspace: Path, name: str) -> None:
    if name in changes.markdown or len(changes.markdown) >= MAX_MARKDOWN:
        return
    path = inside(workspace, name)
    if path is None:
        return
    try:
        data = safefs.read_bytes(path, SHOWN_BYTES, changes.budget)
    except OSError:
        return
    changes.markdown[name] = data.decode("utf-8", "replace")
