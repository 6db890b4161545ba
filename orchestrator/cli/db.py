"""`db upgrade`, `db downgrade`, `db current`: the schema's commands."""

from __future__ import annotations

import click

from orchestrator.cli.app import App, pass_app


@click.group()
def db() -> None:
    """Create, migrate and inspect the database schema."""


@db.command("upgrade")
@click.argument("revision", default="head")
@click.option("--force", is_flag=True, help="Upgrade even while a tick runs (not advised).")
@pass_app
def db_upgrade(app: App, revision: str, force: bool) -> None:
    """Create the database or migrate it to REVISION (default: head).

    Refuses (exit 75) while a tick holds the lock or attempts are unfinished,
    since running code would meet a schema it does not know.
    """
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine, sqlite_path

    settings = app.settings()
    file = sqlite_path(settings.database_url)
    created = file is not None and not file.exists()
    engine = make_engine(settings.database_url, busy_timeout=settings.busy_timeout, create=True)
    click.get_current_context().call_on_close(engine.dispose)
    with migrate.quiesced(settings.lock_file, engine, force=force):
        before = migrate.current(engine)
        migrate.upgrade(engine, revision)
        after = migrate.current(engine)
    change = "created" if created else "" if before == after else f"was {before or 'empty'}"
    click.echo(f"database at {after}" + (f" ({change})" if change else ""))


@db.command("downgrade")
@click.argument("revision")
@click.option("--force", is_flag=True, help="Downgrade even while a tick runs (not advised).")
@pass_app
def db_downgrade(app: App, revision: str, force: bool) -> None:
    """Migrate the database back to REVISION (`base` removes every table)."""
    from orchestrator.storage import migrate

    settings = app.settings()
    engine = app.engine(settings, check=False)
    with migrate.quiesced(settings.lock_file, engine, force=force):
        migrate.downgrade(engine, revision)
        click.echo(f"database at {migrate.current(engine) or 'base'}")


@db.command("current")
@pass_app
def db_current(app: App) -> None:
    """Print the schema revision of the database and of this code."""
    from orchestrator.storage import migrate
    from orchestrator.storage.schema import HEAD

    engine = app.engine(check=False)
    click.echo(f"database: {migrate.current(engine) or 'empty'}\ncode:     {HEAD}")
