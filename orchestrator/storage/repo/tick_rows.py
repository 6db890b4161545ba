"""The row of one tick run: opened when it starts, closed with its counts.

The counts let an operator see what each tick did without reading logs.
"""

from __future__ import annotations

from datetime import UTC, datetime

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


def note_idle_tick(conn: Connection, *, host: str, pid: int, now: datetime, code: int) -> None:
    """Record an idle tick at the cost of one small row per run of them.

    Cron runs an idle tick 1,440 times a day; a row each would grow the
    table for nothing, and no row at all leaves a silent log looking like a
    dead cron. So this host's newest row, when it is an idle one, is moved
    forward to this tick; after a tick that did work, a new idle row starts.
    Ticks of one host never overlap (the host's tick lock), so the two
    statements need no more than the write transaction they run in. An
    idle row starts and finishes at the same time: nothing ran in between."""
    newest = (
        select(ticks.c.id).where(ticks.c.host == host).order_by(ticks.c.id.desc()).limit(1)
    ).scalar_subquery()
    moved = conn.execute(
        update(ticks)
        .where(
            ticks.c.id == newest,
            ticks.c.claimed == 0,
            ticks.c.recovered == 0,
            ticks.c.advanced == 0,
            ticks.c.finished_at.is_not(None),
            # An idle row ended cleanly; a dead tick's row (137), closed by
            # recovery with nothing counted, is history to keep.
            ticks.c.exit_code == 0,
        )
        .values(pid=pid, started_at=now, finished_at=now, exit_code=code)
    )
    if moved.rowcount == 0:
        conn.execute(
            insert(ticks).values(
                host=host,
                pid=pid,
                started_at=now,
                finished_at=now,
                claimed=0,
                recovered=0,
                advanced=0,
                exit_code=code,
            )
        )


RECENT_TICKS = 100


def last_tick(conn: Connection, host: str | None = None) -> datetime | None:
    """When the newest finished tick (idle ones included) ended, for one host
    or any. A host's newest row is its last tick (its ticks never overlap,
    and the idle row is always its newest); across hosts, the newest of the
    last RECENT_TICKS rows: a read that stays the same size as the table grows."""
    recent = select(ticks.c.finished_at).where(ticks.c.finished_at.is_not(None))
    if host is not None:
        recent = recent.where(ticks.c.host == host)
    inner = recent.order_by(ticks.c.id.desc()).limit(1 if host else RECENT_TICKS).subquery()
    value = conn.execute(select(func.max(inner.c.finished_at))).scalar()
    if isinstance(value, str):  # an aggregate loses the column's type on SQLite
        value = datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


# The exit status recorded for a tick that died without closing its row
# (SIGKILL, an OOM kill, power loss): 128 + SIGKILL, what a shell reports.
DIED_STATUS = 137
# How far back a tick looks for dead ticks' rows: the next tick on the dead
# one's host closes its row, so it is among the newest; the bound keeps the
# look a range of the primary key on a table that grows for ever.


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
