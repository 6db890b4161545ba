"""Engines, transactions and the translation of driver errors.

SQLite rules: every write transaction begins
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

import contextlib
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
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.pool import QueuePool

from orchestrator.errors import (
    ConnectionLostError,
    DatabaseBusyError,
    DatabaseFullError,
    DatabaseUnreadableError,
    OrchestratorError,
    PermissionDeniedError,
    SchemaError,
)
from orchestrator.storage.prepared import Prepared
from orchestrator.testing import install_statement_crash

# Set by `write_tx` (and migrations): only these transactions take SQLite's
# write lock at BEGIN. Anything else, including a `Connection.execute` or a
# `Prepared` that autobegins, starts a plain deferred (read) transaction, so a
# command that only looks can never hold up the tick's writers.
WRITE = "orchestrator_write"
WAL_SIZE_LIMIT = 1 << 20  # bytes a reset WAL is cut back to (`journal_size_limit`)
WAL_CHECKPOINT_PAGES = 128  # a checkpoint once the WAL holds this many pages (512 KiB)
CONNECT_TIMEOUT = 10  # seconds a PostgreSQL connect may take


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


def make_engine(
    url: str, *, busy_timeout: float = 30.0, create: bool = False, jobs: int = 1
) -> Engine:
    """An engine with our pragmas and transaction rules.

    `create=False` (every command but init, demo and `db upgrade`) refuses a
    missing SQLite file with exit 78 instead of creating an empty database.
    """
    path = sqlite_path(url)
    if path is None:
        if make_url(url).get_backend_name() == "sqlite":
            return _sqlite_engine(url, busy_timeout, None)
        return _server_engine(url, jobs)
    if not path.exists():
        if not create:
            raise SchemaError(
                f"database not found at {path}; run `orchestrator db upgrade` to create it"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
    return _sqlite_engine(url, busy_timeout, path if not create else None)


def _server_engine(url: str, jobs: int) -> Engine:
    try:
        # A client frozen inside a transaction (SIGSTOP, a paused VM) would
        # hold its row locks for ever and block every other host's recovery;
        # our transactions are short, so the server may end such a session.
        # Options in the URL (`?options=-c ...`) come after ours: they win.
        parsed = make_url(url)
        connect_args: dict[str, Any] = {}
        if parsed.get_backend_name() == "postgresql":
            given = parsed.query.get("options", "")
            extra = " ".join(given) if isinstance(given, tuple) else given
            connect_args["options"] = f"-c idle_in_transaction_session_timeout=30000 {extra}"
            # A server out of reach must fail a connect within the tick's
            # reconnect bound, not hang on the kernel's TCP timeout.
            if "connect_timeout" not in parsed.query:
                connect_args["connect_timeout"] = CONNECT_TIMEOUT
        engine = create_engine(
            url,
            pool_pre_ping=False,
            # Each running attempt may hold a connection (recording, renewing)
            # while the claim loop holds another: never fewer than --jobs + 2.
            pool_size=max(5, jobs + 2),
            max_overflow=10,
            connect_args=connect_args,
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
            # Without a limit the WAL keeps its largest size for ever (it is
            # reused from the start, not shrunk), which a small volume feels.
            cursor.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            # SQLite's own checkpoint waits for 1,000 pages (4 MB): a busy
            # tick then fills a small volume with WAL alone, and the WAL can
            # no longer be checkpointed (the database file must grow into
            # the space it holds), so every write fails for good.
            cursor.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(WRITE):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

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


def checkpoint(engine: Engine) -> None:
    """Copy the WAL into the database and truncate it to nothing, at the end
    of a tick that wrote. SQLite checkpoints on its own only as the WAL
    grows past a thousand pages, and truncates it only when the last
    connection closes, which never happens while `run`, another command or
    a reader keeps one open. Best effort: the tick's work is already
    committed (in the WAL, which is durable), and a busy reader or a full
    disk merely leaves the WAL for the next tick to try again."""
    if not is_sqlite(engine):
        return
    with contextlib.suppress(SQLAlchemyError, sqlite3.Error), engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        # Never wait: a TRUNCATE checkpoint waits on the busy handler for
        # readers to finish and holds new writers off meanwhile. With no
        # wait, a reader still in the WAL only leaves it for the next tick.
        timeout = driver.execute("PRAGMA busy_timeout").fetchone()[0]
        driver.execute("PRAGMA busy_timeout = 0").close()
        try:
            driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        finally:
            driver.execute(f"PRAGMA busy_timeout = {int(timeout)}").close()


def settle_wal(engine: Engine) -> None:
    """Checkpoint a WAL an earlier command left behind (a full disk failed
    its checkpoint) before writing more to it: once space is back, the
    first tick folds it into the database rather than grow it."""
    path = sqlite_path(str(engine.url)) if is_sqlite(engine) else None
    try:
        left = path is not None and Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return
    if left:
        checkpoint(engine)


@contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """A short write transaction (BEGIN IMMEDIATE on SQLite), errors translated."""
    with translate_errors(engine), engine.connect() as plain:
        conn = plain.execution_options(**{WRITE: True})
        with conn.begin():
            yield conn


@contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read transaction that takes no write lock (SQLite: a deferred BEGIN,
    which in WAL mode neither waits for nor blocks a writer)."""
    with translate_errors(engine), engine.connect() as conn, conn.begin():
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
    except BaseException as exc:
        if connection_lost(exc):
            raise  # the whole transaction is gone: nothing to roll back to
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
