"""Landing: the step between a task's last stage and `complete`.

- `tasks.status` may be `landing`; `tasks.halt_reason` may be
  `land_refused`; `transitions.event` may be `landed` or `send_back`.
- `tasks` gains `landed_commit` (what the base branch moved to, or what was
  pushed) and `pr_url` (the pull request's address).
- `land_locks`: the merge queue's lease, one row per repository.

As in 0004 the lists are written out; on SQLite the CHECKs need the tables
rebuilt, so the views are dropped and made again around it, and the claim's
index is made again exactly.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
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
)
HALT_REASONS = (
    "score_plateau",
    "max_attempts",
    "interrupted",
    "unknown_stage",
    "manual",
    "budget",
    "no_progress",
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
)
NEW_STATUSES = (*STATUSES, "landing")
NEW_HALT_REASONS = (*HALT_REASONS, "land_refused")
NEW_EVENTS = (*EVENTS, "landed", "send_back")
TASK_COLUMNS = (("landed_commit", sa.String(length=64)), ("pr_url", sa.Text()))


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _rebuild(NEW_STATUSES, NEW_HALT_REASONS, NEW_EVENTS, add=True)
    op.create_table(
        "land_locks",
        sa.Column("repository", sa.String(1024), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("repository", name="pk_land_locks"),
    )


def downgrade() -> None:
    op.drop_table("land_locks")
    # What the older checks refuse: a landing task reads as the halted one
    # it becomes (resume runs its last stage again, then it completes), a
    # landing's halt as a manual one; the two landing events as halts.
    op.execute(
        "UPDATE tasks SET status = 'halted', halt_reason = 'manual' WHERE status = 'landing'"
    )
    op.execute("UPDATE tasks SET halt_reason = 'manual' WHERE halt_reason = 'land_refused'")
    op.execute("UPDATE transitions SET event = 'halt' WHERE event IN ('landed', 'send_back')")
    _rebuild(STATUSES, HALT_REASONS, EVENTS, add=False)


def _rebuild(
    statuses: tuple[str, ...], halt_reasons: tuple[str, ...], events: tuple[str, ...], *, add: bool
) -> None:
    views = _module("0001_initial.py")
    op.execute("DROP VIEW IF EXISTS costs")  # 0003's view reads attempts and tasks
    views.drop_views()
    with op.batch_alter_table("tasks", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_tasks_status"), type_="check")
        batch.create_check_constraint("status", one_of("status", statuses))
        batch.drop_constraint(op.f("ck_tasks_halt_reason"), type_="check")
        batch.create_check_constraint("halt_reason", one_of("halt_reason", halt_reasons))
        for name, kind in TASK_COLUMNS if add else ():
            batch.add_column(sa.Column(name, kind, nullable=True))
        for name, _kind in () if add else reversed(TASK_COLUMNS):
            batch.drop_column(name)
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
