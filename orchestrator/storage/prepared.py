"""Hot-path statements compiled once per dialect and run on the driver's cursor.

A tick of 100 attempts runs ~1,100 statements. Through `Connection.execute`
each pays 60-200 µs of SQLAlchemy bookkeeping (cache key, parameter
processing, result metadata) for a query SQLite answers in 20-50 µs: most of
a trivial attempt's database cost. `Prepared` keeps the Core statement as
the single definition of the SQL, compiles it with SQLAlchemy (public API:
`compile`, `positiontup`, `bind_names`, and each type's dialect
implementation's bind and result processors, which is where
`Connection.execute` gets them too), and then runs it on the driver cursor
of the caller's transaction. `tests/storage/test_prepared.py` checks stored
bytes, values read back and exceptions against `Connection.execute`.

Some of what it reads (`insert_prefetch`, a bind parameter's `required`
and `callable`, `is_disconnect`, `DBAPIError.instance`) SQLAlchemy documents
only in passing, so pyproject pins the SQLAlchemy range the equivalence test
passed on, and `python -m bench.prepared` measures what this module saves
(docs/decisions.md has the figures): rerun both before widening the range.

What it refuses, on purpose: expanding (`IN`) parameters and Python-side
column defaults. Hot statements name every value they write; anything else
stays on `Connection.execute`. Like it, it begins a transaction on a
connection that has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

from orchestrator import testing

Processor = Callable[[Any], Any]


@dataclass
class _Plan:
    """One statement as one dialect runs it."""

    sql: str
    positional: tuple[str, ...] | None  # parameter names in order, for `?` styles
    literals: dict[str, Any]  # values fixed in the statement (LIMIT 1, 'ready')
    binds: dict[str, Processor]  # name -> bind processor, where the type has one
    columns: tuple[Any, ...]  # the result columns' types, in order
    # Result processors, made at the first result: some depend on the type
    # code the driver reports (cursor.description), as in SQLAlchemy.
    results: tuple[Processor | None, ...] | None = None


class Rows:
    """The outcome of one execution: the rows (converted) and the row count."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def first(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


class Prepared:
    """A Core statement, compiled on first use for each dialect it meets."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._plans: dict[tuple[str, str, str], _Plan] = {}

    def __repr__(self) -> str:
        return f"Prepared({self.statement})"

    def plan(self, dialect: Dialect) -> _Plan:
        key = (dialect.name, dialect.driver, dialect.paramstyle)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _compile(self.statement, dialect)
        return plan

    def execute(self, conn: Connection, params: Mapping[str, Any] | None = None) -> Rows:
        """Run on `conn`'s current transaction; driver errors come out as
        SQLAlchemy's (`IntegrityError`, `OperationalError`, ...), as from
        `Connection.execute`, so `translate_errors` maps them the same way."""
        if not conn.in_transaction():
            conn.begin()  # autobegin, as Connection.execute does
        dialect = conn.dialect
        plan = self.plan(dialect)
        values = dict(plan.literals)
        if params:
            values.update(params)
        for name, process in plan.binds.items():
            values[name] = process(values[name])
        bound: Sequence[Any] | Mapping[str, Any] = (
            values if plan.positional is None else [values[name] for name in plan.positional]
        )
        driver = conn.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor()
        try:
            try:
                cursor.execute(plan.sql, bound)
                raw = cursor.fetchall() if cursor.description is not None else []
            except dialect.loaded_dbapi.Error as exc:
                lost = dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor)
                if lost:
                    conn.invalidate(exc)  # as Connection.execute would: never reuse it
                raise DBAPIError.instance(
                    plan.sql,
                    bound,
                    exc,
                    dialect.loaded_dbapi.Error,
                    connection_invalidated=lost,
                    dialect=dialect,
                ) from exc
            rowcount = cursor.rowcount
            if raw and plan.results is None:
                if len(cursor.description) != len(plan.columns):
                    # e.g. an INSERT given an implicit RETURNING by the dialect
                    raise ValueError(
                        f"{plan.sql!r} returns columns it does not declare; "
                        "add .returning() or .inline()"
                    )
                plan.results = tuple(
                    kind.dialect_impl(dialect).result_processor(dialect, description[1])
                    for kind, description in zip(plan.columns, cursor.description, strict=True)
                )
        finally:
            cursor.close()
        testing.statement_executed(plan.sql, driver)
        if raw and plan.results is not None and any(plan.results):
            processors = plan.results
            rows = [
                tuple(
                    value if process is None or value is None else process(value)
                    for process, value in zip(processors, row, strict=True)
                )
                for row in raw
            ]
        else:
            rows = [tuple(row) for row in raw]
        return Rows(rows, rowcount)


def _compile(statement: ClauseElement, dialect: Dialect) -> _Plan:
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    if "POSTCOMPILE" in compiled.string:
        # Expanding (IN) and literal-execute parameters are rendered per call.
        raise ValueError("a statement with expanding or post-compile parameters cannot be prepared")
    if compiled.insert_prefetch or compiled.update_prefetch:
        # Connection.execute would compute these defaults; we would send NULL.
        raise ValueError("a statement relying on Python-side column defaults cannot be prepared")
    literals: dict[str, Any] = {}
    binds: dict[str, Processor] = {}
    for bind, name in compiled.bind_names.items():
        if not bind.required and bind.callable is None:
            literals[name] = bind.value
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            binds[name] = process
    positional = None if compiled.positiontup is None else tuple(compiled.positiontup)
    columns = tuple(column.type for column in getattr(statement, "exported_columns", ()) or ())
    return _Plan(compiled.string, positional, literals, binds, columns)
