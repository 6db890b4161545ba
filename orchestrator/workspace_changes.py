"""What a stage changed in a task's workspace, for the reviewer at its gate.

A git repository answers with `git diff HEAD` plus its untracked files; any
other folder with the files modified since the stage began. Every file read
is capped: a reviewer reads a page, not a gigabyte, and the approval hash
(`orchestrator.gate`) covers the full content through a digest anyway.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

SHOWN_BYTES = 200_000  # of a diff or one Markdown file
MAX_FILES = 500  # listed; more are counted, and still hashed
MARKDOWN_SUFFIXES = (".md", ".markdown")
GIT_TIMEOUT = 30.0


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
    files: list[ChangedFile] = field(default_factory=list)  # untracked (git) or modified
    more_files: int = 0  # changed files past MAX_FILES, not listed
    markdown: dict[str, str] = field(default_factory=dict)  # path -> shown text
    digest_parts: list[str] = field(default_factory=list)  # what the approval hash covers
    error: str = ""


def collect(workspace: Path, since: datetime | None) -> WorkspaceChanges:
    """The workspace's changes; `since` is when the stage began (None: all files)."""
    if not workspace.is_dir() or workspace.is_symlink():
        return WorkspaceChanges(kind="none", digest_parts=["none"])
    if (workspace / ".git").exists():
        changes = _git(workspace)
        if changes is not None:
            return changes
    return _files(workspace, since)


def _run_git(workspace: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(workspace), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git(workspace: Path) -> WorkspaceChanges | None:
    has_head = _run_git(workspace, "rev-parse", "--verify", "-q", "HEAD") is not None
    # Without a first commit, the staged files against the empty tree.
    base = "HEAD" if has_head else "--cached"
    diff = _run_git(workspace, "diff", "--no-color", "--no-ext-diff", base)
    untracked = _run_git(workspace, "ls-files", "--others", "--exclude-standard", "-z")
    if diff is None or untracked is None:
        return None  # not a usable repository: fall back to modified files
    changes = WorkspaceChanges(kind="git")
    changes.diff = diff[:SHOWN_BYTES].decode("utf-8", "replace")
    changes.diff_truncated = len(diff) > SHOWN_BYTES
    changes.digest_parts.append("git-diff:" + hashlib.sha256(diff).hexdigest())
    names = sorted(n for n in untracked.decode("utf-8", "surrogateescape").split("\0") if n)
    _add_files(changes, workspace, names)
    for line in diff.decode("utf-8", "replace").splitlines():
        if line.startswith("+++ b/") and line.endswith(MARKDOWN_SUFFIXES):
            _add_markdown(changes, workspace, line[len("+++ b/") :])
    return changes


def _files(workspace: Path, since: datetime | None) -> WorkspaceChanges:
    changes = WorkspaceChanges(kind="files")
    # One second of slack: some file systems keep mtimes to the second.
    cutoff = since.timestamp() - 1.0 if since is not None else float("-inf")
    names: list[str] = []
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in files:
            path = Path(root) / name
            try:
                if path.lstat().st_mtime >= cutoff:
                    names.append(path.relative_to(workspace).as_posix())
            except OSError:
                continue
    _add_files(changes, workspace, sorted(names))
    return changes


def _add_files(changes: WorkspaceChanges, workspace: Path, names: list[str]) -> None:
    for index, name in enumerate(names):
        path = workspace / name
        digest, size = _hash_file(path)
        changes.digest_parts.append(f"file:{name}:{size}:{digest}")
        if index < MAX_FILES:
            changes.files.append(ChangedFile(name, size, digest))
            if name.endswith(MARKDOWN_SUFFIXES):
                _add_markdown(changes, workspace, name)
        else:
            changes.more_files += 1


def _hash_file(path: Path) -> tuple[str, int]:
    """A link is hashed as its target's name: following it could read anything."""
    sha = hashlib.sha256()
    try:
        if path.is_symlink():
            target = str(path.readlink()).encode("utf-8", "surrogateescape")
            sha.update(b"link:" + target)
            return sha.hexdigest(), len(target)
        size = 0
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 16):
                sha.update(chunk)
                size += len(chunk)
        return sha.hexdigest(), size
    except OSError as exc:
        return f"unreadable:{exc.strerror}", -1


def _add_markdown(changes: WorkspaceChanges, workspace: Path, name: str) -> None:
    path = workspace / name
    if name in changes.markdown or path.is_symlink() or len(changes.markdown) >= 20:
        return
    try:
        with path.open("rb") as handle:
            data = handle.read(SHOWN_BYTES)
    except OSError:
        return
    changes.markdown[name] = data.decode("utf-8", "replace")
