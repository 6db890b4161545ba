"""The project's database as the library opens and migrates it: the engine
checked at head, `db upgrade`/`downgrade`, `db current`.

Apart from `project.py`: these run before a `Project` exists (the class
methods `migrate` and `schema_revision`, the CLI's own engine), and what
they guard (a schema at head, a quiet database to migrate) is their own.
"""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator.api.results import MigrateResult, SchemaRevision
from orchestrator.config import Settings
from orchestrator.storage import db as storage_db
from orchestrator.storage.db import read_tx
from orchestrator.storage.repo.outbox import with_hooks
from orchestrator.storage.schema import require_head


def open_engine(settings: Settings, *, check: bool = True, jobs: int = 1) -> Engine:
    """The project's database, refusing (78) a missing file or, with `check`,
    a schema not at head. The caller disposes the engine."""
    # Looked up on the module at each call, so a test can stand in for it.
    engine = storage_db.make_engine(
        settings.database_url, busy_timeout=settings.busy_timeout, jobs=jobs
    )
    if check:
        try:
            with read_tx(engine) as conn:  # no write lock just to look
                require_head(conn)
        except BaseException:
            engine.dispose()
            raise
    return with_hooks(engine, settings.hooks)


def migrate_database(
    settings: Settings, revision: str, *, down: bool, force: bool
) -> MigrateResult:
    """`Project.migrate`: upgrade (creating the file) or downgrade, quiesced."""
    from orchestrator.storage import migrate
    from orchestrator.storage.db import sqlite_path

    file = sqlite_path(settings.database_url)
    created = not down and file is not None and not file.exists()
    if down:
        engine = open_engine(settings, check=False)
    else:
        engine = storage_db.make_engine(
            settings.database_url, busy_timeout=settings.busy_timeout, create=True
        )
    try:
        with migrate.quiesced(settings.lock_file, engine, force=force):
            before = migrate.current(engine)
            if down:
                migrate.downgrade(engine, revision)
            else:
                migrate.upgrade(engine, revision)
            return MigrateResult(before, migrate.current(engine), created)
    finally:
        engine.dispose()


def schema_revision(settings: Settings) -> SchemaRevision:
    """`Project.schema_revision`: the database's revision and this code's."""
    from orchestrator.storage import migrate
    from orchestrator.storage.schema import HEAD

    engine = open_engine(settings, check=False)
    try:
        return SchemaRevision(migrate.current(engine), HEAD)
    finally:
        engine.dispose()
