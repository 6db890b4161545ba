"""Best of N: a stage's round of candidates.

- `attempts` gains `round` (the stage's round an attempt is a candidate
  of; NULL for an attempt on its own), `candidate` (its slot, 1..K) and
  `candidates` (the round's K). An attempt on its own is slot 1 of 1.
- The one-open-attempt index becomes one open attempt per task and slot:
  `uq_attempts_open_task_id` is replaced by
  `uq_attempts_open_task_id_candidate`.

Columns added in place with a default, the index dropped and made again:
no table is rebuilt, no view read.

Revision ID: 0013
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

OPEN = sa.text("finished_at IS NULL")


def upgrade() -> None:
    op.add_column("attempts", sa.Column("round", sa.Integer(), nullable=True))
    for name in ("candidate", "candidates"):
        op.add_column(
            "attempts",
            sa.Column(name, sa.Integer(), nullable=False, server_default=sa.text("1")),
        )
    op.drop_index("uq_attempts_open_task_id", table_name="attempts")
    op.create_index(
        "uq_attempts_open_task_id_candidate",
        "attempts",
        ["task_id", "candidate"],
        unique=True,
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )


def downgrade() -> None:
    # The older index allows one open attempt per task: a round still open
    # keeps only its first open slot open, the others close as interrupted.
    op.execute(
        "UPDATE attempts SET finished_at = started_at, outcome = 'interrupted', "
        "error = 'closed by db downgrade (a round of candidates was open)' "
        "WHERE finished_at IS NULL AND id NOT IN (SELECT min(id) FROM attempts "
        "WHERE finished_at IS NULL GROUP BY task_id)"
    )
    op.drop_index("uq_attempts_open_task_id_candidate", table_name="attempts")
    op.create_index(
        "uq_attempts_open_task_id",
        "attempts",
        ["task_id"],
        unique=True,
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )
    for name in ("candidates", "candidate", "round"):
        op.drop_column("attempts", name)
