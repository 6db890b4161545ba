"""The outbox: `events` (written with the transition that caused them) and
`deliveries` (one event handed to one hook, with its tries).

New tables only: no view reads them and no table is rebuilt, so SQLite needs
no batch mode here.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("at", UTC, nullable=False),
        sa.Column("dispatched_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name="fk_events_task_id_tasks", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name="fk_events_attempt_id_attempts",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_task_id", "events", ["task_id"])
    op.create_index("ix_events_dispatched_at", "events", ["dispatched_at"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("hook", sa.String(255), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_try_at", UTC, nullable=False),
        sa.Column("delivered_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name="fk_deliveries_event_id_events", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.UniqueConstraint("event_id", "hook", name="uq_deliveries_event_id_hook"),
    )
    op.create_index(
        "ix_deliveries_delivered_at_next_try_at", "deliveries", ["delivered_at", "next_try_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_delivered_at_next_try_at", table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_index("ix_events_dispatched_at", table_name="events")
    op.drop_index("ix_events_task_id", table_name="events")
    op.drop_table("events")
