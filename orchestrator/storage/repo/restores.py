"""What best-attempt restore reads and writes: a stage's finished attempts
with their scores, the halted tasks a `best` halt may still owe a restore,
and the mark on the attempt whose work went back on the branch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select, update

from orchestrator.domain.decide import HaltReason
from orchestrator.domain.pipeline import Status
from orchestrator.storage.repo.records import _TASK_COLUMNS, TaskSnapshot, _task, attempts, tasks

BEST_HALTS = (HaltReason.SCORE_PLATEAU.value, HaltReason.MAX_ATTEMPTS.value)


@dataclass(frozen=True)
class KeptAttempt:
    """One finished attempt of a stage, as restore needs it."""

    id: int
    run: int
    number: int
    outcome: str | None
    score: float | None
    lease_token: str
    finished_at: datetime | None
    restored_at: datetime | None


def stage_attempts(conn: Connection, task_id: int, stage: str) -> list[KeptAttempt]:
    """Every attempt of the task's stage, oldest first (open ones too: the
    caller refuses while one is)."""
    rows = conn.execute(
        select(
            attempts.c.id,
            attempts.c.run,
            attempts.c.number,
            attempts.c.outcome,
            attempts.c.score,
            attempts.c.lease_token,
            attempts.c.finished_at,
            attempts.c.restored_at,
        )
        .where(attempts.c.task_id == task_id, attempts.c.stage == stage)
        .order_by(attempts.c.number)
    )
    return [KeptAttempt(*row) for row in rows]


def open_attempts(conn: Connection, task_id: int) -> int:
    rows = conn.execute(
        select(attempts.c.id).where(attempts.c.task_id == task_id, attempts.c.finished_at.is_(None))
    )
    return len(rows.all())


def mark_restored(conn: Connection, attempt_id: int, at: datetime) -> None:
    conn.execute(
        update(attempts)
        .where(attempts.c.id == attempt_id, attempts.c.finished_at.is_not(None))
        .values(restored_at=at)
    )


def halted_for_best(conn: Connection) -> list[TaskSnapshot]:
    """Branch tasks halted where `on_halt = "best"` may apply (the caller
    checks the stage's key and whether the restore was done)."""
    rows = conn.execute(
        select(*_TASK_COLUMNS)
        .where(
            tasks.c.status == Status.HALTED.value,
            tasks.c.halt_reason.in_(BEST_HALTS),
            tasks.c.branch.is_not(None),
        )
        .order_by(tasks.c.id)
    )
    return [_task(row) for row in rows]


def best_of(kept: list[KeptAttempt], run: int) -> KeptAttempt | None:
    """The run's best-scoring finished attempt; a tie goes to the earliest
    (the first to reach that score did not need the later ones)."""
    scored = [a for a in kept if a.run == run and a.score is not None and a.finished_at]
    if not scored:
        return None
    return max(scored, key=lambda a: (a.score, -a.number))


@dataclass(frozen=True)
class Marks:
    """Which attempts `show`, the task page and the score curve mark."""

    best: frozenset[int]  # attempt ids: the best-scoring of each stage's run
    restored: frozenset[int]  # the newest restored of each stage
    restored_at: dict[int, datetime]


def task_marks(conn: Connection, task_id: int) -> Marks:
    rows = conn.execute(
        select(
            attempts.c.id,
            attempts.c.stage,
            attempts.c.run,
            attempts.c.number,
            attempts.c.score,
            attempts.c.finished_at,
            attempts.c.restored_at,
        ).where(attempts.c.task_id == task_id)
    ).all()
    best: dict[tuple[str, int], tuple[float, int, int]] = {}
    newest: dict[str, tuple[datetime, int]] = {}
    restored_at: dict[int, datetime] = {}
    for attempt_id, stage, run, number, score, finished_at, restored in rows:
        if score is not None and finished_at is not None:
            held = best.get((stage, run))
            if held is None or (score, -number) > (held[0], -held[1]):
                best[(stage, run)] = (score, number, attempt_id)
        if restored is not None:
            restored_at[attempt_id] = restored
            if stage not in newest or restored > newest[stage][0]:
                newest[stage] = (restored, attempt_id)
    return Marks(
        frozenset(v[2] for v in best.values()),
        frozenset(v[1] for v in newest.values()),
        restored_at,
    )
