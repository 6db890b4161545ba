"""Restore: a recorded attempt's kept work back on its task's branch, by a
person (`orchestrator restore`, through `restoring.py`) or by the tick
when a stage with `on_halt = "best"` halts (`best_restore.py`, after the
claims). The engine reaches it only through its hooks (`FEATURE`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    from orchestrator.features.restore.best_restore import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="restore", tick=_tick)
