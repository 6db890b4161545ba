"""The schema as SQLAlchemy Core tables. Table and column names are a
contract: users query them directly (docs/reference/sql.md).

This is the one definition of the schema: the code, Alembic's
`target_metadata` (so `alembic check` and the migration tests compare the
migrated database against it) and the test that docs/reference/sql.md
documents every column all read it. No ORM classes are mapped onto it: the tick must not
import `sqlalchemy.orm` (~60 ms a tick, which cron pays 1,440 times a day),
and a second, typed copy of every column would be one more place to edit for
each new column.

Timestamps are aware UTC datetimes in Python. SQLite has no time zone type,
so `UTCDateTime` stores naive UTC text there and re-attaches UTC on the way
out; PostgreSQL stores `timestamptz`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from orchestrator.domain.decide import HaltReason, Outcome
from orchestrator.domain.pipeline import RECORDED_EVENTS, Status

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC in, aware UTC out, whatever the backend stores."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # a raw value read through a view
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def one_of(column: str, values: Any) -> str:
    """A CHECK that `column` holds one of `values` (or NULL): the database
    refuses a state the code does not know, whoever writes it."""
    listed = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({listed})"


# One unit of work. `version` is the compare-and-set fence: it equals the
# `seq` of the task's newest transition, and every state change bumps it.
tasks = Table(
    "tasks",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("slug", String(63), nullable=False, unique=True),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False, default=""),
    Column("pipeline", String(63), nullable=False),
    Column("priority", Integer, nullable=False, default=0),
    Column("stage", String(63), nullable=False, index=True),
    Column("status", String(32), nullable=False, index=True),
    Column("halt_reason", String(64)),
    Column("run", Integer, nullable=False, default=1),
    Column("version", Integer, nullable=False, default=0),
    Column("next_hint", Text, nullable=False, default=""),
    Column("hint_source", String(16)),
    Column("host", String(255)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # The task's own budget (`add --budget`, `resume --budget`): NULL leaves
    # it to its stages' `max_cost_usd`.
    Column("max_cost_usd", Float),
    # Not claimed before this time (a worker asked to be retried later).
    Column("backoff_until", UTCDateTime),
    # A task is a branch (a pipeline with `repository`): `task/<slug>`, the
    # branch it started from, and that branch's tip when its worktree was made.
    Column("branch", String(255)),
    Column("base_branch", String(255)),
    Column("base_commit", String(64)),
    # Landed (`land`): the commit the base branch moved to (merge), or the
    # one pushed (pr), and the pull request's address (0011).
    Column("landed_commit", String(64)),
    Column("pr_url", Text),
    # The task whose attempt added this one as a subtask (`orchestrator mcp`,
    # `add_subtask`); NULL for a task a person or a script added (0016). No
    # foreign key (SQLite cannot add a named one in place); tasks are never
    # deleted, and the invariant checker holds it to an existing task.
    Column("parent_id", Integer),
    # The pipeline version the task was added on (`pipeline_versions.hash`,
    # 0018); NULL for a task added before versions were recorded.
    Column("pipeline_version", String(64)),
    CheckConstraint(one_of("status", [s.value for s in Status]), name="status"),
    CheckConstraint(one_of("halt_reason", [r.value for r in HaltReason]), name="halt_reason"),
)
# Claims read the ready tasks in priority order, oldest first, and stop at the
# first one they may take: the index must hold exactly that order.
Index("ix_tasks_claim", tasks.c.status, tasks.c.priority.desc(), tasks.c.id)

# One tick that did work; a run of idle ticks shares one row per host, moved
# forward by each (claimed = recovered = advanced = 0, started = finished).
ticks = Table(
    "ticks",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("claimed", Integer, nullable=False, default=0),
    Column("recovered", Integer, nullable=False, default=0),
    Column("advanced", Integer, nullable=False, default=0),
    Column("exit_code", Integer),
)

# One run of worker + verifier. Open while `finished_at` is NULL; the lease
# (`lease_token`, `lease_expires_at`) fences late writers, and the process
# columns let a later tick kill an orphan without hitting a reused pid.
attempts = Table(
    "attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("task_id", ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("stage", String(63), nullable=False),
    Column("run", Integer, nullable=False),
    Column("number", Integer, nullable=False),
    Column("outcome", String(32)),
    Column("pass", Boolean),
    Column("score", Float),
    Column("reasons", Text),  # JSON list of strings
    Column("next_hint", Text),
    Column("hint", Text, nullable=False, default=""),  # what this attempt was given
    Column("error", Text),
    Column("worker_exit", Integer),
    Column("verifier_exit", Integer),
    Column("plateau", Text),  # JSON: the plateau decision's numbers
    Column("late_result", Text),  # JSON: a result that lost its fence, kept
    Column("tick_id", ForeignKey("ticks.id", ondelete="SET NULL")),
    Column("lease_token", String(32), nullable=False),
    Column("lease_expires_at", UTCDateTime, nullable=False),
    Column("host", String(255), nullable=False),
    Column("boot_id", String(64), nullable=False),
    Column("tick_pid", Integer, nullable=False),
    Column("tick_start", String(64)),
    Column("pid", Integer),
    Column("pgid", Integer),
    Column("proc_start", String(64)),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, index=True),
    # What the agent reported spending (its output envelope or
    # $ORCHESTRATOR_USAGE_FILE); NULL where it said nothing.
    Column("cost_usd", Float),
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("turns", Integer),
    Column("duration_ms", Integer),
    Column("session_id", String(255)),
    # The workspace after the attempt (`workspace.fingerprint`), and whether
    # the attempt changed it; NULL when not looked at.
    Column("workspace_hash", String(80)),
    Column("workspace_changed", Boolean),
    # The commit the workspace was at when the worker started (0006):
    # `repo.START_PENDING` until then, `repo.START_NO_COMMIT` without one;
    # NULL on attempts from before the record. The gate diffs against the
    # first attempt's of the stage's run.
    Column("start_commit", String(64)),
    # The commit a passed attempt's work became on the task's branch.
    Column("commit_sha", String(64)),
    # The stage's `[pools.NAME]` when the attempt was claimed (0015): what
    # the pool's running count and daily spend are summed over.
    Column("pool", String(255)),
    # When this attempt's kept work (its `refs/orchestrator/` snapshot) was
    # put back on the task's branch (0014): `restore`, or `on_halt = "best"`.
    Column("restored_at", UTCDateTime),
    # Best of N (0013): the stage's round this attempt is a candidate of
    # (NULL: an attempt on its own), its slot 1..candidates, and the round's
    # size. One attempt alone is slot 1 of 1.
    Column("round", Integer),
    Column("candidate", Integer, nullable=False, server_default=text("1")),
    Column("candidates", Integer, nullable=False, server_default=text("1")),
    # The pipeline version the attempt ran (0018), written when it is
    # claimed; NULL on attempts from before versions were recorded.
    Column("pipeline_version", String(64)),
    UniqueConstraint("task_id", "stage", "number"),
    Index("ix_attempts_pool_finished_at", "pool", "finished_at"),
    Index("ix_attempts_task_id_stage_run", "task_id", "stage", "run"),
    CheckConstraint(one_of("outcome", [o.value for o in Outcome]), name="outcome"),
)
# At most one unfinished attempt per task and candidate slot (an attempt on
# its own is slot 1), whatever the interleaving; it also serves the claim's
# and recovery's look for open attempts. On PostgreSQL it is the same
# partial index (`WHERE finished_at IS NULL`, made by migration 0013): a
# `postgresql_where` here would import the PostgreSQL dialect, a tenth of
# the Core's import time, into every SQLite tick.
Index(
    "uq_attempts_open_task_id_candidate",
    attempts.c.task_id,
    attempts.c.candidate,
    unique=True,
    sqlite_where=attempts.c.finished_at.is_(None),
)

# One row per `[pools.NAME]` a claim has met (0015): the row a claim locks
# to count the pool's running attempts, and the pool's pause. A usage limit
# sets `paused_until`; until then no host claims for the pool.
pools = Table(
    "pools",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("paused_until", UTCDateTime),
    Column("paused_at", UTCDateTime),
    Column("pause_reason", Text),
    # The task whose attempt met the limit (its events carry it).
    Column("paused_task_id", ForeignKey("tasks.id", ondelete="SET NULL")),
    # Limits in a row that named no reset time: the exponential wait's step.
    Column("pause_streak", Integer, nullable=False, default=0),
    CheckConstraint("pause_streak >= 0", name="pause_streak"),
    CheckConstraint("(paused_until IS NULL) = (paused_at IS NULL)", name="paused_together"),
)

# Every change of state, written in the same transaction as the change.
transitions = Table(
    "transitions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("task_id", ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("from_state", String(128)),
    Column("to_state", String(128), nullable=False),
    Column("event", String(32), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("reason", Text),
    Column("note", Text),
    Column("attempt_id", ForeignKey("attempts.id", ondelete="SET NULL"), index=True),
    Column("at", UTCDateTime, nullable=False),
    UniqueConstraint("task_id", "seq"),
    CheckConstraint(one_of("event", RECORDED_EVENTS), name="event"),
)

# Outbox: a transition of interest (orchestrator.domain.event_kinds) writes its
# event here in the transition's own transaction; the tick hands it to hooks
# after commit. `dispatched_at` is set once a delivery row exists for every
# hook configured then (a hook added later does not get old news).
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("task_id", ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("attempt_id", ForeignKey("attempts.id", ondelete="SET NULL")),
    Column("payload", Text, nullable=False),  # JSON: what a hook gets on stdin
    Column("at", UTCDateTime, nullable=False),
    Column("dispatched_at", UTCDateTime, index=True),
)

# One event handed to one hook: at least once, retried with capped
# exponential backoff. `next_try_at` doubles as the claim of a try in flight
# (pushed past the hook's timeout), so two ticks do not run the same try.
deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", ForeignKey("events.id", ondelete="CASCADE"), nullable=False),
    Column("hook", String(255), nullable=False),
    Column("tries", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("next_try_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    UniqueConstraint("event_id", "hook"),
    Index("ix_deliveries_delivered_at_next_try_at", "delivered_at", "next_try_at"),
)

# The merge queue's lock: one row per repository a pipeline lands into. A
# lease, not a held transaction: `owner` (the tick, as host:pid:start) holds
# it until `expires_at`, so no transaction stays open across a rebase and a
# `land_check`; a dead owner's lease is taken over (docs/decisions/landing.md).
land_locks = Table(
    "land_locks",
    metadata,
    Column("repository", String(1024), primary_key=True),
    Column("owner", String(255)),
    Column("task_id", Integer),
    Column("expires_at", UTCDateTime),
)

# `add --after`: the task `task_id` is not claimed until the task `after_id`
# is complete (0016). Written once, at `add`, so a cycle can only be made
# inside one `add`'s input, which refuses it.
task_dependencies = Table(
    "task_dependencies",
    metadata,
    Column("task_id", ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("after_id", ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True, index=True),
    CheckConstraint("task_id <> after_id", name="not_itself"),
)

# Every pipeline version a host loaded (0018): the content hash of what its
# stages do, and that definition as JSON, for display and diffs only (a
# host runs what its own config says, never a definition read from here).
# Written once per version, by the first host that loads it.
pipeline_versions = Table(
    "pipeline_versions",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("pipeline", String(63), nullable=False, index=True),
    Column("definition", Text, nullable=False),
    Column("first_seen", UTCDateTime, nullable=False),
    Column("host", String(255), nullable=False),
)
