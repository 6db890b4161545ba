"""Typed ORM classes over the Core tables of `tables.py`.

For library users and Alembic (whose `target_metadata` is `Base.metadata`).
The tick's hot path uses the Core tables directly and never imports this
module: `sqlalchemy.orm` costs ~60 ms to import.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import DeclarativeBase, Mapped

from orchestrator.storage import tables


class Base(DeclarativeBase):
    metadata = tables.metadata


class Task(Base):
    __table__ = tables.tasks

    id: Mapped[int]
    slug: Mapped[str]
    title: Mapped[str]
    body: Mapped[str]
    pipeline: Mapped[str]
    priority: Mapped[int]
    stage: Mapped[str]
    status: Mapped[str]
    halt_reason: Mapped[str | None]
    run: Mapped[int]
    version: Mapped[int]
    next_hint: Mapped[str]
    hint_source: Mapped[str | None]
    host: Mapped[str | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    backoff_until: Mapped[datetime | None]


class Tick(Base):
    __table__ = tables.ticks

    id: Mapped[int]
    host: Mapped[str]
    pid: Mapped[int]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    claimed: Mapped[int]
    recovered: Mapped[int]
    advanced: Mapped[int]
    exit_code: Mapped[int | None]


class Attempt(Base):
    __table__ = tables.attempts

    id: Mapped[int]
    task_id: Mapped[int]
    stage: Mapped[str]
    run: Mapped[int]
    number: Mapped[int]
    outcome: Mapped[str | None]
    passed: Mapped[bool | None] = tables.attempts.c["pass"]  # type: ignore[assignment]
    score: Mapped[float | None]
    reasons: Mapped[str | None]
    next_hint: Mapped[str | None]
    hint: Mapped[str]
    error: Mapped[str | None]
    worker_exit: Mapped[int | None]
    verifier_exit: Mapped[int | None]
    plateau: Mapped[str | None]
    late_result: Mapped[str | None]
    tick_id: Mapped[int | None]
    lease_token: Mapped[str]
    lease_expires_at: Mapped[datetime]
    host: Mapped[str]
    boot_id: Mapped[str]
    tick_pid: Mapped[int]
    tick_start: Mapped[str | None]
    pid: Mapped[int | None]
    pgid: Mapped[int | None]
    proc_start: Mapped[str | None]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    workspace_hash: Mapped[str | None]
    workspace_changed: Mapped[bool | None]


class Transition(Base):
    __table__ = tables.transitions

    id: Mapped[int]
    task_id: Mapped[int]
    seq: Mapped[int]
    from_state: Mapped[str | None]
    to_state: Mapped[str]
    event: Mapped[str]
    actor: Mapped[str]
    reason: Mapped[str | None]
    note: Mapped[str | None]
    attempt_id: Mapped[int | None]
    at: Mapped[datetime]


__all__ = ["Attempt", "Base", "Task", "Tick", "Transition"]
