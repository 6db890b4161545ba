"""`init --agent NAME --sandbox`: the recipe with its pipeline inside
bubblewrap, and the agent CLI's own folders mapped so the real CLI still
runs there (its login and settings writable, where npm or its installer put
it readable). What a CLI needs is its kind's (`AgentKind.sandbox_ro`,
`.sandbox_rw`, `.in_sandbox`: Codex's own sandbox is turned off inside ours,
see docs/decisions/sandbox.md)."""

from __future__ import annotations

import json

from orchestrator.agents import kinds

PIPELINE_LINE = "[pipelines.default]\n"


def with_sandbox(text: str, agent: str) -> str:
    """The recipe `text` with `sandbox = "bwrap"` for its whole pipeline."""
    assert PIPELINE_LINE in text, "every recipe has [pipelines.default]"
    kind = kinds.named(agent)
    # A path that does not exist is skipped when the sandbox is built.
    ro, rw = kind.sandbox_ro, kind.sandbox_rw
    keys = (
        "# Every command of this pipeline runs inside bubblewrap: the system\n"
        "# read-only, the task's worktree writable, your home hidden except what\n"
        "# is listed here (docs/how-to/sandbox.md). Add what your agent needs.\n"
        'sandbox = "bwrap"\n'
        f"sandbox_ro = [{', '.join(json.dumps(p) for p in ro)}]\n"
        f"sandbox_rw = [{', '.join(json.dumps(p) for p in rw)}]\n"
        "# sandbox_network = false              # no network (an agent needs its API)\n"
    )
    text = text.replace(PIPELINE_LINE, PIPELINE_LINE + keys, 1)
    return text if kind.in_sandbox is None else kind.in_sandbox(text)
