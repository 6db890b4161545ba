"""The schema revision this code speaks, checked without importing Alembic.

Alembic costs ~140 ms to import; a tick that runs every minute must not pay
that to learn the schema is fine. `HEAD` and `REVISIONS` are constants, and a
test keeps them equal to what the migration scripts say.
"""

from __future__ import annotations

from sqlalchemy import Connection, column, select, table
from sqlalchemy.exc import DBAPIError

from orchestrator.errors import SchemaError
from orchestrator.storage.prepared import Prepared

HEAD = "0020"
REVISIONS = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005",
    "0006",
    "0010",
    "0011",
    "0012",
    "0013",
    "0014",
    "0015",
    "0016",
    "0017",
    "0018",
    "0020",
)  # oldest first

FIX = "run `orchestrator db upgrade`"
# Read before every claim (a migration mid-tick stops the claiming).
_READ_REVISION = Prepared(select(column("version_num")).select_from(table("alembic_version")))


def current_revision(conn: Connection) -> str | None:
    """The revision stamped in the database, or None when it has none.

    On PostgreSQL a failed query spoils the transaction it runs in: call it
    on its own transaction, or (the tick's claims) inside a savepoint or
    where losing the transaction is acceptable."""
    try:
        row = _READ_REVISION.execute(conn).first()
    except DBAPIError as exc:
        message = str(exc.orig).lower()
        if "no such table" in message or "does not exist" in message:
            return None
        raise
    return None if row is None else str(row[0])


def require_head(conn: Connection) -> None:
    """Refuse (exit 78) a database that is empty, behind or ahead of the code."""
    revision = current_revision(conn)
    if revision is None:
        raise SchemaError(f"database is empty (no orchestrator schema); {FIX}")
    if revision == HEAD:
        return
    if revision in REVISIONS:
        raise SchemaError(f"database schema is at {revision}, this code needs {HEAD}; {FIX}")
    raise SchemaError(
        f"database schema {revision} is newer than this orchestrator (which knows up to "
        f"{HEAD}); upgrade orchestrator, or run `orchestrator db downgrade {HEAD}` "
        "with the newer version"
    )
