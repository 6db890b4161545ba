"""What the attempts running on one host reserved: its open attempts,
counted per (pipeline, stage), which the gate prices with the config.

Per host, because each host judges its own memory: on PostgreSQL another
host's attempts hold that host's memory, not this one's. No lock is taken:
one host's claims come from one tick at a time (its tick lock), one claim
after another, and on SQLite the claim's `BEGIN IMMEDIATE` already
serialises them."""

from __future__ import annotations

from sqlalchemy import Connection, and_, bindparam, func, select

from orchestrator.storage import tables
from orchestrator.storage.prepared import Prepared

attempts = tables.attempts
tasks = tables.tasks

_OPEN_HERE = Prepared(
    select(tasks.c.pipeline, attempts.c.stage, func.count())
    .select_from(attempts.join(tasks, tasks.c.id == attempts.c.task_id))
    .where(and_(attempts.c.host == bindparam("host"), attempts.c.finished_at.is_(None)))
    .group_by(tasks.c.pipeline, attempts.c.stage)
)


def open_here(conn: Connection, host: str) -> list[tuple[str, str, int]]:
    """(pipeline, stage, open attempts) of the attempts open on `host`."""
    return [
        (str(pipeline), str(stage), int(count))
        for pipeline, stage, count in _OPEN_HERE.execute(conn, {"host": host}).rows
    ]
