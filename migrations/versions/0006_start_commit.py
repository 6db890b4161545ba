"""`attempts.start_commit`: the commit the workspace was at when the worker
started, so the gate diffs the stage's work against where it began rather
than against a commit guessed from (worker-chosen) commit dates.

One nullable column, no CHECK: SQLite adds it in place, without rebuilding
the table or its views. Rows from before stay NULL ("not recorded").

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("start_commit", sa.String(64), nullable=True))


def downgrade() -> None:
    # In place on both (SQLite 3.35+): a batch rebuild would have to drop and
    # make again the views that read `attempts`.
    op.execute("ALTER TABLE attempts DROP COLUMN start_commit")
