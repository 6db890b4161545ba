"""Evidence from a project's own history: how far each gate's verifier
agrees with the people who decided its verdicts (`verifiers`), and what
another plateau rule would have done with the recorded runs (`simulate`).

Gates that earn autonomy (`gate = "auto"`, `autogate*.py`) open a gate
by themselves once the record says the verifier may be trusted. It adds
no table: everything is read from the attempts, transitions and events
the engine already writes, and a project with no `gate = "auto"` stage
sets no hook and pays nothing."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.features.evidence.autogate_config import AUTOGATE_SECTION

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # No stage with an auto gate: no hook and no import of the gate's
    # queries (a plain tick loads nothing of this feature's).
    pipelines = kernel.settings.pipelines.values()
    if not any(stage.gate == "auto" for p in pipelines for stage in p.stages):
        return TickHooks()
    from orchestrator.features.evidence.autogate_tick import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(
    name="evidence",
    config=(AUTOGATE_SECTION,),
    tick=_tick,
    explain="orchestrator.features.evidence.views:explain",
    commands=MappingProxyType(
        {
            "verifiers": "orchestrator.features.evidence.cli:verifiers",
            "simulate": "orchestrator.features.evidence.cli:simulate",
        }
    ),
)
