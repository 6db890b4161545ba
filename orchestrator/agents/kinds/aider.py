"""aider: its output is plain text, read as any command's; doctor checks
the CLI and its flags, and the sandbox maps where pip put it."""

from __future__ import annotations

from orchestrator.agents.kind import AgentKind

KIND = AgentKind(
    name="aider",
    label="aider",
    program="aider",
    sandbox_ro=("~/.local", "~/.aider"),
    sandbox_rw=("~/.aider.chat.history.md", "~/.cache/aider"),
)
