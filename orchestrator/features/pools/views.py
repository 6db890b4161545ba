"""What the pools are doing: paused (until when, why), how many attempts
run, what they spent today. Read by `pool list`, `explain`, `list`, the
board and `metrics`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from orchestrator.config import Settings
from orchestrator.features.pools import store as pool_rows


def pool_states(conn: Connection, settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """Every configured pool, and any pool the database knows of that the
    configuration lost (still paused, say), by name."""
    rows = pool_rows.pool_rows(conn)
    running = pool_rows.running_by_pool(conn)
    names = sorted(set(settings.pools) | set(rows))
    since = pool_rows.day_start(now)
    found = []
    for name in names:
        config = settings.pools.get(name)
        row = rows.get(name)
        paused = row is not None and row.paused_until is not None and row.paused_until > now
        found.append(
            {
                "pool": name,
                "configured": config is not None,
                "running": running.get(name, 0),
                "max_running": None if config is None else config.max_running,
                "spent_today_usd": round(pool_rows.spent_since(conn, name, since), 6),
                "max_usd_per_day": None if config is None else config.max_usd_per_day,
                "paused": paused,
                "paused_until": None
                if not paused or row is None or row.paused_until is None
                else row.paused_until.isoformat(),
                "seconds_left": None
                if not paused or row is None or row.paused_until is None
                else round((row.paused_until - now).total_seconds(), 1),
                "pause_reason": row.pause_reason if paused and row is not None else None,
            }
        )
    return found


def pool_state(
    conn: Connection, settings: Settings, name: str, now: datetime
) -> dict[str, Any] | None:
    return next((p for p in pool_states(conn, settings, now) if p["pool"] == name), None)


def holds_back(state: dict[str, Any]) -> str | None:
    """Why the pool claims nothing now, for a person; None when it would."""
    if state["paused"]:
        return (
            f"pool {state['pool']} is paused until {state['paused_until']} "
            f"({state['pause_reason']}); `orchestrator pool resume {state['pool']}` ends it"
        )
    if state["max_running"] is not None and state["running"] >= state["max_running"]:
        return f"pool {state['pool']} runs {state['running']} of {state['max_running']} attempts"
    cap = state["max_usd_per_day"]
    if cap is not None and state["spent_today_usd"] >= cap:
        return (
            f"pool {state['pool']} spent ${state['spent_today_usd']:.4f} of its "
            f"${cap:.4f} a day (UTC); it claims again after midnight UTC"
        )
    return None


def pool_line(state: dict[str, Any]) -> str:
    """One pool for `explain` and the `list` footer."""
    cap = "" if state["max_running"] is None else f" of {state['max_running']}"
    said = f"{state['pool']}: {state['running']}{cap} running"
    if state["max_usd_per_day"] is not None:
        said += f", ${state['spent_today_usd']:.4f} of ${state['max_usd_per_day']:.4f} today (UTC)"
    if state["paused"]:
        said += (
            f"; paused until {state['paused_until']} ({state['seconds_left']:g}s left): "
            f"{state['pause_reason']}"
        )
    return said
