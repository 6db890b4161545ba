"""Notes stages: what a research or review stage writes is the pipeline's
paperwork, not the change. A stage with `writes = "notes"` has the files
its attempt wrote or changed moved out of the task's worktree into the
task's notes folder (`state_root/<slug>/notes/`) once its commands ran,
so they never enter the branch (its stage commit is empty) and never
conflict at the landing; every stage of the pipeline is told the folder
in `ORCHESTRATOR_NOTES`. The config key (`config.py`), the move
(`moving.py`) and the hooks (`tick.py`). Why: docs/decisions/notes.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.features.notes.config import NOTES_SECTION

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # Imported when a Ticker is built, and only a project with a notes
    # stage sets a hook: git and the move are not loaded otherwise.
    from orchestrator.features.notes.tick import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(name="notes", config=(NOTES_SECTION,), tick=_tick)
