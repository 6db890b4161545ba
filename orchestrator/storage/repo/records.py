"""The frozen snapshots the verbs return, and the columns they are read from.

Callers get snapshots, never live ORM objects, so nothing they hold can
change under them or reach back into a closed transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orchestrator.domain.pipeline import State, Status
from orchestrator.errors import OrchestratorError
from orchestrator.storage import tables

tasks = tables.tasks
attempts = tables.attempts
transitions = tables.transitions
ticks = tables.ticks


class ConflictError(OrchestratorError):
    """Someone else changed the task between our read and our write."""

    exit_code = 1


@dataclass(frozen=True)
class TaskSnapshot:
    id: int
    slug: str
    title: str
    body: str
    pipeline: str
    priority: int
    stage: str
    status: Status
    halt_reason: str | None
    run: int
    version: int
    next_hint: str
    hint_source: str | None
    host: str | None
    created_at: datetime
    updated_at: datetime
    max_cost_usd: float | None = None  # the task's own budget
    branch: str | None = None  # a task is a branch (a pipeline with `repository`)
    base_branch: str | None = None
    base_commit: str | None = None  # recorded just before its worktree is made
    landed_commit: str | None = None  # what its landing moved the base to (or pushed)
    pr_url: str | None = None  # the pull request `land = "pr"` opened

    @property
    def state(self) -> State:
        return State(self.stage, self.status)


@dataclass(frozen=True)
class NewTask:
    slug: str
    title: str
    pipeline: str
    first_stage: str
    priority: int = 0
    body: str = ""
    max_cost_usd: float | None = None
    branch: str | None = None  # a task is a branch: `task/<slug>` ...
    base_branch: str | None = None  # ... from this one


@dataclass(frozen=True)
class AttemptSnapshot:
    id: int
    task_id: int
    stage: str
    run: int
    number: int
    outcome: str | None
    passed: bool | None
    score: float | None
    reasons: tuple[str, ...]
    next_hint: str | None
    hint: str
    error: str | None
    lease_token: str
    lease_expires_at: datetime
    host: str
    boot_id: str
    tick_pid: int
    tick_start: str | None
    pid: int | None
    pgid: int | None
    proc_start: str | None
    started_at: datetime
    finished_at: datetime | None
    tick_id: int | None = None
    start_commit: str | None = None


_TASK_COLUMNS = [tasks.c[name] for name in TaskSnapshot.__dataclass_fields__]
_ATTEMPT_COLUMNS = [
    attempts.c["pass" if name == "passed" else name]
    for name in AttemptSnapshot.__dataclass_fields__
]
_STATUS = list(TaskSnapshot.__dataclass_fields__).index("status")


def _task(row: Sequence[Any]) -> TaskSnapshot:
    """A snapshot from a row of `_TASK_COLUMNS`, in that order."""
    values = list(row)
    values[_STATUS] = Status(values[_STATUS])
    return TaskSnapshot(*values)


def _attempt(row: Any) -> AttemptSnapshot:
    data = dict(row._mapping)
    data["passed"] = data.pop("pass")
    data["reasons"] = tuple(json.loads(data["reasons"])) if data["reasons"] else ()
    return AttemptSnapshot(**data)
