"""What an orphaned attempt left on its own host: the process groups it
started (killed before it is closed), the result its tick kept, the usage
its commands reported, whether any of them started.

Apart from `recovery`, which judges and closes: all of this is read from
the attempt's state folder, and only on the host that ran it.
"""

from __future__ import annotations

from typing import Any

from orchestrator import runner
from orchestrator.agents import runtime as agent_runtime
from orchestrator.config import Settings
from orchestrator.domain.slug import slug_problem
from orchestrator.ext.model import Slot
from orchestrator.ext.registry import Registry
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.kept import read_kept
from orchestrator.tick.lookups import attempt_folder
from orchestrator.tick.started import has_started
from orchestrator.tick.transactions import Transactions

# `OrphanTraces.by_process`: the attempt's tick is running.
ALIVE = "alive"


class OrphanTraces:
    """The host-local traces of an orphaned attempt, for `Recovery`. Reads
    its state folder and `tasks` (the task's pipeline); kills process groups
    on this host."""

    def __init__(
        self, settings: Settings, tx: Transactions, me: HostIdentity, registry: Registry
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.me = me
        self.registry = registry

    def never_started(self, attempt: repo.AttemptSnapshot, slug: str | None) -> bool:
        """Whether its tick died before any command of it ran (no `started`
        marker in its state folder); known only on the attempt's own host."""
        if attempt.host != self.me.host or slug is None or slug_problem(slug) is not None:
            return False
        return not has_started(attempt_folder(self.settings, slug, attempt.stage, attempt.number))

    def spent(self, attempt: repo.AttemptSnapshot, slug: str | None) -> dict[str, Any]:
        """What the attempt's commands reported spending, from its state
        folder as its tick would have read it: a crash must not make what
        was spent vanish from the budget. Nothing when the folder is not
        on this host or the config lost the attempt's stage."""
        if attempt.host != self.me.host or slug is None or slug_problem(slug) is not None:
            return {}
        task = self.tx.retrying(lambda _again: self.task(attempt.task_id))
        pipeline = None if task is None else self.settings.pipeline(task.pipeline)
        stage = None if pipeline is None else pipeline.stage(attempt.stage)
        if stage is None:
            return {}
        folder = attempt_folder(self.settings, slug, attempt.stage, attempt.number)
        usage = agent_runtime.attempt_usage(folder, stage)
        return {name: value for name, value in usage.items() if value is not None}

    def task(self, task_id: int) -> repo.TaskSnapshot | None:
        with read_tx(self.tx.engine) as conn:
            return repo.get_task_by_id(conn, task_id)

    def _local_pids(self, attempt: repo.AttemptSnapshot) -> bool:
        """Whether the attempt's pids are ours to judge: same host, boot, namespace."""
        return attempt.host == self.me.host and attempt.boot_id == self.me.identity

    def kill(self, attempt: repo.AttemptSnapshot, slug: str | None) -> None:
        """Kill what the attempt started: each noted process group, and on
        Linux every process still carrying the attempt's tag (a command
        started just before the tick died has no note yet; a group whose
        leader exited cannot be matched by the leader's start time)."""
        if not self._local_pids(attempt):
            return
        grace = self.settings.kill_grace_seconds
        for ident in self._identities(attempt, slug):
            runner.kill_process_group(ident, grace=grace)
        runner.kill_tagged(runner.process_tag(attempt.lease_token), grace=grace)

    def _identities(
        self, attempt: repo.AttemptSnapshot, slug: str | None
    ) -> list[runner.ProcessIdentity]:
        """The process groups an attempt started, as recorded when they started.

        They are written to host-local files in the attempt's state folder
        (not the database: two commits per attempt saved, and only this host
        could kill them anyway). The runner kills a group only when host,
        boot id and the leader's start time all still match.
        """
        if attempt.host != self.me.host or slug is None:
            return []
        folder = attempt_folder(self.settings, slug, attempt.stage, attempt.number)
        notes = [folder / f"{name}.proc" for name in ("setup", "worker", "verifier")]
        notes += sorted(folder.glob("verifier-*.proc"))  # `verifier_samples`' later ones
        return [ident for ident in map(runner.ProcessIdentity.read_note, notes) if ident]

    def kept_result(self, attempt: repo.AttemptSnapshot, slug: str | None) -> dict[str, Any] | None:
        """The result a tick could not record (`kept.keep_result`), if it left one."""
        if attempt.host != self.me.host or slug is None:
            return None
        return read_kept(
            attempt_folder(self.settings, slug, attempt.stage, attempt.number), attempt.lease_token
        )

    def by_process(self, attempt: repo.AttemptSnapshot, tick_id: int | None) -> str | None:
        """Why the attempt's tick is gone, by its pid, start time, boot and
        pid namespace; `ALIVE` when it runs; None when this host cannot tell."""
        if attempt.host != self.me.host:
            return None
        boot, _, namespace = attempt.boot_id.partition("/")
        if boot != self.me.boot:
            return "host rebooted"
        if namespace != self.me.pid_namespace:
            return None  # its pids mean nothing here: only its lease can tell
        if attempt.tick_pid == self.me.pid and attempt.tick_start == self.me.start_token:
            # This process: its own attempt only in the tick that opened it
            # (`run` ticks many times); one of an earlier tick was left over.
            if attempt.tick_id is not None and attempt.tick_id == tick_id:
                return ALIVE
            return "left by an earlier tick of this process"
        if not runner.pid_alive(attempt.tick_pid):
            return "tick process is gone"
        started = runner.process_start_time(attempt.tick_pid)
        if attempt.tick_start is not None and started is not None and started != attempt.tick_start:
            return "tick process is gone (pid reused)"
        return ALIVE

    def slot_of(self, attempt_id: int) -> Slot | None:
        """The attempt's place in a round (the features' `slot_of`); no
        query when no feature has rounds."""
        if not self.registry.has_slots:
            return None
        with read_tx(self.tx.engine) as conn:
            return self.registry.slot_of(conn, attempt_id)
