"""The human commands that move a task: approve, reject, halt, resume, cancel
(adding one is `adding`).

Each is one short write transaction: read the task, ask the state machine
for the next state, compare-and-set it with its transition row. On SQLite
the transaction begins IMMEDIATE, so concurrent commands queue behind the
busy timeout instead of failing; on PostgreSQL the task row is locked.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from orchestrator.config import Settings
from orchestrator.domain.actor import actor_problem
from orchestrator.domain.decide import HaltReason
from orchestrator.domain.pipeline import (
    TRANSITIONS,
    Event,
    State,
    Status,
    next_state,
    parse_state,
    reject_state,
    resume_state,
)
from orchestrator.domain.text import clean_text
from orchestrator.errors import IllegalTransitionError, RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, write_tx
from orchestrator.storage.repo.wake import notify_wake
from orchestrator.testing import fault_point
from orchestrator.views.suggest import unknown_task
from orchestrator.workspace.approval import approval_reason

MAX_NOTE_BYTES = 8192


@dataclass(frozen=True)
class ActionResult:
    slug: str
    changed: bool
    state: str
    message: str


def actor_name(by: str | None = None) -> str:
    """Who acts, as transitions record it: `by`, else the login name.
    A `by` that cannot be recorded as it is is refused (exit 1), not
    cleaned: the history would name someone else."""
    if by:
        problem = actor_problem(by)
        if problem is not None:
            shown = ascii(by[:40]) + ("..." if len(by) > 40 else "")
            raise RefusedError(f"--by {shown}: the name {problem}")
        return by
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


def _load(conn: Connection, slug: str) -> repo.TaskSnapshot:
    task = repo.get_task(conn, slug, for_update=True)
    if task is None:
        raise unknown_task(conn, slug)
    return task


def _transition(
    engine: Engine,
    slug: str,
    event: Event,
    actor: str,
    *,
    note: str | None = None,
    reason: str,
    halt_reason: str | None = None,
    new_run: bool = False,
    budget: float | None = None,
) -> ActionResult:
    with write_tx(engine) as conn:
        task = _load(conn, slug)
        target = _target(task, event)
        if event is Event.RESUME:
            target = resume_state(task.state, task.halt_reason)
        if budget is not None:
            from orchestrator.agents.budget import raise_budget

            raise_budget(conn, task, budget)
        after = repo.apply_transition(
            conn,
            task,
            event,
            target,
            now=db_now(conn),
            actor=actor,
            reason=reason,
            note=note,
            halt_reason=halt_reason,
            new_run=new_run,
        )
        if event is Event.RESUME:
            notify_wake(conn)
    return ActionResult(slug, True, str(after.state), f"{slug}: {task.state} -> {after.state}")


def _target(task: repo.TaskSnapshot, event: Event) -> State:
    # Human events never move a task to another stage, so the pipeline's
    # stage list is not needed (ADVANCE is the tick's).
    _refuse_landed(task, event)
    try:
        return next_state(task.state, event, ())
    except IllegalTransitionError:
        # Say what the command needs, not only what is: a newcomer reading
        # "it is hang" cannot tell that approve waits for a gate.
        needed = [
            "ready" if status is Status.READY else f"`:{status.value}`"
            for status in Status
            if (status, event) in TRANSITIONS
        ]
        needs = ", ".join(needed[:-1]) + " or " + needed[-1] if len(needed) > 1 else needed[0]
        why = task.status.value + (f", {task.halt_reason}" if task.halt_reason else "")
        raise IllegalTransitionError(
            f"cannot {event.value} {task.slug!r}: it is at `{task.state}` ({why}); "
            f"{event.value} needs {needs}"
        ) from None


def _own_stage(conn: Connection, task: repo.TaskSnapshot, verb: str) -> tuple[str, ...] | None:
    """The stages of the task's own pipeline (a feature's answer, e.g. its
    version's; None: the config's), refusing a gate whose stage they lack."""
    from orchestrator import compose

    own = compose.stages_of(conn, task)
    if own is not None and task.stage not in own:
        raise RefusedError(
            f"cannot {verb} {task.slug!r}: its pipeline version has no stage {task.stage!r}"
        )
    return own


def _refuse_landed(task: repo.TaskSnapshot, event: Event) -> None:
    """A landing past its commit point (the intent to move the base is on
    the row this transaction locked: `features/landing/model.CommitPoint`) or done
    wins over a person's command: the base holds the change, or will
    without anyone's further say, and a halt or cancel must not pretend
    otherwise (exit 1)."""
    if task.landed_commit is None or task.status not in (Status.LANDING, Status.COMPLETE):
        return
    at = f"{task.base_branch or 'the base branch'} at {task.landed_commit[:12]}"
    if task.status is Status.LANDING:
        raise IllegalTransitionError(
            f"cannot {event.value} {task.slug!r}: already landing ({at}); "
            "the next tick records it as landed"
        )
    raise IllegalTransitionError(f"cannot {event.value} {task.slug!r}: already landed ({at})")


def approve(
    engine: Engine,
    slug: str,
    actor: str,
    note: str | None = None,
    *,
    commit: str | None = None,
    seen_version: int | None = None,
) -> ActionResult:
    """Open a gate. Approving twice is not an error: the second writes nothing.
    `commit` (a branch task's) is what moves on, fixed by the look at
    `seen_version` (`api/approving.py`); a gate that moved since is refused."""
    fault_point("before_approve_tx")
    result = _approve(engine, slug, actor, note, commit, seen_version)
    fault_point("after_approve_commit")
    return result


def _approve(
    engine: Engine,
    slug: str,
    actor: str,
    note: str | None,
    commit: str | None,
    seen_version: int | None,
) -> ActionResult:
    with write_tx(engine) as conn:
        task = _load(conn, slug)
        if task.status is Status.AWAITING_APPROVAL:
            _own_stage(conn, task, "approve")
            if seen_version is not None and task.version != seen_version:
                raise RefusedError(f"{slug}: changed since you looked; review it again")
            after = repo.apply_transition(
                conn,
                task,
                Event.APPROVE,
                _target(task, Event.APPROVE),
                now=db_now(conn),
                actor=actor,
                reason=approval_reason(commit),
                note=_note(note),
            )
            notify_wake(conn)
            fault_point("inside_approve_tx")
            return ActionResult(slug, True, str(after.state), f"{slug}: approved {task.stage}")
        # "Already approved" only for this stage's gate: an approval of an
        # earlier gate must not pass for one of a gate not yet waiting.
        approved = repo.last_event(conn, task.id, Event.APPROVE.value)
        awaiting = repo.last_event(conn, task.id, Event.AWAIT_APPROVAL.value)
        if (
            approved is not None
            and (awaiting is None or approved[0] > awaiting[0])
            and approved[1] is not None
            and parse_state(approved[1]).stage == task.stage
        ):
            by = repo.actor_of(conn, task.id, approved[0])
            return ActionResult(
                slug,
                False,
                str(task.state),
                f"{slug}: already approved by {by} (now {task.state})",
            )
        _target(task, Event.APPROVE)  # raises with the reason
        raise AssertionError("unreachable")


def reject(
    engine: Engine,
    settings: Settings,
    slug: str,
    actor: str,
    note: str,
    to: str | None = None,
) -> ActionResult:
    """Send a gate back: its stage, or `to`, an earlier stage of the task's
    pipeline, runs again (a new run) with the note as the hint."""
    text = _note(note)
    if not text or not text.strip():
        raise RefusedError("reject needs a --note saying what to change")
    with write_tx(engine) as conn:
        task = _load(conn, slug)
        _target(task, Event.REJECT)  # not at a gate: say what reject needs first
        own = _own_stage(conn, task, "reject")
        pipeline = settings.pipeline(task.pipeline)
        names = own if own is not None else pipeline.stage_names if pipeline else ()
        target = reject_state(task.state, to, names)
        after = repo.apply_transition(
            conn,
            task,
            Event.REJECT,
            target,
            now=db_now(conn),
            actor=actor,
            reason="rejected" if target.stage == task.stage else f"rejected to {target.stage}",
            note=text,
            next_hint=text,
            hint_source="reject",
            new_run=True,
        )
        notify_wake(conn)
    return ActionResult(slug, True, str(after.state), f"{slug}: {task.state} -> {after.state}")


def halt(engine: Engine, slug: str, actor: str, note: str | None = None) -> ActionResult:
    return _transition(
        engine,
        slug,
        Event.HALT,
        actor,
        note=_note(note),
        reason="halted by a person",
        halt_reason=HaltReason.MANUAL.value,
    )


def resume(
    engine: Engine, slug: str, actor: str, note: str | None = None, budget: float | None = None
) -> ActionResult:
    """Restart a halted task at its stage; the plateau window starts afresh.
    `budget` gives the task its own budget in the same transaction."""
    return _transition(
        engine,
        slug,
        Event.RESUME,
        actor,
        note=_note(note),
        reason="resumed" if budget is None else f"resumed with budget ${budget:g}",
        new_run=True,
        budget=budget,
    )


def cancel(engine: Engine, slug: str, actor: str, note: str | None = None) -> ActionResult:
    return _transition(
        engine, slug, Event.CANCEL, actor, note=_note(note), reason="cancelled by a person"
    )


def _note(note: str | None) -> str | None:
    return None if note is None else clean_text(note, MAX_NOTE_BYTES)
