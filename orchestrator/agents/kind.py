"""What makes an agent CLI a kind the orchestrator knows: one value per
kind (`agents.kinds`), so that the recipe, the output parser, the usage
limit, the resume rule, the cost, doctor's checks and the sandbox's paths
of one agent are read in one module, and adding an agent is that module
and one line in the registry.

The engine never asks for a kind by name: a stage declares the format its
output is in (`output = "claude-json"`), and the registry finds the kind
that reads it. Names are for `init --agent` and doctor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.agents.usage import AgentOutput

Argv = tuple[str, ...]
# What a kind's output said about a usage limit: its words, and the reset
# time they named (None: they named none). `agents.limits` bounds the time.
LimitSaid = tuple[str, datetime | None]


@dataclass(frozen=True)
class ResumeRule:
    """How this agent continues a session: `argv(worker_argv, session)` is
    the worker's argv resuming `session` (None: this argv cannot), `gone`
    what the agent prints when that session does not exist."""

    argv: Callable[[Argv, str], Argv | None]
    gone: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentKind:
    """One agent CLI. Every field but `name` and `label` may stay empty: a
    kind whose output is plain text (`output=None`) has no parser, no limit
    detection and no resume, and is run and judged as any command."""

    name: str  # `init --agent NAME`, examples/NAME/orchestrator.toml
    label: str  # how people know the CLI, for messages
    output: str | None = None  # the stage `output` format it prints; None: text
    # Whose models it calls (OpenTelemetry's `gen_ai.system`), when one.
    provider: str | None = None
    parse: Callable[[str], AgentOutput] | None = None
    usage_limit: Callable[[str, datetime, tzinfo], LimitSaid | None] | None = None
    # The Usage fields its own output carries: those are never taken from
    # the usage file the agent itself could write (a cost of $0, say).
    carries: frozenset[str] = frozenset()
    resume: ResumeRule | None = None
    # doctor: the program looked for on PATH, and its subcommands whose
    # `--help` documents the flags after them (`codex exec ...`).
    program: str | None = None
    subcommands: tuple[str, ...] = ()
    # init --sandbox: (sandbox_ro, sandbox_rw) its CLI needs mapped, and a
    # rewrite of the recipe for running inside our sandbox.
    sandbox_ro: tuple[str, ...] = ()
    sandbox_rw: tuple[str, ...] = ()
    in_sandbox: Callable[[str], str] | None = None
    # init: files the recipe's commands run, (template under
    # orchestrator/templates/agents, path in the project).
    extra_files: tuple[tuple[str, str], ...] = ()
    # init --mcp: the recipe with its commands given an MCP config file and
    # the server's tools allowed, `mcp(text, config_file, server)`.
    mcp: Callable[[str, str, str], str] | None = None
    # What one session of it holds, in MiB: the memory its attempt reserves
    # on the host unless the stage sets `memory_mb` (`features.memory`).
    # One Claude Code or Codex session held 1.5-2 GB in the field.
    memory_mb: int = 0

    @property
    def reports_cost(self) -> bool:
        """Whether its output names a dollar cost (a budget can count on it)."""
        return "cost_usd" in self.carries
