"""Bounding the disk: the captured output of tasks finished long ago.

Only what the tick wrote under `state_root/<slug>` for tasks `complete` or
`cancelled` (halted tasks may be resumed, so their output is kept) whose
last transition is older than the cut-off, and that have no attempt open:
the attempt folders `<stage>-NNN` of the task's attempts and the setup
marker, then the slug folder if that left it empty. Nothing that is, holds
or lies inside `workspace_root` is touched (the config lets the two roots
overlap, and a workspace is the task's work product). Rows are never
deleted: the database is the history.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from orchestrator.domain.slug import slug_problem
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.reads.finished import attempt_numbers, finished_before


@dataclass(frozen=True)
class Folder:
    slug: str
    path: Path
    size: int  # bytes, as lstat sees them (links are not followed)


@dataclass(frozen=True)
class PruneResult:
    folders: tuple[Folder, ...]
    kept: tuple[Path, ...] = ()  # slug folders left alone: they overlap workspace_root


# Files the tick writes beside the attempt folders (the setup marker and its
# temporary file); anything else in the slug folder is someone else's.
KNOWN_FILES = ("setup.json", "setup.tmp", "round.lock")  # round.lock: best of N


def prune(
    engine: Engine,
    state_root: Path,
    *,
    days: float,
    dry_run: bool,
    workspace_root: Path | None = None,
) -> PruneResult:
    with read_tx(engine) as conn:
        now = db_now(conn)
        # Older than the calendar's first day is nothing (and past it the
        # subtraction overflows): 1e9 days is a valid age that matches no task.
        oldest = now - datetime.min.replace(tzinfo=now.tzinfo)
        if days >= oldest.days:
            return PruneResult(())
        cutoff = now - timedelta(days=days)
        rows = finished_before(conn, cutoff)
        candidates = [(task_id, slug) for task_id, slug in rows if slug_problem(slug) is None]
        names: dict[int, set[str]] = {task_id: set() for task_id, _ in candidates}
        if names:
            for task_id, stage, number in attempt_numbers(conn, names):
                names[task_id].add(f"{stage}-{number:03d}")
    workspaces = None if workspace_root is None else workspace_root.resolve()
    found: list[Folder] = []
    kept: list[Path] = []
    for task_id, slug in candidates:
        path = state_root / slug
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # never had output, or pruned already
        if not stat.S_ISDIR(info.st_mode):
            continue  # a link or a file someone put there: not ours to remove
        if workspaces is not None and _overlaps(path.resolve(), workspaces):
            kept.append(path)
            continue
        targets = _ours(path, names[task_id] | set(KNOWN_FILES))
        if not targets:
            continue
        found.append(Folder(slug, path, sum(_size(target) for target in targets)))
        if not dry_run:
            for target in targets:
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
            with contextlib.suppress(OSError):  # not empty: what is left is not ours
                path.rmdir()
    return PruneResult(tuple(found), tuple(kept))


def _overlaps(folder: Path, workspaces: Path) -> bool:
    """Whether removing in `folder` could touch a workspace: it is
    workspace_root, lies inside it, or holds it."""
    return folder.is_relative_to(workspaces) or workspaces.is_relative_to(folder)


def _ours(folder: Path, names: set[str]) -> list[Path]:
    """The entries of `folder` the tick wrote: named as one of the task's
    attempt folders (a real folder, not a link) or a known file."""
    out = []
    for name in sorted(names):
        entry = folder / name
        try:
            mode = entry.lstat().st_mode
        except FileNotFoundError:
            continue
        wanted = stat.S_ISREG(mode) if name in KNOWN_FILES else stat.S_ISDIR(mode)
        if wanted:
            out.append(entry)
    return out


def _size(root: Path) -> int:
    if not root.is_dir():
        return root.lstat().st_size
    total = 0
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size  # noqa: PTH118
    return total


def size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
