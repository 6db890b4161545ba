"""Landing: what happens to a task's branch after its last stage passes
(`land = "merge"` moves the base branch through a merge queue, `land = "pr"`
pushes the branch and opens a pull request). Each mode is a function from a
`LandRequest` to a `LandOutcome`; the landing step (`landing.py`) records
the answer, reached by the engine only through its hooks (`FEATURE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # Imported when a Ticker is built: registering the feature loads no git
    # or landing code.
    from orchestrator.features.landing.landing import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="landing", tick=_tick)
