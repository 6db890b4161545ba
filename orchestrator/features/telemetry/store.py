"""The one read telemetry makes: a recorded attempt's row (how it ended,
what the agent reported) and the id of its run's previous attempt, whose
span it links to."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, func, select

from orchestrator.storage.db import read_tx
from orchestrator.storage.tables import attempts

_ROW = (
    attempts.c.started_at,
    attempts.c.finished_at,
    attempts.c.outcome,
    attempts.c["pass"],
    attempts.c.score,
    attempts.c.cost_usd,
    attempts.c.input_tokens,
    attempts.c.output_tokens,
    attempts.c.turns,
    attempts.c.error,
)


def recorded_attempt(
    engine: Engine, attempt_id: int, task_id: int, run: int
) -> tuple[dict[str, Any] | None, int | None]:
    """The attempt's row (None when gone) and its run's previous attempt's id."""
    with read_tx(engine) as conn:
        found = conn.execute(select(*_ROW).where(attempts.c.id == attempt_id)).first()
        previous = conn.execute(
            select(func.max(attempts.c.id)).where(
                attempts.c.task_id == task_id,
                attempts.c.run == run,
                attempts.c.id < attempt_id,
            )
        ).scalar()
    return (None if found is None else found._asdict()), previous
