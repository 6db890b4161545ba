"""What every command shares: the global options, settings and the database.

Imports are lazy on purpose: a tick that finds the lock busy must exit in a
fraction of the time a tick that opens the database takes, so SQLAlchemy is
imported only by the commands that open it, after the lock is theirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from orchestrator.config import Settings, load_settings
from orchestrator.errors import RefusedError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from orchestrator.api.project import Project


@dataclass
class App:
    config: str | None
    db: str | None
    verbose: bool
    _settings: Settings | None = None
    # `tick -q`/`run -q` write a log (cron appends it to a file): every line,
    # errors included, starts with the time.
    stamped: bool = False

    def settings(self, *, require_config: bool = False) -> Settings:
        """The settings; without a config only when --db names the database.

        A folder with no config would otherwise send a newcomer to a database
        that does not exist, and `db upgrade` would create a stray one there.
        """
        require_config = require_config or not self.db
        if self._settings is None or (require_config and self._settings.config_path is None):
            self._settings = load_settings(
                config=self.config, db_url=self.db, require_config=require_config
            )
        return self._settings

    def engine(
        self,
        settings: Settings | None = None,
        *,
        check: bool = True,
        owned: bool = False,
        jobs: int = 1,
    ) -> Engine:
        """Open the database, refusing (78) a missing file or a schema not at head.

        The engine is disposed when the command ends, unless `owned`: then the
        caller disposes it (`run` opens one per tick and must not pile them up).
        """
        from orchestrator.api.database import open_engine

        settings = settings or self.settings()
        engine = open_engine(settings, check=check, jobs=jobs)
        if not owned:
            click.get_current_context().call_on_close(engine.dispose)
        return engine

    def project(self) -> Project:
        """The library's face on this command's settings and database."""
        from orchestrator.api.project import Project

        settings = self.settings()
        return Project(settings, self.engine(settings))


pass_app = click.make_pass_decorator(App)


def human_only() -> None:
    """An agent must not approve its own gate: its environment names its task."""
    if os.environ.get("ORCHESTRATOR_TASK"):
        raise RefusedError(
            "refusing a human command from inside an attempt (ORCHESTRATOR_TASK is set)"
        )
