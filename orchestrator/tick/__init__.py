"""The tick, job by job; `Ticker` puts the jobs together and runs them.

The names are imported on first use: `orchestrator.tick.idle` answers an
idle cron tick before SQLAlchemy is imported, and must not pay for them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing is what idle.py saves
if TYPE_CHECKING:
    from typing import Any

    from orchestrator.tick.attempt_context import AttemptContext
    from orchestrator.tick.ticker import Ticker

_LAZY = {
    "AttemptContext": "orchestrator.tick.attempt_context",
    "Ticker": "orchestrator.tick.ticker",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'orchestrator.tick' has no attribute {name!r}")


__all__ = ["AttemptContext", "Ticker"]
