"""A person's own SQL (`orchestrator sql`), run so that it cannot write.

The database refuses the write, not a regex of ours: SQLite's
`query_only` (and an authorizer that denies ATTACH), PostgreSQL's READ ONLY
transaction, and exactly one statement per query."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

# (dialect, driver) pairs whose read-only mode `read_only` and
# `execute_one` can guarantee.
READ_ONLY_DRIVERS = frozenset({("sqlite", "pysqlite"), ("postgresql", "psycopg")})


@contextmanager
def read_only(conn: Connection) -> Iterator[None]:
    """Make the connection refuse writes for this query, then restore it: the
    connection goes back to a pool that the tick's writers share. On SQLite an
    authorizer also denies ATTACH, which `query_only` lets create files."""
    if conn.dialect.name != "sqlite":
        conn.execute(text("SET TRANSACTION READ ONLY"))
        yield
        return
    driver = conn.connection.driver_connection
    assert isinstance(driver, sqlite3.Connection)

    def authorize(action: int, *_args: object) -> int:
        return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_ATTACH else sqlite3.SQLITE_OK

    conn.exec_driver_sql("PRAGMA query_only = ON")
    driver.set_authorizer(authorize)
    try:
        yield
    finally:
        driver.set_authorizer(None)
        driver.execute("PRAGMA query_only = OFF").close()


def execute_one(conn: Connection, query: str) -> tuple[list[str], list[Any]]:
    """Execute exactly one statement, with no parameter substitution.

    sqlite3 refuses a second statement by itself. psycopg would send a
    parameterless query with the simple protocol, which runs several
    statements: `COMMIT; DELETE …` would end the read-only transaction and
    then write. A prepared statement (extended protocol) holds exactly one,
    and with no parameters a `%` in the query stays a `%`.
    """
    if conn.dialect.name == "sqlite":
        result = conn.exec_driver_sql(query)
        if not result.returns_rows:
            return [], []
        return list(result.keys()), list(result)
    dbapi = conn.dialect.loaded_dbapi
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        try:
            cursor.execute(query, prepare=True)
            if cursor.description is None:
                return [], []
            return [column.name for column in cursor.description], cursor.fetchall()
        except dbapi.Error as exc:
            raise DBAPIError.instance(query, None, exc, dbapi.Error, dialect=conn.dialect) from exc
    finally:
        cursor.close()
