"""The board's page of tasks (`serve`, `report --html`): counts that stop at
a cap, and one section's page of rows through the status index.

The board must cost the same for 100 tasks as for 100,000: counts stop at
`cap`, and the attempt count and last score come from correlated
subqueries for the page's rows only."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, func, select

from orchestrator.storage import tables


def capped_count(conn: Connection, status: str, cap: int) -> int:
    """How many tasks have `status`, counting no further than `cap`."""
    t = tables.tasks
    inner = select(t.c.id).where(t.c.status == status).limit(cap).subquery()
    return int(conn.execute(select(func.count()).select_from(inner)).scalar_one())


def section_rows(
    conn: Connection, status: str, *, oldest_first: bool, limit: int, offset: int
) -> list[dict[str, Any]]:
    """One page of the tasks with `status`: id, slug, title, stage, status,
    halt_reason, priority, updated_at, attempt (at its stage) and score (the
    last one there); the oldest changed first, or the newest id first."""
    t, a = tables.tasks, tables.attempts
    count = (
        select(func.count())
        .where(and_(a.c.task_id == t.c.id, a.c.stage == t.c.stage))
        .scalar_subquery()
    )
    last_score = (
        select(a.c.score)
        .where(and_(a.c.task_id == t.c.id, a.c.stage == t.c.stage, a.c.score.is_not(None)))
        .order_by(a.c.number.desc())
        .limit(1)
        .scalar_subquery()
    )
    # The page's ids first (index only), then the columns for those rows:
    # SQLite would otherwise run the subqueries for every row it sorts.
    order = (
        (t.c.updated_at, t.c.id)  # oldest waiting first
        if oldest_first
        else (t.c.id.desc(),)  # newest first, straight off the index
    )
    page = (
        select(t.c.id)
        .where(t.c.status == status)
        .order_by(*order)
        .limit(limit)
        .offset(offset)
        .subquery()
    )
    query = (
        select(
            t.c.id,
            t.c.slug,
            t.c.title,
            t.c.stage,
            t.c.status,
            t.c.halt_reason,
            t.c.priority,
            t.c.updated_at,
            count.label("attempt"),
            last_score.label("score"),
        )
        .join_from(t, page, page.c.id == t.c.id)
        .order_by(*order)
    )
    return [dict(row._mapping) for row in conn.execute(query)]
