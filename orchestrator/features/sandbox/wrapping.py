"""The sandbox's one hook: which walls a command gets (`config_for`), and
the command wrapped in them (`wrap`), for the tick's commands, the land
check (through `Kernel.wrap`) and `calibrate` (called directly).

Light on purpose: the tick imports this module when it is built, so the
walls and bubblewrap's argv (`walls.py`, `bwrap.py`) are imported only
once a command whose config asks for them starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.ext.hooks import TickHooks

if TYPE_CHECKING:
    from orchestrator.config import PipelineConfig, Settings, StageConfig
    from orchestrator.ext.model import Command
    from orchestrator.ext.ports import Kernel
    from orchestrator.features.sandbox.config import SandboxConfig

# An attempt's commands: a program their walls hide stops the tick before
# any attempt is spent on it (`bwrap: execvp`).
_ATTEMPT_COMMANDS = frozenset({"setup", "worker", "verifier"})


def config_for(command: Command) -> SandboxConfig | None:
    """The walls `command` runs in: setup its pipeline's, the land check
    the landing stage's (`land_check_config`), any other its stage's; None
    on the host."""
    if command.name == "setup" and command.pipeline is not None:
        config = command.pipeline.sandbox
    elif command.name == "land_check" and command.pipeline is not None:
        config = land_check_config(command.pipeline, command.stage)
    elif command.stage is not None:
        config = command.stage.sandbox
    else:
        return None
    return config if config.enabled else None


def land_check_config(pipeline: PipelineConfig, stage: StageConfig | None) -> SandboxConfig:
    """The walls the land check runs in (it runs the branch's code: a
    planted `conftest.py` must reach no more than the worker that wrote
    it): the landing stage's, else the first sandboxed stage's (its worker
    wrote the code), else the setup's."""
    if stage is not None and stage.sandbox.enabled:
        return stage.sandbox
    for each in pipeline.stages:
        if each.sandbox.enabled:
            return each.sandbox
    return pipeline.sandbox


def wrap(settings: Settings, command: Command) -> tuple[str, ...] | None:
    """`command` inside its walls, or None when its config asks for none.
    An attempt's command whose program the walls hide is refused
    (`ConfigError`: not started, not charged)."""
    config = config_for(command)
    if config is None:
        return None
    from orchestrator.features.sandbox import bwrap
    from orchestrator.features.sandbox.walls import command_walls

    walls = command_walls(
        settings,
        command.pipeline,
        config,
        workspace=command.cwd,
        state_dir=command.state_dir,
        template=command.template,
    )
    program = command.argv[0]
    if command.name in _ATTEMPT_COMMANDS:
        unseen = bwrap.unseen_program(program, walls, env=command.env, base_dir=settings.base_dir)
        if unseen is not None:
            stage = command.stage.name if command.stage is not None else "?"
            reason = bwrap.unseen_reason(program, unseen)
            raise ConfigError(f"{command.name} of stage {stage}: {reason}")
    return bwrap.wrap(
        command.argv, walls, cwd=command.cwd, env=command.env, base_dir=settings.base_dir
    )


def tick_hooks(kernel: Kernel) -> TickHooks:
    """The sandbox's point in a tick: every command the engine or a feature
    starts is wrapped here when its config asks for walls."""
    settings = kernel.settings

    def wrap_command(command: Command) -> tuple[str, ...] | None:
        return wrap(settings, command)

    return TickHooks(wrap_command=wrap_command)
