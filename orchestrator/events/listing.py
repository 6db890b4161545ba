"""`orchestrator events`: the outbox read back, newest last, with each
hook's delivery (tries, last error, delivered at)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection

from orchestrator.storage.reads.events import event_rows


def list_events(
    conn: Connection, *, pending: bool, limit: int | None, hooks: bool = True
) -> list[dict[str, Any]]:
    """Events with their deliveries, as `events --json` prints them. Pending:
    with a delivery not yet made, or not yet handed out while some hook is
    configured (`hooks`)."""
    out = []
    for event in event_rows(conn, pending=pending, limit=limit, hooks=hooks):
        facts = json.loads(event.payload)
        out.append(
            {
                "id": event.id,
                "kind": event.kind,
                "task": event.task,
                "state": facts.get("state"),
                "reason": facts.get("reason"),
                "at": event.at.isoformat(),
                "dispatched": event.dispatched_at is not None,
                "deliveries": [
                    {
                        "hook": d.hook,
                        "tries": d.tries,
                        "last_error": d.last_error,
                        "next_try_at": None if d.delivered_at else d.next_try_at.isoformat(),
                        "delivered_at": d.delivered_at.isoformat() if d.delivered_at else None,
                    }
                    for d in event.deliveries
                ],
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
