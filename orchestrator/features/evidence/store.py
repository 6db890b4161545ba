"""The decisions people made at gates, counted in the database.

A decision is an `approve` or `reject` transition out of `S:awaiting_approval`.
The verdict it judged is the attempt of the transition just before it
(`await_approval`, seq one less, which carries the attempt's id): a task
waiting at a gate can only be approved, rejected, halted or cancelled, so
the pair is always adjacent. The rows are grouped by (pipeline, stage,
score, pass, decision, later fact) in SQL, so what comes back is a few rows
per distinct score however many attempts the table holds."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, case, exists, func, select, text

from orchestrator.domain.pipeline import State, Status
from orchestrator.ext.model import GATE_ACTOR
from orchestrator.storage import tables

attempts = tables.attempts
tasks = tables.tasks
transitions = tables.transitions

# What happened to a task after an approval, each kind on its own.
SENT_BACK = "sent_back"
LANDED = "landed"


@dataclass(frozen=True)
class DecisionCount:
    pipeline: str
    stage: str
    score: float | None
    passed: bool
    approved: bool
    later: str | None
    count: int


def decision_counts(
    conn: Connection,
    *,
    pipeline: str | None = None,
    stage: str | None = None,
    since: datetime | None = None,
) -> list[DecisionCount]:
    """Every decision at a gate, counted per (pipeline, stage, score, pass,
    approved, later fact); `since` keeps decisions made at or after it."""
    decision = transitions.alias("decision")
    waited = transitions.alias("waited")
    after = transitions.alias("after")

    def later_event(event: str) -> object:
        return exists().where(
            after.c.task_id == decision.c.task_id,
            after.c.seq > decision.c.seq,
            after.c.event == event,
        )

    later = case(
        (decision.c.event != "approve", None),
        (later_event("send_back"), SENT_BACK),  # type: ignore[arg-type]
        (later_event("landed"), LANDED),  # type: ignore[arg-type]
        else_=None,
    ).label("later")
    query = (
        select(
            tasks.c.pipeline,
            attempts.c.stage,
            attempts.c.score,
            attempts.c["pass"],
            decision.c.event,
            later,
            func.count().label("n"),
        )
        .select_from(decision)
        .join(
            waited,
            and_(
                waited.c.task_id == decision.c.task_id,
                waited.c.seq == decision.c.seq - 1,
                waited.c.event == "await_approval",
            ),
        )
        .join(attempts, attempts.c.id == waited.c.attempt_id)
        .join(tasks, tasks.c.id == decision.c.task_id)
        .where(
            decision.c.event.in_(("approve", "reject")),
            # A gate the verifier opened itself (`gate = "auto"`) is no person's decision.
            func.coalesce(decision.c.actor, "") != GATE_ACTOR,
        )
        .group_by(
            tasks.c.pipeline,
            attempts.c.stage,
            attempts.c.score,
            attempts.c["pass"],
            decision.c.event,
            later,
        )
    )
    if pipeline is not None:
        query = query.where(tasks.c.pipeline == pipeline)
    if stage is not None:
        query = query.where(attempts.c.stage == stage)
    if since is not None:
        query = query.where(decision.c.at >= since)
    return [
        DecisionCount(
            str(row.pipeline),
            str(row.stage),
            None if row.score is None else float(row.score),
            bool(row[3]),
            row.event == "approve",
            row.later,
            int(row.n),
        )
        for row in conn.execute(query)
    ]


def sort_key(count: DecisionCount) -> tuple[str, str]:
    return (count.pipeline, count.stage)


def pipelines_and_stages(counts: Sequence[DecisionCount]) -> list[tuple[str, str]]:
    return sorted({sort_key(c) for c in counts})


@dataclass(frozen=True)
class RecordedAttempt:
    pipeline: str
    stage: str
    task: str
    run: int
    outcome: str
    score: float | None
    cost_usd: float | None
    halt_reason: str | None  # the task's halt, on its newest attempt of the stage


def recorded_attempts(
    conn: Connection, *, pipeline: str | None = None, stage: str | None = None
) -> list[RecordedAttempt]:
    """Every finished attempt, oldest first within its task, stage and run,
    with the plateau halt that ended a run (the transition the attempt
    wrote), so a replay can tell where the recorded rule stopped."""
    halted = transitions.alias("halted")
    query = (
        select(
            tasks.c.pipeline,
            attempts.c.stage,
            tasks.c.slug,
            attempts.c.run,
            attempts.c.outcome,
            attempts.c.score,
            attempts.c.cost_usd,
            halted.c.reason,
        )
        .select_from(attempts)
        .join(tasks, tasks.c.id == attempts.c.task_id)
        .outerjoin(
            halted,
            and_(
                halted.c.attempt_id == attempts.c.id,
                halted.c.event == "give_up",
                halted.c.reason.like("plateau:%"),
            ),
        )
        .where(attempts.c.outcome.is_not(None))
        .order_by(attempts.c.task_id, attempts.c.stage, attempts.c.run, attempts.c.number)
    )
    if pipeline is not None:
        query = query.where(tasks.c.pipeline == pipeline)
    if stage is not None:
        query = query.where(attempts.c.stage == stage)
    return [
        RecordedAttempt(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            int(row[3]),
            str(row[4]),
            None if row[5] is None else float(row[5]),
            None if row[6] is None else float(row[6]),
            "score_plateau" if row[7] is not None else None,
        )
        for row in conn.execute(query)
    ]


# An audit: a passing verdict at an auto gate left to a person on purpose
# (`autogate.py`), an event on the verdict's attempt.
GATE_AUDIT = "gate_audit"


@dataclass(frozen=True)
class GateCounts:
    """What an auto gate's mode is computed from, since its epoch (the
    newest person's reject of an audited verdict, if any)."""

    since_reject: bool
    decisions: int  # people's approves and rejects
    approved: int
    opened: int  # approves by the verifier
    audited: int  # verdicts left to a person as audits


def gate_counts(conn: Connection, pipeline: str, stage: str) -> GateCounts:
    """The auto gate at (pipeline, stage), counted from the transitions and
    the audit events: no row of its own."""
    events = tables.events
    awaiting = str(State(stage, Status.AWAITING_APPROVAL))
    decision = transitions.alias("decision")
    waited = transitions.alias("waited")
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
    return GateCounts(
        epoch is not None, int(people[0]), int(people[1] or 0), int(opened), int(audited)
    )


def lock_gate(conn: Connection, pipeline: str, stage: str) -> None:
    """Serialize the gate's decisions across hosts for the rest of the
    transaction (PostgreSQL; SQLite's write transactions already are):
    two records never both read the same count and both open."""
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"autogate:{pipeline}:{stage}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
