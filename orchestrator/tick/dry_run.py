"""The dry run: what a tick would do now, writing nothing."""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator import runner
from orchestrator.agents import budget as agent_budget
from orchestrator.agents.context_file import CONTEXT_NAME
from orchestrator.config import Settings, StageConfig
from orchestrator.domain.pipeline import Status
from orchestrator.ext.lookups import stage_of
from orchestrator.ext.model import TickOptions
from orchestrator.ext.registry import Registry
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.lookups import attempt_folder
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
        registry: Registry | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.tick = tick
        self.me = me
        self.recovery = recovery  # its own test of an orphan
        # The features' `would_refuse`: the claim's own refusals, read-only.
        self.registry = registry or Registry.empty()

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
            refused: list[tuple[str, str]] = []  # (pipeline, stage) a feature said no to
            shown = 0  # attempts, as --max-tasks counts them (a halt is none)
            while options.max_tasks is None or shown < options.max_tasks:
                found = repo.find_claimable(
                    conn,
                    host=self.me.host,
                    any_host=self.settings.affinity == "any",
                    exclude=seen,
                    slug=options.task,
                    skip_stages=refused,
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
                # The claim's own refusals, read-only; like the claim, the
                # tasks the same refusal covers are then passed over.
                refusal = self.registry.would_refuse(conn, stage, now)
                if refusal is not None:
                    refused.extend(refusal.stages)
                    why = "; ".join(filter(None, (refusal.reason, refusal.passed_over)))
                    self.tick.say(f"{found.slug}: would not run ({why})")
                    continue
                shown += 1
                prev = repo.last_attempt(conn, found.id, found.stage)
                number = 1 if prev is None else prev.number + 1
                # The commands as they would start, placeholders filled in.
                values = self._dry_values(found, stage, number)
                commands = [
                    f"{name} {runner.render_argv(argv, values)}"
                    for name, argv in (("worker", stage.worker), ("verifier", stage.verifier))
                    if argv is not None
                ]
                setup = self.settings.pipelines[found.pipeline].setup
                if setup and not (self.settings.workspace_root / found.slug).exists():
                    made = runner.render_argv(setup, {**values, "hint": "", "prompt_file": ""})
                    commands.insert(0, f"setup {made} first (no workspace yet)")
                self.tick.say(
                    f"{found.slug}: would run {stage.name} attempt {number}: " + "; ".join(commands)
                )

    def _dry_values(
        self, task: repo.TaskSnapshot, stage: StageConfig, number: int
    ) -> dict[str, str]:
        """What the placeholders would be (`AttemptContext.placeholders`);
        the previous agent session is known only once the attempt starts."""
        state_dir = attempt_folder(self.settings, task.slug, stage.name, number)
        return {
            "task": task.slug,
            "stage": stage.name,
            "attempt": str(number),
            "workspace": str(self.settings.workspace_root / task.slug),
            "prompt_file": str(state_dir / "prompt.md") if stage.prompt is not None else "",
            "hint": task.next_hint,
            "config_dir": str(self.settings.base_dir),
            "context_file": str(state_dir / CONTEXT_NAME),
            "prev_session": "",
        }
