"""The wake a human action sends `orchestrator run` on PostgreSQL.

`NOTIFY` issued in the action's own transaction is delivered when that
transaction commits, and never when it rolls back: a loop that LISTENs
(`orchestrator.tick.wake`) starts the tick that takes the work within a
moment instead of at its next interval. SQLite needs nothing from the
writer: the loop sees the commit in `PRAGMA data_version`.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

CHANNEL = "orchestrator_wake"
_NOTIFY = text(f"NOTIFY {CHANNEL}")


def notify_wake(conn: Connection) -> None:
    """Wake every `run` on this database once `conn`'s transaction commits."""
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY)
