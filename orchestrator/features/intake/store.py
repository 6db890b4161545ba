"""The intake's rows (on a `MetaData` of its own, made when a config first
names a tracker: a database without one holds none of it), its queries,
and its writes of the engine's: a task added (`repo.insert_tasks`), its
title and body updated before it starts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError

from orchestrator.domain.pipeline import Status
from orchestrator.storage import tables
from orchestrator.storage.tables import UTCDateTime

metadata = MetaData()

intake_issues = Table(
    "intake_issues",
    metadata,
    Column("tracker", String(255), primary_key=True),  # github:OWNER/NAME
    Column("number", Integer, primary_key=True),
    Column("task_id", Integer, nullable=False),
    Column("said_started", Boolean, nullable=False, default=False),
    Column("said_pr", Boolean, nullable=False, default=False),
    Column("said_halted", Boolean, nullable=False, default=False),
)

intake_polls = Table(
    "intake_polls",
    metadata,
    Column("tracker", String(255), primary_key=True),
    Column("etag", String(255)),
    Column("polled_at", UTCDateTime),
)


@dataclass(frozen=True)
class Known:
    number: int
    task_id: int
    said_started: bool
    said_pr: bool
    said_halted: bool


def ensure(engine: Engine) -> None:
    try:
        metadata.create_all(engine, checkfirst=True)
    except DBAPIError:  # made by another host meanwhile
        metadata.create_all(engine, checkfirst=True)


def last_poll(conn: Connection, tracker: str) -> tuple[str | None, datetime | None]:
    row = conn.execute(select(intake_polls).where(intake_polls.c.tracker == tracker)).first()
    return (None, None) if row is None else (row.etag, row.polled_at)


def note_poll(conn: Connection, tracker: str, etag: str | None, now: datetime) -> None:
    done = conn.execute(
        update(intake_polls)
        .where(intake_polls.c.tracker == tracker)
        .values(etag=etag, polled_at=now)
    )
    if done.rowcount == 0:
        conn.execute(insert(intake_polls).values(tracker=tracker, etag=etag, polled_at=now))


def known(conn: Connection, tracker: str) -> dict[int, Known]:
    rows = conn.execute(select(intake_issues).where(intake_issues.c.tracker == tracker))
    return {
        r.number: Known(r.number, r.task_id, r.said_started, r.said_pr, r.said_halted) for r in rows
    }


def remember(conn: Connection, tracker: str, number: int, task_id: int) -> None:
    conn.execute(insert(intake_issues).values(tracker=tracker, number=number, task_id=task_id))


def mark_said(conn: Connection, tracker: str, number: int, what: str) -> None:
    conn.execute(
        update(intake_issues)
        .where(intake_issues.c.tracker == tracker, intake_issues.c.number == number)
        .values({what: True})
    )


def started(conn: Connection, task_id: int) -> bool:
    """Whether any attempt of the task was opened."""
    count = select(func.count()).where(tables.attempts.c.task_id == task_id)
    return int(conn.execute(count).scalar_one()) > 0


def retext(conn: Connection, task_id: int, title: str, body: str) -> bool:
    """A task not started yet takes the issue's edited title and body."""
    t = tables.tasks
    done = conn.execute(
        update(t)
        .where(t.c.id == task_id, t.c.status == Status.READY.value)
        .where((t.c.title != title) | (t.c.body != body))
        .values(title=title, body=body)
    )
    return done.rowcount == 1
