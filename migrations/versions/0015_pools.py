"""Pools: agents that share an account share its limits.

- `pools`: one row per `[pools.NAME]` a claim has met, locked by the claim
  to count the pool's running attempts, and holding its pause.
- `attempts` gains `pool` (the stage's pool when claimed), indexed with
  `finished_at` for the running count and the daily spend.

A new table and a nullable column added in place: no view is rebuilt.

Revision ID: 0015
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("paused_until", UTC, nullable=True),
        sa.Column("paused_at", UTC, nullable=True),
        sa.Column("pause_reason", sa.Text(), nullable=True),
        sa.Column("paused_task_id", sa.Integer(), nullable=True),
        sa.Column("pause_streak", sa.Integer(), nullable=False),
        sa.CheckConstraint("pause_streak >= 0", name="ck_pools_pause_streak"),
        sa.CheckConstraint(
            "(paused_until IS NULL) = (paused_at IS NULL)", name="ck_pools_paused_together"
        ),
        sa.ForeignKeyConstraint(
            ["paused_task_id"],
            ["tasks.id"],
            name="fk_pools_paused_task_id_tasks",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("name", name="pk_pools"),
    )
    op.add_column("attempts", sa.Column("pool", sa.String(255), nullable=True))
    op.create_index("ix_attempts_pool_finished_at", "attempts", ["pool", "finished_at"])


def downgrade() -> None:
    op.drop_index("ix_attempts_pool_finished_at", table_name="attempts")
    op.drop_column("attempts", "pool")
    op.drop_table("pools")
