"""The one read telemetry makes: a recorded attempt's row (how it ended,
what the agent reported) and the id of its run's previous attempt, whose
span it links to."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, func, select

from orchestrator.storage.db import read_tx
from orchestrator.storage.tables import attempts, tasks, transitions

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


def transitions_mark(engine: Engine) -> int:
    """The newest transition's id: what a tick's landings come after."""
    with read_tx(engine) as conn:
        return int(conn.execute(select(func.max(transitions.c.id))).scalar() or 0)


def landings_after(engine: Engine, mark: int) -> list[dict[str, Any]]:
    """The landings that ended after transition `mark` (landed, sent back,
    or given up), each with when it began (the transition into `landing`)
    and the attempt it landed (its run's last before it)."""
    t, began = transitions, transitions.alias("began")
    ended = (
        select(
            t.c.task_id,
            t.c.event,
            t.c.reason,
            t.c.at,
            t.c.from_state,
            began.c.at.label("began_at"),
            tasks.c.slug,
            tasks.c.pipeline,
            tasks.c.created_at,
            tasks.c.landed_commit,
            tasks.c.pr_url,
        )
        .join(tasks, tasks.c.id == t.c.task_id)
        .outerjoin(began, (began.c.task_id == t.c.task_id) & (began.c.seq == t.c.seq - 1))
        .where(t.c.id > mark, t.c.event.in_(_LANDING_ENDS), t.c.from_state.like("%:landing"))
        .order_by(t.c.id)
    )
    found: list[dict[str, Any]] = []
    with read_tx(engine) as conn:
        for row in conn.execute(ended):
            landing = row._asdict()
            attempt = conn.execute(
                select(attempts.c.id, attempts.c.run)
                .where(attempts.c.task_id == row.task_id, attempts.c.started_at <= row.at)
                .order_by(attempts.c.id.desc())
                .limit(1)
            ).first()
            landing["attempt_id"], landing["run"] = attempt if attempt else (None, None)
            found.append(landing)
    return found


_LANDING_ENDS = ("landed", "send_back", "give_up")
