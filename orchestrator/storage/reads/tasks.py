"""Tasks as the read side looks them up beyond `repo`'s verbs: every slug
(for "did you mean"), where the unfinished ones stand (`doctor`), the ones
`report --html` shows."""

from __future__ import annotations

from sqlalchemy import Connection, case, select

from orchestrator.storage import tables

_t = tables.tasks


def all_slugs(conn: Connection) -> list[str]:
    """Every task's slug: a scan of `tasks`, for error paths only."""
    return [str(slug) for slug in conn.execute(select(_t.c.slug)).scalars()]


def unfinished_positions(conn: Connection) -> list[tuple[str, str, str]]:
    """(slug, pipeline, stage) of every task neither complete nor cancelled."""
    rows = conn.execute(
        select(_t.c.slug, _t.c.pipeline, _t.c.stage).where(
            _t.c.status.not_in(("complete", "cancelled"))
        )
    ).all()
    return [(str(slug), str(pipeline), str(stage)) for slug, pipeline, stage in rows]


def recent_slugs(conn: Connection, limit: int) -> list[str]:
    """Gates first (oldest waiting first), then the most recently changed."""
    waiting = case((_t.c.status == "awaiting_approval", 0), else_=1)
    query = select(_t.c.slug).order_by(waiting, _t.c.updated_at.desc(), _t.c.id.desc()).limit(limit)
    return list(conn.execute(query).scalars())


def held_stages(conn: Connection) -> set[str]:
    """Every stage some task is at."""
    return set(conn.execute(select(_t.c.stage).distinct()).scalars())
