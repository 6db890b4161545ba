"""Gates that earn autonomy: at a `gate = "auto"` stage a passing verdict
opens the gate by itself once the people who decided this stage's
verdicts agreed with its verifier often enough, every `audit_every`-th
verdict excepted.

Everything is read from what is already recorded: the people's decisions
are the `approve`/`reject` transitions out of `S:awaiting_approval` whose
actor is not `verifier`; the gate's own openings are the `approve`s by
`verifier`; an audit is a `gate_audit` event on the verdict's attempt,
written here. A person's reject of an audited verdict starts a new epoch:
only decisions after it count. Nothing here runs for a stage without
`gate = "auto"`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, select, text
from sqlalchemy.orm import aliased

from orchestrator.domain.pipeline import State, Status
from orchestrator.ext.model import GATE_ACTOR
from orchestrator.features.evidence.autogate_config import AutoGate
from orchestrator.features.evidence.stats import wilson_lower
from orchestrator.storage import tables

GATE_AUDIT = "gate_audit"

tasks = tables.tasks
transitions = tables.transitions
events = tables.events


@dataclass(frozen=True)
class GateMode:
    """What the gate at (pipeline, stage) does with the next passing verdict."""

    mode: str  # "person", "auto" or "audit"
    decisions: int  # human decisions counted (since the epoch)
    approved: int
    bound: float  # one-sided 95 % Wilson lower bound of approved / decisions
    since_reject: bool  # the epoch began at a person's reject of an audit
    streak: int  # verdicts the gate judged itself (opened or audited) this epoch
    policy: AutoGate

    @property
    def precision(self) -> float | None:
        return self.approved / self.decisions if self.decisions else None

    def why(self) -> str:
        """One line: the evidence and the rule it was held against."""
        p = self.policy
        precision = "n/a" if self.precision is None else f"{self.precision:.3f}"
        epoch = " since a person rejected an audited verdict" if self.since_reject else ""
        evidence = (
            f"N={self.decisions} human decisions{epoch}, precision {precision}, "
            f"Wilson bound {self.bound:.3f}"
        )
        if self.mode == "person":
            return (
                f"waits for a person: {evidence} (needs N >= {p.auto_after} "
                f"and bound >= {p.auto_precision:g})"
            )
        if self.mode == "audit":
            return f"audit (every {p.audit_every}th verdict waits for a person): {evidence}"
        return f"opened by the verifier: {evidence} >= {p.auto_precision:g}"


def gate_mode(conn: Connection, pipeline: str, stage: str, policy: AutoGate) -> GateMode:
    """The mode the next passing verdict at (pipeline, stage) meets."""
    awaiting = str(State(stage, Status.AWAITING_APPROVAL))
    decision = aliased(transitions, name="decision")
    waited = aliased(transitions, name="waited")
    at_stage = and_(
        decision.c.from_state == awaiting,
        tasks.c.pipeline == pipeline,
    )
    by_person = func.coalesce(decision.c.actor, "") != GATE_ACTOR
    # The epoch: the newest reject by a person of a verdict that was audited.
    epoch = conn.execute(
        select(func.max(decision.c.id))
        .select_from(decision)
        .join(tasks, tasks.c.id == decision.c.task_id)
        .join(
            waited,
            and_(waited.c.task_id == decision.c.task_id, waited.c.seq == decision.c.seq - 1),
        )
        .join(
            events,
            and_(events.c.attempt_id == waited.c.attempt_id, events.c.kind == GATE_AUDIT),
        )
        .where(at_stage, decision.c.event == "reject", by_person)
    ).scalar()
    since = 0 if epoch is None else int(epoch)
    people = conn.execute(
        select(func.count(), func.count().filter(decision.c.event == "approve"))
        .select_from(decision)
        .join(tasks, tasks.c.id == decision.c.task_id)
        .where(
            at_stage,
            decision.c.id > since,
            decision.c.event.in_(("approve", "reject")),
            by_person,
        )
    ).one()
    opened = conn.execute(
        select(func.count())
        .select_from(decision)
        .join(tasks, tasks.c.id == decision.c.task_id)
        .where(
            at_stage,
            decision.c.id > since,
            decision.c.event == "approve",
            decision.c.actor == GATE_ACTOR,
        )
    ).scalar_one()
    audited = conn.execute(
        select(func.count())
        .select_from(waited)
        .join(tasks, tasks.c.id == waited.c.task_id)
        .join(
            events,
            and_(events.c.attempt_id == waited.c.attempt_id, events.c.kind == GATE_AUDIT),
        )
        .where(
            waited.c.to_state == awaiting,
            waited.c.event == "await_approval",
            tasks.c.pipeline == pipeline,
            waited.c.id > since,
        )
    ).scalar_one()
    n, approved = int(people[0]), int(people[1] or 0)
    bound = wilson_lower(approved, n)
    streak = int(opened) + int(audited)
    if n < policy.auto_after or bound < policy.auto_precision:
        mode = "person"
    elif (streak + 1) % policy.audit_every == 0:
        mode = "audit"
    else:
        mode = "auto"
    return GateMode(mode, n, approved, bound, epoch is not None, streak, policy)


def lock_gate(conn: Connection, pipeline: str, stage: str) -> None:
    """Serialize the gate's decisions across hosts for the rest of the
    transaction (PostgreSQL; SQLite's write transactions already are):
    two records never both read the same count and both open."""
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"autogate:{pipeline}:{stage}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
