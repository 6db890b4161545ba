"""orchestrator: a durable, verifier-gated workflow orchestrator.

`Project` is the library's face (see docs/reference/python.md). It is
imported on first use: `import orchestrator.config` and a tick that finds
the lock busy must not pay for SQLAlchemy.
"""

from __future__ import annotations

__version__ = "0.1.0"

# Not typing's: an idle cron tick (orchestrator.tick.idle) must not import typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from orchestrator.api.actions import ActionResult
    from orchestrator.api.adding import TaskSpec
    from orchestrator.api.project import Project
    from orchestrator.api.ticking import TickResult

_LAZY = {
    "Project": "orchestrator.api.project",
    "TaskSpec": "orchestrator.api.adding",
    "ActionResult": "orchestrator.api.actions",
    "TickResult": "orchestrator.api.ticking",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")


__all__ = ["ActionResult", "Project", "TaskSpec", "TickResult", "__version__"]
