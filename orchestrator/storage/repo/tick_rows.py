"""The row of one tick run: opened when it starts, closed with its counts.

The counts let an operator see what each tick did without reading logs.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, insert, select, update

from orchestrator.storage.repo.records import ticks


def open_tick(conn: Connection, *, host: str, pid: int, now: datetime) -> int:
    result = conn.execute(
        insert(ticks)
        .values(host=host, pid=pid, started_at=now, claimed=0, recovered=0, advanced=0)
        .returning(ticks.c.id)
    )
    return int(result.scalar_one())


def close_tick(
    conn: Connection,
    tick_id: int,
    *,
    now: datetime,
    claimed: int,
    recovered: int,
    advanced: int,
    exit_code: int,
) -> None:
    conn.execute(
        update(ticks)
        .where(ticks.c.id == tick_id)
        .values(
            finished_at=now,
            claimed=claimed,
            recovered=recovered,
            advanced=advanced,
            exit_code=exit_code,
        )
    )


# The exit status recorded for a tick that died without closing its row
# (SIGKILL, an OOM kill, power loss): 128 + SIGKILL, what a shell reports.
DIED_STATUS = 137
# How far back a tick looks for dead ticks' rows: the next tick on the dead
# one's host closes its row, so it is among the newest; the bound keeps the
# look a range of the primary key on a table that grows for ever.
RECENT_TICKS = 100


def open_tick_rows(conn: Connection, host: str) -> list[tuple[int, int]]:
    """(id, pid) of this host's recent tick rows that were never closed."""
    newest = conn.execute(select(func.max(ticks.c.id))).scalar()
    if newest is None:
        return []
    rows = conn.execute(
        select(ticks.c.id, ticks.c.pid).where(
            ticks.c.id > int(newest) - RECENT_TICKS,
            ticks.c.host == host,
            ticks.c.finished_at.is_(None),
        )
    )
    return [(int(row[0]), int(row[1])) for row in rows]


def close_dead_tick(conn: Connection, tick_id: int, *, now: datetime) -> bool:
    """Close a dead tick's row with `DIED_STATUS`, unless it was closed meanwhile."""
    result = conn.execute(
        update(ticks)
        .where(ticks.c.id == tick_id, ticks.c.finished_at.is_(None))
        .values(finished_at=now, exit_code=DIED_STATUS)
    )
    return result.rowcount == 1
