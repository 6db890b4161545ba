"""The pool rows: the lock a claim takes to count a pool's running attempts,
the pool's pause, and what its attempts spent.

A shared count needs a shared lock. `SKIP LOCKED` on the task rows lets two
hosts claim two different tasks at once, each counting the other's attempt
as not yet there; so the claim locks the pool's row (`FOR UPDATE`, on
PostgreSQL) before it counts, and the count and the new attempt commit
together. On SQLite the claim's `BEGIN IMMEDIATE` is the lock already.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, bindparam, func, select, update

from orchestrator.storage import tables
from orchestrator.storage.prepared import Prepared

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

pools = tables.pools
attempts = tables.attempts


@dataclass(frozen=True)
class PoolRow:
    name: str
    paused_until: datetime | None = None
    paused_at: datetime | None = None
    pause_reason: str | None = None
    paused_task_id: int | None = None
    pause_streak: int = 0


_COLUMNS = (
    pools.c.name,
    pools.c.paused_until,
    pools.c.paused_at,
    pools.c.pause_reason,
    pools.c.paused_task_id,
    pools.c.pause_streak,
)


@functools.cache
def _ensure(dialect: str) -> Prepared:
    """The insert-if-missing of a pool's row in `dialect`'s own form, built
    on first use: importing the PostgreSQL dialect costs a SQLite tick a
    tenth of its start."""
    return Prepared(
        _insert(dialect)
        .values(name=bindparam("name"), pause_streak=0)
        .on_conflict_do_nothing(index_elements=["name"])
    )


def _insert(dialect: str) -> postgresql.Insert | sqlite.Insert:
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql as pg

        return pg.insert(pools)
    from sqlalchemy.dialects import sqlite as lite

    return lite.insert(pools)


_LOCK = Prepared(select(*_COLUMNS).where(pools.c.name == bindparam("name")).with_for_update())
_RUNNING = Prepared(
    select(func.count())
    .select_from(attempts)
    .where(and_(attempts.c.pool == bindparam("name"), attempts.c.finished_at.is_(None)))
)
_SPENT = Prepared(
    select(func.coalesce(func.sum(attempts.c.cost_usd), 0.0)).where(
        and_(attempts.c.pool == bindparam("name"), attempts.c.finished_at >= bindparam("since"))
    )
)


def _row(values: tuple[object, ...]) -> PoolRow:
    name, until, at, reason, task_id, streak = values
    return PoolRow(
        str(name),
        until,  # type: ignore[arg-type]
        at,  # type: ignore[arg-type]
        None if reason is None else str(reason),
        None if task_id is None else int(task_id),  # type: ignore[call-overload]
        int(streak or 0),  # type: ignore[call-overload]
    )


def lock_pool(conn: Connection, name: str) -> PoolRow:
    """The pool's row, made if missing, locked until the transaction ends
    (PostgreSQL; SQLite's writer already holds the database)."""
    _ensure(conn.dialect.name).execute(conn, {"name": name})
    rows = _LOCK.execute(conn, {"name": name}).rows
    return _row(tuple(rows[0]))


def day_start(now: datetime) -> datetime:
    """UTC midnight of `now` (an aware time): the daily spend's window."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def running(conn: Connection, name: str) -> int:
    """The pool's open attempts, on every host."""
    return int(_RUNNING.execute(conn, {"name": name}).rows[0][0])


def spent_since(conn: Connection, name: str, since: datetime) -> float:
    """What the pool's attempts that finished since `since` recorded they cost."""
    return float(_SPENT.execute(conn, {"name": name, "since": since}).rows[0][0])


def pause(
    conn: Connection,
    name: str,
    *,
    until: datetime,
    now: datetime,
    reason: str,
    task_id: int | None,
    streak: int,
) -> None:
    conn.execute(
        update(pools)
        .where(pools.c.name == name)
        .values(
            paused_until=until,
            paused_at=now,
            pause_reason=reason,
            paused_task_id=task_id,
            pause_streak=streak,
        )
    )


def end_pause(conn: Connection, name: str, *, reset_streak: bool) -> None:
    """Clear the pause; the streak stays when the pause merely ran out, so a
    limit met again at once waits longer."""
    values: dict[str, object] = {"paused_until": None, "paused_at": None, "pause_reason": None}
    if reset_streak:
        values["pause_streak"] = 0
    conn.execute(update(pools).where(pools.c.name == name).values(**values))


def reset_streak(conn: Connection, name: str) -> None:
    conn.execute(
        update(pools).where(pools.c.name == name, pools.c.pause_streak != 0).values(pause_streak=0)
    )


def get_pool(conn: Connection, name: str) -> PoolRow | None:
    row = conn.execute(select(*_COLUMNS).where(pools.c.name == name)).first()
    return None if row is None else _row(tuple(row))


def pool_rows(conn: Connection) -> dict[str, PoolRow]:
    return {str(row[0]): _row(tuple(row)) for row in conn.execute(select(*_COLUMNS))}


def running_by_pool(conn: Connection) -> dict[str, int]:
    query = (
        select(attempts.c.pool, func.count())
        .where(attempts.c.pool.is_not(None), attempts.c.finished_at.is_(None))
        .group_by(attempts.c.pool)
    )
    return {str(name): int(count) for name, count in conn.execute(query)}
