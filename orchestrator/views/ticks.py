"""When the last tick ran, as `doctor`, the board and `metrics` tell it.

Every tick that gets the lock leaves a trace in `ticks`, idle ones too (one
row per run of them), so a cron log that says nothing can be told from a
cron that runs nothing: "last tick 40 s ago" against "last tick 3 h ago".
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from orchestrator.storage import repo
from orchestrator.storage.db import db_now


def ago(seconds: float) -> str:
    """`40 s`, `5 min`, `3 h`, `2 d`: how long, to a glance's precision."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size or (unit == "min" and seconds >= size):
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def last_tick_age(conn: Connection, host: str | None = None) -> tuple[datetime, float] | None:
    """(when, seconds ago) of the newest finished tick, of `host` or any; None: never."""
    last = repo.last_tick(conn, host)
    if last is None:
        return None
    return last, (db_now(conn) - last).total_seconds()


def last_tick_text(conn: Connection, host: str | None = None) -> str:
    found = last_tick_age(conn, host)
    return "no tick yet" if found is None else f"last tick {ago(found[1])} ago"
