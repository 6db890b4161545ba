"""Candidates (best of N): a stage with `candidates = K` runs rounds of K
attempts side by side, each in a worktree of its own, and keeps the best.

The claim side (`claims.py`: a round's first slot and each further one),
the record side (`rounds.py`: the round decided once, by its last close),
the git side (`slots.py` where candidates work, `candidate_worktrees.py`
a candidate's worktree and commit, `settling.py` the winner made the task
branch's tip), the rows (`store.py`) and what `show` and the gate page
say (`views.py`). The tick reaches it only through its hooks (`tick.py`,
`FEATURE`); its key stays in the engine's stage Section for now
(docs/decisions/candidates-feature.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks

if TYPE_CHECKING:
    from orchestrator.config import Settings
    from orchestrator.ext.ports import Kernel


def configured(settings: Settings) -> bool:
    """Whether any stage runs candidates: only then does the feature set
    its hooks (a project without one claims, records and recovers exactly
    as the engine alone)."""
    return any(stage.candidates > 1 for p in settings.pipelines.values() for stage in p.stages)


def _tick(kernel: Kernel) -> TickHooks:
    # No stage runs candidates: no hook, no import of the feature's modules,
    # no query per claim.
    if not configured(kernel.settings):
        return TickHooks()
    from orchestrator.features.candidates.tick import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="candidates", tick=_tick)
