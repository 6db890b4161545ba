"""Budgets: a task whose recorded cost reached its budget halts as `budget`
before another attempt is claimed.

Two limits, each on what the attempts recorded (`attempts.cost_usd`):

- the task's own budget (`add --budget`, `resume --budget`), on everything
  the task spent; when set it replaces the stage limits, so that raising it
  with `resume --budget` is always enough to let the task go on;
- otherwise the stage's `max_cost_usd` (or `[defaults]`), on what the task
  spent at that stage, over all its runs.

An attempt whose agent should have reported its cost and did not (a stage
reading `claude-json` whose envelope was cut or never printed) did not cost
nothing: for a task with a limit, such an attempt reaches the budget, so the
task halts as `budget` and a person decides. A `resume` answers that
question; an unknown cost after it asks again.

The check costs queries only for a task that has a limit at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, or_, select, update

from orchestrator.agents import kinds
from orchestrator.config import PipelineConfig, StageConfig
from orchestrator.domain.decide import HaltReason, Outcome
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.errors import RefusedError
from orchestrator.storage import repo


@dataclass(frozen=True)
class Budget:
    limit: float
    spent: float
    scope: str  # "task" or "stage NAME"
    # Attempts (since the last resume) whose cost should have been reported
    # and was not, as "attempt N" or "STAGE attempt N".
    unknown: tuple[str, ...] = ()

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit or bool(self.unknown)

    def describe(self) -> str:
        said = f"${self.spent:.4f} spent of the {self.scope} budget ${self.limit:.4f}"
        if not self.unknown:
            return said
        return (
            f"{said}; {', '.join(self.unknown)} reported no cost (the agent's output "
            "could not be read), so what it spent is unknown"
        )


def spent(conn: Connection, task_id: int, stage: str | None = None) -> float:
    """What the task's attempts recorded they cost (at `stage`, or everywhere)."""
    a = repo.attempts
    query = select(func.coalesce(func.sum(a.c.cost_usd), 0.0)).where(a.c.task_id == task_id)
    if stage is not None:
        query = query.where(a.c.stage == stage)
    return float(conn.execute(query).scalar_one())


def budget_of(
    conn: Connection,
    task: repo.TaskSnapshot,
    stage: StageConfig | None,
    pipeline: PipelineConfig | None = None,
) -> Budget | None:
    """The limit that applies to `task` at `stage`, with what it has spent.
    Unknown costs are looked for at `stage` (a stage limit) or at every stage
    of `pipeline` (the task's own limit; only `stage` without a pipeline)."""
    if task.max_cost_usd is not None:
        stages = tuple(pipeline.stages) if pipeline is not None else (stage,) if stage else ()
        unknown = unknown_costs(conn, task, stages, stage)
        return Budget(task.max_cost_usd, spent(conn, task.id), "task", unknown)
    if stage is not None and stage.max_cost_usd is not None:
        unknown = unknown_costs(conn, task, (stage,), stage)
        return Budget(
            stage.max_cost_usd, spent(conn, task.id, stage.name), f"stage {stage.name}", unknown
        )
    return None


# What an attempt's worker or verifier ran far enough to spend on: it
# exited, or was stopped or lost while it ran. A command that never started
# (or a backoff, which spends nothing by its contract) is not asked about.
_RAN = (Outcome.TIMEOUT.value, Outcome.INTERRUPTED.value, Outcome.CRASHED.value)


def unknown_costs(
    conn: Connection,
    task: repo.TaskSnapshot,
    stages: tuple[StageConfig, ...],
    current: StageConfig | None,
) -> tuple[str, ...]:
    """The task's attempts since its last `resume` at `stages` that read a
    cost-reporting format (`claude-json`) yet recorded no cost."""
    reporting = [st.name for st in stages if _reports_cost(st.output, st.verifier_output)]
    if not reporting:
        return ()
    a, t = repo.attempts, repo.transitions
    since = conn.execute(
        select(func.max(t.c.at)).where(t.c.task_id == task.id, t.c.event == Event.RESUME.value)
    ).scalar()
    query = (
        select(a.c.stage, a.c.number)
        .where(
            a.c.task_id == task.id,
            a.c.stage.in_(reporting),
            a.c.finished_at.is_not(None),
            a.c.cost_usd.is_(None),
            a.c.outcome != Outcome.BACKOFF.value,
            or_(
                a.c.worker_exit.is_not(None),
                a.c.verifier_exit.is_not(None),
                a.c.outcome.in_(_RAN),
            ),
        )
        .order_by(a.c.id)
    )
    if since is not None:
        query = query.where(a.c.started_at >= since)
    here = None if current is None else current.name
    return tuple(
        f"attempt {number}" if name == here else f"{name} attempt {number}"
        for name, number in conn.execute(query)
    )


def halt_if_over(
    conn: Connection,
    task: repo.TaskSnapshot,
    stage: StageConfig,
    *,
    now: datetime,
    actor: str,
    pipeline: PipelineConfig | None = None,
) -> Budget | None:
    """Halt a ready `task` as `budget` when its budget is reached; the budget then."""
    budget = budget_of(conn, task, stage, pipeline)
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


def _reports_cost(*formats: str) -> bool:
    """Whether a stage reading these output formats is told its cost by the
    agent's own output (`AgentKind.reports_cost`), so a missing figure is
    an unknown cost, not one the agent chose not to report."""
    return any(kind is not None and kind.reports_cost for kind in map(kinds.reading, formats))
