"""`attempts.restored_at`: when this attempt's kept work was put back on
the task's branch (`orchestrator restore`, or a stage's `on_halt =
"best"`), so `show`, the task page and the score curve can mark it.

One nullable column, no CHECK: SQLite adds it in place. Rows from before
stay NULL (never restored).

Revision ID: 0014
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("restored_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE attempts DROP COLUMN restored_at")
