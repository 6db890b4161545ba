"""The landing's rows: the merge queue's lease per repository, and what a
landing recorded on its task."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from orchestrator.domain.pipeline import Event, Status
from orchestrator.storage import tables

land_locks = tables.land_locks


@dataclass(frozen=True)
class LandLock:
    repository: str
    owner: str | None
    task_id: int | None
    expires_at: datetime | None


def land_lock(conn: Connection, repository: str) -> LandLock:
    """The repository's lock row, locked for this transaction (`FOR UPDATE`
    on PostgreSQL; SQLite's write transaction holds its whole database),
    made free when there was none. Two ticks making it at once: the second
    one's insert fails in its savepoint and it reads the first one's."""
    query = select(land_locks).where(land_locks.c.repository == repository).with_for_update()
    row = conn.execute(query).first()
    if row is None:
        try:
            with conn.begin_nested():
                conn.execute(insert(land_locks).values(repository=repository))
        except IntegrityError:
            pass
        row = conn.execute(query).first()
        assert row is not None
    return LandLock(row.repository, row.owner, row.task_id, row.expires_at)


def take_land_lock(
    conn: Connection,
    repository: str,
    owner: str | None,
    task_id: int | None,
    expires: datetime | None,
) -> None:
    """Set the lock's holder (None: free), in the transaction `land_lock` locked it in."""
    conn.execute(
        update(land_locks)
        .where(land_locks.c.repository == repository)
        .values(owner=owner, task_id=task_id, expires_at=expires)
    )


def release_land_lock(conn: Connection, repository: str, owner: str) -> None:
    """Free the lock if `owner` still holds it (a lease taken over is not ours to free)."""
    conn.execute(
        update(land_locks)
        .where(land_locks.c.repository == repository, land_locks.c.owner == owner)
        .values(owner=None, task_id=None, expires_at=None)
    )


def record_landed(conn: Connection, task_id: int, commit: str | None, url: str | None) -> None:
    values: dict[str, str] = {}
    if commit is not None:
        values["landed_commit"] = commit
    if url is not None:
        values["pr_url"] = url
    if values:
        conn.execute(update(tables.tasks).where(tables.tasks.c.id == task_id).values(values))


def begin_move(conn: Connection, task_id: int, version: int, commit: str) -> bool:
    """The landing's commit point: note that the base is about to move to
    `commit`, only if the task is still landing at `version` (one
    compare-and-set statement; PostgreSQL rechecks it on the row it waited
    for). `landed_commit` on a `landing` task is that intent: a person's
    halt or cancel reads it and is refused."""
    done = conn.execute(
        update(tables.tasks)
        .where(
            tables.tasks.c.id == task_id,
            tables.tasks.c.version == version,
            tables.tasks.c.status == Status.LANDING.value,
        )
        .values(landed_commit=commit)
    )
    return done.rowcount == 1


def abandon_move(conn: Connection, task_id: int, commit: str | None = None) -> None:
    """The move did not happen (the base moved, or the landing ended
    otherwise): a landing task holds no intent any more. With `commit`,
    only that intent (a landing withdraws its own, never another's)."""
    where = [tables.tasks.c.id == task_id, tables.tasks.c.status == Status.LANDING.value]
    if commit is not None:
        where.append(tables.tasks.c.landed_commit == commit)
    conn.execute(update(tables.tasks).where(*where).values(landed_commit=None))


def sendbacks_since_resume(conn: Connection, task_id: int) -> int:
    """The landing's send-backs of the task since a person last resumed
    it (or since it was added): what `max_land_sendbacks` bounds. A resume
    gives a fresh allowance, as it gives a fresh run its attempts."""
    t = tables.transitions
    resumed = (
        select(func.coalesce(func.max(t.c.seq), 0))
        .where(t.c.task_id == task_id, t.c.event == Event.RESUME.value)
        .scalar_subquery()
    )
    counted = select(func.count()).where(
        t.c.task_id == task_id, t.c.event == Event.SEND_BACK.value, t.c.seq > resumed
    )
    return int(conn.execute(counted).scalar_one())
