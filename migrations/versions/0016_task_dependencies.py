"""Tasks that wait on tasks, and subtasks.

- `task_dependencies(task_id, after_id)`: `add --after`; the claim passes
  over a task while any task it waits on is not `complete`.
- `tasks` gains `parent_id`: the task whose agent added this one as a
  subtask through `orchestrator mcp` (a plain integer, see below).

A new table and a nullable column: no table is rebuilt, no view read.

Revision ID: 0016
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_dependencies",
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("after_id", sa.Integer(), nullable=False),
        sa.CheckConstraint("task_id <> after_id", name="ck_task_dependencies_not_itself"),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name="fk_task_dependencies_task_id_tasks",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["after_id"],
            ["tasks.id"],
            name="fk_task_dependencies_after_id_tasks",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("task_id", "after_id", name="pk_task_dependencies"),
    )
    op.create_index("ix_task_dependencies_after_id", "task_dependencies", ["after_id"])
    # No foreign key: SQLite adds one only inline (ALTER TABLE ... REFERENCES),
    # which its reflection reads back without the name or the ON DELETE, and
    # batch mode would rebuild `tasks` and every view over it. Tasks are never
    # deleted; the invariant checker holds `parent_id` to an existing task.
    op.add_column("tasks", sa.Column("parent_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("tasks", "parent_id")
    op.drop_index("ix_task_dependencies_after_id", table_name="task_dependencies")
    op.drop_table("task_dependencies")
