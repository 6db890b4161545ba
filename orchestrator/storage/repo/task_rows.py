"""Reading, adding and listing tasks.

Looking a task up by id is on the tick's hot path, so it is a `Prepared`
statement built once at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, insert, select, update

from orchestrator.domain.pipeline import ADD, Status, state_string
from orchestrator.storage.prepared import Prepared
from orchestrator.storage.repo.records import (
    _TASK_COLUMNS,
    NewTask,
    TaskSnapshot,
    _task,
    attempts,
    tasks,
    transitions,
)

_TASK_BY_SLUG = select(*_TASK_COLUMNS).where(tasks.c.slug == bindparam("slug"))
_TASK_BY_SLUG_LOCKED = _TASK_BY_SLUG.with_for_update()
_TASK_BY_ID = Prepared(select(*_TASK_COLUMNS).where(tasks.c.id == bindparam("task_id")))


def get_task(conn: Connection, slug: str, *, for_update: bool = False) -> TaskSnapshot | None:
    locked = for_update and conn.dialect.name == "postgresql"
    row = conn.execute(_TASK_BY_SLUG_LOCKED if locked else _TASK_BY_SLUG, {"slug": slug}).first()
    return None if row is None else _task(row)


def get_task_by_id(conn: Connection, task_id: int) -> TaskSnapshot | None:
    row = _TASK_BY_ID.execute(conn, {"task_id": task_id}).first()
    return None if row is None else _task(row)


def lock_task(conn: Connection, task_id: int) -> None:
    """Hold the task's row until the transaction ends: the attempts of a
    round close one at a time, so exactly one of them sees the round full
    (on SQLite the write transaction already holds every row)."""
    conn.execute(select(tasks.c.id).where(tasks.c.id == task_id).with_for_update())


def existing_slugs(conn: Connection, slugs: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(slugs), 500):
        chunk = slugs[start : start + 500]
        found.update(conn.execute(select(tasks.c.slug).where(tasks.c.slug.in_(chunk))).scalars())
    return found


def insert_tasks(conn: Connection, new: Sequence[NewTask], now: datetime, actor: str) -> None:
    """Create tasks at their first stage, each with its creating transition (seq 1)."""
    for start in range(0, len(new), 500):
        chunk = new[start : start + 500]
        conn.execute(
            insert(tasks),
            [
                {
                    "slug": t.slug,
                    "title": t.title,
                    "body": t.body,
                    "pipeline": t.pipeline,
                    "priority": t.priority,
                    "stage": t.first_stage,
                    "status": Status.READY.value,
                    "run": 1,
                    "version": 1,
                    "next_hint": "",
                    "created_at": now,
                    "updated_at": now,
                    "max_cost_usd": t.max_cost_usd,
                    "branch": t.branch,
                    "base_branch": t.base_branch,
                }
                for t in chunk
            ],
        )
        ids = dict(
            conn.execute(
                select(tasks.c.slug, tasks.c.id).where(tasks.c.slug.in_([t.slug for t in chunk]))
            ).all()
        )
        conn.execute(
            insert(transitions),
            [
                {
                    "task_id": ids[t.slug],
                    "seq": 1,
                    "from_state": None,
                    "to_state": t.first_stage,
                    "event": ADD,
                    "actor": actor,
                    "reason": "task added",
                    "note": None,
                    "attempt_id": None,
                    "at": now,
                }
                for t in chunk
            ],
        )


def tasks_with_status(conn: Connection, status: Status) -> list[TaskSnapshot]:
    rows = conn.execute(
        select(*_TASK_COLUMNS).where(tasks.c.status == status.value).order_by(tasks.c.id)
    )
    return [_task(row) for row in rows]


def list_rows(
    conn: Connection,
    *,
    stage: str | None = None,
    status: Status | None = None,
    slug: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """One row per task for `list`: counts and last score at the task's stage,
    from correlated subqueries that each use the (task_id, stage, number) index."""
    count = (
        select(func.count())
        .where(and_(attempts.c.task_id == tasks.c.id, attempts.c.stage == tasks.c.stage))
        .scalar_subquery()
    )
    last_score = (
        select(attempts.c.score)
        .where(
            and_(
                attempts.c.task_id == tasks.c.id,
                attempts.c.stage == tasks.c.stage,
                attempts.c.score.is_not(None),
            )
        )
        .order_by(attempts.c.number.desc())
        .limit(1)
        .scalar_subquery()
    )
    cost = (
        select(func.sum(attempts.c.cost_usd))
        .where(attempts.c.task_id == tasks.c.id)
        .scalar_subquery()
    )
    query = select(
        tasks.c.slug,
        tasks.c.title,
        tasks.c.pipeline,
        tasks.c.priority,
        tasks.c.stage,
        tasks.c.status,
        tasks.c.halt_reason,
        count.label("attempt"),
        last_score.label("score"),
        cost.label("cost_usd"),
        tasks.c.max_cost_usd,
        tasks.c.updated_at,
    ).order_by(tasks.c.id)
    if stage is not None:
        query = query.where(tasks.c.stage == stage)
    if slug is not None:
        query = query.where(tasks.c.slug == slug)
    if status is not None:
        query = query.where(tasks.c.status == status.value)
    if limit is not None:
        query = query.limit(limit)
    out = []
    for row in conn.execute(query):
        data = dict(row._mapping)
        data["state"] = state_string(data["stage"], data["status"])
        out.append(data)
    return out


def record_base_commit(conn: Connection, task_id: int, commit: str) -> str:
    """The task's base commit: `commit` when none was recorded yet, else the
    one recorded first (a tick that died after recording it must make the
    worktree from that same commit, not from a base that moved since)."""
    conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id, tasks.c.base_commit.is_(None))
        .values(base_commit=commit)
    )
    recorded = conn.execute(select(tasks.c.base_commit).where(tasks.c.id == task_id)).scalar_one()
    return str(recorded)
