"""The agent recipes (`examples/<agent>/orchestrator.toml`) that
`orchestrator init --agent NAME` writes: a complete pipeline for each
registered kind (`agents.kinds`: Claude Code, Codex CLI, aider, a script of
your own).

The recipes live at the repository root (`examples/`), where people browse
them, and travel inside the wheel as `orchestrator/examples`, like the
migrations; this module finds whichever this installation has.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from orchestrator.agents import kinds
from orchestrator.errors import RefusedError

# The flags a recipe's commands rely on (checked by `doctor` against the
# program's --help).
_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")


def examples_dir() -> Path:
    """`orchestrator/examples` in a wheel, `<repo>/examples` in a checkout."""
    packaged = Path(str(resources.files("orchestrator"))) / "examples"
    if (packaged / "claude" / "orchestrator.toml").is_file():
        return packaged
    source = Path(__file__).resolve().parents[2] / "examples"
    if (source / "claude" / "orchestrator.toml").is_file():
        return source
    raise RefusedError("the agent recipes (examples/) are not in this installation")


def recipe_text(agent: str) -> str:
    kind = kinds.named(agent)
    return (examples_dir() / kind.name / "orchestrator.toml").read_text(encoding="utf-8")


def extra_files(agent: str) -> list[tuple[str, str]]:
    """(text, relative path) of the files the recipe's commands run, beyond
    the prompts and judges every init writes (`AgentKind.extra_files`)."""
    node = resources.files("orchestrator") / "templates" / "agents"
    return [
        ((node / source).read_text(encoding="utf-8"), target)
        for source, target in kinds.named(agent).extra_files
    ]


def flags_of(argv: tuple[str, ...]) -> list[str]:
    """The options a command passes (`--json`, `-s`), without their values."""
    return [arg for arg in argv[1:] if _FLAG.match(arg) and arg != "-"]
