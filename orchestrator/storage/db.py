"""Engines and transactions (driver errors are translated by `driver_errors`).

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
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import QueuePool

from orchestrator.errors import (
    SchemaError,
)
from orchestrator.storage.driver_errors import connection_lost, translate_errors
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
