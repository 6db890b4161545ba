"""Moving what a notes stage's attempt wrote out of the task's worktree.

Git says what changed (`status`: untracked, modified, added, deleted, with
ignored files left alone, as the stage commit leaves them). Each changed
regular file is copied into the notes folder under its path, then the
worktree is put back: untracked files removed, tracked ones checked out
from HEAD. Run again after a kill at any point it finishes the move: a
file copied but not yet removed is copied again (the same bytes), and
what was removed is no longer listed. A link, a FIFO or a file over
`MAX_NOTE_BYTES` is not copied (named in the attempt's error) but is
removed all the same: nothing of a notes stage reaches the branch.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.workspace.gitrun import GitSteps

MAX_NOTE_BYTES = 10 * 1024 * 1024
_CHECKOUT_BATCH = 200  # paths per `git checkout`, well under any argv limit


@dataclass(frozen=True)
class Moved:
    """What one move did: the notes kept (paths under the worktree) and
    those left out, each with why."""

    kept: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]


def move_notes(git: GitSteps, workspace: Path, folder: Path) -> Moved:
    """Move every change in `workspace` into `folder` and put the worktree
    back at HEAD."""
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
    for start in range(0, len(tracked), _CHECKOUT_BATCH):
        git("checkout", "--quiet", "HEAD", "--", *tracked[start : start + _CHECKOUT_BATCH])
    for path in untracked:
        with contextlib.suppress(FileNotFoundError):
            (workspace / path).unlink()  # a link goes, never what it points to
        _drop_empty_folders(workspace, (workspace / path).parent)
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
