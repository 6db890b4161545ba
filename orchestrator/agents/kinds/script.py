"""A script of your own (`agents/script_agent.py`, written by `init`): it
reports its usage through `$ORCHESTRATOR_USAGE_FILE`, needs nothing mapped
into the sandbox, and is no program doctor knows."""

from __future__ import annotations

from orchestrator.agents.kind import AgentKind

KIND = AgentKind(
    name="script",
    label="a script of your own",
    extra_files=(("script_agent.py", "agents/script_agent.py"),),
)
