"""The outbox read back for `orchestrator events`: events, newest last,
each with its hooks' deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, exists, or_, select

from orchestrator.storage import tables

events = tables.events
deliveries = tables.deliveries
tasks = tables.tasks


@dataclass(frozen=True)
class DeliveryRow:
    hook: str
    tries: int
    last_error: str | None
    next_try_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True)
class EventRow:
    id: int
    kind: str
    task: str  # the slug
    payload: str  # JSON, as written
    at: datetime
    dispatched_at: datetime | None
    deliveries: tuple[DeliveryRow, ...]


def event_rows(
    conn: Connection, *, pending: bool, limit: int | None, hooks: bool
) -> list[EventRow]:
    """The newest `limit` events (all with None), oldest first. Pending: with
    a delivery not yet made, or not yet handed out while some hook is
    configured (`hooks`)."""
    query = (
        select(
            events.c.id,
            events.c.kind,
            tasks.c.slug,
            events.c.payload,
            events.c.at,
            events.c.dispatched_at,
        )
        .join(tasks, tasks.c.id == events.c.task_id)
        .order_by(events.c.id.desc())
    )
    if pending:
        undelivered = exists().where(
            and_(deliveries.c.event_id == events.c.id, deliveries.c.delivered_at.is_(None))
        )
        waiting = events.c.dispatched_at.is_(None)
        query = query.where(or_(waiting, undelivered) if hooks else undelivered)
    if limit is not None:
        query = query.limit(limit)
    rows = list(reversed(conn.execute(query).all()))
    by_event: dict[int, list[DeliveryRow]] = {row[0]: [] for row in rows}
    if rows:
        found = conn.execute(
            select(
                deliveries.c.event_id,
                deliveries.c.hook,
                deliveries.c.tries,
                deliveries.c.last_error,
                deliveries.c.next_try_at,
                deliveries.c.delivered_at,
            )
            .where(deliveries.c.event_id.in_(list(by_event)))
            .order_by(deliveries.c.id)
        )
        for event_id, hook, tries, error, next_try, delivered in found:
            by_event[event_id].append(DeliveryRow(hook, tries, error, next_try, delivered))
    return [
        EventRow(event_id, kind, slug, payload, at, dispatched, tuple(by_event[event_id]))
        for event_id, kind, slug, payload, at, dispatched in rows
    ]
