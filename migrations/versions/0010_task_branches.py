"""A task is a branch.

- `tasks` gains `branch` (`task/<slug>`), `base_branch` (what it branched
  from and lands on) and `base_commit` (that branch's tip when the task's
  worktree was made, what the whole change is measured against).
- `attempts` gains `commit_sha`: the commit a passed attempt's work became.

Nullable columns only, added in place: no table is rebuilt, no view read.

Revision ID: 0010
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0006"
branch_labels = None
depends_on = None

TASK_COLUMNS = (
    ("branch", sa.String(length=255)),
    ("base_branch", sa.String(length=255)),
    ("base_commit", sa.String(length=64)),
)


def upgrade() -> None:
    for name, kind in TASK_COLUMNS:
        op.add_column("tasks", sa.Column(name, kind, nullable=True))
    op.add_column("attempts", sa.Column("commit_sha", sa.String(length=64), nullable=True))


def downgrade() -> None:
    # In place too (SQLite has had DROP COLUMN since 3.35): a rebuild would
    # have to drop and recreate every view that reads these tables.
    op.drop_column("attempts", "commit_sha")
    for name, _kind in reversed(TASK_COLUMNS):
        op.drop_column("tasks", name)
