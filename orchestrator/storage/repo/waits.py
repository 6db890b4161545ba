"""Tasks that wait on tasks, and subtasks: the rows `add --after` and
`add_subtask` write, and the reads `explain`, `show` and the board make."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import Connection, insert, select, update

from orchestrator.domain.pipeline import Status, state_string
from orchestrator.domain.waits import Wait
from orchestrator.storage import tables

tasks = tables.tasks
task_dependencies = tables.task_dependencies


def link_tasks(
    conn: Connection,
    links: Sequence[tuple[str, str | None, Sequence[str]]],
) -> None:
    """Record, for each `(slug, parent, after)` of tasks just inserted, its
    parent and the tasks it waits on, in the caller's transaction."""
    named = {slug for slug, _, _ in links}
    for _, parent, after in links:
        named.update(after)
        if parent is not None:
            named.add(parent)
    if not any(parent or after for _, parent, after in links):
        return
    ids: dict[str, int] = {}
    chunk_size = 500
    wanted = sorted(named)
    for start in range(0, len(wanted), chunk_size):
        chunk = wanted[start : start + chunk_size]
        found = conn.execute(select(tasks.c.slug, tasks.c.id).where(tasks.c.slug.in_(chunk)))
        ids.update((slug, task_id) for slug, task_id in found)
    rows = [
        {"task_id": ids[slug], "after_id": ids[other]}
        for slug, _, after in links
        for other in after
    ]
    for start in range(0, len(rows), chunk_size):
        conn.execute(insert(task_dependencies), rows[start : start + chunk_size])
    for slug, parent, _ in links:
        if parent is not None:
            conn.execute(update(tasks).where(tasks.c.id == ids[slug]).values(parent_id=ids[parent]))


def waits_of(conn: Connection, task_ids: Collection[int]) -> dict[int, list[Wait]]:
    """The tasks each of `task_ids` waits on, in the order they were added."""
    other = tasks.alias("other")
    found: dict[int, list[Wait]] = {}
    wanted = sorted(task_ids)
    for start in range(0, len(wanted), 500):
        rows = conn.execute(
            select(
                task_dependencies.c.task_id,
                other.c.slug,
                other.c.stage,
                other.c.status,
                other.c.halt_reason,
            )
            .join(other, other.c.id == task_dependencies.c.after_id)
            .where(task_dependencies.c.task_id.in_(wanted[start : start + 500]))
            .order_by(task_dependencies.c.task_id, other.c.id)
        )
        for task_id, slug, stage, status, halt_reason in rows:
            text = state_string(stage, Status(status))
            found.setdefault(task_id, []).append(Wait(slug, text, status, halt_reason))
    return found


def family(conn: Connection, task_id: int) -> tuple[str | None, list[str]]:
    """The slug of the task's parent (or None), and its subtasks' slugs."""
    parent_id = conn.execute(select(tasks.c.parent_id).where(tasks.c.id == task_id)).scalar()
    parent = None
    if parent_id is not None:
        parent = conn.execute(select(tasks.c.slug).where(tasks.c.id == parent_id)).scalar()
    children = conn.execute(
        select(tasks.c.slug).where(tasks.c.parent_id == task_id).order_by(tasks.c.id)
    ).scalars()
    return parent, list(children)
