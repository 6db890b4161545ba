"""`restore` and `calibrate` from the library face: the checks of what a
person typed (slug, task, stage), then the tick's own restore
(`features/restore/restoring.py`) or the verifier run N times (`calibrate`)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from orchestrator import runner
from orchestrator.agents import runtime as agent_runtime
from orchestrator.config import Settings, StageConfig
from orchestrator.domain.noise import Spread, spread
from orchestrator.domain.pipeline import Status
from orchestrator.domain.slug import slug_problem
from orchestrator.domain.verdict import parse_verdict
from orchestrator.errors import InvalidChoiceError, InvalidSlugError, NoVerdictError, RefusedError
from orchestrator.ext.model import Command
from orchestrator.features.restore.restoring import restore_attempt
from orchestrator.features.sandbox import wrapping
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.views.suggest import did_you_mean, require_task


def _task_and_stage(
    engine: Engine, settings: Settings, slug: str, stage: str | None
) -> tuple[repo.TaskSnapshot, StageConfig]:
    problem = slug_problem(slug)
    if problem is not None:
        raise InvalidSlugError(f"bad slug {slug!r}: {problem}")
    with read_tx(engine) as conn:
        task = require_task(conn, slug)
    pipeline = settings.pipeline(task.pipeline)
    if pipeline is None:
        raise RefusedError(f"task {slug!r}'s pipeline {task.pipeline!r} is not in the config")
    name = stage or task.stage
    found = pipeline.stage(name)
    if found is None:
        names = pipeline.stage_names
        raise InvalidChoiceError(
            f"pipeline {pipeline.name!r} has no stage {name!r}{did_you_mean(name, names)} "
            f"(stages: {', '.join(names)})"
        )
    return task, found


def restore(
    engine: Engine, settings: Settings, slug: str, attempt: int, stage: str | None = None
) -> dict[str, Any]:
    task, found = _task_and_stage(engine, settings, slug, stage)
    return restore_attempt(engine, settings, task, found.name, attempt).as_dict()


@dataclass(frozen=True)
class Calibration:
    task: str
    stage: str
    scores: tuple[float, ...]
    invalid: int  # samples that printed no verdict
    spread: Spread

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "stage": self.stage,
            **self.spread.to_dict(),
            "invalid": self.invalid,
            "scores": list(self.scores),
        }


def calibrate(
    engine: Engine, settings: Settings, slug: str, stage: str, samples: int
) -> Calibration:
    """Run the stage's verifier `samples` times on the task's workspace as it
    is, one after another, recording nothing; the spread of the scores."""
    task, found = _task_and_stage(engine, settings, slug, stage)
    if found.verifier is None:
        raise RefusedError(f"stage {found.name!r} has no verifier to calibrate")
    if task.status is Status.RUNNING:
        raise RefusedError(f"task {slug!r} is running (its work is changing); wait or halt it")
    workspace = settings.workspace_root / slug
    if not workspace.is_dir() or workspace.is_symlink():
        raise RefusedError(f"task {slug!r} has no workspace yet ({workspace})")
    context = AttemptContext(
        task=slug,
        title=task.title,
        body=task.body,
        stage=found.name,
        attempt=0,  # not an attempt
        workspace=workspace,
        hint="",
        prev_outcome="",
        prev_score="",
        config_dir=str(settings.base_dir),
    )
    env = runner.child_environment(
        os.environ,
        deny=settings.child_deny,
        extra=agent_runtime.stage_extra_env(found, settings.secret_sources(os.environ)),
        orchestrator_vars=context.environment(),
    )
    argv = runner.render_argv(found.verifier, context.placeholders())
    scores: list[float] = []
    invalid = 0
    with tempfile.TemporaryDirectory(prefix="orchestrator-calibrate-") as scratch:
        # Where the tick runs it: the same walls, by the sandbox's own wrap.
        calibrating = Command(
            "calibrate",
            tuple(argv),
            found.verifier,
            workspace,
            env,
            Path(scratch),
            settings.pipeline(task.pipeline),
            found,
            confined=found.confined,
        )
        command = wrapping.wrap(settings, calibrating) or calibrating.argv
        for index in range(samples):
            done = runner.run_command(
                command,
                cwd=workspace,
                env=env,
                timeout=found.timeout_seconds,
                stdout_path=Path(scratch) / f"verifier-{index + 1}.out",
                stderr_path=Path(scratch) / f"verifier-{index + 1}.err",
                output_cap=settings.output_cap_bytes,
                grace=settings.kill_grace_seconds,
            )
            said = agent_runtime.read_output(found.verifier_output, done.stdout)
            verdict = None if said.error is not None else parse_verdict(said.message or "")
            if verdict is None or done.start_error is not None:
                invalid += 1
                continue
            scores.append(verdict.score)
    if not scores:
        raise NoVerdictError(f"the verifier printed no verdict in {samples} runs")
    return Calibration(slug, found.name, tuple(scores), invalid, spread(scores))
