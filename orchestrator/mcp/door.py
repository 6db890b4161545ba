"""What an agent may ask of the orchestrator through `orchestrator mcp`.

The one door an agent has to the database: it reads tasks, and it adds
subtasks of the task whose attempt it runs in. Nothing here approves,
rejects, halts, resumes or cancels (those stay human) or ticks; the MCP
server offers these functions and no other.

The attempt is known from the environment the tick gave its commands
(`ORCHESTRATOR_TASK`); a subtask is refused unless that task is running an
attempt now, so a stale variable in some other shell cannot add work.

A subtask stays on its parent's pipeline, at no higher priority than its
parent's (its default): an agent must not add work that skips the walls or
gates its own stage runs under, or jumps the queue. Inside a sandbox the
door is the tick's socket (`mcp.door_socket`), which runs these same
methods with the tick's database, for that one task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import Engine

from orchestrator.api.adding import Added, TaskSpec, add_tasks
from orchestrator.config import Settings
from orchestrator.domain.pipeline import Status
from orchestrator.domain.slug import slug_problem
from orchestrator.errors import RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx

# The most rows one answer carries: an agent's context is not a database dump.
MAX_ROWS = 200
READ_TOOLS = ("list_tasks", "show_task", "task_history", "explain")
WRITE_TOOLS = ("add_subtask",)


def as_text(value: Any) -> str:
    """An answer as the JSON text an agent reads."""
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


# An agent's subtasks are more agent runs on its own pipeline, each free to
# add its own: a bound, so one answer cannot flood the queue.
MAX_SUBTASKS = 20


class Source(Protocol):
    """What the door reads through: `api.Project`, or the tick's own views
    (`door_socket`), which may not import the library face."""

    settings: Settings
    engine: Engine
    added: Added | None  # the features told of a subtask (`Feature.added`)

    def tasks(self, state: str | None = None) -> list[dict[str, Any]]: ...
    def task(self, slug: str) -> dict[str, Any]: ...
    def history(
        self, slug: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]: ...
    def explain(self, slug: str) -> dict[str, Any]: ...


class Door:
    """The tools over one project, for the attempt named in `environ`."""

    def __init__(self, project: Source, environ: Mapping[str, str]) -> None:
        self.project = project
        self.task = environ.get("ORCHESTRATOR_TASK") or None
        self.actor = f"agent:{self.task}" if self.task else "agent"

    def list_tasks(self, state: str | None = None) -> dict[str, Any]:
        rows = self.project.tasks(state or None)
        return {"tasks": rows[:MAX_ROWS], "more": max(0, len(rows) - MAX_ROWS)}

    def show_task(self, slug: str) -> dict[str, Any]:
        data = self.project.task(slug)
        data.pop("approval_hash", None)  # the gate's business, not the agent's
        return data

    def task_history(self, slug: str, limit: int = 50) -> dict[str, Any]:
        rows = self.project.history(slug, max(1, min(limit, MAX_ROWS)))
        return {"transitions": rows}

    def explain(self, slug: str) -> dict[str, Any]:
        return self.project.explain(slug)

    def add_subtask(
        self,
        title: str,
        slug: str | None = None,
        body: str = "",
        pipeline: str | None = None,
        after: Sequence[str] = (),
        priority: int | None = None,
    ) -> dict[str, Any]:
        parent = self._running_parent()
        if pipeline and pipeline != parent.pipeline:
            raise RefusedError(
                f"a subtask runs on its parent's pipeline ({parent.pipeline!r}), not {pipeline!r}"
            )
        if priority is None:
            priority = parent.priority
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise RefusedError("priority must be an integer")
        if priority > parent.priority:
            raise RefusedError(
                f"a subtask's priority is at most its parent's ({parent.priority}), not {priority}"
            )
        with read_tx(self.project.engine) as conn:
            _, children = repo.family(conn, parent.id)
        if len(children) >= MAX_SUBTASKS:
            raise RefusedError(
                f"{parent.slug!r} has {len(children)} subtasks already, the most a task may "
                "have: ask a person to add more"
            )
        name = slug or self._next_slug(parent)
        spec = TaskSpec(
            slug=name,
            title=title,
            pipeline=parent.pipeline,
            priority=priority,
            body=body,
            after=tuple(after),
            parent=parent.slug,
        )
        project = self.project
        add_tasks(project.engine, project.settings, [spec], self.actor, project.added)
        return {
            "added": name,
            "parent": parent.slug,
            "pipeline": spec.pipeline,
            "priority": spec.priority,
            "after": list(spec.after),
            "state": project.task(name)["state"],
        }

    def _running_parent(self) -> repo.TaskSnapshot:
        if self.task is None:
            raise RefusedError(
                "add_subtask works only inside an attempt (ORCHESTRATOR_TASK is not set)"
            )
        with read_tx(self.project.engine) as conn:
            task = repo.get_task(conn, self.task)
        if task is None or task.status is not Status.RUNNING:
            raise RefusedError(
                f"task {self.task!r} is not running an attempt; subtasks are added "
                "only from inside one"
            )
        return task

    def _next_slug(self, parent: repo.TaskSnapshot) -> str:
        """`<parent>-<n>`, the first free n; the parent's slug cut to fit."""
        with read_tx(self.project.engine) as conn:
            _, children = repo.family(conn, parent.id)
            for number in range(len(children) + 1, len(children) + 1000):
                suffix = f"-{number}"
                name = parent.slug[: 63 - len(suffix)] + suffix
                if slug_problem(name) is None and not repo.existing_slugs(conn, [name]):
                    return name
        raise RefusedError(f"no free subtask name under {parent.slug!r}; give a slug")
