"""What `show` and `list` say about cost: per attempt usage, and a task's
spending against its budget."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from orchestrator.agents.usage import Usage
from orchestrator.domain.money import money
from orchestrator.storage import repo

USAGE_COLUMNS = tuple(Usage().columns())


def attempt_usage(conn: Connection, task_id: int) -> dict[int, dict[str, Any]]:
    """attempt id -> its usage columns (None where the agent said nothing)."""
    a = repo.attempts
    rows = conn.execute(
        select(a.c.id, *(a.c[name] for name in USAGE_COLUMNS)).where(a.c.task_id == task_id)
    )
    return {row[0]: dict(zip(USAGE_COLUMNS, row[1:], strict=True)) for row in rows}


def cost_line(cost: float | None, budget: float | None) -> str:
    spent = "none recorded" if cost is None else money(cost)
    return spent + ("" if budget is None else f" of a {money(budget)} budget")
