"""The dry run: what a tick would do now, writing nothing."""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator.agents import budget as agent_budget
from orchestrator.config import Settings
from orchestrator.domain.pipeline import Status
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.lookups import stage_of
from orchestrator.tick.model import TickOptions
from orchestrator.tick.recovery import Recovery
from orchestrator.tick.tick_run import TickRun


class DryRun:
    """The dry run reads through the claim's own query, so what it shows is
    what a tick would claim. It reads `attempts` and `tasks` in one read
    transaction and writes nothing; of the tick, only its `say`."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        tick: TickRun,
        me: HostIdentity,
        recovery: Recovery,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.tick = tick
        self.me = me
        self.recovery = recovery  # its own test of an orphan

    def show(self, options: TickOptions) -> None:
        """What a tick would do now, read through the claim's own query (same
        order, affinity and open-attempt rules), writing nothing."""
        with read_tx(self.engine) as conn:
            now = db_now(conn)
            for attempt in repo.unfinished_attempts(conn):
                why = self.recovery.orphaned(attempt, now)
                if why is not None:
                    self.tick.say(f"would recover attempt {attempt.id} ({attempt.stage}): {why}")
            for task in repo.tasks_with_status(conn, Status.APPROVED):
                self.tick.say(f"{task.slug}: would move {task.state} to its next stage")
            seen: list[int] = []
            shown = 0  # attempts, as --max-tasks counts them (a halt is none)
            while options.max_tasks is None or shown < options.max_tasks:
                found = repo.find_claimable(
                    conn,
                    host=self.me.host,
                    any_host=self.settings.affinity == "any",
                    exclude=seen,
                    slug=options.task,
                    lock=False,
                )
                if found is None:
                    break
                seen.append(found.id)
                stage = stage_of(self.settings, found)
                if stage is None:
                    self.tick.say(f"{found.slug}: would halt (unknown_stage {found.stage!r})")
                    continue
                budget = agent_budget.budget_of(conn, found, stage)
                if budget is not None and budget.reached:
                    self.tick.say(f"{found.slug}: would halt (budget: {budget.describe()})")
                    continue
                shown += 1
                prev = repo.last_attempt(conn, found.id, found.stage)
                commands = [
                    f"{name} {list(argv)}"
                    for name, argv in (("worker", stage.worker), ("verifier", stage.verifier))
                    if argv is not None
                ]
                setup = self.settings.pipelines[found.pipeline].setup
                if setup and not (self.settings.workspace_root / found.slug).exists():
                    commands.insert(0, f"setup {list(setup)} first (no workspace yet)")
                self.tick.say(
                    f"{found.slug}: would run {stage.name} attempt "
                    f"{1 if prev is None else prev.number + 1}: " + "; ".join(commands)
                )
