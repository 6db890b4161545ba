"""Initial schema: tasks, ticks, attempts, transitions and the three views.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)

# The views are part of the contract (users query them). Each revision drops
# them first and recreates them last: SQLite's batch mode cannot rebuild a
# table that a view reads.
VIEWS = {
    "task_states": """
CREATE VIEW task_states AS
SELECT t.id AS task_id,
       t.slug AS task,
       t.title,
       t.pipeline,
       t.priority,
       t.stage,
       t.status,
       CASE WHEN t.status IN ('ready', 'complete') THEN t.stage
            ELSE t.stage || ':' || t.status END AS state,
       t.halt_reason,
       (SELECT count(*) FROM attempts a
         WHERE a.task_id = t.id AND a.stage = t.stage) AS attempts,
       (SELECT a.score FROM attempts a
         WHERE a.task_id = t.id AND a.stage = t.stage AND a.score IS NOT NULL
         ORDER BY a.number DESC LIMIT 1) AS score,
       t.created_at,
       t.updated_at
  FROM tasks t
""",
    "score_history": """
CREATE VIEW score_history AS
SELECT t.slug AS task,
       a.task_id,
       a.stage,
       a.number AS attempt,
       a.run,
       a.score,
       a.pass,
       max(a.score) OVER (PARTITION BY a.task_id, a.stage ORDER BY a.number
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS best_so_far,
       a.finished_at AS at
  FROM attempts a
  JOIN tasks t ON t.id = a.task_id
 WHERE a.score IS NOT NULL
""",
    "timeline": """
CREATE VIEW timeline AS
SELECT tr.id,
       t.slug AS task,
       tr.task_id,
       tr.seq,
       tr.from_state,
       tr.to_state,
       tr.event,
       tr.actor,
       tr.reason,
       tr.note,
       tr.attempt_id,
       tr.at
  FROM transitions tr
  JOIN tasks t ON t.id = tr.task_id
""",
}


def drop_views() -> None:
    for name in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")


def create_views() -> None:
    for ddl in VIEWS.values():
        op.execute(ddl)


def upgrade() -> None:
    drop_views()
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(63), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("pipeline", sa.String(63), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(63), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("halt_reason", sa.String(64), nullable=True),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("next_hint", sa.Text(), nullable=False),
        sa.Column("hint_source", sa.String(16), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tasks"),
        sa.UniqueConstraint("slug", name="uq_tasks_slug"),
    )
    op.create_index("ix_tasks_stage", "tasks", ["stage"])
    op.create_index("ix_tasks_status", "tasks", ["status"])
    op.create_index("ix_tasks_claim", "tasks", ["status", sa.text("priority DESC"), "id"])
    op.create_table(
        "ticks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", UTC, nullable=False),
        sa.Column("finished_at", UTC, nullable=True),
        sa.Column("claimed", sa.Integer(), nullable=False),
        sa.Column("recovered", sa.Integer(), nullable=False),
        sa.Column("advanced", sa.Integer(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_ticks"),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(63), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("pass", sa.Boolean(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("reasons", sa.Text(), nullable=True),
        sa.Column("next_hint", sa.Text(), nullable=True),
        sa.Column("hint", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker_exit", sa.Integer(), nullable=True),
        sa.Column("verifier_exit", sa.Integer(), nullable=True),
        sa.Column("plateau", sa.Text(), nullable=True),
        sa.Column("late_result", sa.Text(), nullable=True),
        sa.Column("tick_id", sa.Integer(), nullable=True),
        sa.Column("lease_token", sa.String(32), nullable=False),
        sa.Column("lease_expires_at", UTC, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("boot_id", sa.String(64), nullable=False),
        sa.Column("tick_pid", sa.Integer(), nullable=False),
        sa.Column("tick_start", sa.String(64), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("pgid", sa.Integer(), nullable=True),
        sa.Column("proc_start", sa.String(64), nullable=True),
        sa.Column("started_at", UTC, nullable=False),
        sa.Column("finished_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name="fk_attempts_task_id_tasks", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["tick_id"], ["ticks.id"], name="fk_attempts_tick_id_ticks", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_attempts"),
        sa.UniqueConstraint("task_id", "stage", "number", name="uq_attempts_task_id_stage_number"),
    )
    op.create_index("ix_attempts_finished_at", "attempts", ["finished_at"])
    op.create_index("ix_attempts_task_id_stage_run", "attempts", ["task_id", "stage", "run"])
    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("from_state", sa.String(128), nullable=True),
        sa.Column("to_state", sa.String(128), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name="fk_transitions_task_id_tasks", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name="fk_transitions_attempt_id_attempts",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_transitions"),
        sa.UniqueConstraint("task_id", "seq", name="uq_transitions_task_id_seq"),
    )
    op.create_index("ix_transitions_attempt_id", "transitions", ["attempt_id"])
    create_views()


def downgrade() -> None:
    drop_views()
    op.drop_table("transitions")
    op.drop_table("attempts")
    op.drop_table("ticks")
    op.drop_table("tasks")
