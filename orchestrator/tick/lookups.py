"""What the tick looks up in its settings: a task's stage and its pipeline's
stage names as the configuration has them now, a stage's policy for
`decide`, and the state folder of an attempt."""

from __future__ import annotations

from pathlib import Path

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
        gate=stage.gate,
        max_attempts=stage.max_attempts,
        pass_score=stage.pass_score,
        plateau=stage.plateau,
        max_interrupts=settings.max_interrupts,
        halt_after_no_change=stage.halt_after_no_change,
        pending_timeout=stage.pending_timeout,
    )


def attempt_folder(settings: Settings, slug: str, stage: str, number: int) -> Path:
    return settings.state_root / slug / f"{stage}-{number:03d}"
