"""The counts behind the Prometheus metrics (`views/metrics.py`), each one
aggregate query. Aggregates lose the column's type on SQLite: a timestamp
comes back as text or naive UTC, and the caller makes it aware."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select

from orchestrator.domain.pipeline import Status
from orchestrator.storage import tables

_t, _a, _k, _d = tables.tasks, tables.attempts, tables.ticks, tables.deliveries


def task_counts(conn: Connection) -> list[tuple[str, str, int]]:
    """(stage, status, how many tasks)."""
    rows = conn.execute(
        select(_t.c.stage, _t.c.status, func.count()).group_by(_t.c.stage, _t.c.status)
    )
    return [(stage, status, n) for stage, status, n in rows]


def attempt_counts(conn: Connection) -> list[tuple[str | None, int]]:
    """(outcome, how many attempts); None: still open."""
    rows = conn.execute(select(_a.c.outcome, func.count()).group_by(_a.c.outcome))
    return [(outcome, n) for outcome, n in rows]


def last_working_tick(conn: Connection) -> tuple[datetime, datetime] | None:
    """(started, finished) of the last finished tick that did work."""
    worked = (_k.c.claimed > 0) | (_k.c.recovered > 0) | (_k.c.advanced > 0)
    row = conn.execute(
        select(_k.c.started_at, _k.c.finished_at)
        .where(_k.c.finished_at.is_not(None), worked)
        .order_by(_k.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else (row[0], row[1])


def last_success(conn: Connection) -> datetime | str | None:
    """When the last tick with exit 0 finished."""
    value: datetime | str | None = conn.execute(
        select(func.max(_k.c.finished_at)).where(_k.c.exit_code == 0)
    ).scalar()
    return value


def recovered_total(conn: Connection) -> int | None:
    """Attempts closed by recovery, over every tick."""
    value: int | None = conn.execute(select(func.coalesce(func.sum(_k.c.recovered), 0))).scalar()
    return value


def pending_approvals(conn: Connection) -> tuple[int, datetime | str | None]:
    """(how many tasks wait at a gate, when the oldest of them got there)."""
    count, oldest = conn.execute(
        select(func.count(), func.min(_t.c.updated_at)).where(
            _t.c.status == Status.AWAITING_APPROVAL.value
        )
    ).one()
    return count, oldest


def undelivered_by_hook(conn: Connection) -> list[tuple[str, int, int]]:
    """(hook, undelivered events, of them how many whose last try failed)."""
    rows = conn.execute(
        select(_d.c.hook, func.count(), func.count(_d.c.last_error))
        .where(_d.c.delivered_at.is_(None))
        .group_by(_d.c.hook)
    )
    return [(hook, waiting, failed) for hook, waiting, failed in rows]
