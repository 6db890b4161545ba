"""The registry of agent kinds: every agent the orchestrator knows, one
module each, registered by the one line below (`KINDS`). Everything that
differs by agent (the recipes `init --agent` offers, reading an output
format, usage limits, resume, cost, doctor's checks, the sandbox's paths)
asks here; docs/how-to/agents.md says how to add one.

Order is the order `init --agent` lists them and `output` formats are
offered in.
"""

from __future__ import annotations

from orchestrator.agents.kind import AgentKind
from orchestrator.agents.kinds import aider, claude, codex, script
from orchestrator.errors import RefusedError

KINDS: tuple[AgentKind, ...] = (claude.KIND, codex.KIND, aider.KIND, script.KIND)

NAMES = tuple(kind.name for kind in KINDS)
# The `output` formats a stage may declare: plain text, and each kind's own.
FORMATS = ("text", *(kind.output for kind in KINDS if kind.output is not None))
_BY_NAME = {kind.name: kind for kind in KINDS}
_BY_OUTPUT = {kind.output: kind for kind in KINDS if kind.output is not None}


def named(name: str) -> AgentKind:
    if name not in _BY_NAME:
        raise RefusedError(f"unknown agent {name!r} (known: {', '.join(NAMES)})")
    return _BY_NAME[name]


def reading(fmt: str) -> AgentKind | None:
    """The kind whose output is in format `fmt`; None for `text`, which
    every command's output is read as."""
    return _BY_OUTPUT.get(fmt)
