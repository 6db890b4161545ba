"""Pools: stages whose agents share an account share its limits
(`[pools.NAME]`): how many attempts run at once on every host, what they
may spend in a UTC day, and the pause a usage limit puts on them. The
config (`config.py`), the rows (`store.py`), the claim's gate and the
pause (`gate.py`, reached by the tick only through its hooks, `FEATURE`)
and what `pool list`, `explain` and `list` show (`views.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # Imported when a Ticker is built: registering the feature loads no
    # SQLAlchemy.
    from orchestrator.features.pools.gate import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="pools", tick=_tick)
