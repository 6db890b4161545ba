"""Which host and process a tick is, as its attempts record it and recovery
judges them."""

from __future__ import annotations

import os
from dataclasses import dataclass

from orchestrator import runner


@dataclass(frozen=True)
class HostIdentity:
    """Who opens an attempt, as stored with it: recovery judges an attempt's
    pids only on the same host, boot and pid namespace, and its tick's pid
    only with the same start time (pids are reused)."""

    host: str
    boot: str
    pid_namespace: str
    pid: int
    start_token: str | None

    @classmethod
    def here(cls) -> HostIdentity:
        pid = os.getpid()
        return cls(
            # ORCHESTRATOR_HOST names this host when the hostname is not stable
            # (containers) or, in tests, to play several hosts on one machine.
            host=os.environ.get("ORCHESTRATOR_HOST") or runner.host_name(),
            boot=runner.boot_id(),
            pid_namespace=runner.pid_namespace(),
            pid=pid,
            start_token=runner.process_start_time(pid),
        )

    @property
    def identity(self) -> str:
        """The boot id, with the pid namespace: pids mean something only within one."""
        return f"{self.boot}/{self.pid_namespace}" if self.pid_namespace else self.boot
