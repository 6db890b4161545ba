"""Admission by memory: a tick starts an attempt of a stage that reserves
`memory_mb` only while the host's `MemAvailable`, less what the attempts
running on this host reserved, is at least that much; otherwise the task
waits, spending no attempt. What the host has (`meminfo.py`), what its
attempts reserved (`store.py`), the claim's refusal (`gate.py`, reached by
the tick only through its hooks, `FEATURE`) and `explain`'s line
(`views.py`). Why each choice: docs/decisions/memory.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # Imported when a Ticker is built: registering the feature loads no
    # SQLAlchemy.
    from orchestrator.features.memory.gate import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="memory", tick=_tick)
