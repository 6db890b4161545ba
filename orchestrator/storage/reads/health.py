"""Whether the database answers at all (`serve`'s /healthz)."""

from __future__ import annotations

from sqlalchemy import Connection, text


def ping(conn: Connection) -> None:
    """One trivial statement: raises whatever the driver raises when the
    database cannot answer."""
    conn.execute(text("SELECT 1"))
