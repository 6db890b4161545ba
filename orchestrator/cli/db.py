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
    from orchestrator.api.project import Project

    done = Project.migrate(app.settings(), revision, force=force)
    before = done.before
    change = (
        "created" if done.created else "" if before == done.after else f"was {before or 'empty'}"
    )
    click.echo(f"database at {done.after}" + (f" ({change})" if change else ""))


@db.command("downgrade")
@click.argument("revision")
@click.option("--force", is_flag=True, help="Downgrade even while a tick runs (not advised).")
@pass_app
def db_downgrade(app: App, revision: str, force: bool) -> None:
    """Migrate the database back to REVISION (`base` removes every table)."""
    from orchestrator.api.project import Project

    done = Project.migrate(app.settings(), revision, down=True, force=force)
    click.echo(f"database at {done.after or 'base'}")


@db.command("current")
@pass_app
def db_current(app: App) -> None:
    """Print the schema revision of the database and of this code."""
    from orchestrator.api.project import Project

    found = Project.schema_revision(app.settings())
    click.echo(f"database: {found.database or 'empty'}\ncode:     {found.code}")
