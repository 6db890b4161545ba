"""What the tick hands a feature (`ext.ports.Kernel`): the collaborators
its own jobs are built from, and the engine's wrap of a command (the
registry's `wrap_command`, fail closed). Built once per `Ticker`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.config import Settings
from orchestrator.ext.model import Command
from orchestrator.tick.applier import Applier
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


@dataclass(frozen=True)
class TickKernel:
    settings: Settings
    tx: Transactions
    tick: TickRun
    me: HostIdentity
    applier: Applier
    # The registry's `wrap_command`, reached late: the registry is built
    # from this kernel.
    wrapper: Callable[[Command], tuple[str, ...]]

    def wrap(self, command: Command) -> tuple[str, ...]:
        return self.wrapper(command)
