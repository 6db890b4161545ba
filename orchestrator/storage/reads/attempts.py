"""Attempts as the read side needs them beyond `repo`'s verbs: a task's
stage commits (`diff`, the branch view), when a run started (the gate view),
its best of N rounds (`show`, the gate page), its exit codes (`show`) and
scores (`scores`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from orchestrator.storage import tables

_a, _t = tables.attempts, tables.transitions


@dataclass(frozen=True)
class StageCommit:
    id: int
    stage: str
    run: int
    commit_sha: str | None


@dataclass(frozen=True)
class RoundSlot:
    id: int
    round: int
    candidate: int | None
    candidates: int | None


def stage_commits(conn: Connection, task_id: int) -> list[StageCommit]:
    """Every attempt of the task, oldest first, with the commit it passed with."""
    rows = conn.execute(
        select(_a.c.id, _a.c.stage, _a.c.run, _a.c.commit_sha)
        .where(_a.c.task_id == task_id)
        .order_by(_a.c.id)
    ).all()
    return [StageCommit(*row) for row in rows]


def run_started_at(conn: Connection, task_id: int, stage: str, run: int) -> datetime | None:
    """When the first attempt of the task's run at `stage` started."""
    value: datetime | None = conn.execute(
        select(func.min(_a.c.started_at)).where(
            _a.c.task_id == task_id, _a.c.stage == stage, _a.c.run == run
        )
    ).scalar_one_or_none()
    return value


def newest_round(conn: Connection, task_id: int, stage: str, run: int) -> int | None:
    """The newest best of N round of the task's run at `stage`, if any."""
    value = conn.execute(
        select(func.max(_a.c.round)).where(
            _a.c.task_id == task_id, _a.c.stage == stage, _a.c.run == run
        )
    ).scalar()
    return None if value is None else int(value)


def round_slots(conn: Connection, task_id: int) -> list[RoundSlot]:
    """The task's attempts that were candidates of a round."""
    rows = conn.execute(
        select(_a.c.id, _a.c.round, _a.c.candidate, _a.c.candidates).where(
            _a.c.task_id == task_id, _a.c.round.is_not(None)
        )
    ).all()
    return [RoundSlot(*row) for row in rows]


def named_attempts(conn: Connection, task_id: int) -> set[int | None]:
    """The attempts a transition of the task other than a claim names: the
    ones a decision was made on."""
    return {
        row[0]
        for row in conn.execute(
            select(_t.c.attempt_id).where(_t.c.task_id == task_id, _t.c.event != "claim")
        )
    }


def exit_codes(conn: Connection, task_id: int) -> dict[int, tuple[int | None, int | None]]:
    """attempt id -> (worker exit, verifier exit), for the task's attempts."""
    return {
        row.id: (row.worker_exit, row.verifier_exit)
        for row in conn.execute(
            select(_a.c.id, _a.c.worker_exit, _a.c.verifier_exit).where(_a.c.task_id == task_id)
        )
    }


def tried_stages(conn: Connection, task_id: int) -> set[str]:
    """The stages the task has any attempt at."""
    return set(conn.execute(select(_a.c.stage).where(_a.c.task_id == task_id).distinct()).scalars())


def score_rows(conn: Connection, task_id: int, stage: str | None) -> list[dict[str, Any]]:
    """The task's scored attempts (at `stage`, or all), oldest first: stage,
    attempt, run, score, pass, outcome, cost_usd, at."""
    condition = and_(_a.c.task_id == task_id, _a.c.score.is_not(None))
    if stage is not None:
        condition = and_(condition, _a.c.stage == stage)
    rows = conn.execute(
        select(
            _a.c.stage,
            _a.c.number.label("attempt"),
            _a.c.run,
            _a.c.score,
            _a.c["pass"],
            _a.c.outcome,
            _a.c.cost_usd,
            _a.c.finished_at.label("at"),
        )
        .where(condition)
        .order_by(_a.c.id)
    )
    return [dict(row._mapping) for row in rows]
