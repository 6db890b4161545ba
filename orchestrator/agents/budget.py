"""Budgets: a task whose recorded cost reached its budget halts as `budget`
before another attempt is claimed.

Two limits, each on what the attempts recorded (`attempts.cost_usd`):

- the task's own budget (`add --budget`, `resume --budget`), on everything
  the task spent; when set it replaces the stage limits, so that raising it
  with `resume --budget` is always enough to let the task go on;
- otherwise the stage's `max_cost_usd` (or `[defaults]`), on what the task
  spent at that stage, over all its runs.

The check costs a query only for a task that has a limit at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, select, update

from orchestrator.config import StageConfig
from orchestrator.domain.decide import HaltReason
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.errors import RefusedError
from orchestrator.storage import repo


@dataclass(frozen=True)
class Budget:
    limit: float
    spent: float
    scope: str  # "task" or "stage NAME"

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit

    def describe(self) -> str:
        return f"${self.spent:.4f} spent of the {self.scope} budget ${self.limit:.4f}"


def spent(conn: Connection, task_id: int, stage: str | None = None) -> float:
    """What the task's attempts recorded they cost (at `stage`, or everywhere)."""
    a = repo.attempts
    query = select(func.coalesce(func.sum(a.c.cost_usd), 0.0)).where(a.c.task_id == task_id)
    if stage is not None:
        query = query.where(a.c.stage == stage)
    return float(conn.execute(query).scalar_one())


def budget_of(
    conn: Connection, task: repo.TaskSnapshot, stage: StageConfig | None
) -> Budget | None:
    """The limit that applies to `task` at `stage`, with what it has spent."""
    if task.max_cost_usd is not None:
        return Budget(task.max_cost_usd, spent(conn, task.id), "task")
    if stage is not None and stage.max_cost_usd is not None:
        return Budget(stage.max_cost_usd, spent(conn, task.id, stage.name), f"stage {stage.name}")
    return None


def halt_if_over(
    conn: Connection, task: repo.TaskSnapshot, stage: StageConfig, *, now: datetime, actor: str
) -> Budget | None:
    """Halt a ready `task` as `budget` when its budget is reached; the budget then."""
    budget = budget_of(conn, task, stage)
    if budget is None or not budget.reached:
        return None
    repo.apply_transition(
        conn,
        task,
        Event.HALT,
        State(task.stage, Status.HALTED),
        now=now,
        actor=actor,
        reason=f"budget reached: {budget.describe()}",
        halt_reason=HaltReason.BUDGET.value,
    )
    return budget


def raise_budget(conn: Connection, task: repo.TaskSnapshot, amount: float) -> None:
    """Give the task its own budget; refused when it would halt it again at once."""
    if not (math.isfinite(amount) and amount > 0):
        raise RefusedError("--budget must be a positive, finite number of US dollars")
    already = spent(conn, task.id)
    if amount <= already:
        raise RefusedError(
            f"--budget {amount:g} is not above the ${already:.4f} {task.slug!r} has spent; "
            "the next tick would halt it again"
        )
    conn.execute(update(repo.tasks).where(repo.tasks.c.id == task.id).values(max_cost_usd=amount))
