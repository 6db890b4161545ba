"""A landing that keeps failing halts: `tasks.halt_reason` may be
`land_failed` (`max_land_sendbacks`: the landing sent the task back that
many times since it was added or last resumed, and failed once more).

Only the CHECK changes; on SQLite that needs the tasks table rebuilt, so
the views of 0001 (and 0003's `costs`) are dropped and made again around
it, and the claim's index is made again exactly, as in 0011.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

HALT_REASONS = (
    "score_plateau",
    "max_attempts",
    "interrupted",
    "unknown_stage",
    "manual",
    "budget",
    "no_progress",
    "land_refused",  # 0011
)
NEW_HALT_REASONS = (*HALT_REASONS, "land_failed")


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _rebuild(NEW_HALT_REASONS)


def downgrade() -> None:
    # The older check refuses it: the halt reads as the one that needs a
    # person to that code, which it is (resume works the same).
    op.execute("UPDATE tasks SET halt_reason = 'land_refused' WHERE halt_reason = 'land_failed'")
    _rebuild(HALT_REASONS)


def _rebuild(halt_reasons: tuple[str, ...]) -> None:
    views = _module("0001_initial.py")
    op.execute("DROP VIEW IF EXISTS costs")  # 0003's view reads tasks too
    views.drop_views()
    with op.batch_alter_table("tasks", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_tasks_halt_reason"), type_="check")
        batch.create_check_constraint("halt_reason", one_of("halt_reason", halt_reasons))
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
