"""Best of N: a stage's round of candidates in `attempts`.

A round's first candidate is claimed like any attempt (the task becomes
`running`); its other slots are claimed one by one, by any tick on any
host, while the task stays `running`: a slot is open while the newest
attempt of the task's stage is a candidate whose slot is below the
round's size. Slots are opened in order inside claim transactions that
hold the task's row, so the newest attempt's slot counts the round's.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, exists, func, insert, or_, select

from orchestrator.domain.pipeline import Status
from orchestrator.storage.prepared import Prepared
from orchestrator.storage.repo.attempt_rows import _OPEN_COLUMNS, START_PENDING
from orchestrator.storage.repo.records import (
    _TASK_COLUMNS,
    TaskSnapshot,
    _task,
    attempts,
    tasks,
    transitions,
)

_ROUND_COLUMNS = ("round", "candidate", "candidates")
_OPEN_CANDIDATE = Prepared(
    insert(attempts)
    .values({name: bindparam(name) for name in (*_OPEN_COLUMNS, *_ROUND_COLUMNS)})
    .returning(attempts.c.id)
)


@dataclass(frozen=True)
class Slot:
    """The next open slot of a task's round."""

    round: int
    candidate: int
    candidates: int
    number: int  # the attempt number the slot gets
    first_number: int  # the round's first attempt's


@dataclass(frozen=True)
class Member:
    """One candidate of a round, as recorded."""

    id: int
    number: int
    candidate: int
    candidates: int
    outcome: str | None
    passed: bool | None
    score: float | None
    finished_at: datetime | None
    commit_sha: str | None
    start_commit: str | None
    reasons: str | None
    next_hint: str | None


def open_candidate(conn: Connection, **values: Any) -> int:
    """Insert an open candidate attempt: `open_attempt`'s values plus
    `round`, `candidate` and `candidates`."""
    row = _OPEN_CANDIDATE.execute(conn, {"start_commit": START_PENDING, **values}).first()
    assert row is not None
    return int(row[0])


def next_round(conn: Connection, task_id: int, stage: str) -> int:
    found = conn.execute(
        select(func.max(attempts.c.round)).where(
            attempts.c.task_id == task_id, attempts.c.stage == stage
        )
    ).scalar()
    return 1 if found is None else int(found) + 1


def find_open_slot(
    conn: Connection,
    *,
    host: str,
    any_host: bool,
    exclude: Collection[int] = (),
    slug: str | None = None,
) -> tuple[TaskSnapshot, Slot] | None:
    """The next running task (priority, then age) whose round has a slot
    no tick has claimed yet, its row locked (a row locked elsewhere is
    passed over, as `find_claimable` does)."""
    query = _slot_query(any_host=any_host, slug=slug is not None)
    params: dict[str, Any] = {"limit": len(exclude) + 1}
    if not any_host:
        params["host"] = host
    if slug is not None:
        params["slug"] = slug
    for row in query.execute(conn, params).rows:
        task = _task(row)
        if task.id in exclude:
            continue
        newest = conn.execute(
            select(attempts.c.round, attempts.c.candidate, attempts.c.candidates, attempts.c.number)
            .where(attempts.c.task_id == task.id, attempts.c.stage == task.stage)
            .order_by(attempts.c.number.desc())
            .limit(1)
        ).one()
        round_no, candidate, candidates, number = newest
        if round_no is None or candidate >= candidates:
            continue  # its round filled (or ended) since the query's snapshot
        return task, Slot(
            round=int(round_no),
            candidate=int(candidate) + 1,
            candidates=int(candidates),
            number=int(number) + 1,
            first_number=int(number) - int(candidate) + 1,
        )
    return None


@functools.cache
def _slot_query(*, any_host: bool, slug: bool) -> Prepared:
    a, b = attempts.alias("a"), attempts.alias("b")
    # Correlated to the outer task by hand: nested in `exists()`, it would
    # otherwise take `tasks` into its own FROM and be the newest number of
    # any task at that stage, so a round behind another task's attempts
    # never showed its open slots.
    newest = (
        select(func.max(b.c.number))
        .where(b.c.task_id == tasks.c.id, b.c.stage == tasks.c.stage)
        .correlate(tasks)
        .scalar_subquery()
    )
    open_slot = exists().where(
        and_(
            a.c.task_id == tasks.c.id,
            a.c.stage == tasks.c.stage,
            a.c.round.is_not(None),
            a.c.candidate < a.c.candidates,
            a.c.number == newest,
        )
    )
    query = select(*_TASK_COLUMNS).where(tasks.c.status == Status.RUNNING.value, open_slot)
    if not any_host:
        query = query.where(or_(tasks.c.host.is_(None), tasks.c.host == bindparam("host")))
    if slug:
        query = query.where(tasks.c.slug == bindparam("slug"))
    query = query.order_by(tasks.c.priority.desc(), tasks.c.id).limit(bindparam("limit"))
    # SKIP LOCKED, as `find_claimable`: a claim never waits on another
    # transaction (which may hold the row long, or wait on this one). A row
    # skipped a moment is looked at again (`Scheduler`, SLOT_RECHECK_SECONDS).
    return Prepared(query.with_for_update(skip_locked=True, of=tasks))


def round_of(conn: Connection, attempt_id: int) -> tuple[int, int, int] | None:
    """(round, candidate, candidates) of a candidate attempt; None for an
    attempt on its own."""
    row = conn.execute(
        select(attempts.c.round, attempts.c.candidate, attempts.c.candidates).where(
            attempts.c.id == attempt_id
        )
    ).first()
    if row is None or row[0] is None:
        return None
    return int(row[0]), int(row[1]), int(row[2])


def members(conn: Connection, task_id: int, stage: str, round_no: int) -> list[Member]:
    """A round's candidates, in the order they finished (open ones last, by slot)."""
    rows = conn.execute(
        select(
            attempts.c.id,
            attempts.c.number,
            attempts.c.candidate,
            attempts.c.candidates,
            attempts.c.outcome,
            attempts.c["pass"],
            attempts.c.score,
            attempts.c.finished_at,
            attempts.c.commit_sha,
            attempts.c.start_commit,
            attempts.c.reasons,
            attempts.c.next_hint,
        ).where(
            attempts.c.task_id == task_id,
            attempts.c.stage == stage,
            attempts.c.round == round_no,
        )
    ).all()
    found = [Member(*tuple(row)) for row in rows]
    return sorted(
        found,
        key=lambda m: (m.finished_at is None, str(m.finished_at or ""), m.id),
    )


def latest_round(conn: Connection, task_id: int, stage: str) -> int | None:
    found = conn.execute(
        select(func.max(attempts.c.round)).where(
            attempts.c.task_id == task_id, attempts.c.stage == stage
        )
    ).scalar()
    return None if found is None else int(found)


def decided(conn: Connection, ids: Collection[int]) -> int | None:
    """The attempt a round was decided by (its best), when it was: the one
    of `ids` a transition other than the claim names."""
    if not ids:
        return None
    return conn.execute(
        select(transitions.c.attempt_id)
        .where(transitions.c.attempt_id.in_(list(ids)), transitions.c.event != "claim")
        .limit(1)
    ).scalar()


def clear_commits(conn: Connection, ids: Collection[int]) -> None:
    """The losers' commits are kept at their refs, not as the task's: the
    gate and `diff` read `commit_sha` as a commit on the task branch."""
    if ids:
        conn.execute(attempts.update().where(attempts.c.id.in_(list(ids))).values(commit_sha=None))


def rounds_newest_first(conn: Connection, task_id: int) -> list[tuple[str, int, int]]:
    """(stage, round, its newest attempt's id) of every round of the task,
    the newest round first."""
    rows = conn.execute(
        select(attempts.c.stage, attempts.c.round, func.max(attempts.c.id))
        .where(attempts.c.task_id == task_id, attempts.c.round.is_not(None))
        .group_by(attempts.c.stage, attempts.c.round)
        .order_by(func.max(attempts.c.id).desc())
    ).all()
    return [(stage, round_no, newest) for stage, round_no, newest in rows]


def record_plateau(conn: Connection, attempt_id: int, plateau: str) -> None:
    """The plateau record (JSON) of the round's chosen attempt."""
    conn.execute(attempts.update().where(attempts.c.id == attempt_id).values(plateau=plateau))
