"""Alembic driven from code: `db upgrade`, `db downgrade`, `db current`.

The scripts live at the repository root (`migrations/`) and travel inside the
wheel as `orchestrator/migrations`; `script_location` finds whichever this
installation has. Alembic is imported here only, never on the tick path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect
from sqlalchemy.exc import IntegrityError

from orchestrator.errors import LockBusyError, SchemaError
from orchestrator.locking import TickLock
from orchestrator.storage import repo
from orchestrator.storage.db import enable_wal, read_tx
from orchestrator.storage.driver_errors import translate_errors
from orchestrator.storage.schema import HEAD, REVISIONS, current_revision


def migrations_dir() -> Path:
    """`orchestrator/migrations` in a wheel, `<repo>/migrations` in a checkout."""
    packaged = Path(str(resources.files("orchestrator"))) / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    source = Path(__file__).resolve().parents[2] / "migrations"
    if (source / "env.py").is_file():
        return source
    raise SchemaError("migration scripts not found in this installation")


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if engine is not None:
        cfg.attributes["connection"] = engine
    return cfg


def script_revisions() -> list[str]:
    """Every revision of the scripts, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def upgrade(engine: Engine, revision: str = "head") -> None:
    enable_wal(engine)
    _check_known(engine)
    try:
        with translate_errors(engine):
            command.upgrade(alembic_config(engine), revision)
    except IntegrityError as exc:
        # The migration's transaction rolled back: the database is as it was.
        first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else "refused"
        raise SchemaError(
            f"cannot upgrade: rows break a rule of the new schema ({first}); nothing was "
            "changed. Find them with `orchestrator sql`, fix or delete them, and run "
            "`orchestrator db upgrade` again"
        ) from exc


def downgrade(engine: Engine, revision: str) -> None:
    _check_known(engine)
    with translate_errors(engine):
        command.downgrade(alembic_config(engine), revision)


def current(engine: Engine) -> str | None:
    with read_tx(engine) as conn:
        return current_revision(conn)


def _check_known(engine: Engine) -> None:
    """Refuse a database stamped by newer code: Alembic would only say
    "Can't locate revision"."""
    revision = current(engine)
    if revision is not None and revision not in REVISIONS:
        raise SchemaError(
            f"database schema {revision} is newer than this orchestrator (which knows up to "
            f"{HEAD}); upgrade orchestrator first"
        )


@contextmanager
def quiesced(lock_file: Path, engine: Engine, *, force: bool = False) -> Iterator[None]:
    """Whether the schema may change now: only while this host's tick lock is
    ours and no attempt is unfinished (running code would meet a schema it
    does not know). LockBusyError (75) otherwise; `force` skips both checks."""
    if force:
        yield
        return
    lock = TickLock(lock_file)
    lock.acquire()
    try:
        if inspect(engine).has_table("attempts"):
            with read_tx(engine) as conn:
                if repo.any_unfinished(conn):
                    raise LockBusyError("attempts are still running; wait for them or pass --force")
        yield
    finally:
        lock.release()
