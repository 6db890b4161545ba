"""`doctor`'s look at the sandbox: when a stage or a pipeline says
`sandbox = "bwrap"`, bubblewrap must be installed and able to make its
namespaces here. Both are tried for real (a `true` run inside the same
walls a stage gets), since a kernel or a container that forbids user
namespaces fails only at run time, with a message of its own."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from orchestrator.config import PipelineConfig, Settings
from orchestrator.doctor.report import Check, Level
from orchestrator.features.sandbox import bwrap as sandbox
from orchestrator.features.sandbox.config import SandboxConfig

NAME = "sandbox"
TIMEOUT = 30.0
_INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
_USERNS = (
    "let unprivileged user namespaces run (sysctl kernel.unprivileged_userns_clone=1, "
    "or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or in a container "
    "give it --privileged / a seccomp profile that allows clone(CLONE_NEWUSER); "
    'or set sandbox = "none"'
)


def sandbox_checks(settings: Settings) -> list[Check]:
    users = [
        name
        for pipeline in settings.pipelines.values()
        for name, config in (
            (f"{pipeline.name}.setup", pipeline.sandbox if pipeline.setup else None),
            *((f"{pipeline.name}.{s.name}", s.sandbox) for s in pipeline.stages),
        )
        if config is not None and config.enabled
    ]
    if not users:
        return []
    where = ", ".join(users[:4]) + (f" and {len(users) - 4} more" if len(users) > 4 else "")
    program = sandbox.bwrap_program()
    if program is None:
        return [Check(Level.FAIL, NAME, f"bwrap not found on PATH ({where}): {_INSTALL}")]
    problem = _try(program)
    if problem is not None:
        return [Check(Level.FAIL, NAME, f"bwrap cannot run here ({where}): {problem}; {_USERNS}")]
    unseen = [
        Check(Level.FAIL, NAME, problem)
        for pipeline in settings.pipelines.values()
        for problem in _unseen_programs(settings, pipeline)
    ]
    return [Check(Level.OK, NAME, f"bubblewrap runs here ({program}; {where})"), *unseen]


def _unseen_programs(settings: Settings, pipeline: PipelineConfig) -> list[str]:
    """A sandboxed command whose program (or its `#!` interpreter) is on the
    host but not inside its walls would spend every attempt on `bwrap:
    execvp ...: No such file or directory`: one line for each. The walls
    are the tick's own (`features/sandbox/walls.py`), for a task's
    worktree and attempt folder; the land check's are the landing stage's
    (`land_check_config`)."""
    from orchestrator.features.sandbox.walls import command_walls
    from orchestrator.features.sandbox.wrapping import land_check_config

    commands: list[tuple[str, tuple[str, ...] | None, SandboxConfig, dict[str, str]]] = [
        ("setup", pipeline.setup, pipeline.sandbox, {})
    ]
    for stage in pipeline.stages:
        env = dict(stage.env)
        commands += [(stage.name, stage.worker, stage.sandbox, env)]
        commands += [(stage.name, stage.verifier, stage.sandbox, env)]
    if pipeline.landing.lands and pipeline.landing.check and pipeline.stages:
        config = land_check_config(pipeline, pipeline.stages[-1])
        commands += [("land_check", pipeline.landing.check, config, {})]
    problems: list[str] = []
    for name, argv, config, extra in commands:
        if argv is None or not argv or not config.enabled:
            continue
        env = {**os.environ, **extra}
        walls = command_walls(
            settings,
            pipeline,
            config,
            workspace=settings.workspace_root / PROBE,
            state_dir=settings.state_root / PROBE / "stage-001",
            template=argv,
        )
        unseen = sandbox.unseen_program(argv[0], walls, env=env, base_dir=settings.base_dir)
        if unseen is not None:
            problems.append(f"{pipeline.name}.{name}: {sandbox.unseen_reason(argv[0], unseen)}")
    return problems


PROBE = "doctor-probe"  # a task's folders, as a task's would be named


def _try(program: str) -> str | None:
    """None when `true` runs inside the walls a stage gets, else why not."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-doctor-") as folder:
        place = Path(folder)
        walls = sandbox.Walls(writable=(place,), network=False, tmp_mb=1)
        argv = sandbox.wrap(
            ["true"], walls, cwd=place, env=os.environ, base_dir=place, program=program
        )
        try:
            done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return said[-1][:300] if said else f"exit status {done.returncode}"
