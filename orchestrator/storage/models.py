"""The schema, as typed SQLAlchemy models. Table and column names are a
contract: users query them directly (README, "SQL schema").

Timestamps are aware UTC datetimes in Python. SQLite has no time zone type,
so `UTCDateTime` stores naive UTC text there and re-attaches UTC on the way
out; PostgreSQL stores `timestamptz`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


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


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime}


class Task(Base):
    """One unit of work. `version` is the compare-and-set fence: it equals the
    `seq` of the task's newest transition, and every state change bumps it."""

    __tablename__ = "tasks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(63), unique=True)
    title: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text, default="")
    pipeline: Mapped[str] = mapped_column(String(63))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    stage: Mapped[str] = mapped_column(String(63), index=True)
    status: Mapped[str] = mapped_column(String(32), index=True)
    halt_reason: Mapped[str | None] = mapped_column(String(64))
    run: Mapped[int] = mapped_column(Integer, default=1)
    version: Mapped[int] = mapped_column(Integer, default=0)
    next_hint: Mapped[str] = mapped_column(Text, default="")
    hint_source: Mapped[str | None] = mapped_column(String(16))
    host: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    __table_args__ = (Index("ix_tasks_claim", "status", "priority", "id"),)


class Tick(Base):
    """One tick that did work (idle ticks write nothing)."""

    __tablename__ = "ticks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    claimed: Mapped[int] = mapped_column(Integer, default=0)
    recovered: Mapped[int] = mapped_column(Integer, default=0)
    advanced: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer)


class Attempt(Base):
    """One run of worker + verifier. Open while `finished_at` is NULL; the
    lease (`lease_token`, `lease_expires_at`) fences late writers, and the
    process columns let a later tick kill an orphan without hitting a reused pid."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    stage: Mapped[str] = mapped_column(String(63))
    run: Mapped[int] = mapped_column(Integer)
    number: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str | None] = mapped_column(String(32))
    passed: Mapped[bool | None] = mapped_column("pass", Boolean)
    score: Mapped[float | None] = mapped_column(Float)
    reasons: Mapped[str | None] = mapped_column(Text)  # JSON list of strings
    next_hint: Mapped[str | None] = mapped_column(Text)
    hint: Mapped[str] = mapped_column(Text, default="")  # what this attempt was given
    error: Mapped[str | None] = mapped_column(Text)
    worker_exit: Mapped[int | None] = mapped_column(Integer)
    verifier_exit: Mapped[int | None] = mapped_column(Integer)
    plateau: Mapped[str | None] = mapped_column(Text)  # JSON: the plateau decision's numbers
    late_result: Mapped[str | None] = mapped_column(Text)  # JSON: a stale result, kept
    tick_id: Mapped[int | None] = mapped_column(ForeignKey("ticks.id", ondelete="SET NULL"))
    lease_token: Mapped[str] = mapped_column(String(32))
    lease_expires_at: Mapped[datetime]
    host: Mapped[str] = mapped_column(String(255))
    boot_id: Mapped[str] = mapped_column(String(64))
    tick_pid: Mapped[int] = mapped_column(Integer)
    tick_start: Mapped[str | None] = mapped_column(String(64))
    pid: Mapped[int | None] = mapped_column(Integer)
    pgid: Mapped[int | None] = mapped_column(Integer)
    proc_start: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None] = mapped_column(index=True)

    __table_args__ = (
        UniqueConstraint("task_id", "stage", "number"),
        Index("ix_attempts_task_id_stage_run", "task_id", "stage", "run"),
    )


class Transition(Base):
    """Every change of state, written in the same transaction as the change."""

    __tablename__ = "transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    from_state: Mapped[str | None] = mapped_column(String(128))
    to_state: Mapped[str] = mapped_column(String(128))
    event: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(255))
    reason: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("attempts.id", ondelete="SET NULL"), index=True
    )
    at: Mapped[datetime]

    __table_args__ = (UniqueConstraint("task_id", "seq"),)


__all__ = ["Attempt", "Base", "Task", "Tick", "Transition", "UTCDateTime"]
