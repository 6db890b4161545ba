"""Bounding the disk: the captured output of tasks finished long ago.

Only `state_root/<slug>` folders of tasks `complete` or `cancelled` (halted
tasks may be resumed, so their output is kept) whose last transition is
older than the cut-off, and that have no attempt open. Rows are never
deleted: the database is the history.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, and_, exists, select

from orchestrator.domain.pipeline import Status
from orchestrator.domain.slug import slug_problem
from orchestrator.storage import tables
from orchestrator.storage.db import db_now, read_tx

FINISHED = (Status.COMPLETE.value, Status.CANCELLED.value)


@dataclass(frozen=True)
class Folder:
    slug: str
    path: Path
    size: int  # bytes, as lstat sees them (links are not followed)


@dataclass(frozen=True)
class PruneResult:
    folders: tuple[Folder, ...]


def prune(engine: Engine, state_root: Path, *, days: float, dry_run: bool) -> PruneResult:
    t, a = tables.tasks, tables.attempts
    with read_tx(engine) as conn:
        cutoff = db_now(conn) - timedelta(days=days)
        open_attempt = exists().where(and_(a.c.task_id == t.c.id, a.c.finished_at.is_(None)))
        slugs = conn.execute(
            select(t.c.slug)
            .where(t.c.status.in_(FINISHED), t.c.updated_at <= cutoff, ~open_attempt)
            .order_by(t.c.id)
        ).scalars()
        candidates = [slug for slug in slugs if slug_problem(slug) is None]
    found: list[Folder] = []
    for slug in candidates:
        path = state_root / slug
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # never had output, or pruned already
        if not stat.S_ISDIR(info.st_mode):
            continue  # a link or a file someone put there: not ours to remove
        found.append(Folder(slug, path, _size(path)))
        if not dry_run:
            shutil.rmtree(path)
    return PruneResult(tuple(found))


def _size(root: Path) -> int:
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
