"""Applying what follows an attempt: the transition `decide` chose, or the
halt of a task whose stage the configuration lost (`unknown_stage`), in the
caller's transaction."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from orchestrator.domain.decide import Decision, HaltReason
from orchestrator.domain.pipeline import Event, State, Status, landing_instead
from orchestrator.ext.model import ACTOR, GATE_ACTOR
from orchestrator.storage import repo
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


class Applier:
    """Writes a task's transition (`tasks`, `transitions`, through
    `repo.apply_transition`, fenced by the task's version) and counts a
    halt in the tick's report. Claims, records and recovery share it."""

    def __init__(self, tx: Transactions, tick: TickRun) -> None:
        self.tx = tx
        self.tick = tick

    def apply(
        self,
        conn: Connection,
        task: repo.TaskSnapshot,
        decision: Decision,
        attempt_id: int,
        now: datetime,
    ) -> State:
        """Write the decision; the state written, which is `landing` where
        the decision says `complete` in a pipeline that lands (what the
        tick's line must say: nothing is complete before it landed)."""
        pipeline = self.tx.settings.pipeline(task.pipeline)
        lands = pipeline is not None and pipeline.landing.lands
        to = landing_instead(task.state, decision.state, lands)
        repo.apply_transition(
            conn,
            task,
            decision.event,
            to,
            now=now,
            actor=ACTOR,
            reason=decision.reason,
            attempt_id=attempt_id,
            halt_reason=None if decision.halt_reason is None else decision.halt_reason.value,
            next_hint=decision.next_hint,
            hint_source="verdict",
        )
        if decision.halt_reason is not None:
            self.tick.halted()
        return to

    def open_gate(
        self, conn: Connection, task: repo.TaskSnapshot, reason: str, now: datetime
    ) -> State:
        """Approve a gate a feature opened by itself (`TickHooks.open_gate`),
        as a person's approval would, with the feature's reason."""
        to = State(task.stage, Status.APPROVED)
        repo.apply_transition(
            conn, task, Event.APPROVE, to, now=now, actor=GATE_ACTOR, reason=reason
        )
        return to

    def halt_unknown(self, conn: Connection, task: repo.TaskSnapshot, now: datetime) -> None:
        """A stage (or pipeline) the configuration no longer has: stop, loudly."""
        repo.apply_transition(
            conn,
            task,
            Event.HALT if task.status is not Status.RUNNING else Event.GIVE_UP,
            State(task.stage, Status.HALTED),
            now=now,
            actor=ACTOR,
            reason=f"pipeline {task.pipeline!r} has no stage {task.stage!r}",
            halt_reason=HaltReason.UNKNOWN_STAGE.value,
        )
        self.tick.halted()
        self.tx.say_after_commit(f"{task.slug}: halted (unknown_stage {task.stage!r})")
