"""Intake: issues become tasks. `[intake.github]` names a repository, a
label and a pipeline; each tick adds a task for each open issue with the
label and tells the issue what became of it. The tracker is one small
interface (`tracker.Tracker`), GitHub its first implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.features.intake.config import INTAKE_SECTION, intakes

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    if not intakes(kernel.settings):  # no tracker named: nothing loaded, no query
        return TickHooks()
    from orchestrator.features.intake.sync import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(
    name="intake",
    config=(INTAKE_SECTION,),
    tick=_tick,
    commands={"intake": "orchestrator.features.intake.cli:intake"},
)
