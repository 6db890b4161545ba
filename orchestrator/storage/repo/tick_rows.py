"""The row of one tick run: opened when it starts, closed with its counts.

The counts let an operator see what each tick did without reading logs.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert, update

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
