"""`orchestrator events`: the outbox read back, newest last, with each
hook's delivery (tries, last error, delivered at)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, and_, exists, or_, select

from orchestrator.storage import tables

events = tables.events
deliveries = tables.deliveries
tasks = tables.tasks


def list_events(
    conn: Connection, *, pending: bool, limit: int | None, hooks: bool = True
) -> list[dict[str, Any]]:
    """Events with their deliveries. Pending: with a delivery not yet made,
    or not yet handed out while some hook is configured (`hooks`)."""
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
    by_event: dict[int, list[dict[str, Any]]] = {row[0]: [] for row in rows}
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
            by_event[event_id].append(
                {
                    "hook": hook,
                    "tries": tries,
                    "last_error": error,
                    "next_try_at": None if delivered else next_try.isoformat(),
                    "delivered_at": delivered.isoformat() if delivered else None,
                }
            )
    out = []
    for event_id, kind, slug, payload, at, dispatched in rows:
        facts = json.loads(payload)
        out.append(
            {
                "id": event_id,
                "kind": kind,
                "task": slug,
                "state": facts.get("state"),
                "reason": facts.get("reason"),
                "at": at.isoformat(),
                "dispatched": dispatched is not None,
                "deliveries": by_event[event_id],
                "payload": facts,
            }
        )
    return out


def delivery_summary(event: dict[str, Any]) -> str:
    """One cell: each hook's standing, or why there is none."""
    if not event["dispatched"]:
        return "not handed out yet (no tick with a hook since)"
    if not event["deliveries"]:
        return "no hook wants it"
    parts = []
    for d in event["deliveries"]:
        tries = f"{d['tries']} {'try' if d['tries'] == 1 else 'tries'}"
        if d["delivered_at"]:
            parts.append(f"{d['hook']}: delivered ({tries})")
        else:
            error = f", {d['last_error']}" if d["last_error"] else ""
            parts.append(f"{d['hook']}: pending ({tries}{error})")
    return "; ".join(parts)
