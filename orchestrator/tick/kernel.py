"""What the tick hands a feature (`ext.ports.Kernel`): the collaborators
its own jobs are built from, and the engine's walls for a sandboxed
command. Built once per `Ticker`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import PipelineConfig, Settings
from orchestrator.config.sandbox import SandboxConfig
from orchestrator.runner import sandbox
from orchestrator.tick.applier import Applier
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions
from orchestrator.tick.walls import command_walls


@dataclass(frozen=True)
class TickKernel:
    settings: Settings
    tx: Transactions
    tick: TickRun
    me: HostIdentity
    applier: Applier

    def walls(
        self,
        pipeline: PipelineConfig | None,
        config: SandboxConfig,
        *,
        workspace: Path,
        state_dir: Path,
        template: Sequence[str] = (),
    ) -> sandbox.Walls:
        return command_walls(
            self.settings,
            pipeline,
            config,
            workspace=workspace,
            state_dir=state_dir,
            template=template,
        )
