"""Pipeline versions: what a task and each attempt ran.

- `pipeline_versions`: one row per pipeline version a host loaded (the
  content hash of its definition, the definition as JSON for display, when
  and by which host it was first seen).
- `tasks.pipeline_version`: the version a task was added on.
- `attempts.pipeline_version`: the version an attempt ran.

- `transitions.event` may be `migrate` (a person moved a task to another
  version). Only the CHECK changes; on SQLite that rebuilds the
  transitions table, so the views of 0001 (and 0003's `costs`) are dropped
  and made again around it, as in 0011.

The table and the two nullable columns are added in place. Rows from
before stay NULL.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

EVENTS = (
    "add",
    "claim",
    "stage_passed",
    "await_approval",
    "retry",
    "give_up",
    "approve",
    "reject",
    "advance",
    "resume",
    "halt",
    "cancel",
    "landed",  # 0011
    "send_back",  # 0011
)
NEW_EVENTS = (*EVENTS, "migrate")


def one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


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
    _events(NEW_EVENTS)


def downgrade() -> None:
    # What the older check refuses: a migration reads as the manual step it was.
    op.execute("UPDATE transitions SET event = 'resume' WHERE event = 'migrate'")
    _events(EVENTS)
    op.drop_column("attempts", "pipeline_version")
    op.drop_column("tasks", "pipeline_version")
    op.drop_index("ix_pipeline_versions_pipeline", table_name="pipeline_versions")
    op.drop_table("pipeline_versions")


def _events(events: tuple[str, ...]) -> None:
    views = _module("0001_initial.py")
    op.execute("DROP VIEW IF EXISTS costs")  # 0003's view reads attempts and tasks
    views.drop_views()
    with op.batch_alter_table("transitions", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_transitions_event"), type_="check")
        batch.create_check_constraint("event", one_of("event", events))
    views.create_views()
    op.execute(_module("0003_agent_usage.py").COSTS_VIEW)


def _module(name: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        f"orchestrator_migration_{name[:4]}", Path(__file__).with_name(name)
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
