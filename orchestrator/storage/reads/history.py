"""Transitions read back with their task's slug: `history` (oldest first,
or the newest N) and the web page's filtered pages."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Select, select

from orchestrator.storage import tables

_t, _tasks = tables.transitions, tables.tasks


def _transitions() -> Select[Any]:
    """The history's rows (the task's slug with each transition), unordered."""
    return select(
        _tasks.c.slug.label("task"),
        _t.c.seq,
        _t.c.from_state,
        _t.c.to_state,
        _t.c.event,
        _t.c.actor,
        _t.c.reason,
        _t.c.note,
        _t.c.at,
    ).join(_tasks, _tasks.c.id == _t.c.task_id)


def history_rows(
    conn: Connection, task_id: int | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Transitions in id order (all tasks, or one); with `limit`, the newest
    `limit` of them, newest first."""
    query = _transitions().order_by(_t.c.id)
    if task_id is not None:
        query = query.where(_t.c.task_id == task_id)
    if limit is not None:
        query = query.order_by(None).order_by(_t.c.id.desc()).limit(limit)
    return [dict(row._mapping) for row in conn.execute(query)]


def history_page_rows(
    conn: Connection,
    *,
    task: str | None,
    event: str | None,
    actor: str | None,
    limit: int,
    offset: int,
) -> list[dict[str, Any]]:
    """Transitions, newest first, filtered by exact task slug, event and actor."""
    query = _transitions()
    if task:
        query = query.where(_tasks.c.slug == task)
    if event:
        query = query.where(_t.c.event == event)
    if actor:
        query = query.where(_t.c.actor == actor)
    query = query.order_by(_t.c.id.desc()).limit(limit)
    query = query.offset(offset)
    return [dict(row._mapping) for row in conn.execute(query)]
