"""`orchestrator mcp`: the MCP server an agent CLI starts inside an attempt."""

from __future__ import annotations

import click

from orchestrator.cli.app import App, pass_app


@click.command("mcp")
@pass_app
def mcp_command(app: App) -> None:
    """Serve the Model Context Protocol on stdin/stdout for an agent.

    Tools to read tasks (list_tasks, show_task, task_history, explain) and
    to add subtasks of the attempt's task (add_subtask); none approves,
    rejects, halts, resumes or cancels. An agent CLI starts it (the recipes'
    --mcp writes the config); the attempt's ORCHESTRATOR_TASK names the parent.
    In a sandboxed attempt ORCHESTRATOR_DOOR names the tick's socket for it,
    and the server asks that instead of opening the config and the database.
    """
    import os

    from orchestrator.mcp.door_socket import DOOR_ENV

    if os.environ.get(DOOR_ENV):
        from orchestrator.mcp.server import serve_socket

        serve_socket()
        return
    from orchestrator.mcp.server import serve

    project = app.project()
    try:
        serve(project)
    finally:
        project.close()
