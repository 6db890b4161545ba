"""Building one job of the tick alone: its settings, engine and `TickRun`,
and the few collaborators it is handed, on a migrated database, with no
`Ticker` around it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import Engine
from support import Project

from orchestrator.config import Settings, load_settings
from orchestrator.events.courier import Courier
from orchestrator.ext.model import Claim, Command
from orchestrator.ext.registry import Registry
from orchestrator.features.landing.landing import Lander, Mode
from orchestrator.guards.watch import WorkspaceWatch
from orchestrator.storage.db import make_engine
from orchestrator.tick.applier import Applier
from orchestrator.tick.attempt import AttemptRunner
from orchestrator.tick.briefing import Briefer
from orchestrator.tick.claim_limits import ConfigWatch
from orchestrator.tick.claims import Claimer
from orchestrator.tick.commands import CommandRunner
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.kernel import TickKernel
from orchestrator.tick.notes import AttemptNotes
from orchestrator.tick.progress import NoProgress
from orchestrator.tick.recording import Recorder
from orchestrator.tick.runaway import RunawayGuards
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions
from orchestrator.tick.workspaces import WorkspacePreparer


@dataclass
class Bench:
    """One tick's footing for a job under test; each method builds one job
    from exactly what the tick would hand it."""

    project: Project
    settings: Settings
    engine: Engine
    me: HostIdentity
    said: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tick = TickRun(say=self.said.append, warn=self.warned.append)
        self.tx = Transactions(
            self.settings,
            self.engine,
            self.tick,
            self.me,
            Courier(self.settings, self.engine, warn=self.warned.append),
        )
        self.notes = AttemptNotes()

    def wrapper(self, command: Command) -> tuple[str, ...]:
        """The engine alone: no feature wraps a command, and one whose
        config asks for walls is refused."""
        return Registry.empty().wrap_command(command)

    def applier(self) -> Applier:
        return Applier(self.tx, self.tick)

    def lander(self, modes: dict[str, Mode] | None = None) -> Lander:
        kernel = TickKernel(
            self.settings,
            self.tx,
            self.tick,
            self.me,
            self.applier(),
            self.wrapper,
            Registry.empty().hold_finished,
        )
        return Lander(kernel, modes)

    def claimer(self) -> Claimer:
        config = ConfigWatch(self.settings.config_path, self.settings.fingerprint)
        return Claimer(self.settings, self.tx, self.tick, self.me, self.applier(), config)

    def recorder(self, claimer: Claimer | None = None) -> Recorder:
        return Recorder(
            self.settings,
            self.tx,
            self.tick,
            claimer or self.claimer(),
            self.applier(),
            self.notes,
        )

    def commands(self) -> CommandRunner:
        return CommandRunner(self.settings, self.tick, self.notes, NoProgress())

    def attempts(self, recorder: Recorder | None = None) -> AttemptRunner:
        commands = self.commands()
        return AttemptRunner(
            self.settings,
            self.tx,
            self.tick,
            self.notes,
            commands,
            WorkspacePreparer(self.settings, self.tx, commands),
            Briefer(self.settings, self.tx, self.tick, self.notes),
            RunawayGuards(self.settings, self.tx, WorkspaceWatch()),
            recorder or self.recorder(),
            NoProgress(),
        )

    def claim(self, slug: str | None = None) -> Claim:
        """A claim made as the tick makes it (committed), for jobs that start from one."""
        claim = self.claimer().claim((), slug, uuid.uuid4().hex)
        assert claim is not None, f"nothing to claim ({slug})"
        return claim

    def add(self, *slugs: str) -> None:
        for slug in slugs:
            result = self.project.cli("add", slug, "--title", slug)
            assert result.exit_code == 0, result.output


def make_bench(project: Project, me: HostIdentity | None = None) -> Bench:
    """A bench on `project`'s config as it is written now."""
    settings = load_settings(config=str(project.config), db_url=project.db_url, require_config=True)
    return Bench(project, settings, make_engine(project.db_url), me or HostIdentity.here())
