"""Which task a tick claims next, and the backoff that keeps a task from being claimed.

The claim is one statement per shape, cached, so a tick that claims many
tasks compiles it once.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, exists, func, or_, select, update

from orchestrator.domain.pipeline import Status
from orchestrator.storage.prepared import Prepared
from orchestrator.storage.repo.records import _TASK_COLUMNS, TaskSnapshot, _task, attempts, tasks
from orchestrator.storage.tables import task_dependencies


def find_claimable(
    conn: Connection,
    *,
    host: str,
    any_host: bool,
    exclude: Collection[int] = (),
    slug: str | None = None,
    lock: bool = True,
    skip_stages: Sequence[tuple[str, str]] = (),
) -> TaskSnapshot | None:
    """The next ready task (priority, then age) with no unfinished attempt,
    skipping the ids in `exclude`.

    The query reads one row more than `exclude` holds and skips those ids
    here: the same answer as `NOT IN (...)`, from one statement that needs no
    recompiling as the set changes. On PostgreSQL the rows are locked with
    SKIP LOCKED, so ticks on other hosts pass over them instead of waiting;
    on SQLite the caller's BEGIN IMMEDIATE already excludes every other writer.
    A task waiting out a backoff (`backoff_until` still ahead of the
    database's clock) is passed over, and so are one that waits on a task
    not yet complete (`add --after`) and a task at any (pipeline, stage) of
    `skip_stages` (a pool that refused the claim: `features.pools`).
    """
    query = _claim_query(
        any_host=any_host, slug=slug is not None, lock=lock, skipped=len(skip_stages)
    )
    params: dict[str, Any] = {"limit": len(exclude) + 1}
    if not any_host:
        params["host"] = host
    if slug is not None:
        params["slug"] = slug
    for index, (pipeline, stage) in enumerate(skip_stages):
        params[f"skip_pipeline_{index}"] = pipeline
        params[f"skip_stage_{index}"] = stage
    for row in query.execute(conn, params).rows:
        if row[0] not in exclude:
            return _task(row)
    return None


@functools.cache
def _claim_query(*, any_host: bool, slug: bool, lock: bool, skipped: int = 0) -> Prepared:
    unfinished = exists().where(
        and_(attempts.c.task_id == tasks.c.id, attempts.c.finished_at.is_(None))
    )
    # The database's clock, in the statement: no extra round trip per claim.
    # SQLite's CURRENT_TIMESTAMP is UTC text to the second, compared with the
    # stored text: at worst the wait ends up to a second late.
    waited = or_(tasks.c.backoff_until.is_(None), tasks.c.backoff_until <= func.current_timestamp())
    query = select(*_TASK_COLUMNS).where(
        tasks.c.status == Status.READY.value, ~unfinished, waited, ~_waits_on_unfinished()
    )
    if not any_host:
        query = query.where(or_(tasks.c.host.is_(None), tasks.c.host == bindparam("host")))
    if slug:
        query = query.where(tasks.c.slug == bindparam("slug"))
    for index in range(skipped):
        query = query.where(
            ~and_(
                tasks.c.pipeline == bindparam(f"skip_pipeline_{index}"),
                tasks.c.stage == bindparam(f"skip_stage_{index}"),
            )
        )
    query = query.order_by(tasks.c.priority.desc(), tasks.c.id).limit(bindparam("limit"))
    if lock:  # `tick --dry-run` reads the same rows without locking them
        # FOR UPDATE ... SKIP LOCKED is PostgreSQL's; SQLite's compiler leaves it out.
        query = query.with_for_update(skip_locked=True, of=tasks)
    return Prepared(query)


def _waits_on_unfinished() -> Any:
    """`add --after`: some task this one waits on is not complete yet."""
    other = tasks.alias("after_task")
    return exists().where(
        task_dependencies.c.task_id == tasks.c.id,
        other.c.id == task_dependencies.c.after_id,
        other.c.status != Status.COMPLETE.value,
    )


def set_backoff(conn: Connection, task_id: int, until: datetime | None) -> None:
    """Keep the task from being claimed before `until`, by any tick on any host."""
    conn.execute(update(tasks).where(tasks.c.id == task_id).values(backoff_until=until))


def backoff_until(conn: Connection, task_id: int) -> datetime | None:
    return conn.execute(select(tasks.c.backoff_until).where(tasks.c.id == task_id)).scalar()
