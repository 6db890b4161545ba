"""Alembic environment for orchestrator.

The connection comes, in order, from `config.attributes["connection"]` (a
Connection or an Engine: how `orchestrator db upgrade` and the tests call
us, the Alembic cookbook and pytest-alembic conventions), `-x db=URL`, or
`ORCHESTRATOR_DB_URL`. `render_as_batch` lets SQLite ALTER tables by copy.
On PostgreSQL a transaction-level advisory lock serialises two hosts
upgrading at once (never a session-level one: it leaks under PgBouncer).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from alembic import context
from sqlalchemy import Connection, Engine, text

from orchestrator.errors import SchemaError
from orchestrator.storage.db import WRITE, enable_wal, make_engine
from orchestrator.storage.tables import metadata

config = context.config
target_metadata = metadata
UPGRADE_LOCK_KEY = 0x6F7263  # "orc"


def _run(connection: Connection) -> None:
    sqlite = connection.dialect.name == "sqlite" and not connection.in_transaction()
    if not sqlite:
        _migrate(connection)
        return
    enable_wal(connection)
    # Rebuilding a table (batch mode) drops the old one, and with foreign
    # keys on that DROP would cascade into its children. The pragma cannot
    # change inside a transaction, so it is set on the driver connection
    # before Alembic begins one, and checked and restored after.
    driver = connection.connection.driver_connection
    assert driver is not None
    # Rows whose parent was deleted by hand (the sqlite3 shell has foreign
    # keys off) are there already; only breakage the migration made counts.
    before = _orphans(driver)
    driver.execute("PRAGMA foreign_keys = OFF").close()
    try:
        _migrate(connection, lambda: _check_foreign_keys(driver, before))
    finally:
        driver.execute("PRAGMA foreign_keys = ON").close()


def _orphans(driver: Any) -> set[tuple[Any, ...]]:
    """(table, rowid, parent table) of each row whose parent is missing; the
    foreign key's index is left out: a rebuilt table may number them anew."""
    return {tuple(row[:3]) for row in driver.execute("PRAGMA foreign_key_check").fetchall()}


def _check_foreign_keys(driver: Any, before: set[tuple[Any, ...]]) -> None:
    """Inside the migration's transaction: refuse (and so roll back) a
    migration that left rows pointing at nothing."""
    broken = _orphans(driver) - before
    if broken:
        raise SchemaError(
            f"the migration would leave rows without their parent ({sorted(broken)[:3]}); "
            "nothing was changed"
        )


def _migrate(connection: Connection, check: Callable[[], None] = lambda: None) -> None:
    # A migration writes: on SQLite it must hold the write lock from BEGIN.
    connection = connection.execution_options(**{WRITE: True})
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": UPGRADE_LOCK_KEY})
        context.run_migrations()
        check()


def run_migrations_online() -> None:
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _run(given)
        return
    if isinstance(given, Engine):
        with given.connect() as connection:
            _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("db") or os.environ.get(
        "ORCHESTRATOR_DB_URL"
    )
    if not url:
        raise SystemExit("set ORCHESTRATOR_DB_URL (or pass -x db=URL) to run alembic")
    engine = make_engine(url, create=True)
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; connect to a database")
run_migrations_online()
