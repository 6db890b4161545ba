"""A landed task a feature follows waits `held` (a pull request, until it
is merged or closed): `tasks.status` may be `held`, `transitions.event`
`hold`, and `tasks.halt_reason` `pr_closed` or `feedback_rounds` (what a
held task's follower halts it for).

Only the CHECKs change; on SQLite that needs the tables rebuilt, so the
views of 0001 (and 0003's `costs`) are dropped and made again around it,
and the claim's index is made again exactly, as in 0011.

Revision ID: 0020
Revises: 0018
Create Date: 2026-12-05
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0018"
branch_labels = None
depends_on = None

STATUSES = (
    "ready",
    "running",
    "awaiting_approval",
    "approved",
    "halted",
    "cancelled",
    "complete",
    "landing",  # 0011
)
HALT_REASONS = (
    "score_plateau",
    "max_attempts",
    "interrupted",
    "unknown_stage",
    "manual",
    "budget",
    "no_progress",
    "land_refused",  # 0011
    "land_failed",  # 0017
)
EVENTS = (
    "add",
    "claim",
    "stage_passed",
    "await_approval",
    "retry",
    "give_up",
    "approve",
    "reject",
    "advance",
    "resume",
    "halt",
    "cancel",
    "landed",  # 0011
    "send_back",  # 0011
    "migrate",  # 0018
)
NEW_STATUSES = (*STATUSES, "held")
NEW_HALT_REASONS = (*HALT_REASONS, "pr_closed", "feedback_rounds")
NEW_EVENTS = (*EVENTS, "hold")


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _rebuild(NEW_STATUSES, NEW_HALT_REASONS, NEW_EVENTS)


def downgrade() -> None:
    # What the older checks refuse: a held task was landed (its pull
    # request open), so it reads as complete, as before the hold existed;
    # the follower's halts as the landing's refusal; `hold` as `landed`.
    op.execute("UPDATE tasks SET status = 'complete', stage = 'complete' WHERE status = 'held'")
    op.execute(
        "UPDATE tasks SET halt_reason = 'land_refused' "
        "WHERE halt_reason IN ('pr_closed', 'feedback_rounds')"
    )
    op.execute("UPDATE transitions SET event = 'landed' WHERE event = 'hold'")
    _rebuild(STATUSES, HALT_REASONS, EVENTS)


def _rebuild(
    statuses: tuple[str, ...], halt_reasons: tuple[str, ...], events: tuple[str, ...]
) -> None:
    views = _module("0001_initial.py")
    op.execute("DROP VIEW IF EXISTS costs")  # 0003's view reads attempts and tasks
    views.drop_views()
    with op.batch_alter_table("tasks", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_tasks_status"), type_="check")
        batch.create_check_constraint("status", one_of("status", statuses))
        batch.drop_constraint(op.f("ck_tasks_halt_reason"), type_="check")
        batch.create_check_constraint("halt_reason", one_of("halt_reason", halt_reasons))
    with op.batch_alter_table("transitions", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_transitions_event"), type_="check")
        batch.create_check_constraint("event", one_of("event", events))
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP INDEX IF EXISTS ix_tasks_claim")
        op.create_index("ix_tasks_claim", "tasks", ["status", sa.text("priority DESC"), "id"])
    views.create_views()
    op.execute(_module("0003_agent_usage.py").COSTS_VIEW)


def _module(name: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        f"orchestrator_migration_{name[:4]}", Path(__file__).with_name(name)
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
