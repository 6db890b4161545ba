"""What the decisions and the context file read back: runs, attempts and context rows.

The decision of a stage depends on the history of its current run, read in
one statement rather than rebuilt from every attempt.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, bindparam, select

from orchestrator.domain import rounds
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
        attempts.c.round,
        attempts.c.finished_at,
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
    conn: Connection,
    task: TaskSnapshot,
    *,
    excluding: int | None = None,
    excluding_round: int | None = None,
) -> RunHistory:
    """The facts `decide` needs about the task's current run at its stage.
    A round of candidates counts as one attempt, its best (`domain.rounds`);
    `excluding_round` leaves out the round being decided."""
    rows = _RUN_HISTORY.execute(
        conn, {"task_id": task.id, "stage": task.stage, "run": task.run}
    ).rows
    kept = [row for row in rows if row[0] != excluding]
    if any(row[4] is not None for row in kept):
        kept = _rounds_collapsed(
            [row for row in kept if row[4] != excluding_round or row[4] is None]
        )
    return RunHistory.of(
        [(Outcome(row[1]), row[2]) for row in kept],
        hint=task.next_hint,
        changes=[row[3] for row in kept],
        started=[row[6] for row in kept],
    )


def awaits_verdict(conn: Connection, task: TaskSnapshot) -> bool:
    """Whether the task's run at its stage waits on a pending verdict (its
    newest counted attempt was pending): its next attempt is a recheck."""
    return run_history(conn, task).awaiting_verdict


def _rounds_collapsed(rows: list[Any]) -> list[Any]:
    """Each round's rows reduced to its best candidate's (`rounds.best`),
    a round's candidates taken in the order they finished."""
    by_id = {row[0]: row for row in rows}
    places: list[int | None] = []  # None: an attempt on its own, at its place
    alone: list[Any] = []
    grouped: dict[int, list[Any]] = {}
    for row in rows:
        if row[4] is None:
            places.append(None)
            alone.append(row)
        elif row[4] not in grouped:
            grouped[row[4]] = [row]
            places.append(row[4])
        else:
            grouped[row[4]].append(row)
    pairs: list[tuple[int | None, rounds.Candidate]] = []
    singles = iter(alone)
    for place in places:
        if place is None:
            pairs.append((None, _candidate(next(singles))))
            continue
        members = sorted(grouped[place], key=lambda row: (str(row[5]), row[0]))
        pairs.extend((place, _candidate(row)) for row in members)
    return [by_id[candidate.attempt_id] for candidate in rounds.collapse(pairs)]


def _candidate(row: Any) -> rounds.Candidate:
    return rounds.Candidate(row[0], 0, 0, Outcome(row[1]), row[2])


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
