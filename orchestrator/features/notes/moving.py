"""Moving what a notes stage's attempt wrote out of the task's worktree.

Git says what changed (`status`: untracked, modified, added, deleted, with
ignored files left alone, as the stage commit leaves them). Each changed
regular file is copied into the notes folder under its path, then the
worktree is put back: untracked files removed, the index and the tracked
files reset to HEAD (`git reset --hard`, no pathspec: a file the worker
`git add`ed is not in HEAD, and a path is never read as pathspec magic);
a folder git does not look into (a nested repository) is removed whole.
A worker that committed is moved back to the attempt's starting commit
first, its commits' files then notes too. Run again after a kill at any
point it finishes the move: a file copied but not yet removed is copied
again (the same bytes), and what was removed is no longer listed. A link, a FIFO or a file over
`MAX_NOTE_BYTES` is not copied (named in the attempt's error) but is
removed all the same: nothing of a notes stage reaches the branch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.workspace.gitrun import GitSteps

MAX_NOTE_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class Moved:
    """What one move did: the notes kept (paths under the worktree) and
    those left out, each with why."""

    kept: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]


def move_notes(git: GitSteps, workspace: Path, folder: Path, start: str = "") -> Moved:
    """Move every change in `workspace` into `folder` and put the worktree
    back at HEAD; at `start` first (the attempt's starting commit), when
    the worker committed: what it committed is then a change too."""
    if start and git("rev-parse", "--verify", "-q", "HEAD^{commit}").strip() != start:
        git("reset", "--quiet", "--soft", start)  # the branch back, the files kept
    listed = git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    untracked: list[str] = []
    tracked: list[str] = []
    for record in listed.split("\0"):
        if len(record) < 4:
            continue
        code, path = record[:2], record[3:]
        (untracked if code == "??" else tracked).append(path)
    kept: list[str] = []
    left_out: list[tuple[str, str]] = []
    for path in (*untracked, *tracked):
        why = _copy(workspace / path, folder / path)
        if why is None:
            kept.append(path)
        elif why != "deleted":
            left_out.append((path, why))
    # Untracked first: one may stand where a tracked file is put back (a
    # folder or a link in place of a tracked file or folder).
    for path in untracked:
        if path.endswith("/"):  # a nested repository: git lists only its folder
            shutil.rmtree(workspace / path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                (workspace / path).unlink()  # a link goes, never what it points to
        _drop_empty_folders(workspace, (workspace / path.rstrip("/")).parent)
    if tracked:
        git("reset", "--quiet", "--hard", "HEAD")
    return Moved(tuple(kept), tuple(left_out))


def _copy(source: Path, target: Path) -> str | None:
    """None when copied; else why not ("deleted" for a file that is gone)."""
    try:
        info = os.lstat(source)
    except FileNotFoundError:
        return "deleted"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > MAX_NOTE_BYTES:
        return f"over {MAX_NOTE_BYTES // (1024 * 1024)} MB"
    try:
        data = safefs.read_bytes(source, MAX_NOTE_BYTES + 1)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    target.parent.mkdir(parents=True, exist_ok=True)
    safefs.replace(target, data)
    return None


def _drop_empty_folders(workspace: Path, folder: Path) -> None:
    """The folders an untracked note sat in, once empty, up to the worktree."""
    while folder != workspace and workspace in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
