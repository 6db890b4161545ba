"""Engines, transactions and the translation of driver errors.

SQLite rules (RELIABILITY.md points 2 and 7): every write transaction begins
IMMEDIATE, because a deferred transaction that reads then writes fails at once
with SQLITE_BUSY_SNAPSHOT in WAL mode whatever the busy timeout. Python's
sqlite3 module (before 3.12) opens transactions itself and never for SELECT,
so we take transaction control away from it (`isolation_level = None`) and
emit BEGIN ourselves — SQLAlchemy's documented pysqlite recipe. WAL with
`synchronous=FULL` keeps what was acknowledged across power loss.

A database file that does not exist is refused rather than created: SQLite
would happily create an empty one and the tick would report "no tasks".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import QueuePool

from orchestrator.errors import (
    DatabaseBusyError,
    DatabaseUnreadableError,
    OrchestratorError,
    PermissionDeniedError,
    SchemaError,
)
from orchestrator.storage.prepared import Prepared
from orchestrator.testing import install_statement_crash

_READ_ONLY = "orchestrator_read_only"


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or None for other backends and memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def is_sqlite(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str, *, busy_timeout: float = 30.0, create: bool = False) -> Engine:
    """An engine with our pragmas and transaction rules.

    `create=False` (every command but init, demo and `db upgrade`) refuses a
    missing SQLite file with exit 78 instead of creating an empty database.
    """
    path = sqlite_path(url)
    if path is None:
        if make_url(url).get_backend_name() == "sqlite":
            return _sqlite_engine(url, busy_timeout, None)
        return _server_engine(url)
    if not path.exists():
        if not create:
            raise SchemaError(
                f"database not found at {path}; run `orchestrator db upgrade` to create it"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
    return _sqlite_engine(url, busy_timeout, path if not create else None)


def _server_engine(url: str) -> Engine:
    try:
        # A client frozen inside a transaction (SIGSTOP, a paused VM) would
        # hold its row locks for ever and block every other host's recovery;
        # our transactions are short, so the server may end such a session.
        engine = create_engine(
            url,
            pool_pre_ping=False,
            pool_size=5,
            max_overflow=10,
            connect_args=(
                {"options": "-c idle_in_transaction_session_timeout=30000"}
                if make_url(url).get_backend_name() == "postgresql"
                else {}
            ),
        )
    except ModuleNotFoundError as exc:
        raise SchemaError(
            f"the driver for {make_url(url).drivername} is not installed "
            "(pip install 'orchestrator[pg]')"
        ) from exc
    except SQLAlchemyError as exc:
        raise SchemaError(f"invalid database URL: {exc}") from exc
    install_statement_crash(engine)
    return engine


def _sqlite_engine(url: str, busy_timeout: float, must_exist: Path | None) -> Engine:
    # A pool (not a connection per transaction): closing the last
    # connection to a WAL database checkpoints it, an fsync per transaction.
    # Each checkout belongs to one thread at a time, so attempts running in
    # threads never share a handle.
    kwargs: dict[str, Any] = {
        "connect_args": {"timeout": busy_timeout, "check_same_thread": False},
        "poolclass": QueuePool,
    }
    if must_exist is not None:
        # A URI filename: `?`, `#` and `%` in the path must be escaped, or
        # SQLite opens (and creates) a different file.
        uri = f"file:{quote(str(must_exist))}?mode=rw"

        def creator() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, timeout=busy_timeout, check_same_thread=False)

        kwargs = {"creator": creator, "poolclass": QueuePool}
    engine = create_engine(url, **kwargs)
    install_statement_crash(engine)
    timeout_ms = int(busy_timeout * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = FULL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(_READ_ONLY):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def enable_wal(target: Engine | Connection) -> None:
    """WAL is a property of the file; set once when the database is created.

    It cannot change inside a transaction, so it goes straight to the driver
    connection (which, with our hooks, never opens one by itself)."""
    if not is_sqlite(target):
        return
    if isinstance(target, Engine):
        with target.connect() as conn:
            enable_wal(conn)
        return
    driver = target.connection.driver_connection
    assert driver is not None
    driver.execute("PRAGMA journal_mode = WAL").close()


@contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """A short write transaction (BEGIN IMMEDIATE on SQLite), errors translated."""
    with translate_errors(), engine.begin() as conn:
        yield conn


@contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read transaction that takes no write lock."""
    with translate_errors(), engine.connect() as plain:
        conn = plain.execution_options(**{_READ_ONLY: True})
        with conn.begin():
            yield conn


_NOW = Prepared(select(func.now()))
_SAVEPOINT = Prepared(text("SAVEPOINT orchestrator_inner"))
_ROLLBACK_TO = Prepared(text("ROLLBACK TO SAVEPOINT orchestrator_inner"))
_RELEASE = Prepared(text("RELEASE SAVEPOINT orchestrator_inner"))


@contextmanager
def savepoint(conn: Connection) -> Iterator[None]:
    """Undo what the block wrote, and only that, when it raises; the
    enclosing transaction goes on (on PostgreSQL, usable again)."""
    _SAVEPOINT.execute(conn)
    try:
        yield
    except BaseException:
        _ROLLBACK_TO.execute(conn)
        _RELEASE.execute(conn)
        raise
    _RELEASE.execute(conn)


def db_now(conn: Connection) -> datetime:
    """The database's clock: the authority for lease expiry on PostgreSQL,
    where ticks on several hosts must agree. SQLite lives on one host, whose
    clock it is."""
    if conn.dialect.name == "postgresql":
        row = _NOW.execute(conn).first()
        assert row is not None
        value = row[0]
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    return datetime.now(UTC)


_BUSY = ("database is locked", "database table is locked", "lock timeout", "could not obtain lock")
_UNREADABLE = (
    "file is not a database",
    "malformed",
    "disk i/o error",
    "database or disk is full",
    "no space left",
    "could not write",
    "corrupt",
)
_PERMISSION = ("readonly database", "read-only", "permission denied", "unable to open database")


def translate(exc: BaseException) -> OrchestratorError | None:
    """Map a driver error onto our exit statuses; None when it is not one of ours."""
    if not isinstance(exc, DBAPIError | sqlite3.Error):
        return None
    orig = getattr(exc, "orig", exc)
    message = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    lowered = message.lower()
    if any(marker in lowered for marker in _BUSY):
        return DatabaseBusyError(f"database busy: {message} (another writer held it too long)")
    if any(marker in lowered for marker in _UNREADABLE):
        return DatabaseUnreadableError(f"database unreadable: {message}")
    if any(marker in lowered for marker in _PERMISSION):
        return PermissionDeniedError(f"cannot write the database: {message}")
    if any(marker in lowered for marker in _DRIFT) or type(orig).__name__ in _DRIFT_CLASSES:
        return SchemaError(
            f"database schema does not match this orchestrator ({message}); "
            "run `orchestrator doctor`"
        )
    if isinstance(exc, OperationalError) and (
        "connection" in lowered or "could not connect" in lowered or "does not exist" in lowered
    ):
        return SchemaError(f"cannot reach the database: {message}")
    return None


# A table or column the code expects is missing although the stamped revision
# is current: someone altered the schema by hand.
_DRIFT = ("no such table", "no such column", "has no column named")
_DRIFT_CLASSES = frozenset({"UndefinedTable", "UndefinedColumn"})


@contextmanager
def translate_errors() -> Iterator[None]:
    try:
        yield
    except (DBAPIError, sqlite3.Error) as exc:
        mapped = translate(exc)
        if mapped is None:
            raise
        raise mapped from exc
    except UnicodeDecodeError as exc:
        # SQLite quotes a damaged schema's bytes in its message, which the
        # driver then cannot decode: the file is corrupt, not our input.
        raise DatabaseUnreadableError(
            "database unreadable: malformed database schema (SQLite's message is not UTF-8)"
        ) from exc
