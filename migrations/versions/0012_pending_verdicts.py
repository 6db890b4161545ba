"""Verdicts that wait: `attempts.outcome` may be 'pending'.

A verifier that prints `{"pending": true, ...}` (CI still running) makes a
`pending` attempt, which spends nothing and is rechecked later. Only the
CHECK changes; on SQLite that needs the attempts table rebuilt, so the views
of 0001 (and 0003's `costs`) are dropped and made again around it, as in 0004.

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

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
    "backoff",  # 0004
)
NEW_OUTCOMES = (*OUTCOMES, "pending")


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _rebuild(NEW_OUTCOMES)


def downgrade() -> None:
    # The older check refuses it: a wait reads as the interruption it was to
    # that code (it spent no attempt either).
    op.execute("UPDATE attempts SET outcome = 'interrupted' WHERE outcome = 'pending'")
    _rebuild(OUTCOMES)


def _rebuild(outcomes: tuple[str, ...]) -> None:
    views = _module("0001_initial.py")
    op.execute("DROP VIEW IF EXISTS costs")  # 0003's view reads attempts too
    views.drop_views()
    op.drop_index("uq_attempts_open_task_id", table_name="attempts")
    with op.batch_alter_table("attempts", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_attempts_outcome"), type_="check")
        batch.create_check_constraint("outcome", one_of("outcome", outcomes))
    op.create_index(
        "uq_attempts_open_task_id",
        "attempts",
        ["task_id"],
        unique=True,
        sqlite_where=sa.text("finished_at IS NULL"),
        postgresql_where=sa.text("finished_at IS NULL"),
    )
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
