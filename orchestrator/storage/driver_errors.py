"""Driver errors translated to the orchestrator's exit statuses.

Apart from the engines and transactions of `db`: what a driver's message
means (busy, full, unreadable, lost, drifted) is one concern, read by every
layer that meets the database, and grows with each driver's wording.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from orchestrator.errors import (
    ConnectionLostError,
    DatabaseBusyError,
    DatabaseFullError,
    DatabaseUnreadableError,
    OrchestratorError,
    PermissionDeniedError,
    SchemaError,
)

_BUSY = ("database is locked", "database table is locked", "lock timeout", "could not obtain lock")
# A full disk is not damage: it heals when space returns, so it is said
# apart, naming the file whose disk it is.
_FULL = ("database or disk is full", "no space left")
_UNREADABLE = (
    "file is not a database",
    "malformed",
    "disk i/o error",
    "could not write",
    "corrupt",
)
_PERMISSION = ("readonly database", "read-only", "permission denied", "unable to open database")


def translate(exc: BaseException, database: str | None = None) -> OrchestratorError | None:
    """Map a driver error onto our exit statuses; None when it is not one of
    ours. `database` names the file (or server database) in the message."""
    if not isinstance(exc, DBAPIError | sqlite3.Error):
        return None
    orig = getattr(exc, "orig", exc)
    message = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    lowered = message.lower()
    if any(marker in lowered for marker in _BUSY):
        return DatabaseBusyError(f"database busy: {message} (another writer held it too long)")
    if any(marker in lowered for marker in _FULL):
        where = f"database {database}" if database else "the database"
        return DatabaseFullError(
            f"disk full under {where} ({message}): nothing was written; "
            "it heals once space is freed there"
        )
    if any(marker in lowered for marker in _UNREADABLE):
        return DatabaseUnreadableError(f"database unreadable: {message}")
    if any(marker in lowered for marker in _PERMISSION):
        return PermissionDeniedError(f"cannot write the database: {message}")
    if any(marker in lowered for marker in _DRIFT) or type(orig).__name__ in _DRIFT_CLASSES:
        return SchemaError(
            f"database schema does not match this orchestrator ({message}); "
            "run `orchestrator doctor`"
        )
    if connection_lost(exc):
        return ConnectionLostError(f"lost the connection to the database: {message}")
    if (
        isinstance(exc, OperationalError)
        and not isinstance(orig, sqlite3.Error)
        and any(marker in lowered for marker in _UNREACHABLE)
    ):
        # The server is down, restarting or out of reach: a blip for cron to
        # try again, not a configuration to fix.
        return ConnectionLostError(f"cannot reach the database: {message}")
    if isinstance(exc, OperationalError) and (
        "connection" in lowered or "could not connect" in lowered or "does not exist" in lowered
    ):
        return SchemaError(f"cannot reach the database: {message}")
    return None


# SQLSTATEs of a session the server ended or could not keep: class 08
# (connection exception), admin/crash shutdown, cannot connect now, and the
# idle timeouts (which psycopg raises as InternalError, not OperationalError).
_LOST_STATES = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03"})
_LOST = (
    "server closed the connection",
    "terminating connection",
    "connection is closed",
    "connection is lost",
    "the connection is lost",
    "connection not open",
    "consuming input failed",
    "could not receive data from server",
    "could not send data to server",
    "ssl connection has been closed",
    "connection already closed",
)


def connection_lost(exc: BaseException) -> bool:
    """Whether a driver error means the session is gone (so nothing of the
    transaction was committed), by every sign a driver gives: SQLAlchemy's
    invalidation, the SQLSTATE, the message."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", exc)
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and (state.startswith("08") or state in _LOST_STATES):
        return True
    if isinstance(orig, sqlite3.Error):
        return False
    lowered = str(orig).lower()
    return any(marker in lowered for marker in _LOST)


# A server that is there but does not answer now (restarting, failing over,
# a network drop). A wrong host name, database or password stays 78.
_UNREACHABLE = (
    "connection refused",
    "the database system is",  # shutting down, starting up, in recovery mode
    "timeout expired",
    "no route to host",
    "network is unreachable",
    "connection timed out",
    "no such file or directory",  # the unix socket, while the server restarts
    "server closed the connection",
)


# A table or column the code expects is missing although the stamped revision
# is current: someone altered the schema by hand.
_DRIFT = ("no such table", "no such column", "has no column named")
_DRIFT_CLASSES = frozenset({"UndefinedTable", "UndefinedColumn"})


def database_name(engine: Engine | Connection) -> str | None:
    """What a message calls the database: its file (SQLite) or its name."""
    return engine.engine.url.database or None


@contextmanager
def translate_errors(engine: Engine | Connection | None = None) -> Iterator[None]:
    try:
        yield
    except (DBAPIError, sqlite3.Error) as exc:
        mapped = translate(exc, None if engine is None else database_name(engine))
        if mapped is None:
            raise
        raise mapped from exc
    except PoolTimeoutError as exc:
        raise DatabaseBusyError(
            "database busy: no free connection in the pool in time (too many --jobs for "
            "the server's connections?)"
        ) from exc
    except UnicodeDecodeError as exc:
        # SQLite quotes a damaged schema's bytes in its message, which the
        # driver then cannot decode: the file is corrupt, not our input.
        raise DatabaseUnreadableError(
            "database unreadable: malformed database schema (SQLite's message is not UTF-8)"
        ) from exc
