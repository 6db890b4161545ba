"""What the decisions and the context file read back: runs, attempts and context rows.

The decision of a stage depends on the history of its current run, read in
one statement rather than rebuilt from every attempt.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, bindparam, select

from orchestrator.domain.decide import Outcome, RunHistory
from orchestrator.storage.prepared import Prepared
from orchestrator.storage.repo.records import (
    _ATTEMPT_COLUMNS,
    AttemptSnapshot,
    TaskSnapshot,
    _attempt,
    attempts,
)

_RUN_HISTORY = Prepared(
    select(
        attempts.c.id,
        attempts.c.outcome,
        attempts.c.score,
        attempts.c.workspace_changed,
        attempts.c.started_at,
    )
    .where(
        attempts.c.task_id == bindparam("task_id"),
        attempts.c.stage == bindparam("stage"),
        attempts.c.run == bindparam("run"),
        attempts.c.finished_at.is_not(None),
    )
    .order_by(attempts.c.number)
)


def run_history(
    conn: Connection, task: TaskSnapshot, *, excluding: int | None = None
) -> RunHistory:
    """The facts `decide` needs about the task's current run at its stage."""
    rows = _RUN_HISTORY.execute(
        conn, {"task_id": task.id, "stage": task.stage, "run": task.run}
    ).rows
    kept = [row for row in rows if row[0] != excluding]
    return RunHistory.of(
        [(Outcome(row[1]), row[2]) for row in kept],
        hint=task.next_hint,
        changes=[row[3] for row in kept],
        started=[row[4] for row in kept],
    )


def awaits_verdict(conn: Connection, task: TaskSnapshot) -> bool:
    """Whether the task's run at its stage waits on a pending verdict (its
    newest counted attempt was pending): its next attempt is a recheck."""
    return run_history(conn, task).awaiting_verdict


def context_rows(conn: Connection, task_id: int) -> list[dict[str, Any]]:
    """A task's finished attempts, oldest first, with what an attempt's
    context tells of them (not in `AttemptSnapshot`, which must read a
    database still at an older revision, as `db upgrade` does)."""
    columns = [
        attempts.c[name]
        for name in (
            "id", "stage", "run", "number", "outcome", "pass", "score", "reasons",
            "next_hint", "error", "workspace_changed", "finished_at",
        )
    ]  # fmt: skip
    rows = conn.execute(
        select(*columns)
        .where(attempts.c.task_id == task_id, attempts.c.finished_at.is_not(None))
        .order_by(attempts.c.id)
    )
    result = []
    for row in rows:
        data = dict(row._mapping)
        data["reasons"] = list(json.loads(data["reasons"])) if data["reasons"] else []
        result.append(data)
    return result


def attempts_of(conn: Connection, task_id: int, stage: str | None = None) -> list[AttemptSnapshot]:
    query = select(*_ATTEMPT_COLUMNS).where(attempts.c.task_id == task_id)
    if stage is not None:
        query = query.where(attempts.c.stage == stage)
    return [_attempt(row) for row in conn.execute(query.order_by(attempts.c.id))]
