"""What agents cost, and budgets.

- `attempts` gains the usage an agent reported: `cost_usd`, `input_tokens`,
  `output_tokens`, `turns`, `duration_ms`, `session_id`.
- `tasks` gains `max_cost_usd`, the task's own budget.
- `tasks.halt_reason` may be `budget`.
- The `costs` view: per task and stage, the attempts and what they cost.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

HALT_REASONS = ("score_plateau", "max_attempts", "interrupted", "unknown_stage", "manual")
ADDED_HALT_REASONS = ("budget",)
USAGE_COLUMNS = (
    ("cost_usd", sa.Float()),
    ("input_tokens", sa.Integer()),
    ("output_tokens", sa.Integer()),
    ("turns", sa.Integer()),
    ("duration_ms", sa.Integer()),
    ("session_id", sa.String(length=255)),
)
COSTS_VIEW = """
CREATE VIEW costs AS
SELECT t.slug AS task,
       a.task_id,
       a.stage,
       count(*) AS attempts,
       sum(a.cost_usd) AS cost_usd,
       sum(a.input_tokens) AS input_tokens,
       sum(a.output_tokens) AS output_tokens,
       sum(a.turns) AS turns,
       sum(a.duration_ms) AS duration_ms
  FROM attempts a
  JOIN tasks t ON t.id = a.task_id
 GROUP BY t.slug, a.task_id, a.stage
"""


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    views = _views()
    views.drop_views()
    with op.batch_alter_table("tasks", recreate="auto") as batch:
        batch.add_column(sa.Column("max_cost_usd", sa.Float(), nullable=True))
        batch.drop_constraint(op.f("ck_tasks_halt_reason"), type_="check")
        batch.create_check_constraint(
            "halt_reason", one_of("halt_reason", HALT_REASONS + ADDED_HALT_REASONS)
        )
    with op.batch_alter_table("attempts") as batch:
        for name, kind in USAGE_COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    _restore_claim_index()
    views.create_views()
    op.execute(COSTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS costs")
    views = _views()
    views.drop_views()
    op.execute(
        "UPDATE tasks SET halt_reason = 'manual' WHERE halt_reason IN "
        f"({', '.join(repr(value) for value in ADDED_HALT_REASONS)})"
    )
    with op.batch_alter_table("attempts") as batch:
        for name, _kind in reversed(USAGE_COLUMNS):
            batch.drop_column(name)
    with op.batch_alter_table("tasks", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_tasks_halt_reason"), type_="check")
        batch.create_check_constraint("halt_reason", one_of("halt_reason", HALT_REASONS))
        batch.drop_column("max_cost_usd")
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
