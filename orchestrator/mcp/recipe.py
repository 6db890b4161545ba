"""`init --agent claude --mcp`: the recipe registers `orchestrator mcp` with
the agent CLI, so its agents can read tasks and add subtasks.

The MCP config (`mcp.json` beside orchestrator.toml) names this Python and
the config file by absolute path: Claude Code starts the server in the
task's workspace, with the attempt's environment, which holds no
`ORCHESTRATOR_CONFIG` or database URL (the tick passes none of its own
`ORCHESTRATOR_*` names on). The server reads the database from that config
and knows its task from the attempt's `ORCHESTRATOR_TASK`. Which agent
CLIs can be told of it, and how, is their kind's (`AgentKind.mcp`).

In a sandbox it sees neither: the tick's door socket (`ORCHESTRATOR_DOOR`)
answers for it. What it needs to start is this Python, its environment
and the orchestrator package, which a home (pyenv) or project folder (a
venv) the sandbox hides may hold: `with_sandboxed_mcp` binds them back
read-only in every stage's `sandbox_ro`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from orchestrator.agents import kinds
from orchestrator.errors import RefusedError

MCP_FILE = "mcp.json"
SERVER = "orchestrator"


def with_mcp(text: str, agent: str | None) -> str:
    """The recipe with every command of the agent's CLI given the MCP
    config; only a kind that says how (`AgentKind.mcp`) can be."""
    kind = None if agent is None else kinds.named(agent)
    if kind is None or kind.mcp is None:
        able = [k for k in kinds.KINDS if k.mcp is not None]
        raise RefusedError(
            f"--mcp registers the MCP server with {' or '.join(k.label for k in able)}: "
            f"use --agent {' or '.join(k.name for k in able)}"
        )
    return kind.mcp(text, f"{{config_dir}}/{MCP_FILE}", SERVER)


def mcp_config(config_path: Path) -> str:
    """The MCP config Claude Code reads (`--mcp-config`)."""
    server = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "orchestrator", "--config", str(config_path), "mcp"],
    }
    return json.dumps({"mcpServers": {SERVER: server}}, indent=2) + "\n"


def server_paths() -> list[str]:
    """What the server `mcp_config` names needs to start: the interpreter's
    installation, its environment, and the orchestrator package (an
    editable install's lives in its checkout); each once, real."""
    import orchestrator

    found: list[str] = []
    for place in (sys.base_prefix, sys.prefix, str(Path(orchestrator.__file__).parent)):
        real = os.path.realpath(place)
        if real != "/" and not any(real == f or real.startswith(f + "/") for f in found):
            found.append(real)
    return found


def with_sandboxed_mcp(text: str) -> str:
    """The sandboxed recipe with the server's paths in its `sandbox_ro`."""
    line = "sandbox_ro = ["
    assert line in text, "a sandboxed recipe lists sandbox_ro"
    added = "".join(f"{json.dumps(path)}, " for path in server_paths())
    return text.replace(line, line + added)
