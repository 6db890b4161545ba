"""`init --agent NAME --sandbox`: the recipe with its pipeline inside
bubblewrap, and the agent CLI's own folders mapped so the real CLI still
runs there (its login and settings writable, where npm or its installer put
it readable). Codex's own sandbox is turned off inside ours: see
docs/decisions/sandbox.md."""

from __future__ import annotations

import json

PIPELINE_LINE = "[pipelines.default]\n"
# (sandbox_ro, sandbox_rw) per agent; a path that does not exist is skipped.
MAPPED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "claude": (
        ("~/.npm-global", "~/.local/bin", "~/.local/share/claude", "~/.nvm"),
        ("~/.claude", "~/.claude.json", "~/.cache/claude"),
    ),
    "codex": (("~/.npm-global", "~/.local/bin", "~/.nvm"), ("~/.codex",)),
    "aider": (("~/.local", "~/.aider"), ("~/.aider.chat.history.md", "~/.cache/aider")),
    "script": ((), ()),
}
# Codex would run its own bubblewrap inside ours (nested user namespaces,
# helper binaries it refuses to make under a temporary home): one wall.
_CODEX_OWN = ('"-s", "workspace-write"', '"-s", "read-only"')
_CODEX_OFF = '"-s", "danger-full-access"'


def with_sandbox(text: str, agent: str) -> str:
    """The recipe `text` with `sandbox = "bwrap"` for its whole pipeline."""
    assert PIPELINE_LINE in text, "every recipe has [pipelines.default]"
    ro, rw = MAPPED[agent]
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
    if agent == "codex":
        for own in _CODEX_OWN:
            text = text.replace(own, _CODEX_OFF)
    return text
