"""Finished tasks, for what bounds the disk: `prune` (their captured
output) and the worktree sweep (`prune --finished`, `keep_worktree_days`).

A task with an attempt still open is never finished here, whatever its
status says: its tick may still write under its folders."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, and_, exists, select

from orchestrator.domain.pipeline import Status
from orchestrator.storage import tables

FINISHED = (Status.COMPLETE.value, Status.CANCELLED.value)

_t, _a = tables.tasks, tables.attempts


@dataclass(frozen=True)
class FinishedBranch:
    slug: str
    pipeline: str
    branch: str
    base_commit: str | None
    updated_at: datetime


def _no_open_attempt() -> ColumnElement[bool]:
    return ~exists().where(and_(_a.c.task_id == _t.c.id, _a.c.finished_at.is_(None)))


def finished_before(conn: Connection, cutoff: datetime) -> list[tuple[int, str]]:
    """(id, slug) of the tasks finished at or before `cutoff`, oldest id first."""
    rows = conn.execute(
        select(_t.c.id, _t.c.slug)
        .where(_t.c.status.in_(FINISHED), _t.c.updated_at <= cutoff, _no_open_attempt())
        .order_by(_t.c.id)
    ).all()
    return [(int(task_id), str(slug)) for task_id, slug in rows]


def attempt_numbers(conn: Connection, task_ids: Collection[int]) -> list[tuple[int, str, int]]:
    """(task id, stage, number) of every attempt of these tasks."""
    rows = conn.execute(
        select(_a.c.task_id, _a.c.stage, _a.c.number).where(_a.c.task_id.in_(list(task_ids)))
    )
    return [(int(task_id), str(stage), int(number)) for task_id, stage, number in rows]


def finished_branches(conn: Connection, pipelines: Collection[str]) -> list[FinishedBranch]:
    """The finished tasks of these pipelines that have a branch, oldest id first."""
    rows = conn.execute(
        select(_t.c.slug, _t.c.pipeline, _t.c.branch, _t.c.base_commit, _t.c.updated_at)
        .where(
            _t.c.status.in_(FINISHED),
            _t.c.branch.is_not(None),
            _t.c.pipeline.in_(list(pipelines)),
            _no_open_attempt(),
        )
        .order_by(_t.c.id)
    ).all()
    return [FinishedBranch(*row) for row in rows]
