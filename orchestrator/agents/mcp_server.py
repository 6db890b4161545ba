"""`orchestrator mcp`: the door (`agents.door`) as a Model Context Protocol
server on stdio, with the official `mcp` SDK.

Imported only by the `mcp` command: the SDK (pydantic, anyio) costs more
to import than a tick may spend, and no other command needs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from orchestrator.agents.door import Door, as_text
from orchestrator.api.project import Project
from orchestrator.errors import OrchestratorError

INSTRUCTIONS = (
    "The orchestrator that runs this attempt. Read its tasks (list_tasks, show_task, "
    "task_history, explain) and split your work: add_subtask adds a task under yours, "
    "in your pipeline unless you name another, waiting on the tasks in `after`. "
    "Approving, rejecting, halting, resuming and cancelling are for people; there is "
    "no tool for them."
)


def build_server(project: Project) -> MCPServer:
    """The server with exactly the door's tools, for the attempt in our environment."""
    door = Door(project, os.environ)
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
        pipeline: Annotated[str | None, Field(description="default: your task's")] = None,
        after: Annotated[
            list[str] | None, Field(description="slugs of tasks it must wait for")
        ] = None,
        priority: int = 0,
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


def serve(project: Project) -> None:
    build_server(project).run("stdio")
