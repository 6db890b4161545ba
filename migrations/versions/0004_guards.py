"""Runaway guards: a task's backoff, an attempt's workspace fingerprint.

- `tasks.backoff_until`: a task whose worker asked to be retried later is
  not claimed before then, by any tick on any host.
- `attempts.workspace_hash` / `attempts.workspace_changed`: what the
  workspace looked like after the attempt, and whether the attempt changed it.
- `tasks.halt_reason` may be 'no_progress'; `attempts.outcome` may be
  'backoff'.

As in 0002 the lists are written out; on SQLite the CHECKs need the tables
rebuilt, so the views of 0001 are dropped and made again around it, and the
indexes a rebuild does not keep exactly are made again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


HALT_REASONS = (
    "score_plateau",
    "max_attempts",
    "interrupted",
    "unknown_stage",
    "manual",
    "budget",  # 0003
)
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
NEW_HALT_REASONS = (*HALT_REASONS, "no_progress")
NEW_OUTCOMES = (*OUTCOMES, "backoff")


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _rebuild(NEW_HALT_REASONS, NEW_OUTCOMES, add=True)


def downgrade() -> None:
    # Values the older checks refuse: a no_progress halt reads as a manual
    # one, a backoff wait as the worker error it was.
    op.execute("UPDATE tasks SET halt_reason = 'manual' WHERE halt_reason = 'no_progress'")
    op.execute("UPDATE attempts SET outcome = 'worker_error' WHERE outcome = 'backoff'")
    _rebuild(HALT_REASONS, OUTCOMES, add=False)


def _rebuild(halt_reasons: tuple[str, ...], outcomes: tuple[str, ...], *, add: bool) -> None:
    views = _views()
    op.execute("DROP VIEW IF EXISTS costs")  # 0003's view reads attempts too
    views.drop_views()
    op.drop_index("uq_attempts_open_task_id", table_name="attempts")
    with op.batch_alter_table("tasks", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_tasks_halt_reason"), type_="check")
        batch.create_check_constraint("halt_reason", one_of("halt_reason", halt_reasons))
        if add:
            batch.add_column(sa.Column("backoff_until", sa.DateTime(timezone=True)))
        else:
            batch.drop_column("backoff_until")
    with op.batch_alter_table("attempts", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_attempts_outcome"), type_="check")
        batch.create_check_constraint("outcome", one_of("outcome", outcomes))
        if add:
            batch.add_column(sa.Column("workspace_hash", sa.String(80)))
            batch.add_column(sa.Column("workspace_changed", sa.Boolean()))
        else:
            batch.drop_column("workspace_changed")
            batch.drop_column("workspace_hash")
    op.create_index(
        "uq_attempts_open_task_id",
        "attempts",
        ["task_id"],
        unique=True,
        sqlite_where=sa.text("finished_at IS NULL"),
        postgresql_where=sa.text("finished_at IS NULL"),
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP INDEX IF EXISTS ix_tasks_claim")
        op.create_index("ix_tasks_claim", "tasks", ["status", sa.text("priority DESC"), "id"])
    views.create_views()
    op.execute(_module("0003_agent_usage.py").COSTS_VIEW)


def _views():  # type: ignore[no-untyped-def]
    """The views of 0001, which a SQLite rebuild must drop and recreate."""
    return _module("0001_initial.py")


def _module(name: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        f"orchestrator_migration_{name[:4]}", Path(__file__).with_name(name)
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
