"""`orchestrator mcp`: the door (`mcp.door`) as a Model Context Protocol
server on stdio, with the official `mcp` SDK.

Imported only by the `mcp` command: the SDK (pydantic, anyio) costs more
to import than a tick may spend, and no other command needs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from orchestrator.api.adding import Added
from orchestrator.api.project import Project
from orchestrator.errors import OrchestratorError
from orchestrator.mcp.door import Door, as_text
from orchestrator.mcp.door_socket import DOOR_ENV, DoorClient

INSTRUCTIONS = (
    "The orchestrator that runs this attempt. Read its tasks (list_tasks, show_task, "
    "task_history, explain) and split your work: add_subtask adds a task under yours, "
    "in your pipeline at no higher priority than yours, waiting on the tasks in `after`. "
    "Approving, rejecting, halting, resuming and cancelling are for people; there is "
    "no tool for them."
)


class Tools(Protocol):
    """The door's tools: `Door` over the database, or `DoorClient` over the tick's socket."""

    def list_tasks(self, state: str | None = None) -> Any: ...
    def show_task(self, slug: str) -> Any: ...
    def task_history(self, slug: str, limit: int = 50) -> Any: ...
    def explain(self, slug: str) -> Any: ...
    def add_subtask(self, title: str, *args: Any) -> Any: ...


def build_server(door: Tools) -> MCPServer:
    """The server with exactly the door's tools, for the attempt in our environment."""
    server: MCPServer = MCPServer("orchestrator", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(structured_output=False)
    def list_tasks(
        state: Annotated[
            str | None, Field(description="only this state (`build`, `build:halted`) or status")
        ] = None,
    ) -> str:
        """Tasks in creation order with their state, attempt count, score and cost."""
        return _answer(door.list_tasks, state)

    @server.tool(structured_output=False)
    def show_task(slug: str) -> str:
        """One task: its state, body, what it waits on, parent, subtasks, transitions, attempts."""
        return _answer(door.show_task, slug)

    @server.tool(structured_output=False)
    def task_history(slug: str, limit: int = 50) -> str:
        """A task's newest transitions (at most 200), oldest first."""
        return _answer(door.task_history, slug, limit)

    @server.tool(structured_output=False)
    def explain(slug: str) -> str:
        """Why a task is where it is and what the next tick will do with it."""
        return _answer(door.explain, slug)

    @server.tool(structured_output=False)
    def add_subtask(
        title: Annotated[str, Field(description="one line saying what the subtask is")],
        slug: Annotated[
            str | None, Field(description="1-63 of a-z 0-9 . _ -; default <your task>-<n>")
        ] = None,
        body: Annotated[str, Field(description="the full description its agent gets")] = "",
        pipeline: Annotated[
            str | None, Field(description="your task's; no other is accepted")
        ] = None,
        after: Annotated[
            list[str] | None, Field(description="slugs of tasks it must wait for")
        ] = None,
        priority: Annotated[
            int | None, Field(description="at most your task's (the default)")
        ] = None,
    ) -> str:
        """Add a subtask of the task this attempt works on; it runs on a later tick."""
        return _answer(door.add_subtask, title, slug, body, pipeline, after or (), priority)

    return server


def _answer(tool: Callable[..., Any], *args: Any) -> str:
    """The tool's answer as JSON text; our refusal as the tool error the agent
    reads (the SDK would hide any other exception's message)."""
    try:
        return as_text(tool(*args))
    except OrchestratorError as exc:
        raise ToolError(str(exc)) from exc


class _Plain:
    """`Project` as the door reads it: its views as the JSON objects they print."""

    def __init__(self, project: Project) -> None:
        from orchestrator.compose import tasks_added

        self.settings = project.settings
        self.engine = project.engine
        self.project = project
        self.added: Added | None = tasks_added

    def tasks(self, state: str | None = None) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.project.tasks(state)]

    def task(self, slug: str) -> dict[str, Any]:
        return self.project.task(slug).to_dict()

    def history(self, slug: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.project.history(slug, limit)]

    def explain(self, slug: str) -> dict[str, Any]:
        return self.project.explain(slug).to_dict()


def serve(project: Project) -> None:
    """The door over the database the config names (an unsandboxed attempt)."""
    build_server(Door(_Plain(project), os.environ)).run("stdio")


def serve_socket() -> None:
    """The door over the tick's socket for this attempt (`ORCHESTRATOR_DOOR`):
    inside a sandbox, where neither the config nor the database is seen."""
    build_server(DoorClient(os.environ[DOOR_ENV])).run("stdio")
