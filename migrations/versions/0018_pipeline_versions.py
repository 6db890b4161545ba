"""Pipeline versions: what a task and each attempt ran.

- `pipeline_versions`: one row per pipeline version a host loaded (the
  content hash of its definition, the definition as JSON for display, when
  and by which host it was first seen).
- `tasks.pipeline_version`: the version a task was added on.
- `attempts.pipeline_version`: the version an attempt ran.

A new table and two nullable columns added in place: no table is rebuilt,
no view read. Rows from before stay NULL.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipeline_versions",
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("pipeline", sa.String(63), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("hash", name="pk_pipeline_versions"),
    )
    op.create_index("ix_pipeline_versions_pipeline", "pipeline_versions", ["pipeline"])
    op.add_column("tasks", sa.Column("pipeline_version", sa.String(64), nullable=True))
    op.add_column("attempts", sa.Column("pipeline_version", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("attempts", "pipeline_version")
    op.drop_column("tasks", "pipeline_version")
    op.drop_index("ix_pipeline_versions_pipeline", table_name="pipeline_versions")
    op.drop_table("pipeline_versions")
