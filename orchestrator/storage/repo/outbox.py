"""Writing events: always on the caller's transaction, so an event exists
exactly when its transition committed (an outbox). Delivery is the
courier's job, after commit.

The connection's `info` carries a flag that an event was written, which the
tick reads once its transaction commits to wake the courier; transactions
that wrote no event cost nothing more.

The engine carries the hooks configured (`with_hooks`), so an event is
handed out to them as it is written, in the same transaction, whoever writes
it (a tick, `halt`, the web UI): however late the next tick comes, those
hooks get it. An event written with no hook configured waits for the first
tick with a hook (which takes only recent ones: `deliveries.dispatch`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, insert, select

from orchestrator.domain.event_kinds import BY_STATUS, CRASHED
from orchestrator.domain.pipeline import Event, State
from orchestrator.storage import tables
from orchestrator.storage.repo import deliveries
from orchestrator.storage.repo.deliveries import Hook

WROTE = "orchestrator_wrote_event"
HOOKS = "orchestrator_hooks"  # an execution option: the hooks configured

_SCORES = (
    select(tables.attempts.c.number, tables.attempts.c.score)
    .where(
        tables.attempts.c.task_id == bindparam("task_id"),
        tables.attempts.c.stage == bindparam("stage"),
        tables.attempts.c.run == bindparam("run"),
    )
    .order_by(tables.attempts.c.number)
)


def with_hooks(engine: Engine, hooks: tuple[Hook, ...]) -> Engine:
    """`engine` (sharing its pool) whose transactions hand each event they
    write to `hooks` at once."""
    return engine.execution_options(**{HOOKS: hooks})


def on_transition(
    conn: Connection,
    task: Any,
    event: Event,
    to: State,
    *,
    now: datetime,
    actor: str,
    reason: str | None,
    note: str | None,
    attempt_id: int | None,
    halt_reason: str | None,
) -> None:
    """Record the event a transition of `task` (as it was before) to `to` makes, if any."""
    kind = BY_STATUS.get(to.status)
    if kind is None or event is Event.MIGRATE:  # its status is not news: the feature says what is
        return
    record(
        conn,
        kind,
        task,
        now=now,
        attempt_id=attempt_id,
        facts={
            "state": str(to),
            "from_state": str(task.state),
            "transition": str(event),
            "actor": actor,
            "reason": reason,
            "note": note,
            "halt_reason": halt_reason,
        },
    )


def on_crash(
    conn: Connection, task: Any, attempt: Any, *, now: datetime, why: str, outcome: str
) -> None:
    """Record that recovery closed `attempt` of `task` as crashed (its tick
    died); a database_error close or a vanished task is no such news."""
    if task is None or outcome != CRASHED:
        return
    record(
        conn,
        CRASHED,
        task,
        now=now,
        attempt_id=attempt.id,
        stage=attempt.stage,
        run=attempt.run,
        facts={
            "state": str(task.state),
            "reason": why,
            "outcome": outcome,
            "attempt": attempt.number,
        },
    )


def record(
    conn: Connection,
    kind: str,
    task: Any,
    *,
    now: datetime,
    attempt_id: int | None,
    facts: dict[str, Any],
    stage: str | None = None,
    run: int | None = None,
) -> None:
    """Insert one event with what a hook needs to act without a query:
    the task, its stage, the new state, the reason and the stage's scores."""
    stage = task.stage if stage is None else stage
    run = task.run if run is None else run
    scores = [
        {"attempt": int(number), "score": score}
        for number, score in conn.execute(_SCORES, {"task_id": task.id, "stage": stage, "run": run})
    ]
    payload = {
        "kind": kind,
        "task": task.slug,
        "title": task.title,
        "pipeline": task.pipeline,
        "stage": stage,
        **facts,
        "attempt_id": attempt_id,
        "scores": scores,
        "at": now.isoformat(),
    }
    hooks: tuple[Hook, ...] = conn.get_execution_options().get(HOOKS, ())
    written = conn.execute(
        insert(tables.events).values(
            kind=kind,
            task_id=task.id,
            attempt_id=attempt_id,
            payload=json.dumps(payload, sort_keys=True, ensure_ascii=False),
            at=now,
            dispatched_at=now if hooks else None,
        )
    )
    key = written.inserted_primary_key
    if hooks and key is not None:
        deliveries.hand_out(conn, int(key[0]), kind, hooks, now)
    conn.info[WROTE] = True


def take_written(conn: Connection) -> bool:
    """Whether an event was written on `conn` since the last call (and forget it)."""
    return bool(conn.info.pop(WROTE, False))
