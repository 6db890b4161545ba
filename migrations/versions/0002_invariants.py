"""The database refuses states that must never exist.

- At most one unfinished attempt per task (a partial unique index).
- `tasks.status`, `tasks.halt_reason`, `attempts.outcome` and
  `transitions.event` hold only the values the code knows (CHECK).

The lists are written out here, not imported: a migration describes the
schema as it was at its revision. `tests/storage/test_migrations.py` keeps
them equal to the code's. On SQLite a CHECK needs the table rebuilt (batch
mode); foreign keys are switched off around it by `migrations/env.py`, or
dropping the old table would cascade into its children.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


STATUSES = ("ready", "running", "awaiting_approval", "approved", "halted", "cancelled", "complete")
HALT_REASONS = ("score_plateau", "max_attempts", "interrupted", "unknown_stage", "manual")
OUTCOMES = (
    "passed",
    "failed",
    "invalid_verdict",
    "worker_error",
    "verifier_error",
    "timeout",
    "crashed",
    "interrupted",
    "host_error",
    "database_error",
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
CHECKS = {
    "tasks": {"status": STATUSES, "halt_reason": HALT_REASONS},
    "attempts": {"outcome": OUTCOMES},
    "transitions": {"event": EVENTS},
}


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    views = _views()
    views.drop_views()
    for table, checks in CHECKS.items():
        with op.batch_alter_table(table, recreate="auto") as batch:
            for column, values in checks.items():
                batch.create_check_constraint(column, one_of(column, values))
    _restore_claim_index()
    op.create_index(
        "uq_attempts_open_task_id",
        "attempts",
        ["task_id"],
        unique=True,
        sqlite_where=sa.text("finished_at IS NULL"),
        postgresql_where=sa.text("finished_at IS NULL"),
    )
    views.create_views()


def downgrade() -> None:
    views = _views()
    views.drop_views()
    op.drop_index("uq_attempts_open_task_id", table_name="attempts")
    for table, checks in CHECKS.items():
        with op.batch_alter_table(table, recreate="auto") as batch:
            for column in checks:
                batch.drop_constraint(op.f(f"ck_{table}_{column}"), type_="check")
    _restore_claim_index()
    views.create_views()


def _restore_claim_index() -> None:
    """SQLite's rebuild reflects `priority DESC` as plain `priority`: make the
    claim's index again exactly as 0001 made it."""
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP INDEX IF EXISTS ix_tasks_claim")
    op.create_index("ix_tasks_claim", "tasks", ["status", sa.text("priority DESC"), "id"])


def _views():  # type: ignore[no-untyped-def]
    """The views of 0001, which a SQLite rebuild must drop and recreate."""
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "orchestrator_migration_0001", Path(__file__).with_name("0001_initial.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
