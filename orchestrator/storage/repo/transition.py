"""Every change of a task's state, and the history of those changes.

A change is a compare-and-set UPDATE on the task's `version`, checked by row
count, plus the transition row with `seq = version + 1`: of two writers of the
same step, the second fails rather than writing it twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, insert, select, update

from orchestrator.domain.pipeline import Event, State, Status, check_transition
from orchestrator.storage.prepared import Prepared
from orchestrator.storage.repo import outbox
from orchestrator.storage.repo.records import ConflictError, TaskSnapshot, tasks, transitions


def apply_transition(
    conn: Connection,
    task: TaskSnapshot,
    event: Event,
    to: State,
    *,
    now: datetime,
    actor: str,
    reason: str | None = None,
    note: str | None = None,
    attempt_id: int | None = None,
    halt_reason: str | None = None,
    next_hint: str | None = None,
    hint_source: str | None = None,
    new_run: bool = False,
    host: str | None = None,
) -> TaskSnapshot:
    """Compare-and-set the task from the state in `task` to `to`, and record it.

    Raises ConflictError when the task moved since `task` was read, and
    IllegalTransitionError for an edge the state machine does not have: the
    caller's transaction then rolls back and nothing is written.
    """
    check_transition(task.state, event, to)
    run = task.run + 1 if new_run or to.stage != task.stage else task.run
    after = TaskSnapshot(
        **{
            **task.__dict__,
            "stage": to.stage,
            "status": to.status,
            "halt_reason": halt_reason if to.status is Status.HALTED else None,
            "version": task.version + 1,
            "run": run,
            "next_hint": task.next_hint if next_hint is None else next_hint,
            "hint_source": task.hint_source if next_hint is None else hint_source,
            "host": task.host if host is None else host,
            "updated_at": now,
        }
    )
    result = _COMPARE_AND_SET.execute(
        conn,
        {
            "expected_id": task.id,
            "expected_version": task.version,
            **{f"new_{name}": getattr(after, name) for name in _CAS_COLUMNS},
        },
    )
    if result.rowcount != 1:
        raise ConflictError(f"task {task.slug!r} changed meanwhile; try again")
    _INSERT_TRANSITION.execute(
        conn,
        {
            "task_id": task.id,
            "seq": after.version,
            "from_state": str(task.state),
            "to_state": str(to),
            "event": str(event),
            "actor": actor,
            "reason": reason,
            "note": note,
            "attempt_id": attempt_id,
            "at": now,
        },
    )
    # The outbox: an event of interest commits or rolls back with its transition.
    outbox.on_transition(
        conn,
        task,
        event,
        to,
        now=now,
        actor=actor,
        reason=reason,
        note=note,
        attempt_id=attempt_id,
        halt_reason=after.halt_reason,
    )
    return after


_CAS_COLUMNS = (
    "stage",
    "status",
    "halt_reason",
    "version",
    "run",
    "next_hint",
    "hint_source",
    "host",
    "updated_at",
)
_COMPARE_AND_SET = Prepared(
    update(tasks)
    .where(tasks.c.id == bindparam("expected_id"), tasks.c.version == bindparam("expected_version"))
    .values({name: bindparam(f"new_{name}") for name in _CAS_COLUMNS})
)
_TRANSITION_COLUMNS = (
    "task_id",
    "seq",
    "from_state",
    "to_state",
    "event",
    "actor",
    "reason",
    "note",
    "attempt_id",
    "at",
)


# inline(): no implicit RETURNING of the new id (PostgreSQL), which nobody reads.
_INSERT_TRANSITION = Prepared(
    insert(transitions).values({name: bindparam(name) for name in _TRANSITION_COLUMNS}).inline()
)


def last_event(conn: Connection, task_id: int, event: str) -> tuple[int, str | None] | None:
    """(seq, from_state) of the task's newest transition of this event, or None."""
    row = conn.execute(
        select(transitions.c.seq, transitions.c.from_state)
        .where(and_(transitions.c.task_id == task_id, transitions.c.event == event))
        .order_by(transitions.c.seq.desc())
        .limit(1)
    ).first()
    return None if row is None else (int(row[0]), row[1])


def last_reason(conn: Connection, task_id: int, event: str) -> str | None:
    """The reason of the task's newest transition of this event (None: none,
    or no reason)."""
    return conn.execute(
        select(transitions.c.reason)
        .where(and_(transitions.c.task_id == task_id, transitions.c.event == event))
        .order_by(transitions.c.seq.desc())
        .limit(1)
    ).scalar()


def actor_of(conn: Connection, task_id: int, seq: int) -> str | None:
    """Who made the task's transition `seq` (None: there is no such one)."""
    return conn.execute(
        select(transitions.c.actor).where(
            and_(transitions.c.task_id == task_id, transitions.c.seq == seq)
        )
    ).scalar()


def transitions_of(conn: Connection, task_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(
            transitions.c.seq,
            transitions.c.from_state,
            transitions.c.to_state,
            transitions.c.event,
            transitions.c.actor,
            transitions.c.reason,
            transitions.c.note,
            transitions.c.attempt_id,
            transitions.c.at,
        )
        .where(transitions.c.task_id == task_id)
        .order_by(transitions.c.seq)
    )
    return [dict(row._mapping) for row in rows]
