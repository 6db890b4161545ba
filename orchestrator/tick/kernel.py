"""What the tick hands a feature (`ext.ports.Kernel`): the collaborators
its own jobs are built from, and the engine's wrap of a command (the
registry's `wrap_command`, fail closed) and its `hold_finished`. Built once
per `Ticker`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from orchestrator.config import Settings
from orchestrator.ext.model import Command
from orchestrator.storage import repo
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
    # The registry's `hold_finished`, reached late for the same reason.
    holder: Callable[[Connection, repo.TaskSnapshot, str | None, str | None], str | None]

    def wrap(self, command: Command) -> tuple[str, ...]:
        return self.wrapper(command)

    def hold_finished(
        self, conn: Connection, task: repo.TaskSnapshot, commit: str | None, url: str | None
    ) -> str | None:
        return self.holder(conn, task, commit, url)
