"""What the engine and a feature look up in the settings about a task's
stage: the stage as the configuration has it now, its pipeline's stage
names, and the policy `decide` is asked with. Here, below both, so that a
feature deciding for the engine (a round's decision) asks `decide` with
exactly the engine's policy."""

from __future__ import annotations

from orchestrator.config import Settings, StageConfig
from orchestrator.domain.decide import StagePolicy
from orchestrator.storage import repo


def stage_of(settings: Settings, task: repo.TaskSnapshot) -> StageConfig | None:
    pipeline = settings.pipeline(task.pipeline)
    return None if pipeline is None else pipeline.stage(task.stage)


def stage_names(settings: Settings, task: repo.TaskSnapshot) -> tuple[str, ...]:
    pipeline = settings.pipeline(task.pipeline)
    return () if pipeline is None else pipeline.stage_names


def stage_policy(settings: Settings, stage: StageConfig) -> StagePolicy:
    return StagePolicy(
        gate=bool(stage.gate),
        max_attempts=stage.max_attempts,
        pass_score=stage.pass_score,
        plateau=stage.plateau,
        max_interrupts=settings.max_interrupts,
        halt_after_no_change=stage.halt_after_no_change,
        pending_timeout=stage.pending_timeout,
    )
